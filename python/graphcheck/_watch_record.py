"""How graphs reach :class:`graphcheck.Watch`: CUDA graph captures and the CPU twin (private).

:class:`Recorder` is the part of the watch that records graphs: the callbacks its
:class:`~graphcheck._watch_cuda.CaptureHooks` call around a CUDA graph capture (open the
ATen capture window after ``capture_begin``, finish it after ``capture_end``, on the
capturing thread) and :meth:`Recorder.capture`, the CPU twin of a capture for processes
without CUDA graphs. :class:`WatchedGraph` is one recorded graph. Split from
:mod:`graphcheck._watch`, which holds the bookkeeping, the check points and the process's
watch; the attributes declared on :class:`Recorder` are set by ``Watch.__init__``.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from graphcheck._watch_graph import ModelSource, RegistryCache, WatchedCapture

if TYPE_CHECKING:
    import itertools

    from graphcheck._watch_output import CheckResult

__all__ = ["Recorder", "WatchedGraph"]

log = logging.getLogger("graphcheck.watch")


class WatchedGraph:
    """One graph a watch recorded.

    Attributes:
        id: its graph id (unique in the watch; the ``graph`` of its findings).
        capture: the :class:`graphcheck.Capture` (epochs, check, save, replay
            for the CPU twin).
        kind: ``"cuda"`` (a CUDA graph capture) or ``"cpu twin"`` (:meth:`Watch.capture`).
        device: the device it was captured on.
        checked: whether a check point has checked it.
    """

    def __init__(self, graph_id: int, capture: Any, kind: str, device: str) -> None:
        self.id = graph_id
        self.capture = capture
        self.kind = kind
        self.device = device
        self.checked = False
        self._labels: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"<WatchedGraph {self.id} ({self.kind} on {self.device}): {self.capture!r}>"

    def next_label(self, label: str) -> str:
        """The epoch label of a check point: ``label``, then ``label-2``, ... (unique per graph)."""
        n = self._labels.get(label, 0) + 1
        self._labels[label] = n
        return label if n == 1 else f"{label}-{n}"


class Recorder:
    """Records graphs into a watch (the base of :class:`graphcheck.Watch`).

    Thread safety: a CUDA capture is recorded on the thread that captures (the ATen window
    is thread-local); the bookkeeping is under the watch's lock.
    """

    _lock: threading.RLock
    _ids: itertools.count[int]
    _open: dict[int, tuple[Any, int, torch.device, threading.Thread]]
    _registry: RegistryCache
    _device_of: Callable[[Any], torch.device]
    check_on_capture: bool
    closed: bool

    def _source(self, device: torch.device) -> ModelSource:
        raise NotImplementedError

    def _add(self, capture: Any, graph_id: int, kind: str, device: str) -> WatchedGraph:
        raise NotImplementedError

    def _forget(self, graph_id: int) -> None:
        raise NotImplementedError

    def _check(self, label: str, graphs: list[WatchedGraph], *, fresh: bool) -> CheckResult | None:
        raise NotImplementedError

    # ------------------------------------------------------------- CUDA capture

    def _capture_begins(self, graph: Any) -> None:
        from graphcheck import _torch

        if self.closed:
            return
        device = self._device_of(graph)
        with self._lock:
            graph_id = next(self._ids)
        window = _torch.CaptureWindow(None, graph_id)  # raises inside another window
        with self._lock:
            self._open[id(graph)] = (window, graph_id, device, threading.current_thread())

    def _capture_aborted(self, graph: Any) -> None:
        with self._lock:
            entry = self._open.pop(id(graph), None)
        if entry is not None:
            entry[0].close()

    def _capture_ends(self, graph: Any) -> None:
        with self._lock:
            entry = self._open.pop(id(graph), None)
        if entry is None:
            return
        window, graph_id, device, thread = entry
        if thread is not threading.current_thread():
            window.close()
            log.warning(
                "graphcheck: graph %d ended its capture on another thread than it began on; "
                "it is not watched",
                graph_id,
            )
            return
        try:
            record = window.finish()
        finally:
            window.close()
        with self._lock:
            if self.check_on_capture:
                self._registry.invalidate()
            capture = WatchedCapture.make(self._source(device), self._registry, record)
            watched = self._add(capture, graph_id, "cuda", str(device))
        with contextlib.suppress(TypeError):  # a graph without weak references stays watched
            weakref.finalize(graph, self._forget, graph_id)
        if self.check_on_capture:
            self._check("capture", [watched], fresh=False)

    # ------------------------------------------------------------ CPU twin

    def capture(
        self,
        model: torch.nn.Module,
        *args: Any,
        warmup: int = 1,
        arena: Any = None,
        **kwargs: Any,
    ) -> Any:
        """Capture one forward of ``model`` through the ATen window and watch it (the CPU twin).

        As :func:`graphcheck.capture` (``warmup`` forwards first, the tensor
        arguments are the graph's static inputs, ``arena`` the weights arena,
        found by default), for a process without CUDA graphs: the graph is
        recorded like a CUDA capture and checked now unless
        :attr:`check_on_capture` is off. Returns the :class:`graphcheck.Capture`
        (``replay()`` re-executes it); raises :class:`FindingsError` in
        ``error`` mode after recording it.
        """
        from graphcheck import _capture, _torch

        arena, inputs = _capture.capture_arguments(
            "Watch.capture", model, warmup, arena, args, kwargs
        )
        with self._lock:
            graph_id = next(self._ids)
        with torch.no_grad():
            for _ in range(warmup):
                model(*args, **kwargs)
            window = _torch.CaptureWindow(arena._native if arena is not None else None, graph_id)
            try:
                for name, tensor in inputs:
                    window.declare_input(name, tensor, _capture._INPUT_REASON)
                output = model(*args, **kwargs)
                record = window.finish()
            finally:
                window.close()
        source = ModelSource([("model", weakref.ref(model))])
        with self._lock:
            self._registry.invalidate()
            capture = WatchedCapture.make(
                source, self._registry, record, output, (args, kwargs), arena
            )
            device = next((str(p.device) for p in model.parameters()), "cpu")
            watched = self._add(capture, graph_id, "cpu twin", device)
        if self.check_on_capture:
            self._check("capture", [watched], fresh=False)
        return capture
