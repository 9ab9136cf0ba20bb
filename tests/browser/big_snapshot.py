"""A generated snapshot with one 10,000-node graph, for the browser tier's load test.

Also the HTML writer's memory figure (README, docs/report-format.md): ``python
tests/browser/big_snapshot.py OUT --nodes 200000`` writes a 200,000-node one (about 33 MB).

Capture and after_reload epochs: 250 layers of parameters in a weights pool, a KV cache, a
workspace no span covers (unregistered), a scratch allocation freed after capture (dangling),
and three layers rebound by the reload (stale, drawn as arrows on the map). Its `expect`
block says what the check must report in after_reload, counted from the construction.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

WEIGHTS = 0x7F2000000000
KV = 0x7F6000000000
DEFAULT = 0x7F7000000000
MOVED = 0x7F4000000000
LAYERS = 250
PER_LAYER = 4
NODES = 10_000
MOVED_LAYERS = (3, 97, 201)


def word(address: int) -> str:
    return address.to_bytes(8, "little").hex()


def param_span(layer: int, index: int, base: int = WEIGHTS) -> dict[str, Any]:
    size = 1 << 20
    begin = base + (layer * PER_LAYER + index) * size
    name = f"model.layers.{layer}.w{index}"
    return {"begin": hex(begin), "size": size, "kind": "parameter", "name": name}


def epoch(label: str, *, reloaded: bool) -> dict[str, Any]:
    spans = []
    for layer in range(LAYERS):
        for index in range(PER_LAYER):
            moved = reloaded and layer in MOVED_LAYERS
            spans.append(param_span(layer, index, MOVED if moved else WEIGHTS))
    spans.append(
        {
            "begin": hex(KV),
            "size": 1 << 30,
            "kind": "runtime",
            "name": "kv_cache",
            "reason": "KV cache",
        }
    )
    weights = LAYERS * PER_LAYER << 20
    allocations = [
        {"begin": hex(WEIGHTS), "size": weights, "pool": "weights", "generation": 1},
        {"begin": hex(KV), "size": 1 << 30, "pool": "default", "generation": 1},
        {
            "begin": hex(DEFAULT),
            "size": 4096,
            "pool": "default",
            "generation": 1,
            "label": "model.quant_method.workspace",
        },
    ]
    if reloaded:
        moved_size = len(MOVED_LAYERS) * PER_LAYER << 20
        allocations.append(
            {"begin": hex(MOVED), "size": moved_size, "pool": "weights", "generation": 1}
        )
    else:
        allocations.append(
            {
                "begin": hex(DEFAULT + 0x100000),
                "size": 65536,
                "pool": "default",
                "generation": 1,
                "label": "scratch",
            }
        )
    return {"label": label, "spans": spans, "allocations": allocations}


def node(index: int) -> dict[str, Any]:
    layer = (index // 40) % LAYERS
    weight = WEIGHTS + (layer * PER_LAYER + index % PER_LAYER) * (1 << 20) + 256 * (index % 7)
    params = [
        {"offset": 0, "size": 8, "hex": word(weight)},
        {"offset": 8, "size": 16, "hex": word(KV + 4096 * index) + word(index)},
    ]
    if index % 1000 == 0:
        params.append({"offset": 24, "size": 8, "hex": word(DEFAULT + 64)})
    if index % 2500 == 1:
        params.append({"offset": 32, "size": 8, "hex": word(DEFAULT + 0x100000 + 128)})
    return {"id": index, "type": "kernel", "name": f"gemm_kernel_{index % 13}", "params": params}


def expected_summary(nodes: int = NODES) -> dict[str, int]:
    """The after_reload summary, by construction: every node reads a weight (stale where its
    layer moved) and the KV cache; every 1000th the workspace no span covers, every 2500th
    (from 1) the scratch freed since capture."""
    stale = sum(1 for i in range(nodes) if (i // 40) % LAYERS in MOVED_LAYERS)
    workspace = sum(1 for i in range(nodes) if i % 1000 == 0)
    scratch = sum(1 for i in range(nodes) if i % 2500 == 1)
    return {
        "graphs": 1,
        "nodes": nodes,
        "references": 2 * nodes + workspace + scratch,
        "registered": nodes - stale,
        "runtime": nodes,
        "graph": 0,
        "input": 0,
        "allowed": 0,
        "unregistered": workspace,
        "dangling": scratch,
        "stale": stale,
        "lost": 0,
    }


def big_snapshot(nodes: int = NODES) -> dict[str, Any]:
    return {
        "format": "graphcheck-snapshot",
        "version": 1,
        "producer": {"backend": "synthetic", "tool": "tests/browser/big_snapshot.py"},
        "epochs": [epoch("capture", reloaded=False), epoch("after_reload", reloaded=True)],
        "graphs": [{"id": 1, "epoch": "capture", "nodes": [node(i) for i in range(nodes)]}],
        "allow": [],
        "expect": {"epoch": "after_reload", "summary": expected_summary(nodes)},
    }


def write_big_snapshot(path: Path, nodes: int = NODES) -> None:
    path.write_text(json.dumps(big_snapshot(nodes)), encoding="utf-8")


def main() -> None:
    """``big_snapshot.py OUT [--nodes N]``: writes the snapshot to OUT."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--nodes", type=int, default=NODES)
    args = parser.parse_args()
    write_big_snapshot(args.out, args.nodes)


if __name__ == "__main__":
    main()
