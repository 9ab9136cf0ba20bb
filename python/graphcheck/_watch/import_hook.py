"""``GRAPHCHECK=1``: the import hook that turns :func:`graphcheck.watch` on without code changes.

The package installs ``graphcheck_watch.pth`` into site-packages; Python's ``site`` runs its
one line at every start. With ``GRAPHCHECK`` unset (or empty, or ``0``) the line reads one
environment variable and does nothing else. Otherwise it calls :func:`install_from_env`, which
puts a finder on ``sys.meta_path`` that waits for ``torch``: right after ``import torch``
finished, the process gets its watch (:func:`graphcheck._watch.process.watch_from_env`, with
the settings of :mod:`graphcheck._watch.settings`), so every CUDA graph it captures from then
on is recorded and checked.

:func:`when_imported` (run a callback right after a module is imported) is also what the vLLM
plugin uses to patch its worker lazily.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import logging
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType

from graphcheck._watch.settings import flag_on, one_line

__all__ = ["install_from_env", "when_imported"]

log = logging.getLogger("graphcheck.watch")

#: The module that starts the watch; imported only once torch is (it imports torch).
_PROCESS_MODULE = "graphcheck._watch.process"


class _PostImportLoader(importlib.abc.Loader):
    """Runs the real loader, then the callbacks of the finder for that module."""

    def __init__(self, loader: importlib.abc.Loader, finder: _PostImportFinder) -> None:
        self._loader = loader
        self._finder = finder

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        # Leave no trace: the module keeps its real loader.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        self._finder.fire(module.__name__, module)

    def __getattr__(self, name: str) -> object:
        return getattr(self._loader, name)


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """On ``sys.meta_path``: finds watched modules with the other finders, wraps their loader."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callable[[ModuleType], object]]] = {}  # _FINDER_LOCK
        self._finding: set[str] = set()

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
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
    except Exception as exc:
        # One line in the host's log: the traceback only where graphcheck's debug log is on.
        log.error(
            "graphcheck: the post-import hook for %s failed: %s: %s",
            module.__name__,
            type(exc).__name__,
            one_line(exc),
            exc_info=log.isEnabledFor(logging.DEBUG),
        )


def when_imported(name: str, callback: Callable[[ModuleType], object]) -> None:
    """Call ``callback(module)`` right after ``name`` is imported (now, if it already is).

    The callback runs once, in the importing thread, after the module's code
    ran; an exception in it is logged, never raised into the import. Thread-safe.
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


def _start_watch(_torch: ModuleType) -> None:
    # By name, once torch is imported: the watch's modules import torch, which this module
    # must not (it runs at every interpreter start).
    importlib.import_module(_PROCESS_MODULE).watch_from_env()


def install_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """The ``.pth`` line's call: watch every process that imports torch when ``GRAPHCHECK`` is on.

    Returns whether it installed the hook. Never raises (a failure is printed
    to stderr: a site hook must not stop Python from starting).
    """
    try:
        if not flag_on(environ):
            return False
        when_imported("torch", _start_watch)
        return True
    except Exception as exc:  # pragma: no cover - defensive: never break interpreter start
        print(f"graphcheck: GRAPHCHECK is set but the import hook failed: {exc}", file=sys.stderr)
        return False
