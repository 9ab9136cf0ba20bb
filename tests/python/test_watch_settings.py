"""The server flag's settings never harm the host (issue 34): whatever GRAPHCHECK_* hold, a host
program runs as it does without graphcheck, with at most one graphcheck line in its log.

Each bad value runs a real host script in its own interpreter, through the installed import
hook (graphcheck_watch.pth), beside the same script with no GRAPHCHECK variable at all; the
runs start together so that the interpreters' start-up overlaps. The readers in process:
test_watch_settings_readers.py.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from hostile_values import VARIABLES, random_env

# Builds a module, runs it, watches it (graphcheck.watch reads GRAPHCHECK_* too), and ends
# with a status of its own, so that an exit status graphcheck changed cannot pass for it.
HOST = """\
import sys
import torch
import graphcheck

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
graphcheck.watch(model)
with torch.no_grad():
    out = model(torch.ones(3, 4))
print("host:", [round(v, 4) for v in out.flatten().tolist()])
print("checkpoint:", graphcheck.checkpoint("after_reload"))
sys.exit(3)
"""
# The issue's other host: a program that only imports torch.
PLAIN = "import torch\nprint(torch.arange(4).sum().item())\n"

# Root reads any file: an unprivileged host runs without the capabilities that let it
# (util-linux's setpriv; the test is skipped without it).
_NO_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


class Host:
    """One host run: the script, its extra environment (bytes: values need not be UTF-8)."""

    def __init__(
        self, folder: Path, script: str, env: Mapping[bytes, bytes], *, unprivileged: bool
    ) -> None:
        self.folder = folder
        self.script = script
        self.env = env
        self.prefix = _NO_DAC if unprivileged and os.geteuid() == 0 else []

    def run(self) -> subprocess.CompletedProcess[bytes]:
        env = {k: v for k, v in os.environb.items() if k not in VARIABLES}
        env.update(self.env)
        return subprocess.run(
            [*self.prefix, sys.executable, "-c", self.script],
            cwd=self.folder,
            env=env,
            capture_output=True,
            timeout=300,
            check=False,
        )


def _file(folder: Path, name: str, data: bytes) -> bytes:
    path = folder / name
    path.write_bytes(data)
    return os.fsencode(path)


def _fifo(folder: Path) -> bytes:
    path = folder / "allow.fifo"
    os.mkfifo(path)
    return os.fsencode(path)


def _huge(folder: Path) -> bytes:
    path = folder / "huge.txt"
    with open(path, "wb") as out:
        out.truncate(5 << 20)  # sparse: 5 MiB of zeros, over the 4 MiB an allowlist may hold
    return os.fsencode(path)


def _private(folder: Path) -> bytes:
    path = folder / "private.txt"
    path.write_text("model.*\n")
    path.chmod(0)
    return os.fsencode(path)


# Each kind of bad value: its GRAPHCHECK_* variables, made in the case's own folder.
BAD_VALUES: dict[str, Callable[[Path], dict[bytes, bytes]]] = {
    "allowlist_not_utf8": lambda d: {
        b"GRAPHCHECK_ALLOW": _file(d, "a.txt", b"model.*\n\xff\xfe\n")
    },
    "allowlist_binary": lambda d: {b"GRAPHCHECK_ALLOW": _file(d, "a.bin", bytes(range(256)) * 64)},
    "allowlist_folder": lambda d: {b"GRAPHCHECK_ALLOW": os.fsencode(d)},
    "allowlist_fifo": lambda d: {b"GRAPHCHECK_ALLOW": _fifo(d)},
    "allowlist_huge": lambda d: {b"GRAPHCHECK_ALLOW": _huge(d)},
    "allowlist_permission_denied": lambda d: {b"GRAPHCHECK_ALLOW": _private(d)},
    "allow_path_not_utf8": lambda d: {b"GRAPHCHECK_ALLOW": os.fsencode(d) + b"/\xff.txt"},
    "dir_path_not_utf8": lambda d: {b"GRAPHCHECK_DIR": os.fsencode(d) + b"/r\xfe"},
    "mode_not_utf8": lambda d: {b"GRAPHCHECK_MODE": b"err\xffor"},
}


# ---------------------------------------------------------------------- seeded fuzzing

FUZZ_HOSTS = 1  # host runs with random settings (each its own interpreter)


def test_random_settings_leave_the_host_unharmed(runs: Runs) -> None:
    for seed in range(FUZZ_HOSTS):
        # Up to one line for each of GRAPHCHECK_MODE, GRAPHCHECK_DIR and GRAPHCHECK_ALLOW.
        _expect_unharmed(runs.result(f"fuzz_{seed}"), runs.result("clean"), bad_values=3)


class Runs:
    """Every host run of this module, started at once; `result(key)` waits for one."""

    def __init__(self, root: Path) -> None:
        self._pool = ThreadPoolExecutor(max_workers=4)
        self._futures: dict[str, Future[subprocess.CompletedProcess[bytes]]] = {}
        self._root = root

    def start(
        self,
        key: str,
        script: str,
        env: Callable[[Path], dict[bytes, bytes]],
        *,
        unprivileged: bool = False,
    ) -> None:
        folder = self._root / key
        folder.mkdir()
        host = Host(folder, script, env(folder), unprivileged=unprivileged)
        self._futures[key] = self._pool.submit(host.run)

    def result(self, key: str) -> subprocess.CompletedProcess[bytes]:
        return self._futures[key].result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)


@pytest.fixture(scope="module")
def runs() -> Iterator[Runs]:
    root = Path(tempfile.mkdtemp(prefix="graphcheck-hosts-"))
    started = Runs(root)
    started.start("clean", HOST, lambda d: {})
    started.start("clean_unprivileged", HOST, lambda d: {}, unprivileged=True)
    started.start("clean_plain", PLAIN, lambda d: {})
    for kind, env in BAD_VALUES.items():
        unprivileged = kind == "allowlist_permission_denied"
        started.start(
            kind,
            HOST,
            lambda d, env=env: {b"GRAPHCHECK": b"1", **env(d)},
            unprivileged=unprivileged,
        )
    # The issue's reproductions: GRAPHCHECK unset, only the allowlist set; and a host that only
    # imports torch.
    started.start("allow_only", HOST, BAD_VALUES["allowlist_not_utf8"])
    started.start(
        "plain",
        PLAIN,
        lambda d: {b"GRAPHCHECK": b"1", **BAD_VALUES["allowlist_not_utf8"](d)},
    )
    for seed in range(FUZZ_HOSTS):
        started.start(f"fuzz_{seed}", HOST, lambda d, seed=seed: random_env(seed, d))
    yield started
    started.close()
    for private in root.glob("*/private.txt"):
        private.chmod(0o600)
    shutil.rmtree(root)


def _expect_unharmed(
    run: subprocess.CompletedProcess[bytes],
    clean: subprocess.CompletedProcess[bytes],
    *,
    bad_values: int = 1,
) -> str:
    """The host's output and status as without graphcheck; no traceback, and at most one
    graphcheck line per bad value (each printable); returns the first line."""
    err = run.stderr.decode("utf-8", "replace")
    assert run.stdout == clean.stdout, err
    assert run.returncode == clean.returncode, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "graphcheck" in line]
    assert len(lines) <= bad_values, err
    assert all(line.startswith("graphcheck: ") and line.isprintable() for line in lines), err
    assert len(err.splitlines()) == len(lines), err  # nothing else on stderr either
    return lines[0] if lines else ""


def test_a_clean_host_runs_as_it_does_without_graphcheck(runs: Runs) -> None:
    clean = runs.result("clean")
    assert clean.returncode == 3 and clean.stdout.startswith(b"host: [")
    assert b"checkpoint: None" in clean.stdout and clean.stderr == b""


@pytest.mark.parametrize("kind", sorted(BAD_VALUES))
def test_a_bad_setting_is_one_log_line_and_the_host_is_unharmed(runs: Runs, kind: str) -> None:
    if kind == "allowlist_permission_denied" and os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("root reads any file, and setpriv (to run the host without that) is missing")
    unprivileged = kind == "allowlist_permission_denied"
    clean = runs.result("clean_unprivileged" if unprivileged else "clean")
    line = _expect_unharmed(runs.result(kind), clean)
    expected = {
        "allowlist_not_utf8": "a.txt:2: not valid UTF-8 (byte 0xff at byte offset 8",
        "allowlist_binary": "a.bin:1: a NUL byte (byte 0x00 at byte offset 0",
        "allowlist_folder": "found a folder; no allowlist is used",
        "allowlist_fifo": "found a FIFO (named pipe); no allowlist is used",
        "allowlist_huge": "5242880 bytes, more than the 4194304 an allowlist may hold",
        "allowlist_permission_denied": "cannot be read: Permission denied",
        "allow_path_not_utf8": "found not UTF-8 text (byte 0xff at offset",
        "dir_path_not_utf8": "found not UTF-8 text (byte 0xfe at offset",
        "mode_not_utf8": "GRAPHCHECK_MODE 'err\\udcffor': expected one of warn, error; using warn",
    }[kind]
    # Named by the variable that holds the bad value, not by a pattern of them.
    variable = kind.split("_")[0].replace("allowlist", "allow").upper()
    assert line.startswith(f"graphcheck: GRAPHCHECK_{variable}") and expected in line, line


def test_the_issue_reproductions_leave_the_host_unharmed(runs: Runs) -> None:
    # GRAPHCHECK unset, GRAPHCHECK_ALLOW alone: graphcheck.watch() reads it.
    line = _expect_unharmed(runs.result("allow_only"), runs.result("clean"))
    assert "not valid UTF-8" in line
    # A script that only imports torch: the import hook starts the watch; 44 lines of
    # traceback before the fix.
    line = _expect_unharmed(runs.result("plain"), runs.result("clean_plain"))
    assert "not valid UTF-8" in line
