"""Benchmarks of the Python capture (issue 9, section 8): capture, replay, import cost.

Targets: a forward captured from Python at most 2x the bare forward at hidden
1024 (the Python reference model), and ``import graphcheck`` adding under 0.2 s
to ``import torch``. Each figure is printed beside its baseline measured in the
same run (medians of interleaved repetitions, one torch thread as the C++
bench uses):

- ``graphcheck.capture(model, warmup=0, ...)``: the whole call (capture window
  around the forward, census, registry, capture epoch, snapshot), and the
  window alone (open, declare inputs, forward, finish), each against a bare
  forward;
- ``Capture.replay()`` against a bare forward;
- ``import graphcheck`` after ``import torch`` in a fresh interpreter, against
  nothing (the added time is the figure), and whether it imported torch or
  ``graphcheck._torch`` (it must not).

Usage: ``python bench/python/bench_capture.py [--hidden 1024] [--repeat N] [--strict]``
(``--strict`` exits 1 when a figure misses its target).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import torch

import graphcheck
from graphcheck import _torch
from graphcheck.reference import ReferenceConfig, build_reference_model, reference_inputs

TOKENS = 16
CAPTURE_TARGET = 2.0
IMPORT_TARGET_S = 0.2

_IMPORT_PROBE = """
import sys, time
import torch
t0 = time.perf_counter()
import graphcheck
added = time.perf_counter() - t0
print(added, "torch" in sys.modules, "graphcheck._torch" in sys.modules)
"""
_IMPORT_ALONE = """
import sys, time
t0 = time.perf_counter()
import graphcheck
print(time.perf_counter() - t0, "torch" in sys.modules)
"""


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call of ``fn`` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved(repeat: int, **fns: Callable[[], object]) -> dict[str, float]:
    """Median seconds of each function, run in turn ``repeat`` times."""
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            samples[name].append(timed(fn))
    return {name: statistics.median(s) for name, s in samples.items()}


def window_only(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> object:
    """The capture window around one forward, without census, epoch or snapshot."""
    with torch.no_grad():
        window = _torch.CaptureWindow(None)
        try:
            for name, tensor in inputs.items():
                window.declare_input(name, tensor, "input")
            model(**inputs)
            return window.finish()
        finally:
            window.close()


def bench_capture(hidden: int, repeat: int) -> list[tuple[str, float, float, float | None]]:
    """Times capture, the window alone and replay against a bare forward; prints a table."""
    config = ReferenceConfig(hidden=hidden, head_dim=64 if hidden >= 256 else 16)
    model = build_reference_model(config, seed=1)
    inputs = reference_inputs(model, TOKENS)
    with torch.no_grad():
        model(**inputs)  # warm-up
    graph = graphcheck.capture(model, warmup=0, **inputs)
    ops = graph.node_count

    def bare() -> object:
        with torch.no_grad():
            return model(**inputs)

    t = interleaved(
        repeat,
        forward=bare,
        capture=lambda: graphcheck.capture(model, warmup=0, **inputs),
        window=lambda: window_only(model, inputs),
        replay=graph.replay,
    )
    print(
        f"reference model (registered), hidden {hidden}, {config.layers} layers, {TOKENS} tokens, "
        f"1 torch thread, {ops} ops recorded, median of {repeat}"
    )
    rows = [
        ("graphcheck.capture() (whole call)", t["capture"], t["forward"], CAPTURE_TARGET),
        ("capture window only", t["window"], t["forward"], None),
        ("Capture.replay()", t["replay"], t["forward"], None),
    ]
    for name, value, base, target in rows:
        goal = f"  (goal <= {target:.1f}x)" if target else ""
        print(
            f"  {name:<34} {value * 1e3:8.2f} ms   bare forward {base * 1e3:8.2f} ms   "
            f"ratio {value / base:5.2f}x{goal}"
        )
    return rows


def bench_import(repeat: int) -> tuple[float, bool]:
    """Times ``import graphcheck`` after ``import torch`` in fresh interpreters."""
    added, alone, clean = [], [], True
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-I", "-c", _IMPORT_PROBE], check=True, capture_output=True, text=True
        ).stdout.split()
        added.append(float(out[0]))
        clean = clean and out[2] == "False"
        out = subprocess.run(
            [sys.executable, "-I", "-c", _IMPORT_ALONE], check=True, capture_output=True, text=True
        ).stdout.split()
        alone.append(float(out[0]))
        clean = clean and out[1] == "False"
    median = statistics.median(added)
    print(
        f"import graphcheck after import torch: {median * 1e3:.1f} ms added (median of {repeat}, "
        f"{min(added) * 1e3:.1f} to {max(added) * 1e3:.1f} ms; goal < {IMPORT_TARGET_S * 1e3:.0f} "
        f"ms); alone, without torch: {statistics.median(alone) * 1e3:.1f} ms; imports torch or "
        f"graphcheck._torch by itself: {'no' if clean else 'YES'}"
    )
    return median, clean


def main() -> int:
    """Runs the benchmarks; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    options = parser.parse_args()
    torch.set_num_threads(1)  # as the C++ bench: the 2-core machine is shared
    rows = bench_capture(options.hidden, options.repeat)
    added, clean = bench_import(7)
    missed = [name for name, value, base, target in rows if target and value / base > target]
    if added >= IMPORT_TARGET_S or not clean:
        missed.append("import graphcheck")
    if missed:
        print(f"missed: {', '.join(missed)}")
    return 1 if missed and options.strict else 0


if __name__ == "__main__":
    sys.exit(main())
