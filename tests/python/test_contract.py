"""Tests of graphcheck.contract: one or more per rule of the registration contract."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import graphcheck
from contract_fakes import BadHolder, Derived, Holder, QuantMethod, SlotHolder, held_layer
from graphcheck.contract import (
    CONSTANT_BUFFERS_ATTR,
    StorageView,
    dataclass_tensors,
    held_tensors,
    is_constant_buffer,
    is_holder,
    register_constant_buffer,
    register_held_tensors,
    set_derived_buffer,
    storage_views,
)
from wrapper_tensor import TwoPartTensor

# ------------------------------------------------------- set_derived_buffer


def test_set_derived_buffer_missing_slot_says_how_to_declare() -> None:
    m = torch.nn.Linear(2, 2)
    with pytest.raises(KeyError) as err:
        set_derived_buffer(m, "scale", torch.ones(2))
    message = str(err.value)
    assert "no buffer slot 'scale'" in message
    assert "register_buffer('scale', None, persistent=False)" in message


def test_set_derived_buffer_assigns_first_then_copies_in_place() -> None:
    m = Derived()
    m.process()
    first = m.scale
    ptr = first.data_ptr()
    with torch.no_grad():
        m.lin.weight.mul_(3)
    m.process()
    assert m.scale is first
    assert m.scale.data_ptr() == ptr
    assert torch.equal(m.scale, m.lin.weight.detach().abs().amax(dim=1))
    assert "scale" not in m.state_dict()
    assert "scale" in dict(m.named_buffers())


def test_set_derived_buffer_copies_a_non_contiguous_view() -> None:
    m = Derived()
    set_derived_buffer(m, "scale", torch.zeros(4, 4))
    ptr = m.scale.data_ptr()
    source = torch.arange(16.0).reshape(4, 4).t()
    set_derived_buffer(m, "scale", source)
    assert m.scale.data_ptr() == ptr
    assert m.scale.is_contiguous()
    assert torch.equal(m.scale, source)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (torch.ones(5), "shape: expected (4,), found (5,)"),
        (torch.ones(4, dtype=torch.float64), "dtype: expected torch.float32, found torch.float64"),
        (torch.ones(4, device="meta"), "device: expected cpu, found meta"),
    ],
)
def test_set_derived_buffer_mismatch_names_what_differs(value: torch.Tensor, expected: str) -> None:
    m = Derived()
    set_derived_buffer(m, "scale", torch.zeros(4))
    before = m.scale
    with pytest.raises(ValueError) as err:
        set_derived_buffer(m, "scale", value)
    assert expected in str(err.value)
    assert m.scale is before
    assert torch.equal(m.scale, torch.zeros(4))


def test_set_derived_buffer_lists_every_difference() -> None:
    m = Derived()
    set_derived_buffer(m, "scale", torch.zeros(4))
    with pytest.raises(ValueError) as err:
        set_derived_buffer(m, "scale", torch.ones(3, dtype=torch.int8))
    assert "shape: expected (4,), found (3,)" in str(err.value)
    assert "dtype: expected torch.float32, found torch.int8" in str(err.value)


def test_set_derived_buffer_rejects_a_persistent_buffer() -> None:
    m = torch.nn.Module()
    m.register_buffer("scale", torch.zeros(2))
    with pytest.raises(ValueError, match="persistent buffer"):
        set_derived_buffer(m, "scale", torch.ones(2))
    assert torch.equal(m.scale, torch.zeros(2))


def test_set_derived_buffer_replaces_a_meta_placeholder() -> None:
    m = Derived()
    m._buffers["scale"] = torch.empty(4, device="meta")
    value = torch.ones(4)
    set_derived_buffer(m, "scale", value)
    assert m.scale.data_ptr() == value.data_ptr()


def test_set_derived_buffer_bad_arguments() -> None:
    with pytest.raises(TypeError, match="must be a torch.nn.Module, got dict"):
        set_derived_buffer({}, "scale", torch.ones(1))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="value must be a torch.Tensor, got list"):
        set_derived_buffer(Derived(), "scale", [1.0])  # type: ignore[arg-type]


# ------------------------------------------------- register_constant_buffer


def test_constant_buffer_keeps_state_dict_and_is_marked() -> None:
    m = torch.nn.Linear(3, 3)
    before = list(m.state_dict())
    table = torch.arange(3)
    register_constant_buffer(m, "perm", table)
    assert list(m.state_dict()) == before
    assert dict(m.named_buffers())["perm"] is table
    assert is_constant_buffer(m, "perm")
    assert table.weight_loader_numel == 0  # type: ignore[attr-defined]
    assert getattr(m, CONSTANT_BUFFERS_ATTR) == {"perm"}


def test_constant_buffer_mark_survives_to() -> None:
    m = torch.nn.Module()
    register_constant_buffer(m, "table", torch.ones(2))
    m.to(torch.float64)
    assert m.table.dtype == torch.float64
    assert is_constant_buffer(m, "table")


def test_is_constant_buffer_false_for_other_buffers() -> None:
    m = torch.nn.BatchNorm1d(2)
    assert not is_constant_buffer(m, "running_mean")
    assert not is_constant_buffer(m, "missing")
    register_constant_buffer(m, "table", torch.ones(2))
    del m._buffers["table"]
    assert not is_constant_buffer(m, "table")


def test_constant_buffer_bad_arguments() -> None:
    with pytest.raises(TypeError, match="tensor must be a torch.Tensor, got int"):
        register_constant_buffer(torch.nn.Module(), "x", 3)  # type: ignore[arg-type]
    with pytest.raises(KeyError, match="already exists"):
        register_constant_buffer(torch.nn.Linear(2, 2), "weight", torch.ones(2))


# ------------------------------------------------------------------ holders


def test_is_holder() -> None:
    assert is_holder(QuantMethod(torch.ones(1)))
    assert not is_holder(QuantMethod)

    class ModuleWithTensors(torch.nn.Module):
        def persistent_tensors(self) -> dict[str, torch.Tensor]:
            return {}

    assert not is_holder(ModuleWithTensors())
    assert not is_holder(torch.ones(1))


def test_held_tensors_names_none_and_nested_holders() -> None:
    inner = QuantMethod(torch.ones(2), torch.arange(2))
    outer = QuantMethod(torch.zeros(3))
    outer.kernel = inner  # type: ignore[attr-defined]
    got = outer.persistent_tensors()
    assert list(got) == ["sort_idx", "kernel_sort_idx", "kernel_perm"]
    assert got["sort_idx"] is outer.sort_idx
    assert got["kernel_perm"] is inner.perm


def test_held_tensors_recurses_into_slots_and_survives_cycles() -> None:
    a = QuantMethod(torch.ones(1))
    b = QuantMethod(torch.ones(2))
    a.peer = b  # type: ignore[attr-defined]
    b.peer = a  # type: ignore[attr-defined]
    a.slotted = SlotHolder(torch.ones(3))  # type: ignore[attr-defined]
    got = a.persistent_tensors()
    assert set(got) == {"sort_idx", "peer_sort_idx", "slotted_table"}


def test_held_tensors_bad_nested_holder_names_its_owner() -> None:
    holder = QuantMethod(torch.ones(1))
    holder.kernel = BadHolder({"w": 1})  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match=r"holder QuantMethod.kernel \(BadHolder\).*\['w'\] is int"):
        holder.persistent_tensors()


def test_held_tensors_bad_names() -> None:
    holder = QuantMethod(torch.ones(1))
    with pytest.raises(
        graphcheck.GraphcheckValueError, match="QuantMethod has no attribute 'scales'"
    ):
        held_tensors(holder, "scales")
    holder.name = "x"  # type: ignore[attr-defined]
    with pytest.raises(TypeError, match=r"QuantMethod.name is str, expected a torch.Tensor"):
        held_tensors(holder, "name")


@dataclasses.dataclass
class Strides:
    ab: torch.Tensor
    c: torch.Tensor
    label: str = "x"


@dataclasses.dataclass
class MoeParams:
    w13_scale: torch.Tensor
    strides: Strides
    bias: torch.Tensor | None = None


def test_dataclass_tensors_nested_with_prefix() -> None:
    p = MoeParams(torch.ones(2), Strides(torch.ones(1), torch.ones(3)))
    assert list(dataclass_tensors(p)) == ["w13_scale", "strides_ab", "strides_c"]
    got = dataclass_tensors(p, prefix="moe")
    assert list(got) == ["moe_w13_scale", "moe_strides_ab", "moe_strides_c"]
    assert got["moe_strides_c"] is p.strides.c
    assert dataclass_tensors(MoeParams) == {}
    assert dataclass_tensors(object()) == {}


def test_storage_views_of_views_and_dtypes() -> None:
    base = torch.zeros(4, 4)
    ptr = base.untyped_storage().data_ptr()
    assert storage_views(base) == {StorageView(ptr, 0, (4, 4), (4, 1), torch.float32)}
    assert storage_views(base[1:, 2]) == {StorageView(ptr, 6, (3,), (4,), torch.float32)}
    assert storage_views(base.t()) == {StorageView(ptr, 0, (4, 4), (1, 4), torch.float32)}
    as_int = base.view(torch.int32)
    assert storage_views(as_int) == {StorageView(ptr, 0, (4, 4), (4, 1), torch.int32)}
    assert storage_views(as_int) != storage_views(base)
    assert storage_views(base.to(torch.float16)) != storage_views(base)
    assert {v.storage_ptr for v in storage_views(torch.empty(3, device="meta"))} == {0}


def test_storage_views_through_a_wrapper_subclass() -> None:
    data = torch.ones(2, 2, dtype=torch.int8)
    scale = torch.tensor(0.5)
    wrapped = TwoPartTensor(data, scale)
    assert storage_views(wrapped) == storage_views(data) | storage_views(scale)
    assert len(storage_views(wrapped)) == 2


# ---------------------------------------------------- register_held_tensors


def test_register_held_tensors_registers_non_persistent_buffers() -> None:
    model = torch.nn.Sequential(held_layer(torch.zeros(8)), torch.nn.ReLU())
    keys = list(model.state_dict())
    paths = register_held_tensors(model)
    assert paths == ["0._held_qm_sort_idx"]
    assert model[0]._held_qm_sort_idx is model[0].qm.sort_idx
    assert list(model.state_dict()) == keys
    assert "0._held_qm_sort_idx" in dict(model.named_buffers())


def test_register_held_tensors_skips_views_already_registered() -> None:
    layer = torch.nn.Linear(4, 4)
    layer.qm = QuantMethod(layer.weight.detach(), perm=layer.weight.detach().t())
    assert register_held_tensors(layer) == ["_held_qm_perm"]
    shared = torch.ones(3)
    model = torch.nn.Sequential(held_layer(shared), held_layer(shared))
    assert register_held_tensors(model) == ["0._held_qm_sort_idx"]


def test_register_held_tensors_slots_holder_and_wrapper_subclass() -> None:
    layer = torch.nn.Linear(2, 2)
    layer.table = SlotHolder(TwoPartTensor(torch.ones(2, dtype=torch.int8), torch.tensor(1.0)))
    assert register_held_tensors(layer) == ["_held_table_table"]
    covered = TwoPartTensor(torch.ones(2, dtype=torch.int8), torch.tensor(1.0))
    layer2 = torch.nn.Linear(2, 2)
    layer2.qweight = torch.nn.Parameter(covered, requires_grad=False)
    layer2.table = SlotHolder(TwoPartTensor(covered.data_, covered.scale))
    assert register_held_tensors(layer2) == []
    layer2.table = SlotHolder(TwoPartTensor(covered.data_, torch.tensor(2.0)))
    assert register_held_tensors(layer2) == ["_held_table_table"]


def test_register_held_tensors_rerun_replaces_every_held_buffer() -> None:
    model = torch.nn.Sequential(held_layer(torch.zeros(8)), held_layer(torch.zeros(2)))
    register_held_tensors(model)
    new = torch.ones(8)
    model[0].qm.sort_idx = new
    del model[1].qm
    assert register_held_tensors(model) == ["0._held_qm_sort_idx"]
    assert model[0]._held_qm_sort_idx is new
    assert [n for n, _ in model.named_buffers()] == ["0._held_qm_sort_idx"]
    assert "_held_qm_sort_idx" not in model[1]._non_persistent_buffers_set


def test_register_held_tensors_meta_keeps_the_imported_buffer() -> None:
    layer = held_layer(torch.empty(8, device="meta"))
    imported = torch.arange(8.0)
    layer.register_buffer("_held_qm_sort_idx", imported, persistent=False)
    assert register_held_tensors(layer) == []
    assert layer._held_qm_sort_idx is imported


def test_register_held_tensors_bad_holder_names_path_and_key() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    model[0].qm = BadHolder({"sort_idx": torch.ones(1), "scales": [1.0]})
    with pytest.raises(TypeError) as err:
        register_held_tensors(model)
    assert "holder 0.qm (BadHolder)" in str(err.value)
    assert "persistent_tensors()['scales'] is list" in str(err.value)
    model[0].qm = BadHolder([torch.ones(1)])
    with pytest.raises(TypeError, match=r"0.qm \(BadHolder\).*got list"):
        register_held_tensors(model)
    model[0].qm = BadHolder({"a.b": torch.ones(1)})
    with pytest.raises(ValueError, match="key 'a.b' must be a non-empty name without"):
        register_held_tensors(model)


def test_register_held_tensors_bad_holder_changes_nothing() -> None:
    model = torch.nn.Sequential(held_layer(torch.zeros(2)), torch.nn.Linear(2, 2))
    register_held_tensors(model)
    kept = model[0]._held_qm_sort_idx
    model[0].qm.sort_idx = torch.ones(2)
    model[1].qm = BadHolder({"x": "not a tensor"})
    with pytest.raises(TypeError, match=r"holder 1.qm .*\['x'\] is str"):
        register_held_tensors(model)
    assert model[0]._held_qm_sort_idx is kept
    assert [n for n, _ in model.named_buffers()] == ["0._held_qm_sort_idx"]


def test_a_holder_tensor_without_strided_storage_changes_nothing() -> None:
    # A sparse table in a holder: torch's error came after every _held_* buffer was deleted.
    model = torch.nn.Sequential(held_layer(torch.zeros(2)), torch.nn.Linear(2, 2))
    register_held_tensors(model)
    kept = model[0]._held_qm_sort_idx
    model[1].qm = Holder(table=torch.eye(2).to_sparse())
    with pytest.raises(graphcheck.GraphcheckValueError) as err:
        register_held_tensors(model)
    assert str(err.value).startswith(
        "register_held_tensors: holder tensor 1._held_qm_table: expected a tensor with strided "
        "storage to register as a buffer, found torch.sparse_coo Tensor ("
    )
    assert str(err.value).endswith("nothing was changed")
    assert model[0]._held_qm_sort_idx is kept
    assert [n for n, _ in model.named_buffers()] == ["0._held_qm_sort_idx"]


def test_register_held_tensors_rejects_a_non_module() -> None:
    with pytest.raises(TypeError, match="model must be a torch.nn.Module, got QuantMethod"):
        register_held_tensors(QuantMethod(torch.ones(1)))  # type: ignore[arg-type]


def test_held_buffer_names_that_collide_are_an_error_naming_both() -> None:
    # Attribute "a_b" with key "c" and attribute "a" with key "b_c" both join to _held_a_b_c:
    # one would silently replace the other.
    layer = torch.nn.Linear(4, 4)
    layer.a_b = Holder(c=torch.zeros(2))
    layer.a = Holder(b_c=torch.ones(2))
    with pytest.raises(ValueError) as err:
        register_held_tensors(layer)
    message = str(err.value)
    assert "a_b.persistent_tensors()['c']" in message
    assert "a.persistent_tensors()['b_c']" in message
    assert "_held_a_b_c" in message
    assert not [n for n, _ in layer.named_buffers() if n.startswith("_held_")]


def test_held_tensors_nested_name_that_collides_is_an_error() -> None:
    # held_tensors joins a nested holder's keys as <attr>_<key>: "inner_x" from the nested
    # holder meets the holder's own "inner_x".
    class Outer:
        def __init__(self) -> None:
            self.inner_x = torch.zeros(2)
            self.inner = Holder(x=torch.ones(2))

        def persistent_tensors(self) -> dict[str, torch.Tensor]:
            return held_tensors(self, "inner_x")

    with pytest.raises(ValueError, match=r"Outer\.inner's key 'x' is named 'inner_x'"):
        Outer().persistent_tensors()
