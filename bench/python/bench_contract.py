"""Benchmarks of the census and of register_held_tensors (issue 9, section 8).

Targets: a census of a model with 100,000 tensors in under 1 s, and
register_held_tensors with 10,000 holders in under 1 s. Each figure is printed
beside a baseline measured in the same run on the same model:

- census: a plain iteration over ``named_parameters()`` and ``named_buffers()``;
- register_held_tensors: plain ``register_buffer`` calls of the same tensors.

Usage: ``python bench/python/bench_contract.py [--repeat N] [--strict]``
(``--strict`` exits 1 when a figure misses its target).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable

import torch

from graphcheck import census
from graphcheck.contract import held_tensors, register_held_tensors

CENSUS_TENSORS = 100_000
HOLDERS = 10_000
TARGET_S = 1.0


class Block(torch.nn.Module):
    """A transformer-like block: 20 small Linear layers (40 tensors) and plain config."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.proj = torch.nn.ModuleList(torch.nn.Linear(2, 2) for _ in range(20))
        self.config = {"hidden": 2, "act": "silu", "index": index}
        self.name = f"block{index}"
        self.eps = 1e-6


class Holder:
    """A quantization-method-like holder keeping two tensors."""

    def __init__(self) -> None:
        self.g_idx = torch.zeros(4, dtype=torch.int32)
        self.scales = torch.ones(4)

    def persistent_tensors(self) -> dict[str, torch.Tensor]:
        """Both tensors, as the contract asks of a holder."""
        return held_tensors(self, "g_idx", "scales")


def census_model() -> tuple[torch.nn.Module, int]:
    """100,000 registered tensors, plus one unregistered tensor every 100 blocks."""
    blocks = CENSUS_TENSORS // 40
    model = torch.nn.Module()
    model.layers = torch.nn.ModuleList(Block(i) for i in range(blocks))
    for i in range(0, blocks, 100):
        model.layers[i].cache = torch.zeros(8)
    return model, sum(1 for _ in model.parameters()) + sum(1 for _ in model.buffers())


def best(fn: Callable[[], object], repeat: int, setup: Callable[[], object] | None = None) -> float:
    """Fastest of ``repeat`` timed runs of ``fn`` (``setup`` runs untimed before each)."""
    times = []
    for _ in range(repeat):
        if setup is not None:
            setup()
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bench_census(repeat: int) -> float:
    """Print the census figure and its baseline; return the slower census time."""
    model, tensors = census_model()

    def baseline() -> None:
        for _ in model.named_parameters():
            pass
        for _ in model.named_buffers():
            pass

    start = time.perf_counter()
    result = census(model)
    first = time.perf_counter() - start
    assert len(result.entries) == CENSUS_TENSORS // 40 // 100, result
    took = best(lambda: census(model), repeat)
    base = best(baseline, repeat)
    print(
        f"census, {tensors} registered tensors + {len(result.entries)} unregistered: "
        f"{took:.3f} s (first run {first:.3f} s); baseline named_parameters()+"
        f"named_buffers(): {base:.3f} s; ratio {took / base:.1f}x; target < {TARGET_S} s"
    )
    return max(took, first)


def bench_register_held(repeat: int) -> float:
    """Print the register_held_tensors figure and its baseline; return the slower time."""
    model = torch.nn.Module()
    model.layers = torch.nn.ModuleList(torch.nn.Module() for _ in range(HOLDERS))
    for layer in model.layers:
        layer.qm = Holder()
    entries = [
        (layer, f"_held_qm_{name}", t)
        for layer in model.layers
        for name, t in layer.qm.persistent_tensors().items()
    ]

    def clear() -> None:
        for module, name, _ in entries:
            module._buffers.pop(name, None)
            module._non_persistent_buffers_set.discard(name)

    def baseline() -> None:
        for module, name, tensor in entries:
            module.register_buffer(name, tensor, persistent=False)

    first = best(lambda: register_held_tensors(model), repeat, setup=clear)
    rerun = best(lambda: register_held_tensors(model), repeat)
    base = best(baseline, repeat, setup=clear)
    registered = len(register_held_tensors(model))
    assert registered == 2 * HOLDERS, registered
    print(
        f"register_held_tensors, {HOLDERS} holders ({registered} tensors): {first:.3f} s "
        f"(rerun replacing them: {rerun:.3f} s); baseline register_buffer x{registered}: "
        f"{base:.3f} s; ratio {first / base:.1f}x; target < {TARGET_S} s"
    )
    return max(first, rerun)


def main() -> int:
    """Run both benchmarks; with ``--strict``, fail when a target is missed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per figure (best)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, python {sys.version.split()[0]}")
    worst = max(bench_census(args.repeat), bench_register_held(args.repeat))
    return 1 if args.strict and worst >= TARGET_S else 0


if __name__ == "__main__":
    sys.exit(main())
