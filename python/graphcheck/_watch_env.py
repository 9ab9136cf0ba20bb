"""``GRAPHCHECK=1``: the import hook that turns :func:`graphcheck.watch` on without code changes.

Private. The package installs ``graphcheck_watch.pth`` into site-packages; Python's
``site`` runs its one line at every start. With ``GRAPHCHECK`` unset (or empty, or
``0``) the line reads one environment variable and does nothing else. Otherwise
it calls :func:`install_from_env`, which puts a finder on ``sys.meta_path`` that
waits for ``torch``: right after ``import torch`` finished, the process gets
its watch (``graphcheck.watch`` with the settings below), so every CUDA graph it
captures from then on is recorded and checked.

Settings (environment):

- ``GRAPHCHECK``: on unless empty, ``0``, ``false``, ``no`` or ``off``.
- ``GRAPHCHECK_MODE``: ``warn`` (default: findings are logged) or ``error``
  (a check point with findings raises, with the text report).
- ``GRAPHCHECK_DIR``: where reports and snapshots go (default
  ``graphcheck-reports`` in the working directory when the watch starts).
- ``GRAPHCHECK_ALLOW``: an allowlist file (one glob per line, ``#`` comments).

:func:`when_imported` (run a callback right after a module is imported) is
also what the vLLM plugin uses to patch its worker lazily.
"""

from __future__ import annotations

import dataclasses
import importlib.abc
import importlib.machinery
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

log = logging.getLogger("graphcheck.watch")

#: Values of ``GRAPHCHECK`` that mean off (compared lower-case, stripped).
OFF_VALUES = frozenset({"", "0", "false", "no", "off"})
#: The watch's modes.
MODES = ("warn", "error")
#: The default output folder of a watch turned on by the environment.
DEFAULT_DIR = "graphcheck-reports"


def flag_on(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``GRAPHCHECK`` turns the watch on."""
    value = (os.environ if environ is None else environ).get("GRAPHCHECK", "")
    return value.strip().lower() not in OFF_VALUES


@dataclasses.dataclass(frozen=True)
class Settings:
    """A watch's settings from the environment or an engine's configuration.

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
    from graphcheck import _core

    try:
        return tuple(_core.read_allowlist(path))
    except _core.GraphcheckError as exc:
        problems.append(f"{what}: {exc}; no allowlist is used")
        return ()


def settings_from(
    values: Mapping[str, Any], *, source: str, default_dir: str | None = DEFAULT_DIR
) -> Settings:
    """Settings from a mapping with ``mode``, ``dir`` and ``allow`` (all optional).

    ``allow`` is an allowlist file path or a list of globs. Unknown keys and bad
    values are reported in :attr:`Settings.problems` (named by ``source``),
    never raised: a debug flag must not stop a server from starting.
    """
    problems: list[str] = []
    mode = str(values.get("mode") or "warn").strip().lower()
    if mode not in MODES:
        problems.append(f"{source} mode {mode!r}: expected one of {', '.join(MODES)}; using warn")
        mode = "warn"
    folder = values.get("dir") or default_dir
    out_dir = os.path.abspath(os.fspath(folder)) if folder else None
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


class _PostImportLoader(importlib.abc.Loader):
    """Runs the real loader, then the callbacks of the finder for that module."""

    def __init__(self, loader: Any, finder: _PostImportFinder) -> None:
        self._loader = loader
        self._finder = finder

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        create = getattr(self._loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        # Leave no trace: the module keeps its real loader.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._finder.fire(module.__name__, module)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """On ``sys.meta_path``: finds watched modules with the other finders, wraps their loader."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callable[[ModuleType], object]]] = {}  # _FINDER_LOCK
        self._finding: set[str] = set()

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.callbacks or fullname in self._finding:
            return None
        self._finding.add(fullname)
        try:
            for finder in sys.meta_path:
                if finder is self or not hasattr(finder, "find_spec"):
                    continue
                spec = finder.find_spec(fullname, path, target)
                if spec is not None:
                    break
            else:
                return None
        finally:
            self._finding.discard(fullname)
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _PostImportLoader(spec.loader, self)
        return spec

    def fire(self, name: str, module: ModuleType) -> None:
        with _FINDER_LOCK:
            callbacks = self.callbacks.pop(name, [])
            if not self.callbacks and self in sys.meta_path:
                sys.meta_path.remove(self)  # nothing left to wait for
        for callback in callbacks:
            _run(callback, module)


_FINDER: _PostImportFinder | None = None
_FINDER_LOCK = threading.Lock()


def _run(callback: Callable[[ModuleType], object], module: ModuleType) -> None:
    try:
        callback(module)
    except Exception:
        log.exception("graphcheck: the post-import hook for %s failed", module.__name__)


def when_imported(name: str, callback: Callable[[ModuleType], object]) -> None:
    """Call ``callback(module)`` right after ``name`` is imported (now, if it already is).

    The callback runs once, in the importing thread, after the module's code
    ran; an exception in it is logged, never raised into the import.
    """
    global _FINDER
    module = sys.modules.get(name)
    if module is not None:
        _run(callback, module)
        return
    with _FINDER_LOCK:
        if _FINDER is None or _FINDER not in sys.meta_path:
            _FINDER = _PostImportFinder()
            sys.meta_path.insert(0, _FINDER)
        _FINDER.callbacks.setdefault(name, []).append(callback)
        finder = _FINDER
    module = sys.modules.get(name)  # imported by another thread meanwhile
    if module is not None:
        finder.fire(name, module)


def _activate(_torch: ModuleType) -> None:
    from graphcheck._watch import watch_from_env

    watch_from_env()


def install_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """The ``.pth`` line's call: watch every process that imports torch when ``GRAPHCHECK`` is on.

    Returns whether it installed the hook. Never raises (a failure is printed
    to stderr: a site hook must not stop Python from starting).
    """
    try:
        if not flag_on(environ):
            return False
        when_imported("torch", _activate)
        return True
    except Exception as exc:  # pragma: no cover - defensive: never break interpreter start
        print(f"graphcheck: GRAPHCHECK is set but the import hook failed: {exc}", file=sys.stderr)
        return False
