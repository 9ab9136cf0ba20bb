"""PyTorch's caching allocator as the watch sees it at every epoch: :class:`GraphPools`.

Every live block. A CUDA graph holds kernels no dispatcher op saw (inductor's Triton kernels,
custom ops), and their argument words point at tensors wherever the caching allocator put
them: a plain attribute read only by a Triton kernel is in no allocation the ATen window
recorded, and one packed right after a registered tensor starts where that tensor ends, which
the end-pointer rule would call the registered tensor's (the first GPU run, 2026-12-04). So at
every epoch of a CUDA graph the watch asks the allocator for its segments and blocks
(``torch.cuda.memory_snapshot(include_traces=False)``) and adds each segment and each live block
(``active_allocated``, ``active_pending_free``) as an allocation: the blocks a model's
attribute reaches are labelled by its census path, the others by the Python frame that
allocated them where the allocator history records one (``RegistryCache.site_labels``), else
unlabelled (a finding then names the block by address, size and pool).

Graph pools. Everything a CUDA graph allocates while it is captured comes from a memory pool
of its own (the graph's private pool, or a pool several graphs share:
``torch.cuda.graph_pool_handle()``, which vLLM passes to every capture of an engine). What the
ATen window sees produced inside the window is a graph span already; the rest of that pool is
not: a tensor another graph of the same pool produced (the output of one piecewise graph is the
input of the next), and the buffers inductor's generated code allocates without a dispatcher
op (``empty_strided_cuda``). Each segment of a graph pool is an allocation of pool
``graph:<a>,<b>`` (the pool id), which the checker judges ``graph`` (docs/verdicts.md), its
blocks are not listed, and an allocation the ATen window recorded inside such a segment takes
that pool too. A graph pool is a pool whose id is ``(a, 0)`` with ``a != 0`` (a graph's own
private pool) or the pool of a graph the watch saw captured (``CUDAGraph.pool()``, read when its
capture ends: a shared ``(0, uid)`` id cannot be told from a user ``MemPool``, such as vLLM's
tagged ``weights`` pool, by its value). Other pools are ``default`` (``(0, 0)``) and
``mempool:<a>,<b>``: one rule in C++ (graphcheck/detail/allocator_memory.h), which the CUPTI
backend's ``torch_pool_name`` (cupti/torch_allocator_snapshot.h) uses too. Not yet run on a GPU
in this form.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
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
    """``graph:<a>,<b>``: the allocation pool name of graph pool ``pool`` (the C++ rule's)."""
    return _core.torch_pool_name(pool, True)


def torch_segments() -> list[Mapping[str, Any]]:
    """The caching allocator's segments on every device; none before CUDA is initialized.

    None either under another allocator backend (``PYTORCH_CUDA_ALLOC_CONF=backend:
    cudaMallocAsync``, a pluggable allocator), which takes no snapshot: the epochs then hold
    what the ATen window saw (before, its error left every graph unwatched; a review's
    finding).
    """
    # torch.cuda.is_initialized has no annotations in torch's sources.
    if not torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        return []
    backend = getattr(torch.cuda, "get_allocator_backend", None)
    if callable(backend) and backend() != "native":
        return []
    # memory_snapshot has no annotations in torch's sources.
    segments: list[Mapping[str, Any]] = torch.cuda.memory_snapshot(  # type: ignore[no-untyped-call]
        include_traces=False
    )
    return segments


class GraphPools:
    """The caching allocator's memory at each epoch: segments, live blocks, graph pools.

    ``segments`` (default :func:`torch_segments`) is read at every :meth:`apply`, or once for
    all the epochs of one check point (:meth:`one_reading`). Thread safety: :meth:`note` and
    :meth:`apply` may run on any thread (one lock over the pool ids; the snapshot is taken
    outside it); a reading is kept for the thread that opened it only. Lifetime: pool ids are
    kept for the watch's life (a destroyed graph's pool is released by torch only once no
    graph uses it).
    """

    def __init__(self, segments: SegmentSource = torch_segments) -> None:
        self._source = segments
        self._listed: set[PoolId] = set()
        self._lock = threading.Lock()
        self._reading = threading.local()

    def _segments(self) -> Iterable[Mapping[str, Any]]:
        kept: list[Mapping[str, Any]] | None = getattr(self._reading, "segments", None)
        if kept is not None:
            return kept
        depth: int = getattr(self._reading, "depth", 0)
        segments = self._source()
        if depth != 0:  # inside one_reading: the first reading serves the rest of it
            kept = segments if isinstance(segments, list) else list(segments)
            self._reading.segments = kept
            return kept
        return segments

    @contextlib.contextmanager
    def one_reading(self) -> Iterator[None]:
        """Reads the allocator once for every epoch made inside (on this thread).

        A check point records one epoch per watched graph; the allocator is the same for all
        of them (nothing between them allocates device memory), so one
        ``torch.cuda.memory_snapshot()`` serves them all instead of one per graph, and the
        epochs of one check point show one state of the process. Nests; the reading is dropped
        when the outermost scope ends.
        """
        depth: int = getattr(self._reading, "depth", 0)
        self._reading.depth = depth + 1
        try:
            yield
        finally:
            self._reading.depth = depth
            if depth == 0:
                self._reading.segments = None

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
        with self._lock:
            listed = pool in self._listed
        return _core.is_graph_pool(pool, listed)

    def _listed_pools(self) -> list[PoolId]:
        with self._lock:
            return list(self._listed)

    def allocations(self) -> list[_core.Allocation]:
        """Every segment now, and every live block outside graph pools (sorted, unlabelled).

        Segments are labelled ``torch segment dev<d>`` (a word in a free part of one is inside
        memory the allocator holds); blocks carry no label until :meth:`apply` names them.
        Graph pools are named ``graph:<a>,<b>``, others ``default`` (``(0, 0)``) and
        ``mempool:<a>,<b>``; read in C++ (``graphcheck/detail/allocator_memory.h``).
        """
        return _core.allocator_allocations(self._segments(), self._listed_pools())

    def apply(self, epoch: _core.Epoch, labels: Iterable[tuple[int, int, str]] = ()) -> _core.Epoch:
        """Adds the allocator's segments and live blocks to ``epoch`` in place; returns it.

        An allocation of the epoch inside a graph pool's segment takes the segment's pool (the
        ATen window's ``aten:<op>`` storages: memory another graph of the pool produced). A
        block where an allocation of the epoch begins is not added (the dispatcher's storage is
        the tensor), nor a segment the epoch already has. Each added block takes the first of
        ``labels`` (``(begin, end, label)``: census paths, then allocation frames) overlapping
        it. In C++ (``_core.add_allocator_memory``): a server's allocator holds thousands of
        blocks, read at every capture (issue 32 §2).
        """
        _core.add_allocator_memory(epoch, self._segments(), self._listed_pools(), labels)
        return epoch
