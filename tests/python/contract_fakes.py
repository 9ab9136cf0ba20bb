"""Fixtures of the contract tests (test_contract.py, test_contract_reload.py): a layer with a
derived buffer, non-module holders (plain, with __slots__, broken) and a layer that holds one."""

from __future__ import annotations

from typing import Any

import torch

from graphcheck.contract import held_tensors, set_derived_buffer


class Derived(torch.nn.Module):
    """A layer with a weight-derived scale in a declared slot."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("scale", None, persistent=False)

    def process(self) -> None:
        set_derived_buffer(self, "scale", self.lin.weight.detach().abs().amax(dim=1))


class QuantMethod:
    """A non-module holder, as vLLM's quantization methods are."""

    def __init__(self, sort_idx: torch.Tensor, perm: torch.Tensor | None = None) -> None:
        self.sort_idx = sort_idx
        self.perm = perm

    def persistent_tensors(self) -> dict[str, torch.Tensor]:
        return held_tensors(self, "sort_idx", "perm")


class Holder:
    """A holder of the tensors given by key."""

    def __init__(self, **tensors: torch.Tensor) -> None:
        self.tensors = tensors

    def persistent_tensors(self) -> dict[str, torch.Tensor]:
        return dict(self.tensors)


class SlotHolder:
    __slots__ = ("table",)

    def __init__(self, table: torch.Tensor) -> None:
        self.table = table

    def persistent_tensors(self) -> dict[str, torch.Tensor]:
        return held_tensors(self, "table")


class BadHolder:
    def __init__(self, result: Any) -> None:
        self.result = result

    def persistent_tensors(self) -> Any:
        return self.result


def held_layer(sort_idx: torch.Tensor) -> torch.nn.Module:
    layer = torch.nn.Linear(4, 4)
    layer.qm = QuantMethod(sort_idx)
    return layer
