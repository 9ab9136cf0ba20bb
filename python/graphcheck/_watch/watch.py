"""The watch: :class:`Watch` records graphs, keeps the models and settings, runs check points.

A graph reaches the watch in one of two ways. A CUDA graph capture (``torch.cuda.graph`` or a
direct ``CUDAGraph.capture_begin``/``capture_end``) calls the watch's
:class:`~graphcheck._watch.cuda_hooks.CaptureHooks` callbacks: the ATen capture window opens
right after ``capture_begin``, on the capturing thread (the window is thread-local, as a
stream capture is), the graph's own nodes are read right before ``capture_end``
(:mod:`~graphcheck._watch.cuda_capture`: the dispatcher's record then only names the
owners), and the window is finished right after ``capture_end``. In a process without CUDA
graphs (the CPU twin, tests), :meth:`Watch.capture` records a forward the same way. Each graph
is checked when recorded (:attr:`Watch.check_on_capture`; in ``warn`` mode once the burst of
captures ended, :mod:`~graphcheck._watch.quiet`) or at the next :meth:`Watch.check_pending`;
:meth:`Watch.checkpoint` records an epoch (after a wake-up, a weight reload) and checks every
graph against it. The CUDA path ran on a GPU once (2026-12-04, docs/gpu-check.md); what
changed since has not.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

import torch

from graphcheck._capture import capture_arguments, record_forward
from graphcheck._census import census
from graphcheck._errors import GraphcheckValueError, require_text, require_texts
from graphcheck._model_registry import ENGINE_STATE_REASON, EngineState
from graphcheck._watch.allocator_history import AllocatorHistory
from graphcheck._watch.cuda_capture import (
    CudaCaptures,
    CudaGraphReader,
    GraphReader,
    window_notes,
)
from graphcheck._watch.cuda_hooks import CaptureHooks, capture_device
from graphcheck._watch.graph_pools import GraphPools, SegmentSource, torch_segments
from graphcheck._watch.graphs import (
    Declarations,
    GraphList,
    WatchedCapture,
    WatchedGraph,
    watched_capture,
)
from graphcheck._watch.output import CheckResult, FindingsError
from graphcheck._watch.profiling import ProfilingCaptures
from graphcheck._watch.quiet import QuietWorker, renew_after_fork
from graphcheck._watch.registry import ModelGetter, ModelSource, RegistryCache, WatchedModels
from graphcheck._watch.results import CheckPoints, Settings
from graphcheck._watch.settings import MODES
from graphcheck.arena import WeightsArena

__all__ = ["Watch"]

log = logging.getLogger("graphcheck.watch")


class Watch:
    """The process's watch: graphs recorded, models, settings, check points.

    Made by :func:`graphcheck.watch` (one per process; tests make their own). ``mode`` is
    ``"warn"`` or ``"error"``; ``out_dir`` the folder for reports and snapshots (None: none
    written, results kept in :attr:`results` and logged); ``allow`` allowlist globs applied
    to every check. The rest is for tests and the process's one watch: ``cuda_hooks`` installs
    the capture hooks on ``graph_class`` (default ``torch.cuda.CUDAGraph``) or on the global
    hooks of ``hooks_module``; ``device_of`` names a graph's device; ``allocator_history``
    records the caching allocator's frames; ``on_close`` is called once by :meth:`close`;
    ``graph_reader`` reads each CUDA graph's nodes (default
    :class:`~graphcheck._watch.cuda_capture.CudaGraphReader`; None: the dispatcher's ops);
    ``graph_segments`` lists the caching allocator's segments, whose graph pools are graph
    memory in every epoch of a CUDA graph (:mod:`graphcheck._watch.graph_pools`).

    Thread safety: the bookkeeping is under one lock; a capture is recorded on the thread
    that captures (the ATen window is thread-local). A check point reads the models' tensors:
    do not run it while another thread reloads them. Lifetime: graphs are forgotten when
    their CUDA graph is freed; a closed watch keeps its graphs and results readable.
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
        device_of: Callable[[object], torch.device] = capture_device,
        allocator_history: bool = True,
        on_close: Callable[[Watch], None] | None = None,
        graph_reader: GraphReader | None | str = "default",
        graph_segments: SegmentSource = torch_segments,
    ) -> None:
        self._lock = threading.RLock()
        renew_after_fork(self, "_lock", threading.RLock)  # the checks thread takes it
        self.mode = mode
        self._deferred = QuietWorker(
            "graphcheck-checks", "graphcheck: a check at capture failed (the graph is unchecked)"
        )
        self._points = CheckPoints()
        self.out_dir = out_dir
        self.allow = require_texts(allow, "graphcheck.watch: allow")
        self.origin = origin
        #: The process's role in its engine (``worker rank 0``), shown in reports, file names
        #: and log lines; empty when unknown. Engine plugins set it.
        self.role = ""
        #: Check each graph in its capture epoch (True), or leave it to the next
        #: :meth:`check_pending` (engine plugins check all their graphs at once). A CUDA
        #: capture's check runs inside ``capture_end`` in ``error`` mode (it raises there), in
        #: ``warn`` mode on the watch's thread once the burst of captures ended, or sooner when
        #: anyone waits for it (:meth:`flush`, :attr:`results`, a check point, a declaration).
        self.check_on_capture = True
        self._recorded = GraphList()
        self._models = WatchedModels()
        self._registry = RegistryCache()
        self._declared = Declarations()
        reader = CudaGraphReader() if graph_reader == "default" else graph_reader
        if isinstance(reader, str):
            raise GraphcheckValueError(
                "graphcheck.watch: graph_reader must be a reader, None or 'default', "
                f"got {reader!r}"
            )
        self._captures = CudaCaptures(reader)
        self._device_of = device_of
        self._on_close = on_close
        self._profiling = ProfilingCaptures()
        self._told_nothing_watched = False  # the first empty check point logs why
        self._pools = GraphPools(graph_segments)
        self._history = AllocatorHistory()
        if allocator_history:
            self._history.enable()
            self._registry.site_labels = self._history.sites
        self._hooks: CaptureHooks | None = None
        if cuda_hooks:
            self._hooks = CaptureHooks(
                self._capture_begins,
                self._capture_ends,
                self._captures.abort,
                on_ending=self._captures.ending,
                graph_class=graph_class,
                hooks_module=hooks_module,
                raises=(FindingsError,),
            )
            self._hooks.install()
        self.closed = False

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.mode
        return (
            f"<Watch ({state}, {self.origin}): {len(self.graphs)} graphs, "
            f"{len(self._points.all())} check points, out_dir={self.out_dir}>"
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
            raise GraphcheckValueError(
                f"graphcheck.watch: mode must be one of {MODES}, got {value!r}"
            )
        self._mode = value

    @property
    def out_dir(self) -> str | None:
        """The folder reports and snapshots go to, or None."""
        return self._points.folder

    @out_dir.setter
    def out_dir(self, value: str | os.PathLike[str] | None) -> None:
        self._deferred.drain()  # a queued check at capture writes where its capture's went
        self._points.set_folder(value)

    def flush(self) -> None:
        """Wait until every check at capture ran and the files of every check point are written.

        A check at capture in ``warn`` mode runs, and any check at capture writes its files,
        on a thread of the watch's (the capture does not wait for them); every other check
        point, ``error`` mode's findings and :meth:`close` wait for them first. Thread-safe;
        do not call it from a check's own log handler holding the watch's lock.
        """
        self._deferred.drain()
        self._points.flush()

    @property
    def capture_hooks(self) -> str:
        """How CUDA graph captures reach the watch (or ``"not installed"``)."""
        return self._hooks.how if self._hooks is not None else "not installed"

    @property
    def graphs(self) -> list[WatchedGraph]:
        """The graphs recorded and still alive, in capture order (checks at capture ran)."""
        self._deferred.drain()
        with self._lock:
            return list(self._recorded.alive())

    @property
    def results(self) -> list[CheckResult]:
        """Every check point so far, in order (it waits for the checks at capture queued)."""
        self._deferred.drain()
        return self._points.all()

    @property
    def last(self) -> CheckResult | None:
        """The last check point, or None (it waits for the checks at capture queued)."""
        self._deferred.drain()
        return self._points.last()

    # ------------------------------------------------------------ models, state

    def add_model(self, model: torch.nn.Module | ModelGetter, name: str = "model") -> None:
        """Watch ``model`` (a module, or a callable returning the current one) under ``name``.

        Graphs captured from now on are checked against the models added so
        far (one model: its own paths; several: under their names). Without
        any, a graph's model is every root module with parameters on its
        device. Only a weak reference to a module is kept.
        """
        with self._lock:
            self._models.add(name, model)
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
            ] + [EngineState.of(name, obj, reason)]
            self._registry.invalidate()

    def declare_runtime(self, tensor: torch.Tensor, name: str, reason: str) -> None:
        """Declare ``tensor`` runtime state for every graph, recorded or to come.

        Raises :class:`graphcheck.GraphcheckTypeError` or ``GraphcheckValueError`` for a bad
        argument now, not at the next capture.
        """
        self._deferred.drain()  # a graph's check at capture sees its capture epoch as it was
        with self._lock:
            self._declared.add_runtime(tensor, name, reason, self._recorded.alive())

    def declare_input(
        self, name: str, tensor: torch.Tensor, reason: str = "static graph input"
    ) -> None:
        """Declare ``tensor`` a static input of every graph, recorded or to come.

        Raises as :meth:`declare_runtime` for a bad argument.
        """
        self._deferred.drain()
        with self._lock:
            self._declared.add_input(name, tensor, reason, self._recorded.alive())

    # ------------------------------------------------------------- CUDA capture

    def profiling(self, what: str) -> contextlib.AbstractContextManager[None]:
        """A window whose CUDA captures are the engine's memory profiling: none is recorded.

        ``with watch.profiling("vllm.worker.determine_available_memory"): ...``; the next check
        point notes how many graphs were captured there (``what`` names the step). Windows
        nest and are process-wide (:class:`~graphcheck._watch.profiling.ProfilingCaptures`).
        """
        return self._profiling.window(what)

    def _capture_begins(self, graph: object) -> None:
        if self.closed or self._profiling.skip():
            return
        device = self._device_of(graph)
        with self._lock:
            graph_id = self._recorded.next_id()
        self._captures.begin(graph, graph_id, device)  # raises inside another window

    def _capture_ends(self, graph: object) -> None:
        finished = self._captures.end(graph)
        if finished is None:
            return
        with self._lock:
            # One census for graphs captured back to back on one device, until every graph
            # was freed (torch's generator state for graphs is allocated anew then).
            self._registry.recheck((str(finished.device), self._recorded.emptied))
            source = self._models.source(finished.device)
            self._pools.note(graph)
            capture = watched_capture(
                source, self._registry, finished.record, pools=self._pools, declared=self._declared
            )
            watched = self._recorded.add(capture, finished.graph_id, "cuda", str(finished.device))
            watched.reader, watched.reader_notes = finished.reader, finished.notes
        self._recorded.forget_when_freed(graph, finished.graph_id)
        if not self.check_on_capture:
            return
        if self.mode == "warn":  # nothing waits for it: off the engine's capture path
            # With the settings of now: a later graphcheck.watch(allow=...) is not its.
            taken = Settings(self.mode, self.allow, self.role, self._profiling.take_notes())
            check = functools.partial(
                self._check, "capture", [watched], fresh=False, at_capture=True, taken=taken
            )
            self._deferred.submit(lambda last: check())
        else:
            self._check("capture", [watched], fresh=False, at_capture=True)

    # ------------------------------------------------------------------ CPU twin

    def capture(
        self,
        model: torch.nn.Module,
        *args: Any,
        warmup: int = 1,
        arena: WeightsArena | None = None,
        **kwargs: Any,
    ) -> WatchedCapture:
        """Capture one forward of ``model`` through the ATen window and watch it (the CPU twin).

        As :func:`graphcheck.capture` (``warmup`` forwards first, the tensor
        arguments are the graph's static inputs, ``arena`` the weights arena,
        found by default), for a process without CUDA graphs: the graph is
        recorded like a CUDA capture and checked now unless
        :attr:`check_on_capture` is off. Returns the :class:`graphcheck.Capture`
        (``replay()`` re-executes it); raises :class:`FindingsError` in
        ``error`` mode after recording it.
        """
        arena, inputs = capture_arguments("Watch.capture", model, warmup, arena, args, kwargs)
        with self._lock:
            graph_id = self._recorded.next_id()
        record, output = record_forward(
            "Watch.capture",
            model,
            args,
            kwargs,
            warmup=warmup,
            arena=arena,
            inputs=inputs,
            graph_id=graph_id,
            # An engine's model may be compiled: a torch function mode around its warm-up makes
            # dynamo recompile it (the mode stack is guarded), and the twin then records another
            # forward than the engine runs. The watch leaves the warm-up as the engine has it.
            warm_up_in=contextlib.nullcontext,
        )
        source = ModelSource([("model", weakref.ref(model))])
        with self._lock:
            self._registry.recheck()
            capture = watched_capture(
                source, self._registry, record, output, (args, kwargs), arena, None, self._declared
            )
            device = next((str(p.device) for p in model.parameters()), "cpu")
            watched = self._recorded.add(capture, graph_id, "cpu twin", device)
            watched.reader_notes = window_notes(record, graph_id)
        if self.check_on_capture:
            self._check("capture", [watched], fresh=False, at_capture=True)
        return capture

    # ------------------------------------------------------------------- checks

    def census_point(self, label: str = "load") -> CheckResult | None:
        """The census of the watched models now, as a check point without graphs.

        What an engine plugin calls once the model is loaded: every tensor the models keep
        outside their parameters and buffers, by attribute path (the contract's oracle;
        runtime state by attribute name is exempt, the allowlist applies), before any graph
        is captured. None when no model was added. Written, logged and raised like any
        check point (:class:`FindingsError` in ``error`` mode).
        """
        start = time.perf_counter()
        self._deferred.drain()  # their check points come first
        with self._lock:
            source = self._models.given()
        model = source.resolve() if source is not None else None
        if source is None or model is None:
            return None
        entries = census(model, allow=self.allow).entries
        with self._lock:
            settings = Settings(self.mode, self.allow, self.role)
            result = self._points.census(label, entries, source.describe(), settings, start)
        return self._points.finish(result, self.mode)

    def checkpoint(self, label: str, *, notes: Iterable[str] = ()) -> CheckResult | None:
        """Record the epoch ``label`` for every watched graph and check each against it.

        Returns the check point (one merged report, its files), or None when
        no graph is watched. Raises :class:`FindingsError` in ``error`` mode
        when there are findings (after writing the files),
        :class:`graphcheck.GraphcheckTypeError` for a label that is not a str and
        :class:`graphcheck.GraphcheckValueError` for an empty label or ``"now"``. ``notes``
        go into the result (what the caller checked besides, or could not check). The first
        check point that finds no graph watched says so in the log (INFO), once per watch.
        """
        require_text(label, "graphcheck.checkpoint: label")
        if not label or label == "now":
            raise GraphcheckValueError(
                f"graphcheck.checkpoint: expected a non-empty label other than 'now', got {label!r}"
            )
        self._deferred.drain()  # the checks at capture first, in their capture epochs
        with self._lock:
            graphs = list(self._recorded.alive())
            self._registry.invalidate()
            tell = not graphs and not self._told_nothing_watched
            self._told_nothing_watched |= tell
        if tell:
            # Silence would read as a clean check: say once why nothing was checked.
            log.info(
                "graphcheck: check point %r: no CUDA graph is watched in this process, nothing "
                "checked (a graph captured before the watch started, or through a graph class "
                "it does not hook, is not seen; captures reach it through: %s)",
                label,
                self.capture_hooks,
            )
        return self._check(label, graphs, fresh=True, notes=tuple(notes))

    def check_pending(
        self, label: str = "capture", *, notes: Iterable[str] = ()
    ) -> CheckResult | None:
        """Check the graphs no check point has checked yet, each in its capture epoch.

        What an engine plugin calls after the engine captured its graphs (with
        :attr:`check_on_capture` off, they wait for this). None when there is
        nothing new.
        """
        self._deferred.drain()  # a graph whose check at capture is queued is not pending
        with self._lock:
            graphs = [g for g in self._recorded.alive() if not g.checked]
        return self._check(label, graphs, fresh=False, notes=tuple(notes)) if graphs else None

    def _check(
        self,
        label: str,
        graphs: list[WatchedGraph],
        *,
        fresh: bool,
        notes: tuple[str, ...] = (),
        at_capture: bool = False,
        taken: Settings | None = None,
    ) -> CheckResult | None:
        # `taken`: the settings of a queued check at capture, as they were at its capture.
        if at_capture:
            self._deferred.drain()  # the queued ones first (a no-op on their own thread)
        else:
            self.flush()  # the pending pages show the epochs of their own check points only
        with self._lock:
            if not fresh:  # a queued check at capture and check_pending may both have it
                graphs = [g for g in graphs if not g.checked]
            if not graphs:  # before the sequence number and the profiling notes are taken
                return None
            settings = taken or Settings(
                self.mode, self.allow, self.role, self._profiling.take_notes()
            )
            settings = settings._replace(notes=notes + settings.notes)
            result = self._points.check(
                label,
                graphs,
                fresh=fresh,
                pools=self._pools,
                settings=settings,
                background=at_capture,
            )
        return self._points.finish(result, settings.mode)

    # ------------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Remove the capture hooks, stop the allocator history if the watch started it.

        Graphs and results stay readable. The process has no watch afterwards
        (:func:`graphcheck.watch` starts a new one). Idempotent.
        """
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._hooks is not None:
                self._hooks.remove()
            self._captures.close()
            self._history.disable()
        self._deferred.close()  # the checks take the lock: outside it
        self._points.close()  # the files of every check point so far, then the writer ends
        if self._on_close is not None:
            self._on_close(self)
