"""A watch's settings, from the environment or an engine's configuration (no torch).

Settings (environment):

- ``GRAPHCHECK``: on unless empty, ``0``, ``false``, ``no`` or ``off``.
- ``GRAPHCHECK_MODE``: ``warn`` (default: findings are logged) or ``error``
  (a check point with findings raises, with the text report).
- ``GRAPHCHECK_DIR``: where reports and snapshots go (default
  ``graphcheck-reports`` in the working directory when the watch starts).
- ``GRAPHCHECK_ALLOW``: an allowlist file (one glob per line, ``#`` comments).

Bad values never raise: a debug flag must not stop a server from starting. They are listed in
:attr:`Settings.problems`, which the watch logs.
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
    "settings_from",
    "settings_from_env",
]

#: Values of ``GRAPHCHECK`` that mean off (compared lower-case, stripped).
OFF_VALUES = frozenset({"", "0", "false", "no", "off"})
#: The watch's modes.
MODES = ("warn", "error")
#: The default output folder of a watch turned on by the environment.
DEFAULT_DIR = "graphcheck-reports"
# The variables that configure a watch besides GRAPHCHECK itself.
_SETTING_VARIABLES = ("GRAPHCHECK_MODE", "GRAPHCHECK_DIR", "GRAPHCHECK_ALLOW")


def flag_on(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``GRAPHCHECK`` turns the watch on (``environ`` defaults to ``os.environ``)."""
    value = (os.environ if environ is None else environ).get("GRAPHCHECK", "")
    return value.strip().lower() not in OFF_VALUES


def env_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Whether the environment says anything about a watch: the flag or one of its settings."""
    env = os.environ if environ is None else environ
    return flag_on(env) or any(env.get(name) for name in _SETTING_VARIABLES)


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


def _read_allow(path: str, problems: list[str], what: str) -> tuple[str, ...]:
    try:
        return tuple(_core.read_allowlist(path))
    except _core.GraphcheckError as exc:
        problems.append(f"{what}: {exc}; no allowlist is used")
        return ()


def settings_from(
    values: Mapping[str, object], *, source: str, default_dir: str | None = DEFAULT_DIR
) -> Settings:
    """Settings from a mapping with ``mode``, ``dir`` and ``allow`` (all optional).

    ``allow`` is an allowlist file path or a list of globs; ``enabled`` is accepted and
    ignored (the engine reads it). Unknown keys and bad values are reported in
    :attr:`Settings.problems` (named by ``source``), never raised.
    """
    problems: list[str] = []
    mode = str(values.get("mode") or "warn").strip().lower()
    if mode not in MODES:
        problems.append(f"{source} mode {mode!r}: expected one of {', '.join(MODES)}; using warn")
        mode = "warn"
    folder = values.get("dir") or default_dir
    out_dir = None
    if isinstance(folder, (str, os.PathLike)):
        out_dir = os.path.abspath(os.fspath(folder))
    elif folder:
        problems.append(f"{source} dir: expected a folder path, got {folder!r}; no files")
    allow_value = values.get("allow")
    allow: tuple[str, ...] = ()
    if isinstance(allow_value, str) and allow_value:
        allow = _read_allow(allow_value, problems, f"{source} allow")
    elif isinstance(allow_value, Sequence) and not isinstance(allow_value, str):
        allow = tuple(str(glob) for glob in allow_value)
    elif allow_value:
        problems.append(f"{source} allow: expected a file path or a list of globs")
    unknown = sorted(set(values) - {"mode", "dir", "allow", "enabled"})
    if unknown:
        problems.append(f"{source}: unknown keys {unknown} (known: mode, dir, allow, enabled)")
    return Settings(mode, out_dir, allow, tuple(problems))


def settings_from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from ``GRAPHCHECK_MODE``, ``GRAPHCHECK_DIR`` and ``GRAPHCHECK_ALLOW``.

    Without ``GRAPHCHECK_DIR`` the folder is :data:`DEFAULT_DIR` when ``GRAPHCHECK``
    is on, else None (no files).
    """
    env = os.environ if environ is None else environ
    values = {
        "mode": env.get("GRAPHCHECK_MODE", ""),
        "dir": env.get("GRAPHCHECK_DIR", ""),
        "allow": env.get("GRAPHCHECK_ALLOW", ""),
    }
    default_dir = DEFAULT_DIR if flag_on(env) else None
    return settings_from(values, source="GRAPHCHECK_*", default_dir=default_dir)
