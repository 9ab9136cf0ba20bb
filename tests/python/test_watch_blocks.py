"""Every live block of the caching allocator is known to the watch (issue 29 §1): a tensor that
only a kernel outside the dispatcher reads (a Triton kernel of inductor, a custom op) is judged
wherever the allocator put it, by its attribute path. On the first GPU run (2026-12-04) such a
tensor packed right after a registered one read as that tensor's end pointer (registered), and
one in a segment of its own was in no allocation at all (no reference). Driven on the CPU by the
stand-in graph class, a fake reader and an allocator snapshot laid over one host buffer."""

from __future__ import annotations

import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import torch

import graphcheck
from graphcheck._watch.allocator_history import AllocatorFrames, allocator_sites, torch_graph_state
from graphcheck._watch.graph_pools import GraphPools
from watch_fakes import FakeCUDAGraph, NodesReader, capture_fake, fake_watch

pytestmark = pytest.mark.usefixtures("no_watch_left")

# Offsets into one host buffer standing in for device memory: segment A holds the registered
# buffer and, right after it, the unregistered neighbour; segment B, far above, holds a tensor
# in a segment of its own; between them lies memory no allocator listed.
SEGMENT_A, SEGMENT_A_SIZE = 0, 4096
BUFFER, NEIGHBOUR, BLOCK = 0, 1024, 1024
GAP = 16384
SEGMENT_B, SEGMENT_B_SIZE = 49152, 4096
MEMORY = 1 << 16


class Memory:
    """A host buffer and the tensors the test places in it (each its own storage)."""

    def __init__(self) -> None:
        self.bytes = bytearray(MEMORY)
        self.base = torch.frombuffer(self.bytes, dtype=torch.uint8).data_ptr()

    def tensor(self, offset: int, size: int) -> torch.Tensor:
        view = memoryview(self.bytes)[offset : offset + size]
        return torch.frombuffer(view, dtype=torch.float32)

    def segments(self) -> list[Mapping[str, Any]]:
        """What torch.cuda.memory_snapshot() would list for this memory."""

        def block(offset: int, size: int, state: str) -> dict[str, Any]:
            return {"address": self.base + offset, "size": size, "state": state}

        return [
            {
                "device": 0,
                "address": self.base + SEGMENT_A,
                "total_size": SEGMENT_A_SIZE,
                "segment_pool_id": (0, 0),
                "blocks": [
                    block(BUFFER, BLOCK, "active_allocated"),
                    block(NEIGHBOUR, BLOCK, "active_allocated"),
                    block(NEIGHBOUR + BLOCK, SEGMENT_A_SIZE - 2 * BLOCK, "inactive"),
                ],
            },
            {
                "device": 0,
                "address": self.base + SEGMENT_B,
                "total_size": SEGMENT_B_SIZE,
                "segment_pool_id": (0, 0),
                "blocks": [block(SEGMENT_B, SEGMENT_B_SIZE, "active_allocated")],
            },
        ]


class Quantized(torch.nn.Module):
    """A registered buffer, a plain attribute packed right after it, one in its own segment."""

    def __init__(self, memory: Memory) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.register_buffer("scale", memory.tensor(BUFFER, BLOCK))
        self.neighbour = memory.tensor(NEIGHBOUR, BLOCK)  # a packed weight no op reads
        self.held = memory.tensor(SEGMENT_B, SEGMENT_B_SIZE)  # in a segment of its own

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


def kernel(node: int, name: str, *addresses: int) -> graphcheck.Node:
    params = [graphcheck.KernelParam(8 * i, struct.pack("<Q", a)) for i, a in enumerate(addresses)]
    return graphcheck.Node(node, "kernel", name, params=params)


def capture(
    nodes: list[graphcheck.Node], memory: Memory
) -> tuple[graphcheck.Watch, tuple[Quantized, FakeCUDAGraph]]:
    """A watched capture of the model whose graph holds ``nodes``.

    Keep the model and the graph (returned) alive: the watch forgets a freed graph.
    """
    model = Quantized(memory)
    watch = fake_watch(graph_reader=NodesReader(nodes), graph_segments=memory.segments)
    watch.add_model(model)
    x = torch.ones(2, 4)
    watch.declare_input("x", x)
    graph = capture_fake(model, x=x)
    return watch, (model, graph)


def findings(report: graphcheck.Report) -> set[tuple[int, str, str]]:
    return {(f.node, f.verdict, f.owner) for f in report.findings}


def test_a_neighbour_block_read_by_a_kernel_the_dispatcher_never_saw_is_unregistered() -> None:
    memory = Memory()
    watch, _alive = capture([kernel(1, "triton_dequant", memory.base + NEIGHBOUR)], memory)
    assert watch.last is not None
    # Its first address is the registered buffer's end: it is still its own block.
    assert findings(watch.last.report) == {(1, "unregistered", "neighbour")}


def test_a_block_in_a_segment_of_its_own_read_that_way_is_unregistered() -> None:
    memory = Memory()
    watch, _alive = capture([kernel(2, "triton_moe", memory.base + SEGMENT_B + 64)], memory)
    assert watch.last is not None
    assert findings(watch.last.report) == {(2, "unregistered", "held")}
    # And after a check point too (the allocator is read again at every epoch).
    later = watch.checkpoint("after_wake")
    assert later is not None and findings(later.report) == {(2, "unregistered", "held")}


def test_a_registered_buffer_read_by_such_a_kernel_is_no_finding() -> None:
    memory = Memory()
    nodes = [kernel(3, "triton_scale", memory.base + BUFFER, memory.base + BUFFER + BLOCK - 4)]
    watch, _alive = capture(nodes, memory)
    assert watch.last is not None
    report = watch.last.report
    assert report.ok and report.summary["registered"] == 2
    assert report.unattributed == []


def test_words_into_memory_nothing_listed_are_counted_per_node_not_judged() -> None:
    memory = Memory()
    gap = memory.base + GAP
    nodes = [
        kernel(4, "custom_op", gap, gap + 8, 12345, memory.base + BUFFER),
        kernel(5, "custom_op", memory.base + NEIGHBOUR),
    ]
    watch, _alive = capture(nodes, memory)
    assert watch.last is not None
    report = watch.last.report
    (graph_id,) = {g.id for g in watch.graphs}
    assert report.unattributed == [(graph_id, 4, "custom_op", 2, gap)]
    assert findings(report) == {(5, "unregistered", "neighbour")}
    assert report.summary["registered"] == 1  # the scalar 12345 is no reference either


def test_blocks_take_census_paths_else_frames_else_no_label() -> None:
    memory = Memory()
    pools = GraphPools(memory.segments)
    epoch = graphcheck.Epoch("capture")
    frame = "model.py:12 in load"
    labels = [
        (memory.base + NEIGHBOUR, memory.base + NEIGHBOUR + BLOCK, "layers.0.neighbour"),
        (memory.base + SEGMENT_B, memory.base + SEGMENT_B + 16, frame),
    ]
    pools.apply(epoch, labels)
    found = {(a.begin - memory.base, a.size, a.pool, a.label) for a in epoch.allocations}
    assert found == {
        (SEGMENT_A, SEGMENT_A_SIZE, "default", "torch segment dev0"),
        (BUFFER, BLOCK, "default", ""),  # nothing names it: a finding names it by address
        (NEIGHBOUR, BLOCK, "default", "layers.0.neighbour"),
        (SEGMENT_B, SEGMENT_B_SIZE, "default", "torch segment dev0"),
        (SEGMENT_B, SEGMENT_B_SIZE, "default", frame),
    }


def test_a_check_point_reads_the_allocator_once_for_all_its_graphs() -> None:
    memory = Memory()
    reads = []

    def counted() -> list[Mapping[str, Any]]:
        reads.append(1)
        return memory.segments()

    model = Quantized(memory)
    nodes = [kernel(6, "triton_moe", memory.base + SEGMENT_B + 64)]
    watch = fake_watch(graph_reader=NodesReader(nodes), graph_segments=counted)
    watch.add_model(model)
    x = torch.ones(2, 4)
    watch.declare_input("x", x)
    graphs = [capture_fake(model, x=x) for _ in range(3)]  # one per batch size, kept alive
    assert len(watch.graphs) == 3 and len(reads) == 3  # each capture epoch reads it
    later = watch.checkpoint("after_wake")
    assert later is not None
    assert len(reads) == 4  # one reading for the three epochs of the check point
    assert findings(later.report) == {(6, "unregistered", "held")}
    assert later.report.summary["unregistered"] == 3  # every graph judged against it
    watch.checkpoint("after_reload")
    assert len(reads) == 5  # the next check point reads it anew
    assert len(graphs) == 3


def _with_generator_state(memory: Memory, site: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The memory's segments with a 512-byte block at RNG allocated where ``site`` says."""
    segments = memory.segments()
    user = {"filename": "/srv/engine/runner.py", "line": 9, "name": "capture"}
    segments[0]["blocks"][2:] = [  # type: ignore[index]
        {"address": memory.base + RNG, "size": 512, "state": "active_allocated",
         "frames": [site, user]},
        {"address": memory.base + RNG + 512, "size": SEGMENT_A_SIZE - RNG - 512,
         "state": "inactive"},
    ]  # fmt: skip
    return segments


RNG = NEIGHBOUR + BLOCK  # where torch's CUDA generator put its graph state


@pytest.mark.parametrize(
    ("site", "verdicts"),
    [
        # torch's generator allocates its seed and offset for graphs inside capture_begin, and
        # every replay rewrites them: a random kernel's read of them is runtime state.
        (
            {"filename": str(Path(torch.__file__).parent / "cuda" / "graphs.py"), "line": 250,
             "name": "capture_begin"},
            {"runtime": 1, "registered": 1, "unregistered": 0},
        ),
        # Allocated anywhere else (here, a user's function of that name): a finding as before.
        (
            {"filename": "/srv/engine/graphs.py", "line": 250, "name": "capture_begin"},
            {"runtime": 0, "registered": 1, "unregistered": 1},
        ),
    ],
)  # fmt: skip
def test_torchs_generator_graph_state_read_by_a_random_kernel_is_runtime_state(
    site: Mapping[str, Any], verdicts: Mapping[str, int]
) -> None:
    memory = Memory()
    segments = _with_generator_state(memory, site)
    snapshot = {"segments": segments}
    model = Quantized(memory)
    nodes = [kernel(7, "philox_uniform", memory.base + RNG, memory.base + BUFFER)]
    watch = fake_watch(graph_reader=NodesReader(nodes), graph_segments=lambda: segments)
    # What the allocator history's frames give on CUDA (AllocatorHistory.sites).
    watch._registry.site_labels = lambda: AllocatorFrames(
        allocator_sites(snapshot), torch_graph_state(snapshot)
    )
    watch.add_model(model)
    x = torch.ones(2, 4)
    watch.declare_input("x", x)
    graph = capture_fake(model, x=x)
    report = watch.results[0].report
    assert {k: report.summary[k] for k in verdicts} == verdicts
    if verdicts["unregistered"]:
        (finding,) = report.findings
        assert finding.owner == "/srv/engine/graphs.py:250 in capture_begin"  # its own frame
    del graph
