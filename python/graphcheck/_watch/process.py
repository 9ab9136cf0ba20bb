"""The process's one watch: :func:`watch`, :func:`current_watch`, :func:`checkpoint`.

Re-exported as ``graphcheck.watch``, ``graphcheck.current_watch`` and ``graphcheck.checkpoint``.
``watch()`` gives the process one :class:`~graphcheck._watch.watch.Watch`: from then on every
CUDA graph capture is recorded and checked when it ends; ``checkpoint(label)`` records an
epoch (after a wake-up, a weight reload) and checks every watched graph against it. Reports
(JSON, format version 1, and text) and snapshots go to ``out_dir``; ``mode="error"`` raises
:class:`~graphcheck.FindingsError` (with the text report) in the process that owns the graph,
``warn`` logs. ``GRAPHCHECK=1`` starts the watch right after torch is imported
(:mod:`graphcheck._watch.import_hook`, docs/server.md).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable
from typing import Any

import torch

from graphcheck._errors import require_texts
from graphcheck._watch.output import CheckResult
from graphcheck._watch.registry import ModelGetter
from graphcheck._watch.settings import env_configured, flag_on, settings_from_env
from graphcheck._watch.watch import Watch

__all__ = ["checkpoint", "current_watch", "watch", "watch_from_env"]

log = logging.getLogger("graphcheck.watch")

_LOCK = threading.RLock()
_ACTIVE: Watch | None = None


def _closed(closing: Watch) -> None:
    global _ACTIVE
    with _LOCK:
        if _ACTIVE is closing:
            _ACTIVE = None


def watch(
    model: torch.nn.Module | ModelGetter | None = None,
    *,
    mode: str | None = None,
    out_dir: str | os.PathLike[str] | None = None,
    allow: Iterable[str] | None = None,
    origin: str = "graphcheck.watch()",
    **options: Any,
) -> Watch:
    """Watch every CUDA graph this process captures from now on; returns the process's watch.

    ``model`` is the model the graphs are checked against (default: every
    root ``nn.Module`` with parameters on the capture's device, found when a
    capture ends). ``mode`` ``"warn"`` logs findings, ``"error"`` raises
    :class:`~graphcheck.FindingsError` with the text report; ``out_dir`` receives one JSON
    and one text report per check point and each graph's snapshot; ``allow``
    holds allowlist globs. Each defaults to the environment
    (``GRAPHCHECK_MODE``, ``GRAPHCHECK_DIR``, ``GRAPHCHECK_ALLOW``), else
    ``warn``, no files, no globs.

    A process has one watch: calling this again returns it, adding ``model``
    and changing the settings given. ``options`` go to :class:`~graphcheck.Watch` for a new
    watch (tests: ``graph_class``, ``hooks_module``, ``device_of``, ``graph_reader``,
    ``graph_segments``, ``cuda_hooks``, ``allocator_history``). Thread-safe.
    """
    global _ACTIVE
    env = settings_from_env() if env_configured() else None
    with _LOCK:
        if _ACTIVE is None or _ACTIVE.closed:
            _ACTIVE = Watch(
                mode=mode or (env.mode if env else "warn"),
                out_dir=out_dir if out_dir is not None else (env.out_dir if env else None),
                allow=allow if allow is not None else (env.allow if env else ()),
                origin=origin,
                on_close=_closed,
                **options,
            )
            for problem in env.problems if env else ():
                log.warning("graphcheck: %s", problem)
            log.info(
                "graphcheck: watching CUDA graph captures (%s); mode %s, reports to %s",
                _ACTIVE.capture_hooks,
                _ACTIVE.mode,
                _ACTIVE.out_dir or "the log only",
            )
        else:
            if mode is not None:
                _ACTIVE.mode = mode
            if out_dir is not None:
                _ACTIVE.out_dir = out_dir
            if allow is not None:
                _ACTIVE.allow = require_texts(allow, "graphcheck.watch: allow")
        active = _ACTIVE
    if model is not None:
        active.add_model(model)
    return active


def watch_from_env(origin: str = "GRAPHCHECK=1 import hook") -> Watch | None:
    """The watch ``GRAPHCHECK`` asks for (started if needed), or None when it is off."""
    if not flag_on():
        return None
    return watch(origin=origin)


def current_watch() -> Watch | None:
    """The process's watch, or None when none is active."""
    with _LOCK:
        return _ACTIVE if _ACTIVE is not None and not _ACTIVE.closed else None


def checkpoint(label: str) -> CheckResult | None:
    """Record the epoch ``label`` and check every watched graph against it.

    A no-op returning None when no watch is active, so servers can call it
    unconditionally and stay inert without ``GRAPHCHECK=1``. See
    :meth:`Watch.checkpoint <graphcheck.Watch.checkpoint>`.
    """
    active = current_watch()
    return active.checkpoint(label) if active is not None else None
