"""Whether graphcheck's injection attached and found the graphs a smoke run made.

scripts/gpu-check.sh runs it after each injection smoke run (ran on an H200 on 2026-12-04):
``python3 check_inject_snapshots.py DIR --tag exit --graphs 1 --kernel struct_kernel``. The
injection library writes ``graphcheck-<pid>-<tag>-snapshot.json`` into its GRAPHCHECK_OUT
folder (docs/inject.md); none means it never attached (or never checked). Standard library
only: it runs under any python3. Prints one line; exit status 0 when the expectation held,
1 when it did not, 2 when no such snapshot was written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def kernels(nodes: list[dict[str, Any]]) -> list[str]:
    """Names of the kernel nodes of `nodes`, child and conditional bodies included."""
    names = []
    for node in nodes:
        if node.get("type") == "kernel":
            names.append(str(node.get("name", "")))
        if node.get("type") == "child_graph":  # its nodes are the node's own (snapshot format)
            names.extend(kernels(node.get("nodes", [])))
        for body in node.get("bodies", []):
            names.extend(kernels(body.get("nodes", [])))
    return names


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="the injection's GRAPHCHECK_OUT")
    parser.add_argument("--tag", default="exit", help="exit, launch, launch.1, ...")
    parser.add_argument("--graphs", type=int, default=1, help="graphs expected in a snapshot")
    parser.add_argument("--at-least", action="store_true", help="--graphs is a lower bound")
    parser.add_argument("--kernel", default="", help="a kernel name every graph must contain")
    args = parser.parse_args()
    files = sorted(args.folder.glob(f"graphcheck-*-{args.tag}-snapshot.json"))
    if not files:
        print(f"check_inject_snapshots: no {args.tag} snapshot in {args.folder}: not attached")
        return 2
    problems = []
    summary = []
    for path in files:
        graphs = json.loads(path.read_text()).get("graphs", [])
        names = [kernels(graph.get("nodes", [])) for graph in graphs]
        summary.append(f"{path.name}: {len(graphs)} graph(s), {sum(map(len, names))} kernel(s)")
        wrong = len(graphs) < args.graphs if args.at_least else len(graphs) != args.graphs
        if wrong:
            bound = "at least " if args.at_least else ""
            problems.append(f"{path.name} holds {len(graphs)} graphs, not {bound}{args.graphs}")
        missing = [i for i, n in enumerate(names) if not any(args.kernel in k for k in n)]
        if missing:
            problems.append(f"{path.name}: graphs {missing} have no kernel named *{args.kernel}*")
    print("check_inject_snapshots: " + "; ".join(summary + problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
