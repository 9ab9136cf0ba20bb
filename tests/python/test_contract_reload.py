"""Tests of graphcheck.contract's reload_in_place: a reload keeps every address and restores
what a process_weights hook rebinds (the contract's reload rule)."""

from __future__ import annotations

import pytest
import torch

from contract_fakes import Derived, QuantMethod, held_layer
from graphcheck import census
from graphcheck.contract import (
    Rebind,
    register_constant_buffer,
    register_held_tensors,
    reload_in_place,
)

# ---------------------------------------------------------- reload_in_place


class Net(torch.nn.Module):
    """Two derived layers, a constant and a holder: the whole contract."""

    def __init__(self) -> None:
        super().__init__()
        self.a = Derived()
        self.b = Derived()
        register_constant_buffer(self, "perm", torch.arange(4))
        self.qm = QuantMethod(torch.zeros(4))


def process(module: torch.nn.Module) -> None:
    if isinstance(module, Derived):
        module.process()


def checkpoint(model: torch.nn.Module, value: float) -> dict[str, torch.Tensor]:
    return {k: torch.full_like(v, value) for k, v in model.state_dict().items()}


def addresses(model: torch.nn.Module) -> dict[str, int]:
    named = [*model.named_parameters(), *model.named_buffers()]
    return {n: t.data_ptr() for n, t in named}


def test_reload_in_place_keeps_addresses_and_refreshes_derived_state() -> None:
    model = Net()
    for m in model.modules():
        process(m)
    register_held_tensors(model)
    before = addresses(model)
    rebinds = reload_in_place(model, checkpoint(model, 2.0), process)
    assert rebinds == []
    assert addresses(model) == before
    assert torch.equal(model.a.lin.weight, torch.full((4, 4), 2.0))
    assert torch.equal(model.b.scale, torch.full((4,), 2.0))
    assert torch.equal(model.perm, torch.arange(4))
    assert census(model).entries == ()
    assert {"a.scale", "b.scale", "_held_qm_sort_idx"} <= set(dict(model.named_buffers()))


def test_reload_in_place_restores_a_rebound_buffer() -> None:
    model = Derived()
    model.process()
    old = model.scale

    def rebinding(module: torch.nn.Module) -> None:
        if isinstance(module, Derived):
            module.scale = module.lin.weight.detach().abs().amax(dim=1)

    rebinds = reload_in_place(model, checkpoint(model, -3.0), rebinding)
    assert rebinds == [Rebind("scale", "buffer", True, rebinds[0].detail)]
    assert "set_derived_buffer" in rebinds[0].detail
    assert model.scale is old
    assert torch.equal(old, torch.full((4,), 3.0))


def test_reload_in_place_restores_a_rebound_parameter() -> None:
    model = Derived()
    old = model.lin.weight

    def replace(module: torch.nn.Module) -> None:
        if isinstance(module, torch.nn.Linear):
            module.weight = torch.nn.Parameter(module.weight.detach() * 2)

    rebinds = reload_in_place(model, checkpoint(model, 1.5), replace)
    assert [(r.path, r.kind, r.restored) for r in rebinds] == [("lin.weight", "parameter", True)]
    assert model.lin.weight is old
    assert torch.equal(old, torch.full((4, 4), 3.0))


def test_reload_in_place_reports_a_rebind_it_cannot_restore() -> None:
    model = Derived()
    model.process()

    def reshape(module: torch.nn.Module) -> None:
        if isinstance(module, Derived):
            module._buffers["scale"] = torch.ones(8)

    rebinds = reload_in_place(model, checkpoint(model, 1.0), reshape)
    assert [(r.path, r.restored) for r in rebinds] == [("scale", False)]
    assert "shape: expected (4,), found (8,)" in rebinds[0].detail
    assert model.scale.shape == (8,)


def test_reload_in_place_restores_a_rebound_holder_tensor() -> None:
    model = held_layer(torch.zeros(4))
    register_held_tensors(model)
    old = model.qm.sort_idx

    def rebuild(module: torch.nn.Module) -> None:
        module.qm.sort_idx = torch.full((4,), 7.0)

    rebinds = reload_in_place(model, checkpoint(model, 1.0), rebuild)
    assert [(r.path, r.kind, r.restored) for r in rebinds] == [("qm.sort_idx", "held", True)]
    assert model.qm.sort_idx is old
    assert model._held_qm_sort_idx is old
    assert torch.equal(old, torch.full((4,), 7.0))
    assert census(model).entries == ()


def test_reload_in_place_reports_a_rebound_holder_tensor_that_shares_a_parameter() -> None:
    # The holder keeps the layer's weight itself: register_held_tensors registers no _held_
    # buffer for it (the parameter covers it). Processing then points the holder at a new
    # tensor (a repacked weight): captured graphs read the parameter, the holder the new one.
    model = torch.nn.Linear(4, 4)
    model.qm = QuantMethod(model.weight.detach())
    assert register_held_tensors(model) == []
    weight = model.weight

    def repack(module: torch.nn.Module) -> None:
        if isinstance(module, torch.nn.Linear):
            module.qm.sort_idx = module.weight.detach() * 2

    rebinds = reload_in_place(model, checkpoint(model, 1.5), repack)
    assert [(r.path, r.kind, r.restored) for r in rebinds] == [("qm.sort_idx", "held", False)]
    assert "shared with a registered parameter or buffer" in rebinds[0].detail
    # Not copied back: the parameter keeps the checkpoint's values, the holder the new tensor,
    # which the census now finds.
    assert model.weight is weight
    assert torch.equal(weight, torch.full((4, 4), 1.5))
    assert torch.equal(model.qm.sort_idx, torch.full((4, 4), 3.0))
    assert [e.path for e in census(model).entries] == ["qm.sort_idx"]
    # A processing that leaves the holder on the parameter reports nothing.
    model.qm.sort_idx = model.weight.detach()
    register_held_tensors(model)
    assert reload_in_place(model, checkpoint(model, 2.0), lambda m: None) == []


def test_reload_in_place_post_order_and_tied_weights() -> None:
    model = torch.nn.Sequential(torch.nn.Embedding(3, 2), torch.nn.Linear(2, 3, bias=False))
    model[1].weight = model[0].weight
    order: list[str] = []
    weights = {"1.weight": torch.full((3, 2), 4.0)}
    assert reload_in_place(model, weights, lambda m: order.append(type(m).__name__)) == []
    assert order == ["Embedding", "Linear", "Sequential"]
    assert torch.equal(model[0].weight, torch.full((3, 2), 4.0))


def test_reload_in_place_bad_weights_copy_nothing() -> None:
    model = Net()
    good = checkpoint(model, 5.0)
    with pytest.raises(KeyError, match=r"missing keys \['b.lin.bias'\]"):
        reload_in_place(model, {k: v for k, v in good.items() if k != "b.lin.bias"}, process)
    with pytest.raises(KeyError, match=r"unexpected keys \['perm'\]"):
        reload_in_place(model, {**good, "perm": torch.zeros(4)}, process)
    bad_shape = {**good, "b.lin.weight": torch.ones(2, 4)}
    with pytest.raises(ValueError, match=r"'b.lin.weight'\] has shape \(2, 4\), expected \(4, 4\)"):
        reload_in_place(model, bad_shape, process)
    with pytest.raises(TypeError, match=r"weights\['a.lin.bias'\] is list"):
        reload_in_place(model, {**good, "a.lin.bias": [1.0]}, process)
    with pytest.raises(TypeError, match="weights must be a mapping"):
        reload_in_place(model, [("a.lin.bias", torch.ones(4))], process)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got dict"):
        reload_in_place(good, good, process)  # type: ignore[arg-type]
    assert not torch.equal(model.a.lin.weight, torch.full((4, 4), 5.0))


def test_reload_in_place_non_strict_keeps_missing_values() -> None:
    model = Derived()
    bias = model.lin.bias.detach().clone()
    assert reload_in_place(model, {"lin.weight": torch.ones(4, 4)}, None, strict=False) == []
    assert torch.equal(model.lin.weight, torch.ones(4, 4))
    assert torch.equal(model.lin.bias, bias)


def test_reload_in_place_converts_dtype() -> None:
    model = torch.nn.Linear(2, 2)
    ptr = model.weight.data_ptr()
    weights = {"weight": torch.ones(2, 2, dtype=torch.bfloat16), "bias": torch.ones(2)}
    reload_in_place(model, weights, None)
    assert model.weight.dtype == torch.float32
    assert model.weight.data_ptr() == ptr
    assert torch.equal(model.weight, torch.ones(2, 2))
