"""The server debug flag's engine: :func:`watch`, :func:`checkpoint` and :class:`Watch`.

Re-exported as ``graphcheck.watch``, ``graphcheck.checkpoint`` and
``graphcheck.current_watch``. ``watch()`` gives the process one watch: from then
on every CUDA graph capture (``torch.cuda.graph`` or a direct
``CUDAGraph.capture_begin``/``capture_end``) is recorded through the ATen capture
window and checked when it ends; ``checkpoint(label)`` records an epoch (after a
wake-up, a weight reload) and checks every watched graph against it. In a
process without CUDA graphs (the CPU twin, tests), :meth:`Watch.capture`
records a forward the same way. Reports (JSON, format version 1, and text) and
snapshots go to ``out_dir``; ``mode="error"`` raises :class:`FindingsError`
(with the text report) in the process that owns the graph, ``warn`` logs.

``GRAPHCHECK=1`` starts a watch in any Python process right after it imports
torch (docs/server.md). The CUDA path is unverified: it has not run on a GPU.

How graphs are recorded (the capture callbacks, :meth:`Watch.capture`) lives in
:mod:`graphcheck._watch_record`; this module holds the bookkeeping, the check points and the
process's one watch.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import os
import threading
import time
from collections.abc import Iterable
from typing import Any

import torch

from graphcheck import _core
from graphcheck._watch_cuda import AllocatorHistory, CaptureHooks, capture_device
from graphcheck._watch_env import MODES, flag_on, settings_from_env
from graphcheck._watch_graph import (
    ENGINE_STATE_REASON,
    EngineState,
    ModelGetter,
    ModelSource,
    RegistryCache,
    _engine_ref,
    _weak_getter,
)
from graphcheck._watch_output import CheckResult, FindingsError, ReportWriter, merge_reports
from graphcheck._watch_record import Recorder, WatchedGraph

__all__ = [
    "CheckResult",
    "FindingsError",
    "Watch",
    "WatchedGraph",
    "checkpoint",
    "current_watch",
    "watch",
    "watch_from_env",
]

log = logging.getLogger("graphcheck.watch")

_LOCK = threading.RLock()
_ACTIVE: Watch | None = None


class Watch(Recorder):
    """The process's watch: graphs recorded, models, settings, check points.

    Made by :func:`watch` (one per process). ``mode`` is ``"warn"`` or
    ``"error"``; ``out_dir`` the folder for reports and snapshots (None: none
    written, results kept in :attr:`results` and logged); ``allow`` allowlist
    globs applied to every check.

    Thread safety: the bookkeeping is under one lock; a capture is recorded on
    the thread that captures (the ATen window is thread-local). A check point
    reads the models' tensors: do not run it while another thread reloads them.
    """

    def __init__(
        self,
        *,
        mode: str = "warn",
        out_dir: str | os.PathLike[str] | None = None,
        allow: Iterable[str] = (),
        origin: str = "graphcheck.watch()",
        cuda_hooks: bool = True,
        graph_class: type | None = None,
        hooks_module: Any = "default",
        device_of: Any = capture_device,
        allocator_history: bool = True,
    ) -> None:
        self._lock = threading.RLock()
        self.mode = mode
        self.out_dir = out_dir
        self.allow = tuple(allow)
        self.origin = origin
        #: Check each graph when its capture ends (True), or leave it to the next
        #: :meth:`check_pending` (engine plugins check all their graphs at once).
        self.check_on_capture = True
        self._graphs: list[WatchedGraph] = []
        self._results: list[CheckResult] = []
        self._ids = itertools.count(1)
        self._seq = itertools.count(1)
        self._models: dict[str, ModelGetter] = {}
        self._discovery: dict[str, ModelSource] = {}
        self._registry = RegistryCache()
        self._runtime: list[tuple[torch.Tensor, str, str]] = []
        self._inputs: list[tuple[str, torch.Tensor, str]] = []
        self._open: dict[int, tuple[Any, int, torch.device, threading.Thread]] = {}
        self._device_of = device_of
        self._history = AllocatorHistory()
        if allocator_history:
            self._history.enable()
            self._registry.site_labels = self._history.sites
        self._hooks: CaptureHooks | None = None
        if cuda_hooks:
            self._hooks = CaptureHooks(
                self._capture_begins,
                self._capture_ends,
                self._capture_aborted,
                graph_class=graph_class,
                hooks_module=hooks_module,
            )
            self._hooks.install()
        self.closed = False

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.mode
        return (
            f"<Watch ({state}, {self.origin}): {len(self._graphs)} graphs, "
            f"{len(self._results)} check points, out_dir={self.out_dir}>"
        )

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ settings

    @property
    def mode(self) -> str:
        """``"warn"`` (log findings) or ``"error"`` (raise :class:`FindingsError`)."""
        return self._mode

    @mode.setter
    def mode(self, value: str) -> None:
        if value not in MODES:
            raise ValueError(f"graphcheck.watch: mode must be one of {MODES}, got {value!r}")
        self._mode = value

    @property
    def out_dir(self) -> str | None:
        """The folder reports and snapshots go to, or None."""
        return None if self._writer is None else str(self._writer.folder)

    @out_dir.setter
    def out_dir(self, value: str | os.PathLike[str] | None) -> None:
        self._writer = None if value is None else ReportWriter(os.path.abspath(value))

    @property
    def capture_hooks(self) -> str:
        """How CUDA graph captures reach the watch (or ``"not installed"``)."""
        return self._hooks.how if self._hooks is not None else "not installed"

    @property
    def graphs(self) -> list[WatchedGraph]:
        """The graphs recorded and still alive, in capture order."""
        with self._lock:
            return list(self._graphs)

    @property
    def results(self) -> list[CheckResult]:
        """Every check point so far, in order."""
        with self._lock:
            return list(self._results)

    @property
    def last(self) -> CheckResult | None:
        """The last check point, or None."""
        with self._lock:
            return self._results[-1] if self._results else None

    # ------------------------------------------------------------ models, state

    def add_model(self, model: torch.nn.Module | ModelGetter, name: str = "model") -> None:
        """Watch ``model`` (a module, or a callable returning the current one) under ``name``.

        Graphs captured from now on are checked against the models added so
        far (one model: its own paths; several: under their names). Without
        any, a graph's model is every root module with parameters on its
        device. Only a weak reference to a module is kept.
        """
        getter = _weak_getter(model)
        with self._lock:
            self._models[name] = getter
            self._registry.invalidate()

    def add_engine_state(self, obj: object, name: str, reason: str = ENGINE_STATE_REASON) -> None:
        """Declare the tensors ``obj`` holds outside the model runtime state (``name.path``).

        For an engine object such as a model runner: its static input buffers,
        KV caches and scratch are not the model's, and the contract does not
        cover them. Storages the model's census finds unregistered stay
        findings even when ``obj`` reaches them. Weakly held where possible.
        """
        with self._lock:
            self._registry.engine_states = [
                s for s in self._registry.engine_states if s.name != name
            ] + [EngineState(name, _engine_ref(obj), reason)]
            self._registry.invalidate()

    def declare_runtime(self, tensor: torch.Tensor, name: str, reason: str) -> None:
        """Declare ``tensor`` runtime state for every graph, recorded or to come."""
        with self._lock:
            self._runtime.append((tensor, name, reason))
            for graph in self._graphs:
                graph.capture.declare_runtime(tensor, name, reason)

    def declare_input(
        self, name: str, tensor: torch.Tensor, reason: str = "static graph input"
    ) -> None:
        """Declare ``tensor`` a static input of every graph, recorded or to come."""
        with self._lock:
            self._inputs.append((name, tensor, reason))
            for graph in self._graphs:
                graph.capture.declare_input(name, tensor, reason)

    def _source(self, device: torch.device) -> ModelSource:
        if self._models:
            return ModelSource(list(self._models.items()))
        key = str(device)
        if key not in self._discovery:
            self._discovery[key] = ModelSource(device=device)
        return self._discovery[key]

    def _add(self, capture: Any, graph_id: int, kind: str, device: str) -> WatchedGraph:
        graph = WatchedGraph(graph_id, capture, kind, device)
        for tensor, name, reason in self._runtime:
            capture.declare_runtime(tensor, name, reason)
        for name, tensor, reason in self._inputs:
            capture.declare_input(name, tensor, reason)
        self._graphs.append(graph)
        return graph

    def _forget(self, graph_id: int) -> None:
        with self._lock:
            self._graphs = [g for g in self._graphs if g.id != graph_id]

    # --------------------------------------------------------------- checks

    def checkpoint(self, label: str) -> CheckResult | None:
        """Record the epoch ``label`` for every watched graph and check each against it.

        Returns the check point (one merged report, its files), or None when
        no graph is watched. Raises :class:`FindingsError` in ``error`` mode
        when there are findings (after writing the files).
        """
        if not isinstance(label, str) or not label or label == "now":
            raise ValueError(f"graphcheck.checkpoint: expected a non-empty label, got {label!r}")
        with self._lock:
            graphs = list(self._graphs)
            self._registry.invalidate()
        return self._check(label, graphs, fresh=True)

    def check_pending(self, label: str = "capture") -> CheckResult | None:
        """Check the graphs no check point has checked yet, each in its capture epoch.

        What an engine plugin calls after the engine captured its graphs (with
        :attr:`check_on_capture` off, they wait for this). None when there is
        nothing new.
        """
        with self._lock:
            graphs = [g for g in self._graphs if not g.checked]
        return self._check(label, graphs, fresh=False) if graphs else None

    def _check(self, label: str, graphs: list[WatchedGraph], *, fresh: bool) -> CheckResult | None:
        with self._lock:
            reports, checked, skipped = [], [], []
            for graph in graphs:
                try:
                    if fresh:
                        epoch = graph.next_label(label)
                        graph.capture.epoch(epoch)
                    else:
                        epoch = graph.capture.epochs[0]
                    reports.append(graph.capture.check(epoch, allow=self.allow))
                except _core.GraphcheckError as exc:
                    skipped.append(f"graph {graph.id}: {exc}")
                    continue
                graph.checked = True
                checked.append(graph)
            if not checked and not skipped:
                return None
            report = merge_reports(reports, label, "capture")
            model = "; ".join(dict.fromkeys(g.capture.source.describe() for g in checked))
            result = CheckResult(
                next(self._seq),
                label,
                report,
                tuple(g.id for g in checked),
                tuple(skipped),
                {},
                time.time(),
                os.getpid(),
                model,
            )
            if self._writer is not None:
                try:
                    files = self._writer.write(result, [(g.id, g.capture) for g in checked])
                    result = dataclasses.replace(result, files=files)
                except OSError as exc:
                    log.error("graphcheck: could not write reports to %s: %s", self.out_dir, exc)
            self._results.append(result)
        self._log(result)
        if self.mode == "error" and not result.ok:
            raise FindingsError(result)
        return result

    def _log(self, result: CheckResult) -> None:
        where = f" (report: {result.files['report_text']})" if result.files else ""
        for skip in result.skipped:
            log.warning("graphcheck: check point %r: %s", result.label, skip)
        if result.report.stale_allow:
            log.warning(
                "graphcheck: allowlist globs that matched nothing: %s",
                ", ".join(result.report.stale_allow),
            )
        if result.ok:
            log.info("%s%s", result.summary_line(), where)
        elif self.mode == "warn":
            text = "" if result.files else f"\n{result.report}"
            log.warning("%s%s%s", result.summary_line(), where, text)

    # --------------------------------------------------------------- lifetime

    def close(self) -> None:
        """Remove the capture hooks, stop the allocator history if the watch started it.

        Graphs and results stay readable. The process has no watch afterwards
        (:func:`watch` starts a new one). Idempotent.
        """
        global _ACTIVE
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._hooks is not None:
                self._hooks.remove()
            for window, *_ in self._open.values():
                window.close()
            self._open.clear()
            self._history.disable()
        with _LOCK:
            if _ACTIVE is self:
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
    :class:`FindingsError` with the text report; ``out_dir`` receives one JSON
    and one text report per check point and each graph's snapshot; ``allow``
    holds allowlist globs. Each defaults to the environment
    (``GRAPHCHECK_MODE``, ``GRAPHCHECK_DIR``, ``GRAPHCHECK_ALLOW``), else
    ``warn``, no files, no globs.

    A process has one watch: calling this again returns it, adding ``model``
    and changing the settings given. ``options`` go to :class:`Watch` for a new
    watch (tests: ``graph_class``, ``hooks_module``, ``device_of``,
    ``cuda_hooks``, ``allocator_history``).
    """
    global _ACTIVE
    env = settings_from_env() if _env_configured() else None
    with _LOCK:
        if _ACTIVE is None or _ACTIVE.closed:
            _ACTIVE = Watch(
                mode=mode or (env.mode if env else "warn"),
                out_dir=out_dir if out_dir is not None else (env.out_dir if env else None),
                allow=allow if allow is not None else (env.allow if env else ()),
                origin=origin,
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
                _ACTIVE.allow = tuple(allow)
        active = _ACTIVE
    if model is not None:
        active.add_model(model)
    return active


def _env_configured() -> bool:
    return flag_on() or any(
        os.environ.get(name) for name in ("GRAPHCHECK_MODE", "GRAPHCHECK_DIR", "GRAPHCHECK_ALLOW")
    )


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
    :meth:`Watch.checkpoint`.
    """
    active = current_watch()
    return active.checkpoint(label) if active is not None else None
