"""Kernels the dispatcher never sees are judged by what they read (issue 29 §1). NOT YET RUN ON
A GPU: written on a machine without one (docs/gpu-check.md).

Run by scripts/gpu-check.sh: ``python tests/gpu/watch_triton_smoke.py --out DIR``. Under
:func:`graphcheck.watch`, with the model added:

- a Triton kernel inside ``torch.cuda.graph`` reads a registered buffer, a plain attribute the
  caching allocator put right after it (its first address the buffer's end: the first GPU run
  took such a pointer for the buffer's end) and a plain attribute in a segment of its own;
- a ``torch.compile``d forward (inductor's Triton kernels) captured in ``torch.cuda.graph``
  reads a plain attribute and a registered parameter.

Expected: each plain attribute is ``unregistered`` with its attribute path as the owner, and
the registered buffer and parameter have no finding. Whether the allocator really packed the
neighbour is recorded (``packed``), not required: the check holds either way.

Writes ``DIR/triton/`` (the watch's files) and ``DIR/watch-triton-smoke.json``; prints one
line. Exit status 0 when the expectations held, 1 otherwise, 0 with ``SKIP`` without a CUDA
device or without Triton (scripts/gpu-check.sh calls a skip a failure on a GPU machine).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch
from smoke_args import out_dir_or_skip

ELEMENTS = 1024  # 4 KiB of float32: a multiple of the allocator's 512-byte rounding
# 16 MiB: past the caching allocator's 10 MiB, a segment of exactly its own size (between 1 and
# 10 MiB it would share a 20 MiB segment with later large blocks).
SEGMENT_ELEMENTS = 4 << 20


def triton_kernel() -> Any:
    import triton
    import triton.language as tl

    @triton.jit  # type: ignore[misc]
    def fused(x_ptr, scale_ptr, packed_ptr, held_ptr, out_ptr, n, BLOCK: tl.constexpr):  # noqa: ANN001, ANN202
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        scale = tl.load(scale_ptr + offsets, mask=mask)
        packed = tl.load(packed_ptr + offsets, mask=mask)
        held = tl.load(held_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, x * scale + packed + held, mask=mask)

    return fused


class Dequant(torch.nn.Module):
    """A registered buffer, a packed weight right after it, a table in its own segment."""

    def __init__(self, kernel: Any) -> None:
        super().__init__()
        torch.cuda.empty_cache()
        # One freed block split in two: the allocator puts the second tensor at the first's end.
        spare = torch.empty(2 * ELEMENTS, device="cuda")
        del spare
        self.register_buffer("scale", torch.rand(ELEMENTS, device="cuda"))
        self.packed = torch.rand(ELEMENTS, device="cuda")  # a plain attribute
        self.held = torch.rand(SEGMENT_ELEMENTS, device="cuda")  # a plain attribute
        self.kernel = kernel

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        self.kernel[(ELEMENTS // 256,)](
            x, self.scale, self.packed, self.held, out, ELEMENTS, BLOCK=256
        )
        return out


class Compiled(torch.nn.Module):
    """A parameter and a plain attribute, read by inductor's generated Triton kernel."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(ELEMENTS, device="cuda"))
        self.bias_table = torch.rand(ELEMENTS, device="cuda")  # a plain attribute

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * self.weight + self.bias_table)


def owners(result: Any) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for f in result.report.findings:
        found.setdefault(f.verdict, set()).add(f.owner)
    return found


def capture(watch: Any, model: torch.nn.Module, forward: Any, x: torch.Tensor) -> Any:
    """Warm-up (compilation, autotuning) off the capture, then one torch.cuda.graph capture."""
    watch.add_model(model)
    with torch.no_grad():
        for _ in range(3):
            forward(x)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        forward(x)
    graph.replay()
    torch.cuda.synchronize()
    return watch.last, graph


def main() -> int:
    out = out_dir_or_skip("watch_triton_smoke", __doc__ or "")
    if out is None:
        return 0
    try:
        kernel = triton_kernel()
    except ImportError as error:
        print(f"watch_triton_smoke: SKIP (no Triton: {error})")
        return 0
    import graphcheck

    problems: list[str] = []
    summary: dict[str, Any] = {"torch": torch.__version__, "device": torch.cuda.get_device_name()}
    x = torch.rand(ELEMENTS, device="cuda")

    watch = graphcheck.watch(out_dir=out / "triton")
    watch.declare_input("x", x)
    dequant = Dequant(kernel)
    summary["packed"] = dequant.packed.data_ptr() == dequant.scale.data_ptr() + 4 * ELEMENTS
    first, graph = capture(watch, dequant, dequant, x)
    if first is None:
        problems.append(f"the Triton capture was not recorded ({watch.capture_hooks})")
    else:
        summary["triton"] = {"reader": first.readers, "findings": sorted(map(list, _pairs(first)))}
        found = owners(first)
        if found.get("unregistered", set()) != {"packed", "held"}:
            problems.append(f"Triton kernel: findings {found}, expected packed and held")

    watch.close()
    watch = graphcheck.watch(out_dir=out / "compile")
    watch.declare_input("x", x)
    compiled_model = Compiled()
    compiled = torch.compile(compiled_model)
    second, second_graph = capture(watch, compiled_model, compiled, x)
    if second is None:
        problems.append("the compiled capture was not recorded")
    else:
        summary["compile"] = {"findings": sorted(map(list, _pairs(second)))}
        found = owners(second)
        if found.get("unregistered", set()) != {"bias_table"} or set(found) != {"unregistered"}:
            problems.append(f"compiled forward: findings {found}, expected bias_table only")
    summary["problems"] = problems
    out.mkdir(parents=True, exist_ok=True)
    (out / "watch-triton-smoke.json").write_text(json.dumps(summary, indent=2))
    verdict = "ok" if not problems else "FAIL " + "; ".join(problems)
    print(f"watch_triton_smoke: {verdict}; packed neighbour: {summary['packed']}")
    watch.close()
    del graph, second_graph
    return 0 if not problems else 1


def _pairs(result: Any) -> set[tuple[str, str]]:
    return {(f.verdict, f.owner) for f in result.report.findings}


if __name__ == "__main__":
    sys.exit(main())
