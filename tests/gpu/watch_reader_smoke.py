"""The server flag reads what a CUDA graph captured (issue 18 §1). Ran on an H200 on 2026-12-04
(docs/gpu-check.md) with the expectations of that time, which held; the memset's verdict has
changed since (below) and has not run on a GPU again.

Run by scripts/gpu-check.sh: ``python tests/gpu/watch_reader_smoke.py --out DIR``. Under
:func:`graphcheck.watch` it captures, with ``torch.cuda.graph``, one forward of a linear layer
and a ``cudaMemsetAsync`` called through ctypes on libcudart, on the capture stream, over a
tensor that no op of the capture touches: the ATen dispatcher never sees that memset, the
graph holds it as a memset node. Expected, by construction:

- the graph was read by ``cuda-graph`` (``graphcheck._cuda``), not ``aten-dispatcher``;
- its nodes hold a memset node whose ``dst`` is the tensor's address and whose size is its
  byte count, and kernel nodes (the linear layer's GEMM) instead of ``op`` nodes;
- the memset is an ``unregistered`` finding at that address: the tensor is a live block of the
  caching allocator, which every epoch lists (issue 29), and nothing registered it (the first
  GPU run called it ``dangling``: the watch then knew only the storages the dispatcher saw);
- a word of an elementwise kernel's arguments (``weight * 2``) lies in the registered
  weight (at least one ``registered`` reference);
- the replay works (the watch changed nothing in the capture);
- a second graph captured into the first one's pool (``pool=graph.pool()``, as vLLM shares
  one pool between its captures) reads the first graph's output, memory of that pool: no
  ``unregistered`` finding in it, at least one ``graph`` reference (issue 18 §4, the
  caching allocator's segments of a watched graph's pool are graph memory), and a random op
  in it (``torch.rand_like``) reads torch's CUDA generator state for graphs (its seed and
  offset, allocated inside ``capture_begin``, rewritten before each replay): runtime state, so
  no ``unregistered`` finding at all in that graph (a review's finding of 2026-12-07, fixed
  without a GPU: ``torch_graph_state`` in graphcheck/_watch/allocator_history.py).

Recorded, not asserted: the findings of a third graph, the linear layer captured on a stream
it was warmed up on (its cuBLAS workspace made outside any capture; docs/gpu-check.md, "Open
questions").

Writes ``DIR/reader/`` (the watch's reports and snapshots) and ``DIR/watch-reader-smoke.json``;
prints one line. Exit status 0 when the expectations held, 1 otherwise, and 0 with ``SKIP``
when there is no CUDA device (scripts/gpu-check.sh calls that a failure on a GPU machine).
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any

import torch
from smoke_args import out_dir_or_skip


def cudart() -> Any:
    """The CUDA runtime torch loaded (pip's libcudart.so.13): dlopen finds it by soname."""
    for name in ("libcudart.so.13", "libcudart.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    with open("/proc/self/maps") as maps:
        for line in maps:
            if "libcudart.so" in line:
                return ctypes.CDLL(line.split()[-1])
    raise RuntimeError("libcudart is not loaded")


def main() -> int:
    out = out_dir_or_skip("watch_reader_smoke", __doc__ or "")
    if out is None:
        return 0
    import graphcheck

    runtime = cudart()
    memset = runtime.cudaMemsetAsync
    memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p]
    memset.restype = ctypes.c_int

    model = torch.nn.Linear(64, 64, device="cuda").eval()
    static = torch.ones(8, 64, device="cuda")
    hidden = torch.zeros(4096, device="cuda")  # no op of the capture touches it
    watch = graphcheck.watch(model, out_dir=out / "reader")
    watch.declare_input("x", static)
    with torch.no_grad():
        model(static)  # warm-up (cuBLAS handles, workspaces) outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        output = model(static)
        # An elementwise kernel: torch passes its operands' addresses by value in the kernel's
        # argument struct, so one word lies in the registered weight.
        scaled = model.weight * 2
        stream = torch.cuda.current_stream().cuda_stream
        memset_rc = memset(hidden.data_ptr(), 1, hidden.nbytes, stream)
    first = watch.last
    graph.replay()
    torch.cuda.synchronize()
    with torch.no_grad():
        replay_ok = bool(torch.allclose(output, model(static)))
        replay_ok = replay_ok and bool(torch.equal(scaled, model.weight * 2))
    second_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(second_graph, pool=graph.pool()), torch.no_grad():
        tripled = output * 3  # the first graph's output: memory of the shared pool
        noise = torch.rand_like(output)  # reads the generator's graph state
    second = watch.last
    second_graph.replay()
    torch.cuda.synchronize()
    replay_ok = replay_ok and bool(torch.equal(tripled, output * 3)) and noise.shape == output.shape
    # An open question, recorded, not asserted (docs/gpu-check.md): an engine that warms up on
    # its capture stream makes that stream's cuBLAS workspace outside any capture, in the
    # default pool; does a captured GEMM's argument hold its address (an unregistered read)?
    side = torch.cuda.Stream()
    with torch.cuda.stream(side), torch.no_grad():
        model(static)
    torch.cuda.synchronize()
    third_graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(third_graph, stream=side), torch.no_grad():
        model(static)
    third = watch.last
    workspace_reads = (
        None
        if third is None or third is second
        else [(f.verdict, f.owner, f.kernel) for f in third.report.findings]
    )
    memset_ran = bool((hidden.view(torch.int32) == 0x01010101).all())

    problems: list[str] = []
    watched = watch.graphs[0] if watch.graphs else None
    nodes: list[Any] = []
    if memset_rc != 0:
        problems.append(f"cudaMemsetAsync returned {memset_rc}")
    if watched is None or first is None:
        problems.append(f"the capture was not recorded (hooks: {watch.capture_hooks})")
    else:
        (record,) = watched.capture.snapshot.graphs
        nodes = list(record.nodes)
        if watched.reader != "cuda-graph" or record.reader != "cuda-graph":
            problems.append(f"read by {watched.reader}: {list(first.notes)}")
        memsets = [
            n
            for n in nodes
            if n.type == "memset"
            and n.operands
            and n.operands[0].begin == hidden.data_ptr()
            and n.operands[0].size == hidden.nbytes
        ]
        if not memsets:
            problems.append("no memset node over the tensor among the graph's nodes")
        if not any(n.type == "kernel" for n in nodes) or any(n.type == "op" for n in nodes):
            problems.append(f"node types {sorted({n.type for n in nodes})}: expected kernels")
        hits = [
            f
            for f in first.report.findings
            if f.node_type == "memset" and f.address == hidden.data_ptr()
        ]
        if [f.verdict for f in hits] != ["unregistered"]:
            problems.append(f"memset findings {[(f.verdict, f.detail) for f in hits]}")
        if first.report.summary["registered"] < 1:
            problems.append("no registered reference (the weight word of weight * 2)")
    if second is None or second is first:
        problems.append("the second capture, into the first one's pool, was not recorded")
    else:
        begin = output.untyped_storage().data_ptr()
        end = begin + output.untyped_storage().nbytes()
        pooled = [
            (f.verdict, f.owner)
            for f in second.report.findings
            if f.verdict == "unregistered" and begin <= f.address < end
        ]
        if pooled or second.report.summary["graph"] < 1:
            problems.append(f"the shared pool's memory: findings {pooled}, counts {second.counts}")
        others = [
            (f.verdict, f.owner, f.kernel)
            for f in second.report.findings
            if f.verdict == "unregistered" and not begin <= f.address < end
        ]
        if others:
            problems.append(f"the random op's graph: unregistered {others}")
    if not replay_ok or not memset_ran:
        problems.append(f"replay matches eager: {replay_ok}; memset ran: {memset_ran}")
    summary = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "capture_hooks": watch.capture_hooks,
        "reader": None if watched is None else watched.reader,
        "nodes": [(n.id, n.type, n.name) for n in nodes],
        "counts": None if first is None else first.counts,
        "second_counts": None if second is None else second.counts,
        "warmed_up_on_its_capture_stream": workspace_reads,
        "notes": [] if first is None else list(first.notes),
        "problems": problems,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "watch-reader-smoke.json").write_text(json.dumps(summary, indent=2))
    verdict = "ok" if not problems else "FAIL " + "; ".join(problems)
    print(
        f"watch_reader_smoke: {verdict}; read by {summary['reader']}, {len(nodes)} nodes, "
        f"counts {summary['counts']}; a GEMM warmed up on its capture stream: findings "
        f"{workspace_reads}"
    )
    watch.close()
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
