"""Benchmark of the watch's reading of PyTorch's caching allocator (issue 32 §2).

At every epoch of a CUDA graph (each capture among them) the watch adds the allocator's
segments and live blocks to the epoch (``GraphPools.apply``, ``_core.add_allocator_memory``):
a server's allocator holds hundreds to thousands of segments and blocks (its weights, its KV
caches), and this runs on the capture's critical path once per graph. Measured on the CPU
with a stand-in table shaped like ``torch.cuda.memory_snapshot(include_traces=False)``:
``SEGMENTS`` segments of 3 blocks (2 live), one in twenty in a graph pool, a census label on
every live block outside it. Beside it, its floor in the same run: a plain Python pass that
reads the same fields of the same dicts (address, size, state) and keeps nothing. torch's own
``memory_snapshot()`` (building those dicts) is not in either figure: it runs only on a GPU.

Usage: ``python bench/python/bench_allocator.py [--segments 300,1000,3000] [--repeat 30]``
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any

import graphcheck
from bench_capture import interleaved  # this folder: the script's sys.path[0]
from graphcheck._watch.graph_pools import GraphPools

BASE = 0x7F0000000000
GRAPH_POOL = (1, 0)


def stand_in_table(segments: int) -> list[dict[str, Any]]:
    """``segments`` allocator segments of 3 blocks, the middle one free."""
    table = []
    at = BASE
    for s in range(segments):
        size = 20 << 20 if s % 3 == 0 else 2 << 20
        third = size // 3
        blocks = [
            {"address": at + b * third, "size": third, "requested_size": third, "state": state}
            for b, state in enumerate(("active_allocated", "inactive", "active_allocated"))
        ]
        pool = GRAPH_POOL if s % 20 == 0 else (0, 0)
        table.append(
            {
                "device": 0,
                "address": at,
                "total_size": size,
                "allocated_size": 2 * third,
                "active_size": 2 * third,
                "requested_size": 2 * third,
                "stream": 0,
                "segment_type": "large",
                "segment_pool_id": pool,
                "is_expandable": False,
                "blocks": blocks,
            }
        )
        at += size + (2 << 20)
    return table


def census_labels(table: list[dict[str, Any]]) -> list[tuple[int, int, str]]:
    """A label on every live block outside the graph pool (the census's paths)."""
    return [
        (b["address"], b["address"] + b["size"], f"model.layers.{i}.weight")
        for i, s in enumerate(table)
        if s["segment_pool_id"] != GRAPH_POOL
        for b in s["blocks"]
        if b["state"] == "active_allocated"
    ]


def floor_pass(table: list[Mapping[str, Any]]) -> int:
    """Reads what the watch reads of each segment and block, in Python; keeps a count."""
    kept = 0
    for segment in table:
        if int(segment["address"]) > 0 and int(segment["total_size"]) > 0:
            kept += 1
            for block in segment["blocks"]:
                if int(block["size"]) > 0 and block["state"] == "active_allocated":
                    kept += int(block["address"]) > 0
    return kept


def bench(segments: int, repeat: int) -> dict[str, float]:
    """Median seconds of the watch's apply and of the floor's pass over one table."""
    table = stand_in_table(segments)
    labels = census_labels(table)
    pools = GraphPools(lambda: table)

    def apply() -> object:
        return pools.apply(graphcheck.Epoch("capture", [], []), labels)

    return interleaved(repeat, floor=lambda: floor_pass(table), apply=apply)


def main() -> int:
    """One line per table size."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--segments", default="300,1000,3000")
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    print(f"the allocator's blocks at a CUDA epoch (stand-in tables, median of {args.repeat}):")
    for segments in (int(n) for n in args.segments.split(",")):
        t = bench(segments, args.repeat)
        blocks = 2 * segments
        print(
            f"  {segments} segments, {blocks} live blocks: GraphPools.apply "
            f"{t['apply'] * 1e3:.2f} ms ({t['apply'] / (segments + blocks) * 1e9:.0f} ns per "
            f"entry), floor (a Python pass reading the same fields) {t['floor'] * 1e3:.2f} ms: "
            f"{t['apply'] / t['floor']:.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
