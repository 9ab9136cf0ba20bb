"""A forward with a collective, captured and replayed on two gloo ranks (spawned processes).

Lives in its own module so that ``spawn`` can import it in the ranks (pytest's importlib mode
gives test modules names a child process cannot import).
"""

from __future__ import annotations

from typing import Any

import torch

import graphcheck


class _AllReduced(torch.nn.Module):
    """A tensor-parallel layer's shape: a local matmul, a sum over ranks, then more."""

    def __init__(self, rank: int) -> None:
        super().__init__()
        torch.manual_seed(rank)
        self.proj = torch.nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x)
        torch.distributed.all_reduce(y)
        return torch.relu(y) * 2


def replay_over_ranks(rank: int, store: str, results: Any) -> None:
    torch.distributed.init_process_group(
        "gloo", init_method=f"file://{store}", rank=rank, world_size=2
    )
    try:
        model = _AllReduced(rank)
        x = torch.randn(256, 64, generator=torch.Generator().manual_seed(7))
        cap = graphcheck.capture(model, x)
        ops = cap.ops
        replayed = [cap.replay().clone() for _ in range(3)]  # both ranks replay in step
        with torch.no_grad():
            eager = model(x)
        results.put((rank, "c10d::allreduce_" in ops, all(torch.equal(r, eager) for r in replayed)))
    finally:
        torch.distributed.destroy_process_group()
