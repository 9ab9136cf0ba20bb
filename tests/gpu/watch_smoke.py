"""The server debug flag on a real CUDA graph (issue 11, section 6). Ran on an H200 on 2026-12-04.

Run by scripts/gpu-check.sh once per variant: ``python tests/gpu/watch_smoke.py --variant
legacy|registered --out DIR``. Under :func:`graphcheck.watch` it builds the Python reference
model on the GPU, captures one forward with ``torch.cuda.graph`` (the watch's hook on
``CUDAGraph.capture_begin``/``capture_end`` records it through the ATen window and checks it
when the capture ends), replays it, rebinds every parameter (the RL weight-update bug) and
runs a check point. Expected: legacy, ``unregistered`` findings naming the quantization
methods' tensors and the RoPE cache; registered, a clean capture; both, ``stale`` parameters
after the rebinding. It also times the capture with and without the watch (the GPU figure of
bench/python/bench_watch.py). Writes ``DIR/<variant>/`` (the watch's reports and snapshots)
and ``DIR/watch-smoke-<variant>.json``; prints one line. Exit status 0 when the expectations
held, 1 otherwise, and 0 with ``SKIP`` when there is no CUDA device.

Not covered yet: a VMM-backed sleep and wake through the CUPTI tracker (``lost`` on CUDA).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch


def build(variant: str) -> Any:
    """The reference model with every tensor on the GPU (the checkpoint comes from the CPU)."""
    from graphcheck.reference import ReferenceConfig, build_reference_model

    return build_reference_model(ReferenceConfig(variant=variant), 0, device="cuda")


def capture(model: Any, static: dict[str, torch.Tensor]) -> tuple[Any, torch.Tensor, float]:
    """One ``torch.cuda.graph`` capture after a warm-up on a side stream; returns its time."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        model(**static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    start = time.perf_counter()
    with torch.cuda.graph(graph), torch.no_grad():
        output = model(**static)
    torch.cuda.synchronize()
    return graph, output, time.perf_counter() - start


def owners(report: Any) -> dict[str, list[str]]:
    found: dict[str, set[str]] = {}
    for finding in report.findings:
        found.setdefault(finding.verdict, set()).add(finding.owner)
    return {verdict: sorted(names) for verdict, names in found.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variant", choices=("legacy", "registered"), required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print(f"watch_smoke {args.variant}: SKIP (no CUDA device)")
        return 0
    import graphcheck
    from graphcheck.reference import reference_inputs

    model = build(args.variant)
    static = {k: v.cuda() for k, v in reference_inputs(model).items()}
    _, _, plain_s = capture(model, static)  # the baseline: no watch yet
    watch = graphcheck.watch(model, out_dir=args.out / args.variant)
    for name, tensor in static.items():
        watch.declare_input(name, tensor)
    graph, output, watched_s = capture(model, static)
    first = watch.last
    graph.replay()
    torch.cuda.synchronize()
    with torch.no_grad():
        replay_ok = bool(torch.allclose(output, model(**static), equal_nan=True))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.data = parameter.data.clone()
    rebound = graphcheck.checkpoint("after_rebind")
    problems = []
    if first is None:
        problems.append(f"the capture was not recorded (hooks: {watch.capture_hooks})")
    elif not first.graphs or first.skipped or set(first.readers.values()) != {"cuda-graph"}:
        # A skipped graph, or one the dispatcher read instead, would pass the checks below
        # without judging a kernel (found by a review: `ok` holds for a skipped graph).
        problems.append(
            f"the capture was not checked from its CUDA graph: graphs {first.graphs}, skipped "
            f"{list(first.skipped)}, readers {first.readers}, notes {list(first.notes)}"
        )
    elif first.report.summary["registered"] < 1:
        problems.append(f"no registered reference in the capture: {first.counts}")
    elif args.variant == "legacy":
        unregistered = owners(first.report).get("unregistered", [])
        if not any("quant_method" in o for o in unregistered):
            problems.append(f"legacy capture: no quant_method site among {unregistered}")
    elif not first.ok:
        problems.append(f"registered capture has findings: {first.counts}")
    if rebound is None or "stale" not in rebound.counts:
        problems.append("no stale parameter after the rebinding")
    if not replay_ok:
        problems.append("the replay differs from eager")
    summary = {
        "variant": args.variant,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "capture_hooks": watch.capture_hooks,
        "capture_s": {"plain": plain_s, "watched": watched_s},
        "capture": None if first is None else {"counts": first.counts, **owners(first.report)},
        "after_rebind": None if rebound is None else rebound.counts,
        "replay_matches_eager": replay_ok,
        "problems": problems,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"watch-smoke-{args.variant}.json").write_text(json.dumps(summary, indent=2))
    verdict = "ok" if not problems else "FAIL " + "; ".join(problems)
    print(
        f"watch_smoke {args.variant}: {verdict}; capture {plain_s * 1e3:.1f} ms plain, "
        f"{watched_s * 1e3:.1f} ms watched; capture {summary['capture']}"
    )
    watch.close()
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
