"""Benchmarks of the server debug flag (issue 11, section 7): capture, check point, import hook.

Each figure beside its baseline, measured in the same run (medians of interleaved repetitions,
one torch thread, the Python reference model on the CPU twin):

- a capture through the watch (``Watch.capture``: the ATen window around the forward, the
  registry, the capture epoch and its check) against ``graphcheck.capture`` (the same
  without the watch's check) and against a bare forward;
- a check point (``graphcheck.checkpoint``: an epoch and a check of every watched graph),
  per graph, with 1 and with ``--graphs`` graphs watched (the census is shared);
- the import hook with ``GRAPHCHECK`` unset: the ``graphcheck_watch.pth`` line as ``site``
  runs it, in-process (goal: under 5 ms; it reads one environment variable), and
  ``python -c 'import torch'`` with the flag off against the flag on (the watch started
  right after ``import torch``), in fresh interpreters.

The GPU figures (a real ``torch.cuda.graph`` capture under the watch) are prepared in
tests/gpu/watch_smoke.py, which prints its capture times; they are unmeasured until a GPU run.

Usage: ``python bench/python/bench_watch.py [--hidden 1024] [--repeat N] [--graphs 8]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

import graphcheck
from bench_capture import interleaved, timed  # this folder: the script's sys.path[0]
from graphcheck.reference import ReferenceConfig, build_reference_model, reference_inputs

TOKENS = 16
HOOK_TARGET_S = 0.005


def bench_capture(hidden: int, repeat: int) -> dict[str, float]:
    """Median seconds of a bare forward, ``graphcheck.capture`` and ``Watch.capture``."""
    config = ReferenceConfig(hidden=hidden, head_dim=64 if hidden % 64 == 0 else 16)
    model = build_reference_model(config, 0)
    inputs = reference_inputs(model, TOKENS)
    watch = graphcheck.watch(allocator_history=False, cuda_hooks=False)
    try:
        with torch.no_grad():
            model(**inputs)

        def bare() -> object:
            with torch.no_grad():
                return model(**inputs)

        def watched() -> object:
            result = watch.capture(model, warmup=0, **inputs)
            watch._forget(watch.graphs[-1].id)  # keep one graph: the figure is one capture
            return result

        return interleaved(
            repeat,
            forward=bare,
            capture=lambda: graphcheck.capture(model, warmup=0, **inputs),
            watch_capture=watched,
        )
    finally:
        watch.close()


def bench_checkpoint(hidden: int, repeat: int, graphs: int) -> dict[int, float]:
    """Seconds per graph of one check point, with 1 and ``graphs`` graphs watched."""
    config = ReferenceConfig(hidden=hidden, head_dim=64 if hidden % 64 == 0 else 16)
    model = build_reference_model(config, 0)
    per_graph: dict[int, float] = {}
    for count in sorted({1, graphs}):
        watch = graphcheck.watch(allocator_history=False, cuda_hooks=False)
        try:
            watch.check_on_capture = False
            kept = [
                watch.capture(model, warmup=0, **reference_inputs(model, 4 + i))
                for i in range(count)
            ]
            labels = iter(range(10**6))

            def check(watch: graphcheck.Watch = watch, labels: Iterator[int] = labels) -> object:
                return watch.checkpoint(f"c{next(labels)}")

            t = interleaved(repeat, check=check)
            per_graph[count] = t["check"] / count
            del kept
        finally:
            watch.close()
    return per_graph


def _hook_line() -> str:
    pth = Path(graphcheck.__file__).resolve().parents[1] / "graphcheck_watch.pth"
    if not pth.is_file():
        pth = Path(__file__).resolve().parents[2] / "python" / "graphcheck_watch.pth"
    return next(line for line in pth.read_text().splitlines() if line.startswith("import"))


def bench_hook_line(repeat: int) -> float:
    """Seconds of the .pth line with GRAPHCHECK unset (as site.addpackage execs it)."""
    code = compile(_hook_line(), "graphcheck_watch.pth", "exec")
    saved = os.environ.pop("GRAPHCHECK", None)
    try:
        n = 1000
        runs = [timed(lambda: [exec(code, {}) for _ in range(n)]) / n for _ in range(repeat)]
    finally:
        if saved is not None:
            os.environ["GRAPHCHECK"] = saved
    return statistics.median(runs)


def bench_import_torch(repeat: int) -> dict[str, float]:
    """``import torch`` in fresh interpreters, the flag off and on (wall time, whole run)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHCHECK")}
    probe = "import torch"

    def run(flag: str) -> Callable[[], object]:
        env = {**base, "GRAPHCHECK": flag, "GRAPHCHECK_DIR": os.devnull + ".d"}
        return lambda: subprocess.run([sys.executable, "-c", probe], env=env, check=True)

    return interleaved(repeat, off=run("0"), on=run("1"))


def main() -> int:
    """Run every benchmark and print one line per figure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--graphs", type=int, default=8)
    parser.add_argument("--import-repeat", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    t = bench_capture(args.hidden, args.repeat)
    print(
        f"capture (hidden {args.hidden}, {TOKENS} tokens, median of {args.repeat}): forward "
        f"{t['forward'] * 1e3:.2f} ms, graphcheck.capture {t['capture'] * 1e3:.2f} ms, "
        f"Watch.capture {t['watch_capture'] * 1e3:.2f} ms "
        f"({t['watch_capture'] / t['capture']:.2f}x graphcheck.capture, "
        f"{t['watch_capture'] / t['forward']:.1f}x the forward)"
    )
    per = bench_checkpoint(args.hidden, args.repeat, args.graphs)
    print(
        "check point per graph: "
        + ", ".join(f"{n} graph(s) {s * 1e3:.2f} ms" for n, s in sorted(per.items()))
    )
    line = bench_hook_line(args.repeat)
    verdict = "ok" if line < HOOK_TARGET_S else "over"
    print(f"import hook line, flag off: {line * 1e6:.2f} us per interpreter start ({verdict})")
    imp = bench_import_torch(args.import_repeat)
    print(
        f"python -c 'import torch' (median of {args.import_repeat}): flag off "
        f"{imp['off'] * 1e3:.0f} ms, flag on {imp['on'] * 1e3:.0f} ms "
        f"(+{(imp['on'] - imp['off']) * 1e3:.0f} ms: the watch starting)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
