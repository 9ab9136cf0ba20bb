"""The graphs a watch records: :class:`WatchedGraph` and its :class:`WatchedCapture`.

A :class:`WatchedCapture` is a :class:`graphcheck.Capture` whose model is resolved at every
epoch from a :class:`~graphcheck._watch.registry.ModelSource`, whose model registry comes
from the :class:`~graphcheck._watch.registry.RegistryCache` every graph of the watch shares,
and whose epochs hold the caching allocator's segments and live blocks, graph pools as graph
memory (:class:`~graphcheck._watch.graph_pools.GraphPools`), for a CUDA capture.
"""

from __future__ import annotations

import collections
import contextlib
import itertools
import os
import time
import weakref
from collections.abc import Iterable
from typing import Any

import torch

from graphcheck import _core, _torch
from graphcheck._capture import Capture
from graphcheck._declarations import checked_input, checked_runtime, declared_leaves
from graphcheck._model_registry import ModelRegistry
from graphcheck._watch.cuda_capture import READER_DISPATCHER
from graphcheck._watch.graph_pools import GraphPools
from graphcheck._watch.output import CheckResult, merge_reports
from graphcheck._watch.registry import ModelSource, RegistryCache
from graphcheck.arena import WeightsArena

__all__ = [
    "GraphList",
    "Declarations",
    "WatchedCapture",
    "WatchedGraph",
    "check_graphs",
    "check_point",
    "watched_capture",
]

#: ``(name, tensor, reason)`` of one declaration.
Declared = tuple[str, torch.Tensor, str]


class Declarations:
    """What a watch declares for every graph, recorded or to come: runtime state and inputs.

    Each new graph holds them in its capture epoch from the start (:func:`watched_capture`);
    a declaration made later is added to the graphs recorded so far. Arguments are checked
    when a declaration is made. Not thread-safe: the watch calls it under its lock.
    """

    def __init__(self) -> None:
        self.runtime: list[Declared] = []
        self.inputs: list[Declared] = []

    def add_runtime(
        self, tensor: object, name: object, reason: object, graphs: Iterable[WatchedGraph]
    ) -> None:
        """Declare ``tensor`` runtime state (``Watch.declare_runtime``)."""
        label, checked, why = checked_runtime("Watch", tensor, name, reason)
        self.runtime.append((label, checked, why))
        for graph in graphs:
            graph.capture.declare_runtime(checked, label, why)

    def add_input(
        self, name: object, tensor: object, reason: object, graphs: Iterable[WatchedGraph]
    ) -> None:
        """Declare ``tensor`` a static input (``Watch.declare_input``)."""
        label, checked, why = checked_input("Watch", name, tensor, reason)
        self.inputs.append((label, checked, why))
        for graph in graphs:
            graph.capture.declare_input(label, checked, why)


class WatchedCapture(Capture):
    """A capture whose model is resolved at each epoch and whose registry is shared.

    Made by :func:`watched_capture`. Thread safety as :class:`graphcheck.Capture`'s: the
    watch uses it under its lock.
    """

    def __init__(
        self,
        source: ModelSource,
        registry: RegistryCache,
        model: torch.nn.Module,
        record: _torch.CaptureRecord,
        output: Any,
        inputs: tuple[tuple[Any, ...], dict[str, Any]],
        arena: WeightsArena | None,
        pools: GraphPools | None,
        declared: Declarations,
    ) -> None:
        self._source = source
        self._registry = registry
        self._pools = pools
        self._labels: list[tuple[int, int, str]] = []
        self._aliases: dict[str, tuple[str, ...]] = {}
        self._frames = False
        # A bare module stands in when no model was alive at capture: every address is judged
        # against an empty registry until the source finds one.
        self._fallback = model if type(model) is torch.nn.Module else None
        super().__init__(
            model,
            record,
            output,
            inputs,
            arena,
            runtime=declared.runtime,
            declared_inputs=declared.inputs,
        )

    @property
    def source(self) -> ModelSource:
        """Where the model comes from."""
        return self._source

    @property
    def aliases(self) -> dict[str, tuple[str, ...]]:
        """The other census paths of each label of the epoch recorded last, by label."""
        return self._aliases

    def _live_model(self, what: str) -> torch.nn.Module:
        model = self._source.resolve()
        if model is not None:
            return model
        if self._fallback is not None:
            return self._fallback
        raise _core.GraphcheckError(
            f"Capture.{what}: the watched graph's model was freed ("
            f"{self._model_type}); check a recorded epoch by label ({', '.join(self.epochs)})"
        )

    def _model_registry(self, model: torch.nn.Module) -> ModelRegistry:
        registry = self._registry.state(model)
        # The labels of the epoch being built name the allocator's blocks too (_finish_epoch).
        self._labels, self._frames = registry.labels, self._registry.frames
        self._aliases = registry.aliases
        return registry

    def _capture_epoch(self, model: torch.nn.Module) -> _core.Epoch:
        # The watch rechecked the cached registry before this capture (RegistryCache.recheck):
        # its spans, made once per census, are the model's now.
        self._model_registry(model)
        return self._record.capture_epoch_from(
            self._registry.spans(),
            declared_leaves(self._runtime),
            declared_leaves(self._declared_inputs),
        )

    def _finish_epoch(self, epoch: _core.Epoch) -> _core.Epoch:
        if self._pools is not None:
            epoch = self._pools.apply(epoch, self._labels)
        return super()._finish_epoch(epoch)

    def _frame_labels(self) -> bool:
        # The caching allocator's history labels blocks by Python frames.
        return self._frames or super()._frame_labels()


class GraphList:
    """The graphs a watch recorded and still alive, in capture order, and their ids.

    Not thread-safe: the watch calls it under its lock, except :meth:`forget`, which takes
    no lock (a CUDA graph's finalizer runs wherever the collector runs, perhaps while the
    watch's lock is held by a thread waiting for that collecting thread).
    """

    def __init__(self) -> None:
        self._graphs: list[WatchedGraph] = []
        self._forgotten: collections.deque[int] = collections.deque()  # see forget
        self._ids = itertools.count(1)
        self._emptied = 0

    def next_id(self) -> int:
        """The id of the next graph (unique in the watch, from 1)."""
        return next(self._ids)

    def add(self, capture: WatchedCapture, graph_id: int, kind: str, device: str) -> WatchedGraph:
        """Records ``capture`` as the graph ``graph_id``."""
        graph = WatchedGraph(graph_id, capture, kind, device)
        self.alive().append(graph)
        return graph

    @property
    def emptied(self) -> int:
        """How often every graph was freed (the forgotten ones counted first).

        torch allocates its generator's graph state anew at the next capture then, and the
        watch's cached registry must be taken anew.
        """
        self.alive()
        return self._emptied

    def forget_when_freed(self, graph: object, graph_id: int) -> None:
        """Forgets ``graph_id`` once ``graph`` (a CUDA graph) is freed (never without weakrefs)."""
        with contextlib.suppress(TypeError):
            weakref.finalize(graph, self.forget, graph_id)

    def forget(self, graph_id: int) -> None:
        """Forget ``graph_id`` (queued: taking the watch's lock here deadlocked a finalizer)."""
        self._forgotten.append(graph_id)

    def alive(self) -> list[WatchedGraph]:
        """The graphs not forgotten (the list itself)."""
        if self._forgotten:
            gone = set()
            with contextlib.suppress(IndexError):
                while True:
                    gone.add(self._forgotten.popleft())
            had = bool(self._graphs)
            self._graphs = [g for g in self._graphs if g.id not in gone]
            self._emptied += had and not self._graphs
        return self._graphs


def watched_capture(
    source: ModelSource,
    registry: RegistryCache,
    record: _torch.CaptureRecord,
    output: Any = None,
    inputs: tuple[tuple[Any, ...], dict[str, Any]] = ((), {}),
    arena: WeightsArena | None = None,
    pools: GraphPools | None = None,
    declared: Declarations | None = None,
) -> WatchedCapture:
    """A capture of ``record`` whose model comes from ``source`` (the capture epoch now).

    ``pools``: the caching allocator whose segments and blocks each epoch holds (a CUDA
    capture's). ``declared``: what the watch declared for every graph, in the capture epoch
    from the start.
    """
    model = source.resolve()
    if model is None:
        model = torch.nn.Module()  # nothing to register: every address is judged bare
    declared = declared or Declarations()
    return WatchedCapture(source, registry, model, record, output, inputs, arena, pools, declared)


class WatchedGraph:
    """One graph a watch recorded.

    Attributes:
        id: its graph id (unique in the watch; the ``graph`` of its findings).
        capture: the :class:`graphcheck.Capture` (epochs, check, save, replay
            for the CPU twin).
        kind: ``"cuda"`` (a CUDA graph capture) or ``"cpu twin"`` (:meth:`Watch.capture`).
        device: the device it was captured on.
        checked: whether a check point has checked it.
        reader: what read its nodes: ``"cuda-graph"`` (the CUDA graph itself) or
            ``"aten-dispatcher"`` (the ops of the ATen window: the CPU twin, or a CUDA graph
            that could not be read).
        reader_notes: why a CUDA graph's own nodes were not read, or which of them could not
            be (each check point of the graph repeats them).
    """

    def __init__(self, graph_id: int, capture: WatchedCapture, kind: str, device: str) -> None:
        self.id = graph_id
        self.capture = capture
        self.kind = kind
        self.device = device
        self.checked = False
        self.reader = READER_DISPATCHER
        self.reader_notes: tuple[str, ...] = ()
        self._labels: dict[str, int] = {}

    def __repr__(self) -> str:
        return (
            f"<WatchedGraph {self.id} ({self.kind} on {self.device}, read by {self.reader}): "
            f"{self.capture!r}>"
        )

    def next_label(self, label: str) -> str:
        """The epoch label of a check point: ``label``, then ``label-2``, ... (unique per graph)."""
        n = self._labels.get(label, 0) + 1
        self._labels[label] = n
        return label if n == 1 else f"{label}-{n}"


def check_graphs(
    graphs: list[WatchedGraph],
    label: str,
    *,
    fresh: bool,
    allow: Iterable[str],
    pools: GraphPools | None = None,
) -> tuple[list[_core.Report], list[WatchedGraph], list[str]]:
    """Checks each graph at a check point: its reports, the graphs checked, and the skipped.

    ``fresh``: record a new epoch ``label`` (``label-2``, ... when repeated) for each graph and
    check that; else check each in its capture epoch. A graph that cannot be checked (its
    model was freed) is skipped with a line saying why; the others are marked checked.
    ``pools``: the caching allocator the epochs hold, read once for all of them.
    """
    with pools.one_reading() if pools is not None else contextlib.nullcontext():
        return _check_each(graphs, label, fresh=fresh, allow=allow)


def check_point(
    seq: int,
    label: str,
    graphs: list[WatchedGraph],
    *,
    fresh: bool,
    allow: Iterable[str],
    pools: GraphPools,
    notes: tuple[str, ...],
    role: str,
    start: float,
) -> CheckResult:
    """The check point ``seq`` of ``graphs`` (:func:`check_graphs`; at least one) as a result.

    Each graph is checked or skipped with why. ``notes`` go before the notes of each checked
    graph's reader; ``start`` is when the check point began (``time.perf_counter()``).
    """
    reports, checked, skipped = check_graphs(graphs, label, fresh=fresh, allow=allow, pools=pools)
    return CheckResult(
        seq,
        label,
        merge_reports(reports, label, "capture"),
        tuple(g.id for g in checked),
        tuple(skipped),
        {},
        time.time(),
        os.getpid(),
        "; ".join(dict.fromkeys(g.capture.source.describe() for g in checked)),
        role,
        notes + tuple(n for g in checked for n in g.reader_notes),
        seconds=time.perf_counter() - start,
        readers={g.id: g.reader for g in checked},
        epochs={g.id: report.epoch for g, report in zip(checked, reports, strict=True)},
        aliases=_finding_aliases(reports, checked),
    )


def _finding_aliases(
    reports: list[_core.Report], checked: list[WatchedGraph]
) -> dict[str, tuple[str, ...]]:
    """The other census paths of each finding's owner, as the graphs' registries had them."""
    owners = {f.owner for report in reports for f in report.findings}
    aliases: dict[str, tuple[str, ...]] = {}
    for graph in checked:
        for owner, paths in graph.capture.aliases.items():
            if owner in owners:
                aliases.setdefault(owner, paths)
    return aliases


def _check_each(
    graphs: list[WatchedGraph], label: str, *, fresh: bool, allow: Iterable[str]
) -> tuple[list[_core.Report], list[WatchedGraph], list[str]]:
    reports, checked, skipped = [], [], []
    for graph in graphs:
        try:
            if fresh:
                epoch = graph.next_label(label)
                graph.capture.epoch(epoch)
            else:
                epoch = graph.capture.epochs[0]
            reports.append(graph.capture.check(epoch, allow=allow))
        except _core.GraphcheckError as exc:
            skipped.append(f"graph {graph.id}: {exc}")
            continue
        graph.checked = True
        checked.append(graph)
    return reports, checked, skipped
