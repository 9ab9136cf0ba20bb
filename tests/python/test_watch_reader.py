"""On CUDA the watch checks the nodes of the graph itself, not the dispatcher's ops (issue 18
§1): the glue between the capture hooks and a graph reader, driven on the CPU by the stand-in
graph class and a fake reader, and the reader module graphcheck._cuda where it is built."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch

import graphcheck
from graphcheck._watch.cuda_capture import READER_CUDA_GRAPH, READER_DISPATCHER, ReadNodes
from watch_fakes import FakeCUDAGraph, fake_watch

pytestmark = pytest.mark.usefixtures("no_watch_left")


class Scaled(torch.nn.Module):
    """A linear layer and a plain tensor member the census finds (unregistered)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.scale = torch.ones(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale


def word(tensor: torch.Tensor, offset: int = 0) -> graphcheck.KernelParam:
    return graphcheck.KernelParam(0, struct.pack("<Q", tensor.data_ptr() + offset))


class FakeReader:
    """Stands in for CudaGraphReader: reads nodes the test made, notes when it was called."""

    name = READER_CUDA_GRAPH

    def __init__(self, nodes: list[graphcheck.Node], fail: str = "") -> None:
        self.nodes = nodes
        self.fail = fail
        self.calls: list[tuple[str, bool]] = []  # (call, graph captured yet)

    def begin(self, graph: object) -> object:
        assert isinstance(graph, FakeCUDAGraph)
        self.calls.append(("begin", graph.captured))
        self.graph = graph
        return "stream 7"

    def read(self, token: object) -> ReadNodes:
        assert token == "stream 7"
        self.calls.append(("read", self.graph.captured))
        if self.fail:
            raise graphcheck.GraphcheckError(self.fail)
        return ReadNodes(self.nodes, ("node 9 (kernel k): its arguments could not be read: x",))


def capture(model: Scaled, x: torch.Tensor) -> FakeCUDAGraph:
    graph = FakeCUDAGraph()
    with torch.no_grad():
        model(x)
        graph.capture_begin()
        model(x)
        graph.capture_end()
    return graph


def test_the_watch_checks_the_nodes_the_reader_read_and_says_so(tmp_path: Path) -> None:
    model = Scaled()
    x = torch.ones(2, 4)
    hidden = torch.zeros(64)  # memory no dispatcher op of the capture ever touches
    nodes = [
        # A kernel the dispatcher does not see (a Triton kernel of inductor, say): a word in
        # the weight and one in the plain member the dispatcher saw in aten::mul.
        graphcheck.Node(
            1, "kernel", "triton_fused", params=[word(model.linear.weight), word(model.scale, 4)]
        ),
        # A cudaMemsetAsync no ATen op made, on memory the dispatcher never saw.
        graphcheck.Node(
            2, "memset", operands=[graphcheck.Operand("dst", hidden.data_ptr(), 64, "write")]
        ),
    ]
    reader = FakeReader(nodes)
    watch = fake_watch(graph_reader=reader, out_dir=tmp_path)
    watch.add_model(model)
    watch.declare_input("x", x)
    graph = capture(model, x)
    # Read after the capture began and before it ended (the graph is complete, not destroyed).
    assert reader.calls == [("begin", False), ("read", False)] and graph.captured
    (watched,) = watch.graphs
    assert watched.reader == READER_CUDA_GRAPH
    snapshot = watched.capture.snapshot
    (record,) = snapshot.graphs
    assert record.reader == READER_CUDA_GRAPH
    assert [(n.id, n.type, n.name) for n in record.nodes] == [
        (1, "kernel", "triton_fused"),
        (2, "memset", ""),
    ]  # the reader's nodes, no dispatcher op
    result = watch.last
    assert result is not None and result.readers == {watched.id: READER_CUDA_GRAPH}
    by_node = {(f.node, f.verdict, f.owner) for f in result.report.findings}
    # The weight word is registered; the member's word is labelled by the census path the
    # dispatcher's record of aten::mul gave its storage; the memset is judged though no op
    # touched its memory (nothing holds it: dangling).
    assert by_node == {(1, "unregistered", "scale"), (2, "dangling", "")}
    assert result.report.summary["registered"] == 1
    assert any("node 9 (kernel k): its arguments could not be read" in n for n in result.notes)
    assert "read by: graph" in result.header() and READER_CUDA_GRAPH in result.header()
    watch.flush()  # a check at capture writes its files on the watch's writer thread
    saved = json.loads(Path(result.files[f"snapshot:{watched.id}"]).read_text())
    assert saved["graphs"][0]["reader"] == READER_CUDA_GRAPH
    index = [json.loads(line) for line in (tmp_path / "index.jsonl").read_text().splitlines()]
    assert index[-1]["readers"] == {str(watched.id): READER_CUDA_GRAPH}


@pytest.mark.parametrize("fail", ["driver said no", ""])
def test_without_a_read_the_dispatchers_ops_are_the_nodes_and_the_note_says_why(
    fail: str,
) -> None:
    model = Scaled()
    reader = FakeReader([], fail=fail) if fail else None
    watch = fake_watch(graph_reader=reader)
    watch.add_model(model)
    graph = capture(model, torch.ones(2, 4))  # kept: a freed graph is no longer watched
    assert graph.captured
    (watched,) = watch.graphs
    assert watched.reader == READER_DISPATCHER
    (record,) = watched.capture.snapshot.graphs
    assert record.reader == READER_DISPATCHER and record.nodes
    assert {n.type for n in record.nodes} == {"op"}
    result = watch.last
    assert result is not None and result.readers == {watched.id: READER_DISPATCHER}
    why = fail or "no CUDA graph reader"
    assert any("dispatcher's ops" in n and why in n for n in result.notes), result.notes


def test_the_default_reader_reads_nothing_without_cuda() -> None:
    # The stand-in graph captures nothing on a GPU, and CUDA is not initialized here: the
    # default reader declines at capture_begin, and never initializes CUDA itself.
    if torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        pytest.skip("CUDA is initialized in this process")
    model = Scaled()
    watch = fake_watch()
    watch.add_model(model)
    graph = capture(model, torch.ones(2, 4))  # kept: a freed graph is no longer watched
    assert graph.captured
    (watched,) = watch.graphs
    assert watched.reader == READER_DISPATCHER
    assert any("CUDA is not initialized" in n for n in watch.results[-1].notes)
    assert not torch.cuda.is_initialized()  # type: ignore[no-untyped-call]


def test_the_default_reader_loads_the_driver_at_cudas_initialization(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Not inside the first capture (where loading CUPTI could make a call the capture
    # forbids): the watch queues the reader's prepare() for CUDA's initialization.
    from graphcheck._watch.cuda_capture import CudaGraphReader

    queued: list[object] = []
    monkeypatch.setattr(torch.cuda, "_lazy_call", queued.append)
    watch = fake_watch(graph_reader=CudaGraphReader())
    assert [getattr(c, "__func__", None) for c in queued] == [CudaGraphReader.prepare]
    watch.close()
    for call in queued:  # CUDA initializes (here: it cannot, and prepare never raises)
        call()  # type: ignore[operator]
    fake_watch(graph_reader=FakeReader([])).close()  # a reader without prepare(): none queued
    assert len(queued) == 1


def test_a_snapshot_says_which_backend_read_each_graph() -> None:
    graph = graphcheck.GraphRecord(1, "capture", [graphcheck.Node(0)])
    graph.reader = READER_CUDA_GRAPH
    snapshot = graphcheck.Snapshot(epochs=[graphcheck.Epoch("capture")], graphs=[graph])
    text = snapshot.to_json()
    assert '"reader": "cuda-graph"' in text
    assert graphcheck.parse_snapshot(text) == snapshot
    # A snapshot written before the key existed reads with an empty reader.
    old = {
        "format": "graphcheck-snapshot",
        "version": 1,
        "epochs": [{"label": "capture", "spans": [], "allocations": []}],
        "graphs": [{"id": 1, "epoch": "capture", "nodes": []}],
    }
    assert graphcheck.parse_snapshot(json.dumps(old)).graphs[0].reader == ""
    old["graphs"][0]["reader"] = READER_DISPATCHER  # type: ignore[index]
    assert graphcheck.parse_snapshot(json.dumps(old)).graphs[0].reader == READER_DISPATCHER


def test_the_reader_module_says_why_it_cannot_read() -> None:
    cuda = pytest.importorskip("graphcheck._cuda", reason="built without the CUDA headers")
    assert cuda.READER == READER_CUDA_GRAPH
    problem = cuda.driver_problem()
    with pytest.raises(graphcheck.GraphcheckError) as raised:
        cuda.read_capture(0)  # the legacy stream: never capturing here
    if problem:  # no driver on this machine: every read says so
        assert problem in str(raised.value)
    else:  # a driver: the stream is not capturing (or, without a context, the query fails)
        message = str(raised.value)
        assert "not capturing" in message or "cuStreamGetCaptureInfo failed" in message
