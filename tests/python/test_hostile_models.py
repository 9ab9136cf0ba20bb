"""Models and settings a hostile tester brought (2026-12-07): each failed with a torch error,
an AttributeError or a half-written folder; each is now handled or refused by name."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch

import graphcheck
from graphcheck.testing import check_graph_replay


class Opaque(torch.Tensor):
    """A wrapper subclass that does not flatten: a tensor whose storage has no data."""

    inner: torch.Tensor

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> Opaque:
        made = torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype)
        made.inner = inner
        return made  # type: ignore[no-any-return]

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        def unwrap(a: Any) -> Any:
            return a.inner if isinstance(a, Opaque) else a

        tree = torch.utils._pytree.tree_map
        return func(*tree(unwrap, args), **tree(unwrap, kwargs or {}))


OPAQUE_GLOBAL = Opaque(torch.ones(4))  # a global of the model's module, as a table may be


class WithGlobal(torch.nn.Linear):
    """A model defined in this module: its module's globals are read for labels."""


@pytest.mark.parametrize(
    "buffer", [Opaque(torch.ones(4)), torch._efficientzerotensor(4)], ids=["wrapper", "zero"]
)
def test_a_buffer_without_readable_storage_is_no_span(buffer: torch.Tensor) -> None:
    model = torch.nn.Linear(4, 4)
    model.register_buffer("odd", buffer)
    capture = graphcheck.capture(model, torch.ones(2, 4))
    report = capture.check()
    assert report.summary["registered"] > 0 and report.ok
    spans = {s.name for e in capture.snapshot.epochs for s in e.spans}
    assert "weight" in spans and "odd" not in spans


def test_a_storage_less_global_of_the_models_module_is_skipped() -> None:
    assert graphcheck.capture(WithGlobal(4, 4), torch.ones(2, 4)).check().ok


def test_a_strided_nested_tensor_is_a_census_entry_without_a_shape() -> None:
    model = torch.nn.Linear(4, 4)
    model.ragged = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])
    (entry,) = graphcheck.census(model).entries
    assert entry.path == "ragged" and entry.shape == () and entry.nbytes >= 20
    graphcheck.capture(model, torch.ones(2, 4)).check()


def test_the_twin_watches_a_scripted_model() -> None:
    model = torch.jit.script(torch.nn.Linear(4, 4))
    watch = graphcheck.watch(cuda_hooks=False, allocator_history=False)
    try:
        watch.check_on_capture = False
        watch.capture(model, torch.ones(2, 4))
        result = watch.check_pending()
        assert result is not None and result.report.summary["registered"] > 0
    finally:
        watch.close()


def test_an_out_dir_that_is_not_text_is_refused_by_name(tmp_path: Path) -> None:
    folder = os.fsdecode(os.fsencode(str(tmp_path)) + b"/r\xff")
    with pytest.raises(graphcheck.GraphcheckValueError, match=r"out_dir .*byte 0xff"):
        graphcheck.watch(cuda_hooks=False, allocator_history=False, out_dir=folder)
    with pytest.raises(graphcheck.GraphcheckTypeError, match="out_dir: expected a str"):
        graphcheck.watch(cuda_hooks=False, allocator_history=False, out_dir=5)  # type: ignore[arg-type]
    assert not any(tmp_path.iterdir())


def test_a_state_dict_with_other_values_than_tensors_is_refused_by_key() -> None:
    # A dynamically quantized Linear: its state_dict holds a dtype beside its tensors.
    with pytest.raises(graphcheck.GraphcheckError, match="unexpected keys"):
        check_graph_replay(
            lambda: torch.ao.nn.quantized.dynamic.Linear(4, 4), lambda m: torch.ones(2, 4)
        )


def test_a_name_that_is_not_text_is_named_by_its_escape() -> None:
    # A module and an attribute named from bytes that are not UTF-8 (lone surrogates): the
    # capture failed with pybind11's "incompatible function arguments" and every parameter.
    inner = torch.nn.Sequential()
    inner.add_module("lay\udcffer", torch.nn.Linear(8, 8))
    setattr(inner[0], "sc\udcffale", torch.ones(8))

    class Scaled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            scale: torch.Tensor = getattr(self.inner[0], "sc\udcffale")
            return self.inner(x) * scale

    report = graphcheck.capture(Scaled(), torch.ones(2, 8)).check()
    assert report.summary["registered"] == 3
    assert [f.owner for f in report.findings] == ["inner.lay\\udcffer.sc\\udcffale"]


def test_a_census_depth_that_is_no_int_is_refused_by_type() -> None:
    for depth in ("5", 1.5, True):
        with pytest.raises(graphcheck.GraphcheckTypeError, match="max_depth must be an int"):
            graphcheck.census(torch.nn.Linear(2, 2), max_depth=depth)  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["a.b", "", "weight"])
def test_a_bad_constant_buffer_name_is_refused_by_this_function(name: str) -> None:
    from graphcheck.contract import register_constant_buffer

    layer = torch.nn.Linear(2, 2)
    with pytest.raises(graphcheck.GraphcheckKeyError) as err:
        register_constant_buffer(layer, name, torch.ones(2))
    assert str(err.value).startswith(f"register_constant_buffer(Linear, {name!r}): ")
    assert [n for n, _ in layer.named_buffers()] == []


def test_a_forward_argument_that_holds_itself_is_read_once() -> None:
    # A list that holds itself, and nesting past Python's recursion limit: a RecursionError
    # before the capture's window opened.
    x = torch.ones(1, 4)
    cyclic: list[Any] = [x]
    cyclic.append(cyclic)
    deep: Any = torch.ones(4)
    for _ in range(5000):
        deep = [deep]

    class TakesAnything(torch.nn.Linear):
        def forward(self, x: torch.Tensor, *extra: Any) -> torch.Tensor:
            return super().forward(x)

    model = TakesAnything(4, 4)
    capture = graphcheck.capture(model, x, cyclic, deep)
    report = capture.check()
    assert report.findings == []
    inputs = [r for r in capture.snapshot.epochs[0].spans if r.kind == "input"]
    assert len({(r.begin, r.end) for r in inputs}) == 2  # x (three paths to it) and deep's leaf


def test_an_attribute_keyed_by_no_str_is_named_as_an_item() -> None:
    # vars(module)[1] = tensor: the census walk failed with "can only concatenate str".
    model = torch.nn.Sequential(torch.nn.Linear(4, 4))
    vars(model)[1] = torch.ones(3)
    vars(model[0])[("a", 2)] = torch.ones(5)
    assert sorted(e.path for e in graphcheck.census(model).entries) == ["0[('a', 2)]", "[1]"]
