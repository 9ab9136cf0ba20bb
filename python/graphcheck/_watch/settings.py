"""A watch's settings, from the environment or an engine's configuration (no torch).

Settings (environment):

- ``GRAPHCHECK``: on unless empty, ``0``, ``false``, ``no`` or ``off``.
- ``GRAPHCHECK_MODE``: ``warn`` (default: findings are logged) or ``error``
  (a check point with findings raises, with the text report).
- ``GRAPHCHECK_DIR``: where reports and snapshots go (default
  ``graphcheck-reports`` in the working directory when the watch starts).
- ``GRAPHCHECK_ALLOW``: an allowlist file (one glob per line, ``#`` comments; UTF-8 text of at
  most 4 MiB, read by the checker's own reader, ``graphcheck.read_allowlist``).

One reading function per source, none of which raises into the host: a debug flag must not
stop a server from starting, whatever its settings hold. :func:`settings_from_env` reads the
environment, :func:`settings_from` an engine's configuration (vLLM's ``--additional-config``),
:func:`read_allow_file` the allowlist file either names. A bad value (a mode that is not one, a
path with a NUL byte, an allowlist that is a folder, a FIFO, binary, larger than 4 MiB, not
UTF-8 or unreadable) is one entry of :attr:`Settings.problems`, which the watch logs as one
line each, and the documented fallback is used: mode ``warn``, no files, no allowlist.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence

from graphcheck import _core

__all__ = [
    "DEFAULT_DIR",
    "MODES",
    "OFF_VALUES",
    "Settings",
    "env_configured",
    "flag_on",
    "one_line",
    "read_allow_file",
    "settings_from",
    "settings_from_env",
    "text_problem",
]

#: Values of ``GRAPHCHECK`` that mean off (compared lower-case, stripped).
OFF_VALUES = frozenset({"", "0", "false", "no", "off"})
#: The watch's modes.
MODES = ("warn", "error")
#: The default output folder of a watch turned on by the environment.
DEFAULT_DIR = "graphcheck-reports"
# The variables that configure a watch besides GRAPHCHECK itself.
_SETTING_VARIABLES = ("GRAPHCHECK_MODE", "GRAPHCHECK_DIR", "GRAPHCHECK_ALLOW")
# How much of a bad value a problem shows: enough to recognise it, one line always.
_SHOWN_CHARS = 80


def _shown(value: object) -> str:
    """``value`` for a log line: its repr (control characters and surrogates escaped), cut."""
    try:
        text = repr(value)
    except Exception:  # a hostile __repr__: say what it is instead
        text = f"<{type(value).__name__}>"
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def one_line(exc: BaseException) -> str:
    """An exception as one printable line (its message may name a path with any bytes).

    What graphcheck's log lines say of an error in the host's settings.
    """
    text = str(exc) or type(exc).__name__
    return text.encode("ascii", "backslashreplace").decode("ascii").replace("\n", "\\n")


def flag_on(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``GRAPHCHECK`` turns the watch on (``environ`` defaults to ``os.environ``).

    Never raises: an environment that cannot be read counts as off.
    """
    try:
        value = (os.environ if environ is None else environ).get("GRAPHCHECK", "")
        return str(value).strip().lower() not in OFF_VALUES
    except Exception:
        return False


def env_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment says anything about a watch: the flag or one of its settings."""
    try:
        env = os.environ if environ is None else environ
        return flag_on(env) or any(env.get(name) for name in _SETTING_VARIABLES)
    except Exception:
        return False


@dataclasses.dataclass(frozen=True)
class Settings:
    """A watch's settings from the environment or an engine's configuration.

    Immutable, so safe to share between threads.

    Attributes:
        mode: ``warn`` or ``error``.
        out_dir: the output folder (absolute), or None for no files.
        allow: allowlist globs.
        problems: what was wrong in the input (each logged; the default was used).
    """

    mode: str = "warn"
    out_dir: str | None = None
    allow: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


def read_allow_file(path: object, what: str) -> tuple[tuple[str, ...], str | None]:
    """The globs of the allowlist file ``path``, and None; or no globs and the problem.

    ``what`` names the setting in the problem (``GRAPHCHECK_ALLOW``). The file is read by the
    checker's reader (``graphcheck check --allow`` reads it the same way): UTF-8 text, one glob
    per line, at most 4 MiB; a line that is not UTF-8 refuses the file, named by line and byte
    offset. Never raises.
    """
    try:
        if not isinstance(path, (str, os.PathLike)):
            return (), f"{what}: expected an allowlist file path, got {_shown(path)}; no allowlist"
        text = os.fspath(path)
        why = text_problem(text) if isinstance(text, str) else "bytes, not text"
        if why is not None:
            return (), f"{what} {_shown(path)}: expected a file path, found {why}; no allowlist"
        return tuple(_core.read_allowlist(text)), None
    except Exception as exc:
        return (), f"{what}: {one_line(exc)}; no allowlist is used"


def _mode(value: object, what: str, problems: list[str]) -> str:
    if value is None or value == "":
        return "warn"
    mode = value.strip().lower() if isinstance(value, str) else None
    if mode not in MODES:
        problems.append(f"{what} {_shown(value)}: expected one of {', '.join(MODES)}; using warn")
        return "warn"
    return mode


def _folder(value: object, default: str | None, what: str, problems: list[str]) -> str | None:
    folder = value or default
    if not folder:
        return None
    if not isinstance(folder, (str, os.PathLike)):
        problems.append(f"{what}: expected a folder path, got {_shown(folder)}; no files")
        return None
    path = os.fspath(folder)
    why = text_problem(path) if isinstance(path, str) else "bytes, not text"
    if why is not None:
        problems.append(f"{what} {_shown(folder)}: expected a folder path, found {why}; no files")
        return None
    try:
        return os.path.abspath(path)
    except OSError as exc:  # a relative path while the working directory is gone
        problems.append(f"{what} {_shown(folder)}: {one_line(exc)}; no files")
        return None


def text_problem(value: str) -> str | None:
    """Why ``value`` cannot be a setting's text (a NUL byte, not UTF-8), or None."""
    if "\0" in value:
        return f"a NUL byte at offset {value.index(chr(0))}"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        # A byte that is not UTF-8 in the environment arrives as a surrogate escape.
        char = ord(value[exc.start])
        byte = f"byte 0x{char - 0xDC00:02x}" if 0xDC80 <= char <= 0xDCFF else f"U+{char:04X}"
        return f"not UTF-8 text ({byte} at offset {exc.start})"
    return None


def _glob_list(globs: Sequence[object], what: str, problems: list[str]) -> tuple[str, ...]:
    kept: list[str] = []
    for index, glob in enumerate(globs):
        why = text_problem(glob) if isinstance(glob, str) else "not a str"
        if why is None:
            kept.append(str(glob))
        else:
            problems.append(
                f"{what}[{index}] {_shown(glob)}: expected a glob, found {why}; skipped"
            )
    return tuple(kept)


def _settings(
    values: Mapping[str, object],
    source: str,
    default_dir: str | None,
    names: Mapping[str, str] | None = None,
) -> Settings:
    # What a problem names each key by: the variable it came from (GRAPHCHECK_MODE), or the
    # source and the key ("--additional-config graphcheck mode").
    def name(key: str) -> str:
        return names[key] if names and key in names else f"{source} {key}"

    problems: list[str] = []
    mode = _mode(values.get("mode"), name("mode"), problems)
    out_dir = _folder(values.get("dir"), default_dir, name("dir"), problems)
    allow_value = values.get("allow")
    allow: tuple[str, ...] = ()
    if isinstance(allow_value, (str, os.PathLike)) and os.fspath(allow_value):
        allow, problem = read_allow_file(allow_value, name("allow"))
        problems += [problem] if problem else []
    elif isinstance(allow_value, Sequence) and not isinstance(allow_value, (str, bytes)):
        allow = _glob_list(allow_value, name("allow"), problems)
    elif allow_value:
        problems.append(
            f"{name('allow')}: expected a file path or a list of globs, got {_shown(allow_value)}"
        )
    unknown = sorted(
        _shown(key) for key in values if key not in ("mode", "dir", "allow", "enabled")
    )
    if unknown:
        problems.append(
            f"{source}: unknown keys [{', '.join(unknown)}] (known: mode, dir, allow, enabled)"
        )
    return Settings(mode, out_dir, allow, tuple(problems))


def settings_from(
    values: object,
    *,
    source: str,
    default_dir: str | None = DEFAULT_DIR,
    names: Mapping[str, str] | None = None,
) -> Settings:
    """Settings from a mapping with ``mode``, ``dir`` and ``allow`` (all optional).

    ``allow`` is an allowlist file path or a list of globs; ``enabled`` is accepted and
    ignored (the engine reads it). Unknown keys and bad values are reported in
    :attr:`Settings.problems` (named by ``source`` and the key, or by ``names[key]``: the
    environment variable a value came from), never raised: whatever ``values`` holds
    (not a mapping at all, a path with a NUL byte, a glob that is not text), the result is
    settings with the fallback of each bad value.
    """
    try:
        if not isinstance(values, Mapping):
            return Settings(
                out_dir=_folder(None, default_dir, source, []),
                problems=(
                    f"{source}: expected a mapping of settings, got {_shown(values)}; "
                    "defaults used",
                ),
            )
        return _settings(values, source, default_dir, names)
    except Exception as exc:  # a mapping whose methods raise: the host still runs
        return Settings(problems=(f"{source}: cannot be read ({one_line(exc)}); defaults used",))


#: The variable each setting of :func:`settings_from_env` comes from (what a problem names).
_ENV_NAMES = {"mode": "GRAPHCHECK_MODE", "dir": "GRAPHCHECK_DIR", "allow": "GRAPHCHECK_ALLOW"}


def settings_from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from ``GRAPHCHECK_MODE``, ``GRAPHCHECK_DIR`` and ``GRAPHCHECK_ALLOW``.

    Without ``GRAPHCHECK_DIR`` the folder is :data:`DEFAULT_DIR` when ``GRAPHCHECK``
    is on, else None (no files). Never raises (see :func:`settings_from`); values that are not
    UTF-8 arrive as Python decodes them (surrogate escapes) and are used as paths as they are.
    """
    try:
        env = os.environ if environ is None else environ
        values = {key: env.get(variable, "") for key, variable in _ENV_NAMES.items()}
    except Exception as exc:
        return Settings(
            problems=(f"GRAPHCHECK_*: cannot be read ({one_line(exc)}); defaults used",)
        )
    default_dir = DEFAULT_DIR if flag_on(env) else None
    return settings_from(values, source="GRAPHCHECK_*", default_dir=default_dir, names=_ENV_NAMES)
