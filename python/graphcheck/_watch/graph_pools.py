"""Memory of PyTorch's CUDA graph pools, read from the caching allocator: :class:`GraphPools`.

Everything a CUDA graph allocates while it is captured comes from a memory pool of its own
(the graph's private pool, or a pool several graphs share: ``torch.cuda.graph_pool_handle()``,
which vLLM passes to every capture of an engine). What the ATen window sees produced inside
the window is a graph span already; the rest of that pool is not: a tensor another graph of
the same pool produced (the output of one piecewise graph is the input of the next), and the
buffers inductor's generated code allocates without a dispatcher op (``empty_strided_cuda``).
Without this module each of those reads ``unregistered`` on the first real run.

So at every epoch the watch asks the caching allocator for its segments
(``torch.cuda.memory_snapshot(include_traces=False)``) and makes each segment of a graph pool
an allocation of pool ``graph:<a>,<b>`` (the pool id), which the checker judges ``graph``
(docs/verdicts.md); an allocation the ATen window recorded inside such a segment takes that
pool too. A graph pool is a pool whose id is ``(a, 0)`` with ``a != 0`` (a graph's own private
pool) or the pool of a graph the watch saw captured (``CUDAGraph.pool()``, read when its
capture ends: a shared ``(0, uid)`` id cannot be told from a user ``MemPool``, such as vLLM's
tagged ``weights`` pool, by its value). The same rule as the CUPTI backend's
``torch_pool_name`` (cupti/torch_allocator_snapshot.h). Unverified on a GPU.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch

from graphcheck import _core

__all__ = ["GraphPools", "PoolId", "SegmentSource", "pool_name", "torch_segments"]

log = logging.getLogger("graphcheck.watch")

#: A caching-allocator pool id (``MempoolId_t``): ``(0, 0)`` is the default pool.
PoolId = tuple[int, int]
#: Returns the caching allocator's segments (the dicts of ``torch.cuda.memory_snapshot()``).
SegmentSource = Callable[[], Iterable[Mapping[str, Any]]]


def pool_name(pool: PoolId) -> str:
    """``graph:<a>,<b>``: the allocation pool name of graph pool ``pool``."""
    return f"graph:{pool[0]},{pool[1]}"


def torch_segments() -> list[Mapping[str, Any]]:
    """The caching allocator's segments on every device; none before CUDA is initialized."""
    # torch.cuda.is_initialized has no annotations in torch's sources.
    if not torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        return []
    # memory_snapshot has no annotations in torch's sources.
    segments: list[Mapping[str, Any]] = torch.cuda.memory_snapshot(  # type: ignore[no-untyped-call]
        include_traces=False
    )
    return segments


def _pool_of(segment: Mapping[str, Any]) -> PoolId:
    pool = segment.get("segment_pool_id", (0, 0))
    try:
        first, second = pool
        return int(first), int(second)
    except (TypeError, ValueError):
        return (0, 0)


class GraphPools:
    """The graph pools of the graphs a watch saw, and their segments at each epoch.

    ``segments`` (default :func:`torch_segments`) is read at every :meth:`apply`. Thread
    safety: :meth:`note` and :meth:`apply` may run on any thread (one lock over the pool ids;
    the snapshot is taken outside it). Lifetime: pool ids are kept for the watch's life (a
    destroyed graph's pool is released by torch only once no graph uses it).
    """

    def __init__(self, segments: SegmentSource = torch_segments) -> None:
        self._segments = segments
        self._listed: set[PoolId] = set()
        self._lock = threading.Lock()

    def note(self, graph: object) -> None:
        """Notes the pool of ``graph`` (a ``torch.cuda.CUDAGraph`` whose capture ended)."""
        pool_of = getattr(graph, "pool", None)
        if pool_of is None:
            return
        try:
            first, second = pool_of()
            pool = (int(first), int(second))
        except Exception as exc:  # noqa: BLE001 - a graph without a pool id is noted as such
            log.debug("graphcheck: the pool of %r is unknown: %s", graph, exc)
            return
        if pool != (0, 0):
            with self._lock:
                self._listed.add(pool)

    def is_graph_pool(self, pool: PoolId) -> bool:
        """A graph's own private pool ``(a, 0)``, ``a != 0``, or a pool a noted graph used."""
        if pool[0] != 0 and pool[1] == 0:
            return True
        with self._lock:
            return pool in self._listed

    def allocations(self) -> list[_core.Allocation]:
        """Each segment of a graph pool now, as an allocation of its pool (sorted)."""
        result = []
        for segment in self._segments():
            pool = _pool_of(segment)
            if not self.is_graph_pool(pool):
                continue
            begin, size = int(segment.get("address", 0)), int(segment.get("total_size", 0))
            if begin > 0 and size > 0:
                device = segment.get("device", "?")
                result.append(
                    _core.Allocation(begin, size, pool_name(pool), 1, f"torch segment dev{device}")
                )
        result.sort(key=lambda allocation: allocation.begin)
        return result

    def apply(self, epoch: _core.Epoch) -> _core.Epoch:
        """Adds the graph pools' segments to ``epoch`` in place; returns ``epoch``.

        An allocation of the epoch inside a segment takes the segment's pool (the ATen
        window's ``aten:<op>`` storages: memory another graph of the pool produced).
        """
        segments = self.allocations()
        if not segments:
            return epoch
        allocations = epoch.allocations
        known = {(a.begin, a.size) for a in allocations}
        begins = [segment.begin for segment in segments]  # segments never overlap
        for allocation in allocations:
            i = bisect.bisect_right(begins, allocation.begin) - 1
            if i >= 0 and allocation.end <= segments[i].end:
                allocation.pool = segments[i].pool
        allocations += [s for s in segments if (s.begin, s.size) not in known]
        epoch.allocations = allocations
        return epoch
