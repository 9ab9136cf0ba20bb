"""The CUDA captures a watch has open, and which backend reads each graph's nodes.

A CUDA graph holds more than the ATen dispatcher sees: every Triton kernel inductor generates
and every custom op that launches through its own path (``cudaMemsetAsync`` through ctypes, a
raw ``cuLaunchKernel``) is a node of the graph and no dispatcher op. So on CUDA the watch
reads the captured graph itself (:class:`CudaGraphReader`, through ``graphcheck._cuda``,
the CUPTI backend's ``GraphReader`` on the real driver: kernel nodes with their argument
words, memcpy, memset, alloc and free nodes, child graphs), and the ATen capture window stays
open around the capture only for the owners: the memory produced inside the window (graph
spans) and the storages the ops used (allocations labelled ``aten:<op>``). The graph's
``reader`` says which backend read it: ``"cuda-graph"`` or ``"aten-dispatcher"`` (no
``graphcheck._cuda`` in this build, no driver, not a CUDA capture, or the read failed: the
watch says why in the check point's notes).

When the graph is read: right before ``capture_end`` (the watch's wrapper calls
:meth:`CudaCaptures.ending` first), from the stream the capture began on, which the reader
notes right after ``capture_begin`` (``torch.cuda.current_stream()``: a capture runs on the
current stream). ``cuStreamGetCaptureInfo`` hands out the graph under construction, complete
at that point, and CUDA permits every operation but destroying it or removing nodes during
the capture. The alternative, ``CUDAGraph(keep_graph=True)`` and ``raw_cuda_graph()`` after
``capture_end``, needs the flag at construction: vLLM and ``torch.cuda.graph`` construct
their ``CUDAGraph()`` themselves with the default ``keep_graph=False``, under which
``capture_end`` instantiates the graph and destroys it (torch 2.13,
``torch/cuda/graphs.py``), and forcing the flag would change when the engine's graphs are
instantiated and keep every template alive. Unverified on a GPU.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Any, Protocol

import torch

from graphcheck import _core, _torch
from graphcheck._errors import GraphcheckError
from graphcheck._watch.cuda_hooks import at_cuda_initialization

__all__ = [
    "READER_CUDA_GRAPH",
    "READER_DISPATCHER",
    "CudaCaptures",
    "CudaGraphReader",
    "FinishedCapture",
    "GraphReader",
    "ReadNodes",
    "window_notes",
]

log = logging.getLogger("graphcheck.watch")

#: ``GraphRecord.reader`` of a graph whose nodes were read from the CUDA graph.
READER_CUDA_GRAPH = "cuda-graph"
#: ``GraphRecord.reader`` of a graph whose nodes are the dispatcher ops of the ATen window.
READER_DISPATCHER = "aten-dispatcher"


@dataclasses.dataclass(frozen=True)
class ReadNodes:
    """The nodes a reader read from one CUDA graph, and what it could not read in it.

    Attributes:
        nodes: the graph's nodes (:class:`graphcheck.Node`, child graphs nested).
        notes: one line per node it could not read (a kernel whose arguments it could not
            read, a conditional whose bodies it did not read).
    """

    nodes: list[_core.Node]
    notes: tuple[str, ...] = ()


class GraphReader(Protocol):
    """What reads a CUDA graph's nodes for the watch (:class:`CudaGraphReader`; tests: fakes).

    ``begin`` runs right after ``capture_begin`` on the capturing thread and returns what
    ``read`` needs (the capture stream); ``read`` runs right before ``capture_end`` on the
    same thread. Either raises :class:`graphcheck.GraphcheckError` (or any exception) saying
    why the graph cannot be read: the watch then keeps the dispatcher's ops as its nodes. A
    reader may also have a ``prepare()`` method, run once at CUDA's initialization
    (``torch.cuda._lazy_call``), before any capture.
    """

    name: str

    def begin(self, graph: object) -> object: ...

    def read(self, token: object) -> ReadNodes: ...


def _cuda_module() -> Any:
    try:
        from graphcheck import _cuda
    except ImportError as exc:
        raise GraphcheckError(
            f"this graphcheck was built without graphcheck._cuda (no CUDA headers): {exc}"
        ) from exc
    return _cuda


class CudaGraphReader:
    """Reads the graph a CUDA stream captures into, through ``graphcheck._cuda``.

    Node ids are CUPTI's (``cuptiGetGraphNodeId``: the CUPTI library is loaded, no subscriber
    is made). No TMA descriptor is known here, so a ``CUtensorMap`` argument yields no
    reference (the CUPTI backend records them as they are encoded). Unverified on a GPU.
    """

    name = READER_CUDA_GRAPH

    def prepare(self) -> None:
        """Loads the driver table and CUPTI now (at CUDA's initialization), not in a capture.

        The first ``begin`` would load them inside the first capture, where a library's
        initialization could make a call the capture forbids. Never raises: ``begin`` reports
        a problem where it matters.
        """
        try:
            _cuda_module().driver_problem()
        except Exception as exc:  # never break CUDA's initialization
            log.debug("graphcheck: the CUDA graph reader could not load the driver: %s", exc)

    def begin(self, graph: object) -> object:
        # torch.cuda.is_initialized has no annotations in torch's sources.
        if not torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
            raise GraphcheckError("CUDA is not initialized here: not a CUDA graph capture")
        problem = _cuda_module().driver_problem()
        if problem:
            raise GraphcheckError(problem)
        return int(torch.cuda.current_stream().cuda_stream)

    def read(self, token: object) -> ReadNodes:
        if not isinstance(token, int):
            raise GraphcheckError(f"CudaGraphReader.read: expected a stream handle, got {token!r}")
        read = _cuda_module().read_capture(token)
        notes = [
            f"node {node} (kernel {kernel or '?'}): its arguments could not be read: {cause}"
            for node, kernel, cause in read.unreadable
        ]
        notes += [
            f"node {node} (conditional): its bodies were not read (CUDA 13.0 has no getter; "
            f"the CUPTI backend reads them)"
            for node in read.conditionals_without_bodies
        ]
        return ReadNodes(read.nodes, tuple(notes))


@dataclasses.dataclass
class FinishedCapture:
    """A capture that ended: the record to check, where it came from, what read its nodes.

    Attributes:
        record: the ATen window's record; its nodes are the reader's when ``reader`` is
            :data:`READER_CUDA_GRAPH`.
        graph_id: the watch's id of the graph.
        device: the device it was captured on.
        reader: :data:`READER_CUDA_GRAPH` or :data:`READER_DISPATCHER`.
        notes: why the graph's own nodes were not read, or what the reader could not read.
    """

    record: _torch.CaptureRecord
    graph_id: int
    device: torch.device
    reader: str
    notes: tuple[str, ...]


@dataclasses.dataclass
class _Open:
    window: _torch.CaptureWindow
    graph_id: int
    device: torch.device
    thread: threading.Thread
    token: object = None
    read: ReadNodes | None = None
    why_not: str = ""


class CudaCaptures:
    """The CUDA captures between ``capture_begin`` and ``capture_end``, by ``id(graph)``.

    ``reader`` reads each graph's nodes (None: the dispatcher's ops are its nodes). The ATen
    window opens on the capturing thread and keeps no ops or intermediates (a CUDA graph is
    replayed by CUDA; an engine's shared pool reuses what a capture freed). Thread-safe; each
    capture's calls run on its capturing thread.
    """

    def __init__(self, reader: GraphReader | None) -> None:
        self.reader = reader
        self._lock = threading.Lock()
        self._open: dict[int, _Open] = {}
        prepare = getattr(reader, "prepare", None)
        if callable(prepare):
            at_cuda_initialization(prepare)

    def begin(self, graph: object, graph_id: int, device: torch.device) -> None:
        """Opens the window (raises inside another window), notes what the reader needs."""
        window = _torch.CaptureWindow(None, graph_id, replay_ops="drop")
        entry = _Open(window, graph_id, device, threading.current_thread())
        if self.reader is None:
            entry.why_not = "no CUDA graph reader"
        else:
            try:
                entry.token = self.reader.begin(graph)
            except Exception as exc:
                entry.why_not = str(exc) or type(exc).__name__
        with self._lock:
            self._open[id(graph)] = entry

    def ending(self, graph: object) -> None:
        """Reads the graph's nodes before ``capture_end``; a failure is kept, never raised."""
        with self._lock:
            entry = self._open.get(id(graph))
        if entry is None or self.reader is None or entry.why_not:
            return
        if entry.thread is not threading.current_thread():
            entry.why_not = "its capture ended on another thread than it began on"
            return
        try:
            entry.read = self.reader.read(entry.token)
        except Exception as exc:
            entry.why_not = f"reading the CUDA graph failed: {exc or type(exc).__name__}"

    def abort(self, graph: object) -> None:
        """Closes the window of a capture whose ``capture_end`` raised."""
        with self._lock:
            entry = self._open.pop(id(graph), None)
        if entry is not None:
            entry.window.close()

    def end(self, graph: object) -> FinishedCapture | None:
        """Finishes the window after ``capture_end``: what to record, or None.

        None for a graph not opened here, or ended on another thread than it began on (the
        window is closed: nothing is recorded; a window closed off its thread is freed by that
        thread at its next op, ``CaptureWindow``'s rule).
        """
        with self._lock:
            entry = self._open.pop(id(graph), None)
        if entry is None:
            return None
        if entry.thread is not threading.current_thread():
            entry.window.close()
            log.warning(
                "graphcheck: graph %d ended its capture on another thread than it began on; "
                "it is not watched",
                entry.graph_id,
            )
            return None
        try:
            record = entry.window.finish()
        finally:
            entry.window.close()
        if entry.read is not None and self.reader is not None:
            record = record.with_nodes(entry.read.nodes, self.reader.name)
            notes = tuple(f"graph {entry.graph_id} {note}" for note in entry.read.notes)
            return FinishedCapture(record, entry.graph_id, entry.device, self.reader.name, notes)
        why = (
            f"graph {entry.graph_id}: its nodes are the ATen dispatcher's ops (kernels launched "
            f"outside the dispatcher are not checked): {entry.why_not or 'not read'}"
        )
        notes = (why, *window_notes(record, entry.graph_id))
        return FinishedCapture(record, entry.graph_id, entry.device, READER_DISPATCHER, notes)

    def close(self) -> None:
        """Closes every open window (the watch closes)."""
        with self._lock:
            entries = list(self._open.values())
            self._open.clear()
        for entry in entries:
            entry.window.close()


def window_notes(record: _torch.CaptureRecord, graph_id: int) -> tuple[str, ...]:
    """What the ATen window could not record of a graph the dispatcher read.

    Torch hands a thread's state to the work it launches (``torch.jit.fork`` in scripted
    code, autograd's device threads), so those ops reach the window's callback, which counts
    them but records one thread: their reads are missing. A profiler running on the
    capturing thread keeps the slot the window watches allocations through (torch profilers
    read it as their own state): an intermediate first seen as an op's input is then taken
    for older memory.
    """
    notes = []
    if record.foreign_ops:
        notes.append(
            f"graph {graph_id}: {record.foreign_ops} op(s) of the forward ran on other threads "
            "(torch.jit.fork tasks, autograd's threads); the ATen window records one thread, "
            "so what those ops read is not checked"
        )
    if not record.allocations_watched:
        notes.append(
            f"graph {graph_id}: a torch profiler was running on the capturing thread, so the "
            "ATen window could not watch allocations (the profiler owns that slot): an "
            "intermediate a kernel allocated itself may be judged unregistered under an "
            "aten:<op> label; capture outside the profiler to check this graph fully"
        )
    return tuple(notes)
