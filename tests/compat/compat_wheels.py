"""The pinned vLLM and SGLang wheels: their versions, the cache, the download.

Pins, in order: the environment (``COMPAT_VLLM_VERSION``, ``COMPAT_SGLANG_VERSION``), then
scripts/versions.env (the same names), then :data:`DEFAULT_PINS`. The names avoid the
``VLLM_``/``SGLANG_`` prefixes on purpose: vLLM warns about (or, with
``--fail-on-environ-validation``, refuses) any unknown ``VLLM_*`` variable in its environment.

Wheels are fetched with ``pip download --no-deps --only-binary=:all:`` (never installed) into
a cache outside the clone, ``${GRAPHCHECK_CACHE:-${XDG_CACHE_HOME:-~/.cache}/graphcheck}/wheels``
(``GRAPHCHECK_WHEEL_CACHE`` overrides it), once per machine: clones and CI runs on one machine
share it, under a file lock. The interpreter, ABI and platform tags are fixed (CPython 3.11,
manylinux x86_64), so every machine picks the same file whatever Python runs the tests: the
wheels' Python sources do not depend on the tags, and SGLang publishes no wheel for some
interpreters (none for 3.10).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VERSIONS_ENV = REPO / "scripts" / "versions.env"

DEFAULT_PINS = {"vllm": "0.33.0", "sglang": "0.5.23"}
"""The newest releases on PyPI when the tier was written; scripts/versions.env overrides."""

PIN_VARIABLES = {"vllm": "COMPAT_VLLM_VERSION", "sglang": "COMPAT_SGLANG_VERSION"}

ALLOW_OFFLINE = "GRAPHCHECK_COMPAT_ALLOW_OFFLINE"
"""Set to 1 to let the wheel tests skip (instead of fail) when a wheel cannot be fetched."""

EXTRA = "GRAPHCHECK_COMPAT_EXTRA"
"""Further releases to check, e.g. ``sglang==0.5.14 vllm==0.22.0`` (by hand, when bumping)."""

PIP_TAGS = (
    "--python-version",
    "3.11",
    "--implementation",
    "cp",
    "--abi",
    "cp311",
    "--abi",
    "abi3",
    "--abi",
    "none",
    "--platform",
    "manylinux_2_28_x86_64",
    "--platform",
    "manylinux_2_34_x86_64",
    "--platform",
    "any",
)


class WheelUnavailable(RuntimeError):
    """A pinned wheel is neither cached nor downloadable."""


def _versions_env() -> dict[str, str]:
    values: dict[str, str] = {}
    if VERSIONS_ENV.is_file():
        for line in VERSIONS_ENV.read_text().splitlines():
            match = re.match(r"^\s*(?:export\s+)?([A-Z_][A-Z0-9_]*)=(.*)$", line)
            if match:
                values[match.group(1)] = match.group(2).strip().strip("\"'")
    return values


def pinned(dist: str) -> tuple[str, str]:
    """The pinned version of ``vllm`` or ``sglang`` and where the pin came from."""
    variable = PIN_VARIABLES[dist]
    if os.environ.get(variable):
        return os.environ[variable], f"${variable}"
    from_file = _versions_env().get(variable)
    if from_file:
        return from_file, f"scripts/versions.env ({variable})"
    return DEFAULT_PINS[dist], "tests/compat/compat_wheels.py (DEFAULT_PINS)"


def releases() -> list[tuple[str, str]]:
    """``(dist, version)`` to check: the pins, then ``$GRAPHCHECK_COMPAT_EXTRA``."""
    out = [(dist, pinned(dist)[0]) for dist in DEFAULT_PINS]
    for item in os.environ.get(EXTRA, "").replace(",", " ").split():
        dist, sep, version = item.partition("==")
        if not sep or dist not in DEFAULT_PINS or not version:
            raise ValueError(
                f"{EXTRA}: {item!r} is not dist==version with dist one of {sorted(DEFAULT_PINS)}"
            )
        if (dist, version) not in out:
            out.append((dist, version))
    return out


def cache_dir() -> Path:
    """Where wheels are kept (outside the clone)."""
    if os.environ.get("GRAPHCHECK_WHEEL_CACHE"):
        return Path(os.environ["GRAPHCHECK_WHEEL_CACHE"])
    base = os.environ.get("GRAPHCHECK_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "graphcheck"
    )
    return Path(base) / "wheels"


def _cached(dist: str, version: str, cache: Path) -> Path | None:
    for path in sorted(cache.glob(f"{dist}-{version}-*.whl")):
        try:
            # Reading the central directory (at the end of the file) catches a torn file.
            with zipfile.ZipFile(path):
                return path
        except (OSError, zipfile.BadZipFile):
            path.unlink(missing_ok=True)
    return None


def fetch(dist: str, version: str, *, cache: Path | None = None) -> Path:
    """The wheel of ``dist==version``: from the cache, else downloaded into it (never
    installed).

    Raises:
        WheelUnavailable: pip could not fetch it; the message has pip's output and the fix.
    """
    cache = cache or cache_dir()
    found = _cached(dist, version, cache)
    if found is not None:
        return found
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one download per machine; the others wait for it
        found = _cached(dist, version, cache)
        if found is not None:
            return found
        with tempfile.TemporaryDirectory(dir=cache, prefix=".download-") as tmp:
            command = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--disable-pip-version-check",
                "--no-input",
                "--no-deps",
                "--only-binary=:all:",
                *PIP_TAGS,
                "--dest",
                tmp,
                f"{dist}=={version}",
            ]
            try:
                run = subprocess.run(command, capture_output=True, text=True, timeout=1800)
            except (OSError, subprocess.TimeoutExpired) as error:
                raise WheelUnavailable(_unavailable(dist, version, cache, str(error))) from error
            wheels = list(Path(tmp).glob(f"{dist}-{version}-*.whl"))
            if run.returncode != 0 or len(wheels) != 1:
                output = (run.stdout + run.stderr).strip()[
                    -2000:
                ] or f"exit status {run.returncode}"
                raise WheelUnavailable(_unavailable(dist, version, cache, output))
            target = cache / wheels[0].name
            shutil.move(str(wheels[0]), target.with_suffix(".part"))
            os.replace(target.with_suffix(".part"), target)  # complete or absent
            return target


def _unavailable(dist: str, version: str, cache: Path, output: str) -> str:
    return (
        f"cannot fetch the {dist} {version} wheel into {cache}: {output}\n"
        f"The compat tier needs PyPI once per machine (pip download --no-deps "
        f"--only-binary=:all: {dist}=={version}). Fix the network or pip's index settings, "
        f"or put the wheel in {cache}, or set {ALLOW_OFFLINE}=1 to skip the wheel tests."
    )
