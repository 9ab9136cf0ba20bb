"""CUPTI capture overhead on the reference model (issue 18 section 5, issue 29 section 3).

scripts/gpu-check.sh runs it in pairs of processes, interleaved (plain, then under
``CUDA_INJECTION64_PATH=libgraphcheck_inject.so``: the CUPTI backend attached to the whole
process, ``GRAPHCHECK_CHECK=exit``; 5 pairs, issue 32 section 3), then
``--plain ... --graphcheck ...`` compares them (min, median and spread of each side). Each run
builds the model on the GPU, captures one forward with ``torch.cuda.graph`` ``--captures`` times
(capture end includes the instantiate, which is where graphcheck reads the graph) and replays the
last graph ``--replays`` times. Writes one JSON file per run; prints one line.

The model (``--model``): ``reference`` is the Python reference model (``graphcheck.reference``,
registered variant), which needs the graphcheck package under this Python; ``decoder`` is a
decoder of the same structure written here in plain torch; ``auto`` (default) takes the first
that imports. Every run records which one it measured (``model``), and the comparison refuses
to put two different models side by side (the first GPU run, 2026-12-04, compared the decoder
with the reference model because the package became importable between its two runs): pass the
same ``--model`` to every run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

HIDDEN, LAYERS, HEAD_DIM, VOCAB, POSITIONS, TOKENS = 1024, 8, 64, 4096, 256, 16


class Decoder(torch.nn.Module):
    """The reference model's structure in plain torch (float weights, no quantization)."""

    def __init__(self) -> None:
        super().__init__()
        lin = torch.nn.Linear
        self.embed = torch.nn.Embedding(VOCAB, HIDDEN)
        self.layers = torch.nn.ModuleList(
            torch.nn.ModuleDict(
                {
                    "qkv": lin(HIDDEN, 3 * HIDDEN, bias=False),
                    "o": lin(HIDDEN, HIDDEN, bias=False),
                    "gate_up": lin(HIDDEN, 4 * HIDDEN, bias=False),
                    "down": lin(2 * HIDDEN, HIDDEN, bias=False),
                }
            )
            for _ in range(LAYERS)
        )
        self.head = lin(HIDDEN, VOCAB, bias=False)
        inv = 1.0 / 10000 ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM)
        angles = torch.outer(torch.arange(POSITIONS).float(), inv)
        self.register_buffer("cos_sin", torch.cat([angles.cos(), angles.sin()], -1))

    @staticmethod
    def norm(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    def rope(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        half = HEAD_DIM // 2
        cs = self.cos_sin.index_select(0, positions).unsqueeze(1)
        x1, x2 = x[..., :half], x[..., half:]
        cos, sin = cs[..., :half], cs[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids)
        heads = HIDDEN // HEAD_DIM
        for layer in self.layers:
            q, k, v = layer["qkv"](self.norm(x)).view(-1, 3, heads, HEAD_DIM).unbind(1)
            q, k = self.rope(q, positions), self.rope(k, positions)
            a = F.scaled_dot_product_attention(
                q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True
            )
            x = x + layer["o"](a.transpose(0, 1).reshape(-1, HIDDEN))
            gate, up = layer["gate_up"](self.norm(x)).chunk(2, -1)
            x = x + layer["down"](F.silu(gate) * up)
        return self.head(self.norm(x))


def build(which: str) -> tuple[torch.nn.Module, dict[str, torch.Tensor], str]:
    """The model on the GPU, its static inputs, and which model it is (``decoder``,
    ``reference``)."""
    try:
        if which == "decoder":
            raise ImportError("--model decoder")
        from graphcheck.reference import ReferenceConfig, build_reference_model, reference_inputs
    except Exception:  # any import failure means: not this Python
        if which == "reference":
            raise
        torch.manual_seed(0)
        model = Decoder().cuda().eval()
        ids = torch.arange(TOKENS, device="cuda").mul(13).remainder(VOCAB)
        static = {"input_ids": ids, "positions": torch.arange(TOKENS, device="cuda")}
        return model, static, "decoder"
    # Every tensor on the GPU, the checkpoint from the CPU (the registered variant).
    config = ReferenceConfig(
        hidden=HIDDEN, layers=LAYERS, head_dim=HEAD_DIM, vocab=VOCAB, max_positions=POSITIONS
    )
    model = build_reference_model(config, 0, device="cuda")
    static = {k: v.cuda() for k, v in reference_inputs(model, TOKENS).items()}
    return model.eval(), static, "reference"


def measure(which: str, captures: int, replays: int) -> dict[str, Any]:
    model, static, name = build(which)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(3):  # warm-up off the capture: cuBLAS handles, workspaces
            model(**static)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    capture_ms = []
    # Every graph kept, as an engine keeps one per batch size: a graph dropped between two
    # captures was checked at its destroy (the injection writes its snapshot and report
    # there), work the plain runs never did right before their next capture (a review's
    # finding). Destroyed at exit, they leave the destroy snapshots that show the injection
    # attached (scripts/gpu-check.sh checks each pair's).
    graphs: list[torch.cuda.CUDAGraph] = []
    for _ in range(captures):
        graph = torch.cuda.CUDAGraph()
        graphs.append(graph)
        start = time.perf_counter()
        with torch.cuda.graph(graph), torch.no_grad():
            model(**static)
        torch.cuda.synchronize()
        capture_ms.append((time.perf_counter() - start) * 1e3)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    replay_us = []
    for _ in range(replays):
        start = time.perf_counter()
        graph.replay()
        torch.cuda.synchronize()
        replay_us.append((time.perf_counter() - start) * 1e6)
    start = time.perf_counter()
    for _ in range(replays):
        graph.replay()
    torch.cuda.synchronize()
    queued_us = (time.perf_counter() - start) * 1e6 / replays
    injection = os.environ.get("CUDA_INJECTION64_PATH", "")
    globals()["kept_graphs"] = graphs  # alive until exit: the injection's exit check sees them
    return {
        "mode": "graphcheck" if "graphcheck" in injection else "plain",
        "injection": injection,
        # What the process loaded, not what it was asked to (a run whose injection was not
        # loaded measured a plain capture). Loaded is not subscribed: an injection that
        # switched itself off stays mapped, so the check also asks for its destroy snapshots.
        "attached": _injection_loaded(),
        "model": name,
        "tokens": TOKENS,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(),
        "capture_ms": capture_ms,
        # The first capture also pays one-time costs (the graph pool, CUPTI's first reads).
        "capture_ms_median_after_first": statistics.median(capture_ms[1:] or capture_ms),
        "replay_us_median": statistics.median(replay_us),
        "replay_us_queued": queued_us,
    }


def _injection_loaded() -> bool:
    try:
        return "libgraphcheck_inject" in Path("/proc/self/maps").read_text()
    except OSError:
        return False


#: Fewer whole pairs than this are no comparison (issue 29 asks for at least 3, issue 32 for 5:
#: the check runs 5, and names the pairs a budget or a crash cut short).
MIN_PAIRS = 3


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "min": min(values),
        "median": statistics.median(values),
        "spread": max(values) - min(values),
    }


def compare(plain: list[dict[str, Any]], checked: list[dict[str, Any]]) -> dict[str, Any]:
    """The runs side by side: min and median over runs of each run's median, and ratios.

    ``refused`` (and no ratio) when the runs measured different models, token counts or
    devices, when a "graphcheck" run was not injected or its injection did not attach, or
    when the pairs are unequal or fewer than :data:`MIN_PAIRS`.
    """
    runs = plain + checked
    identity = {(r["model"], r["tokens"], r["device"]) for r in runs}
    refused = ""
    if len(identity) != 1:
        refused = f"the runs measured different things: {sorted(identity)}"
    elif len(plain) != len(checked) or len(plain) < MIN_PAIRS:
        refused = (
            f"unequal or too few pairs: {len(plain)} plain, {len(checked)} with graphcheck "
            f"(at least {MIN_PAIRS} whole pairs)"
        )
    elif {r["mode"] for r in plain} != {"plain"} or {r["mode"] for r in checked} != {"graphcheck"}:
        refused = "a plain run was injected, or a graphcheck run was not"
    elif not all(r.get("attached", True) for r in checked) or any(
        r.get("attached", False) for r in plain
    ):
        refused = "a graphcheck run's injection did not attach (or a plain run's did)"
    result: dict[str, Any] = {"plain": plain, "graphcheck": checked, "refused": refused}
    if refused:
        return result
    result["model"] = runs[0]["model"]
    result["pairs"] = len(plain)
    for key in ("capture_ms_median_after_first", "replay_us_median", "replay_us_queued"):
        p = _stats([r[key] for r in plain])
        c = _stats([r[key] for r in checked])
        result[key] = {"plain": p, "graphcheck": c}
        result.setdefault("ratio", {})[key] = {
            stat: c[stat] / p[stat] if p[stat] else None for stat in ("min", "median")
        }
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON file to write")
    parser.add_argument("--model", choices=("auto", "decoder", "reference"), default="auto")
    parser.add_argument("--captures", type=int, default=5)
    parser.add_argument("--replays", type=int, default=200)
    parser.add_argument("--plain", type=Path, nargs="*", default=[], help="plain runs' JSON")
    parser.add_argument("--graphcheck", type=Path, nargs="*", default=[], help="injected runs")
    args = parser.parse_args()
    status = 0
    if args.plain or args.graphcheck:
        try:
            plain = [json.loads(path.read_text()) for path in args.plain]
            checked = [json.loads(path.read_text()) for path in args.graphcheck]
            result = compare(plain, checked)
        except (OSError, ValueError, KeyError) as exc:  # a run's file missing or cut short
            result = {"refused": f"a run's JSON cannot be read: {exc}"}
        if result["refused"]:
            print(f"cupti_overhead: REFUSED to compare: {result['refused']}")
            status = 1
        else:
            cap, rep = result["capture_ms_median_after_first"], result["replay_us_median"]
            ratio = result["ratio"]["capture_ms_median_after_first"]
            print(
                f"cupti_overhead: {result['model']}, {result['pairs']} interleaved pairs: capture"
                f" min {cap['plain']['min']:.2f} / median {cap['plain']['median']:.2f} ms plain,"
                f" min {cap['graphcheck']['min']:.2f} / median"
                f" {cap['graphcheck']['median']:.2f} ms with graphcheck (x{ratio['min']:.2f} /"
                f" x{ratio['median']:.2f}); replay median {rep['plain']['median']:.1f} us plain,"
                f" {rep['graphcheck']['median']:.1f} us with graphcheck"
            )
    elif not torch.cuda.is_available():
        print("cupti_overhead: SKIP (no CUDA device)")
        return 0
    else:
        result = measure(args.model, args.captures, args.replays)
        capture = result["capture_ms_median_after_first"]
        print(
            f"cupti_overhead {result['mode']}: capture {capture:.2f} ms, replay"
            f" {result['replay_us_median']:.1f} us ({result['model']})"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    return status


if __name__ == "__main__":
    sys.exit(main())
