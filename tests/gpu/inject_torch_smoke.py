"""A torch program for gpu-check.sh's second injection smoke run (ran on an H200 on 2026-12-04).

Run under CUDA_INJECTION64_PATH=libgraphcheck_inject.so with GRAPHCHECK_CHECK=launch: it
captures one small graph with torch.cuda.graph, replays it twice and exits normally, keeping
the graph alive until interpreter shutdown. What it settles (docs/gpu-check.md, [verify]):
whether the library attaches to a torch process, whether a launch check sees torch's graph,
and whether the exit check still sees it after Python's finalization (which may destroy the
CUDAGraph object first). With --destroy-graph it deletes the graph before exiting, as a
server shutting down does: the exit check (GRAPHCHECK_CHECK=exit) must still report it,
checked when its exec graph was destroyed (issue 18). Prints one line; exit status 0 when the
replay matched eager.
"""

import gc
import sys

import torch


def main() -> int:
    if not torch.cuda.is_available():
        print("inject_torch_smoke: SKIP (no CUDA device)")
        return 0
    x = torch.randn(4096, device="cuda")
    w = torch.randn(4096, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture, as torch's docs advise
        y = x * w + 1.0
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = x * w + 1.0
    x.copy_(torch.randn(4096, device="cuda"))
    graph.replay()
    graph.replay()
    torch.cuda.synchronize()
    ok = torch.allclose(y, x * w + 1.0)
    print(f"inject_torch_smoke: torch {torch.__version__}, replay matches eager: {ok}")
    if "--destroy-graph" in sys.argv:
        del graph  # cudaGraphExecDestroy now, before the atexit check
        gc.collect()
        torch.cuda.synchronize()
    else:
        globals()["kept_graph"] = graph  # alive until shutdown: the exit check's case
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
