"""PyTorch's CUDA graph pools are graph memory to the watch (issue 18 §4): the segments the
caching allocator reports in a graph's pool (its private pool, or a pool shared through
graph_pool_handle() that a watched graph used) read `graph`, not `unregistered`, in every
epoch. Driven on the CPU by the stand-in graph class, a fake reader and fabricated allocator
segments with the fields of torch.cuda.memory_snapshot(); tests/gpu/watch_reader_smoke.py
runs the real allocator."""

from __future__ import annotations

import re
import struct
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
import torch

import graphcheck
from graphcheck import _core
from graphcheck._watch.graph_pools import GraphPools, pool_name, torch_segments
from watch_fakes import FakeCUDAGraph, NodesReader, fake_watch

SHARED = (0, 77)  # a graph_pool_handle() id, as vLLM passes to every capture
USER_POOL = (0, 99)  # a user MemPool (vLLM's tagged weights pool): not a graph's
PRIVATE = (5, 0)  # a graph's own private pool


pytestmark = pytest.mark.usefixtures("no_watch_left")


class PooledGraph(FakeCUDAGraph):
    """A stand-in graph captured into a pool (CUDAGraph.pool())."""

    def __init__(self, pool: tuple[int, int]) -> None:
        super().__init__()
        self._pool = pool

    def pool(self) -> tuple[int, int]:
        return self._pool


def segment(tensor: torch.Tensor, pool: tuple[int, int]) -> dict[str, Any]:
    """A caching-allocator segment holding exactly ``tensor``'s storage."""
    storage = tensor.untyped_storage()
    return {
        "device": 0,
        "address": storage.data_ptr(),
        "total_size": storage.nbytes(),
        "segment_pool_id": pool,
        "blocks": [{"size": storage.nbytes(), "state": "active_allocated"}],
    }


class Segments:
    """The allocator's segments as the test sets them; counts the snapshots taken."""

    def __init__(self) -> None:
        self.segments: list[Mapping[str, Any]] = []
        self.calls = 0

    def __call__(self) -> list[Mapping[str, Any]]:
        self.calls += 1
        return list(self.segments)


class Piece(torch.nn.Module):
    """One piece of a piecewise graph: reads the previous piece's output and a held tensor."""

    def __init__(self, previous: torch.Tensor, held: torch.Tensor) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.previous = previous  # produced by another graph of the shared pool
        self.held = held  # kept outside the registry, in a user pool

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) + self.previous + self.held


def word(tensor: torch.Tensor) -> graphcheck.KernelParam:
    return graphcheck.KernelParam(0, struct.pack("<Q", tensor.data_ptr()))


def findings(report: graphcheck.Report) -> set[tuple[int, str, str]]:
    return {(f.node, f.verdict, f.owner) for f in report.findings}


def test_memory_of_a_watched_graphs_pool_reads_graph_and_a_user_pool_does_not() -> None:
    previous, held = torch.ones(4), torch.full((4,), 2.0)
    inductor_buffer = torch.zeros(16)  # allocated by generated code: no dispatcher op saw it
    model = Piece(previous, held)
    nodes = [
        graphcheck.Node(1, "kernel", "triton_add", params=[word(previous)]),
        graphcheck.Node(2, "kernel", "triton_add_held", params=[word(held)]),
        graphcheck.Node(
            3, "memset", operands=[graphcheck.Operand("dst", inductor_buffer.data_ptr(), 64)]
        ),
        graphcheck.Node(4, "kernel", "gemm", params=[word(model.linear.weight)]),
    ]
    segments = Segments()
    segments.segments = [
        segment(previous, SHARED),
        segment(held, USER_POOL),
        segment(inductor_buffer, PRIVATE),
    ]
    watch = fake_watch(graph_reader=NodesReader(nodes), graph_segments=segments)
    watch.add_model(model)
    x = torch.ones(2, 4)
    watch.declare_input("x", x)
    graph = PooledGraph(SHARED)
    with torch.no_grad():
        model(x)
        graph.capture_begin()
        model(x)
        graph.capture_end()
    result = watch.last
    assert result is not None and segments.calls >= 1
    report = result.report
    # The previous piece's output lies in the shared pool this graph was captured into, and
    # the generated code's buffer in a private pool: graph memory. The held tensor's pool is
    # no graph's: still unregistered. The weight is registered.
    assert findings(report) == {(2, "unregistered", "held")}
    assert (report.summary["graph"], report.summary["registered"]) == (2, 1)
    epoch = graph_epoch(watch)
    pools = {a.pool for a in epoch.allocations if a.begin == previous.data_ptr()}
    assert pools == {pool_name(SHARED)}  # the dispatcher's allocation took the pool
    assert any(a.pool == pool_name(PRIVATE) for a in epoch.allocations)
    assert not any(a.pool == pool_name(USER_POOL) for a in epoch.allocations)

    # A later check point reads the allocator again: still graph memory.
    later = watch.checkpoint("after_wake")
    assert later is not None
    assert findings(later.report) == findings(report)
    assert later.report.summary["graph"] == 2


def graph_epoch(watch: graphcheck.Watch) -> graphcheck.Epoch:
    (watched,) = watch.graphs
    (epoch,) = [e for e in watched.capture.snapshot.epochs if e.label == "capture"]
    return epoch


def test_without_the_graphs_pool_the_shared_pool_is_a_user_pool() -> None:
    """Before the capture noted its pool, (0, uid) cannot be told from a user MemPool."""
    pools = GraphPools(lambda: [])
    assert pools.is_graph_pool(PRIVATE) and not pools.is_graph_pool(SHARED)
    assert not pools.is_graph_pool((0, 0))
    pools.note(PooledGraph(SHARED))
    assert pools.is_graph_pool(SHARED) and not pools.is_graph_pool(USER_POOL)


def test_graphs_without_a_pool_and_odd_segments_are_skipped() -> None:
    class NoPool:
        pass

    class BrokenPool:
        def pool(self) -> tuple[int, int]:
            raise RuntimeError("the graph was not captured")

    odd: list[Mapping[str, Any]] = [
        {"address": 4096, "total_size": 512, "segment_pool_id": "?"},  # unreadable pool id
        {"address": 0, "total_size": 512, "segment_pool_id": PRIVATE},  # no address
        {"address": 8192, "total_size": 0, "segment_pool_id": PRIVATE},  # empty
        {"address": 16384, "total_size": 256, "segment_pool_id": [7, 0], "device": 1},
    ]
    pools = GraphPools(lambda: odd)
    pools.note(NoPool())
    pools.note(BrokenPool())
    found = [(a.begin, a.size, a.pool, a.label) for a in pools.allocations()]
    assert found == [
        (4096, 512, "default", "torch segment dev?"),  # an unreadable pool id: the default
        (16384, 256, "graph:7,0", "torch segment dev1"),
    ]


def test_any_mapping_is_read_and_blocks_without_an_address_follow_the_one_before() -> None:
    """The allocator's dicts, or any mapping (read in C++: ``_core.add_allocator_memory``)."""
    segments: list[Mapping[str, Any]] = [
        MappingProxyType(
            {
                "address": 1 << 20,
                "total_size": 4096,
                "device": 0,
                "blocks": [
                    MappingProxyType({"size": 1024, "state": "active_allocated"}),
                    {"size": 1024, "state": "inactive"},
                    {"size": 512, "state": "active_pending_free"},
                    {"address": (1 << 20) + 3072, "size": 1024.0, "state": "active_allocated"},
                ],
            }
        )
    ]
    epoch = graphcheck.Epoch("capture", [], [])
    GraphPools(lambda: segments).apply(epoch, [((1 << 20) + 2100, (1 << 20) + 2200, "m.scale")])
    found = [(a.begin - (1 << 20), a.size, a.pool, a.label) for a in epoch.allocations]
    assert found == [
        (0, 1024, "default", ""),
        (0, 4096, "default", "torch segment dev0"),
        (2048, 512, "default", "m.scale"),  # the label starting inside the block
        (3072, 1024, "default", ""),  # int(1024.0), as the Python rule read it
    ]


@pytest.mark.parametrize(
    ("segment", "error", "names"),
    [
        ({"address": 1 << 70, "total_size": 4096}, ValueError, "allocator segment 0 'address'"),
        ({"address": 4096, "total_size": "big"}, ValueError, "allocator segment 0 'total_size'"),
        (  # a segment dropped for it would hide its blocks without a word
            {"address": -4096, "total_size": 4096},
            ValueError,
            "allocator segment 0 'address': expected an address or size at or above 0, found -4096",
        ),
        (
            {"address": 4096, "total_size": 4096, "blocks": [{"size": None}]},
            TypeError,
            "allocator segment 0 block 0 'size'",
        ),
    ],
)
def test_a_bad_allocator_field_is_named(
    segment: dict[str, Any], error: type[Exception], names: str
) -> None:
    epoch = graphcheck.Epoch("capture", [], [])
    with pytest.raises(error, match=re.escape(names)):
        GraphPools(lambda: [segment]).apply(epoch)
    assert epoch.allocations == []  # nothing half-added


def test_a_bad_label_is_named() -> None:
    epoch = graphcheck.Epoch("capture", [], [])
    pools = GraphPools(lambda: [{"address": 4096, "total_size": 4096}])
    with pytest.raises(TypeError, match=r"labels\[1\]: expected a \(begin, end, label\) tuple"):
        pools.apply(epoch, [(0, 1, "a"), (0, 1)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=re.escape("labels[0] 'end': expected an int")):
        pools.apply(epoch, [(0, "end", "a")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=re.escape("labels[0] 'begin': expected an address")):
        pools.apply(epoch, [(-1, 8, "a")])
    assert epoch.allocations == []


def test_a_label_that_is_not_utf8_text_is_escaped() -> None:
    """A module name that was not UTF-8 (a lone surrogate) labels its block by its escape."""
    epoch = graphcheck.Epoch("capture", [], [])
    segment = {
        "address": 4096,
        "total_size": 4096,
        "blocks": [{"size": 64, "state": "active_allocated"}],
    }
    GraphPools(lambda: [segment]).apply(epoch, [(4096, 4160, "m.\udc80scale")])
    assert [a.label for a in epoch.allocations] == ["m.\\udc80scale", "torch segment dev?"]


@pytest.mark.parametrize("pool", ["ab", (1, 2, 3), (1 << 70, 0), ("a", 0)])
def test_a_bad_graph_pool_id_is_named(pool: object) -> None:
    segment = {"address": 4096, "total_size": 4096}
    with pytest.raises(TypeError, match=re.escape("graph_pools[1]: expected a pool id (two ints")):
        _core.allocator_allocations([segment], [(1, 0), pool])


def test_an_epoch_of_the_cpu_twin_reads_no_allocator() -> None:
    """Watch.capture (no CUDA graph) never asks the allocator for segments."""
    segments = Segments()
    watch = fake_watch(graph_segments=segments)
    model = torch.nn.Linear(4, 4)
    watch.capture(model, torch.ones(1, 4))
    watch.checkpoint("after_wake")
    assert segments.calls == 0


def test_one_reading_serves_every_epoch_inside_it_on_its_thread_only() -> None:
    reads: list[str] = []
    segment = {"address": 4096, "total_size": 4096, "segment_pool_id": (0, 0), "blocks": []}

    def source() -> list[Mapping[str, Any]]:
        reads.append(threading.current_thread().name)
        return [segment]

    pools = GraphPools(source)
    pools.apply(graphcheck.Epoch("a"))
    pools.apply(graphcheck.Epoch("b"))
    assert len(reads) == 2  # outside a reading: every epoch reads the allocator
    with pools.one_reading():
        assert len(reads) == 2  # nothing read until an epoch asks
        first = pools.apply(graphcheck.Epoch("c"))
        with pools.one_reading():  # nested: the same reading
            pools.apply(graphcheck.Epoch("d"))
        pools.allocations()
        other = threading.Thread(target=lambda: pools.apply(graphcheck.Epoch("e")), name="other")
        other.start()
        other.join()
        assert reads[2:] == ["MainThread", "other"]  # another thread reads its own
        assert [(a.begin, a.size) for a in first.allocations] == [(4096, 4096)]
    pools.apply(graphcheck.Epoch("f"))
    assert len(reads) == 5  # the reading ended with its outermost scope


def test_another_allocator_backend_lists_no_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    # cudaMallocAsync (or a pluggable allocator) refuses torch.cuda.memory_snapshot(): its error
    # left every CUDA capture unwatched. Stand-ins for an initialized CUDA on that backend.
    def refused(**kwargs: Any) -> list[Mapping[str, Any]]:
        raise RuntimeError("snapshot with backend:cudaMallocAsync is not meaningful")

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "memory_snapshot", refused)
    monkeypatch.setattr(torch.cuda, "get_allocator_backend", lambda: "cudaMallocAsync")
    assert torch_segments() == []
    monkeypatch.setattr(torch.cuda, "get_allocator_backend", lambda: "native")
    with pytest.raises(RuntimeError, match="not meaningful"):  # the native one is asked
        torch_segments()
