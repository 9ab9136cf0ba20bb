"""Tests of graphcheck.census(): path grammar, coverage, exemptions, allowlist, bad input."""

from __future__ import annotations

import collections
import dataclasses
import functools
import re
import types
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch

from graphcheck import RUNTIME_STATE_ATTRS, Census, _walk, census
from graphcheck.contract import held_tensors, register_held_tensors
from wrapper_tensor import TwoPartTensor

GLOBAL_TABLE = torch.ones(5)


def paths(result: Census) -> list[str]:
    return [e.path for e in result.entries]


class Holder:
    def __init__(self, sort_idx: torch.Tensor) -> None:
        self.sort_idx = sort_idx

    def persistent_tensors(self) -> dict[str, torch.Tensor]:
        return held_tensors(self, "sort_idx")


# ------------------------------------------------------------- path grammar


@dataclasses.dataclass
class Params:
    scale: torch.Tensor


class Pair(NamedTuple):
    first: torch.Tensor
    second: int


class Slotted:
    __slots__ = ("cache_table", "unset")

    def __init__(self, t: torch.Tensor) -> None:
        self.cache_table = t


def test_path_grammar() -> None:
    m = torch.nn.Module()
    m.lin = torch.nn.Linear(2, 2)
    m.lin.weight.absmax = torch.ones(2)
    bias = torch.ones(3)
    m.act = lambda x: x + bias
    m.fn = functools.partial(torch.add, torch.zeros(2), alpha=torch.ones(1))
    m.experts = [torch.nn.Linear(2, 2, bias=False)]
    m.tables = {"rope": torch.ones(4), 7: torch.ones(6)}
    m.params = Params(torch.ones(7))
    m.pair = Pair(torch.ones(8), 1)
    m.slotted = Slotted(torch.ones(9))
    m.seq = (None, [torch.ones(10)])
    m.dq = collections.deque([torch.ones(11)])

    # A tensor held by a default argument is exactly what the census must see.
    def with_default(
        x: torch.Tensor,
        w: torch.Tensor = torch.ones(12),  # noqa: B008
    ) -> torch.Tensor:
        return x * w

    m.default = with_default
    assert paths(census(m)) == [
        "lin.weight.absmax",
        "act.bias",
        "fn.args[0]",
        "fn.keywords['alpha']",
        "experts[0].weight",
        "tables['rope']",
        "tables[7]",
        "params.scale",
        "pair.first",
        "slotted.cache_table",
        "seq[1][0]",
        "dq[0]",
        "default.__defaults__[0]",
    ]


def test_nested_module_paths_and_bound_methods() -> None:
    class Inner(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cache = torch.ones(2)

        def run(self) -> torch.Tensor:
            return self.cache

    outer = torch.nn.Sequential(torch.nn.Sequential(Inner()))
    outer.hook = Inner().run
    assert paths(census(outer)) == ["0.0.cache", "hook.__self__.cache"]


def test_forward_hook_closure_is_walked() -> None:
    lin = torch.nn.Linear(2, 2)
    scale = torch.ones(2)
    lin.register_forward_hook(lambda mod, args, out: out * scale)
    (entry,) = census(lin).entries
    assert entry.path.startswith("_forward_hooks[")
    assert entry.path.endswith("].scale")


# ---------------------------------------------------------------- coverage


@pytest.fixture(params=["use-count shortcut", "full scan"])
def scan(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs a test with and without torch's storage use count (a private shortcut)."""
    if request.param == "full scan":
        monkeypatch.setattr(_walk, "_storage_use_count", None)


@pytest.mark.usefixtures("scan")
def test_registered_aliases_views_and_tied_weights_are_not_findings() -> None:
    m = torch.nn.Module()
    m.emb = torch.nn.Embedding(4, 4)
    m.head = torch.nn.Linear(4, 4, bias=False)
    m.head.weight = m.emb.weight
    m.register_buffer("table", torch.arange(8.0))
    m.alias = m.emb.weight
    m.transposed = m.emb.weight.t()
    m.row = m.emb.weight[2]
    m.bits = m.emb.weight.view(torch.int32)
    m.half_table = m.table[4:]
    m.on_meta = torch.empty(100, device="meta")
    m.empty = torch.tensor([])
    result = census(m)
    assert result.entries == ()
    assert result.ok


@pytest.mark.usefixtures("scan")
def test_registered_tensor_reached_before_its_module_is_not_a_finding() -> None:
    m = torch.nn.Module()
    m.a = torch.nn.Linear(2, 2)
    m.b = torch.nn.Linear(2, 2)
    m.a.next_weight = m.b.weight
    m.a.next_bias_row = m.b.bias[:1]
    assert census(m).entries == ()


def test_registered_tensor_beyond_the_depth_bound_is_not_a_finding() -> None:
    leaf = torch.nn.Linear(2, 2)
    m = leaf
    for _ in range(10):
        m = torch.nn.Sequential(m)
    m.ref = leaf.weight
    m.loose = torch.ones(2)
    result = census(m, max_depth=5)
    assert paths(result) == ["loose"]
    assert result.truncated == ("0.0.0.0.0",)


@pytest.mark.usefixtures("scan")
def test_union_of_registered_views_covers_the_whole_storage() -> None:
    fused = torch.zeros(2, 4)
    m = torch.nn.Module()
    m.q = torch.nn.Parameter(fused[0])
    m.k = torch.nn.Parameter(fused[1])
    m.fused = fused
    assert census(m).entries == ()


@pytest.mark.usefixtures("scan")
def test_a_view_reaching_past_registered_bytes_is_a_finding() -> None:
    storage = torch.zeros(8)
    m = torch.nn.Module()
    m.register_buffer("head", storage[:4])
    m.whole = storage
    (entry,) = census(m).entries
    assert entry.path == "whole"


@pytest.mark.usefixtures("scan")
def test_memory_registered_through_another_storage_object_is_not_a_finding() -> None:
    # Two from_numpy of one array: two storage objects over the same bytes. The bytes are
    # registered (a parameter over the first); the second is an alias, not unregistered memory.
    array = np.arange(16, dtype=np.float32)
    m = torch.nn.Module()
    m.weight = torch.nn.Parameter(torch.from_numpy(array), requires_grad=False)
    m.alias = torch.from_numpy(array)
    m.tail = torch.from_numpy(array[8:])  # starts inside the registered bytes, another storage
    assert m.alias.untyped_storage()._cdata != m.weight.untyped_storage()._cdata
    assert census(m).entries == ()
    # Bytes past the registered ones stay findings, however they are reached.
    longer = np.arange(32, dtype=np.float32)
    m.register_buffer("head", torch.from_numpy(longer[:16]))
    m.whole = torch.from_numpy(longer)
    assert paths(census(m)) == ["whole"]


def test_one_entry_per_storage_with_aliases() -> None:
    m = torch.nn.Module()
    t = torch.zeros(4, 4)
    m.a = t
    m.b = t
    m.items = [t[1], t.t()]
    (entry,) = census(m).entries
    assert entry.path == "a"
    assert entry.aliases == ("b", "items[0]", "items[1]")
    assert entry.paths == ("a", "b", "items[0]", "items[1]")


def test_entry_fields() -> None:
    m = torch.nn.Module()
    base = torch.zeros(10, dtype=torch.float16)
    m.part = base[2:6]
    (entry,) = census(m).entries
    storage = base.untyped_storage()
    assert entry.shape == (4,)
    assert entry.dtype == torch.float16
    assert entry.device == torch.device("cpu")
    assert entry.nbytes == 8
    assert entry.storage_range == (storage.data_ptr(), storage.data_ptr() + 20)
    assert entry.reason == ""
    assert "set_derived_buffer" in entry.fix


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int8, torch.bool])
def test_dtypes(dtype: torch.dtype) -> None:
    m = torch.nn.Module()
    m.register_buffer("b", torch.zeros(3, dtype=dtype))
    m.b_as_bytes = m.b.view(torch.uint8)
    m.loose = torch.zeros(3, dtype=dtype)
    (entry,) = census(m).entries
    assert (entry.path, entry.dtype, entry.nbytes) == ("loose", dtype, 3 * dtype.itemsize)


def test_wrapper_subclasses() -> None:
    m = torch.nn.Module()
    m.qweight = torch.nn.Parameter(
        TwoPartTensor(torch.ones(2, dtype=torch.int8), torch.tensor(0.5)), requires_grad=False
    )
    m.scale_alias = m.qweight.scale
    m.loose = TwoPartTensor(torch.ones(3, dtype=torch.int8), torch.tensor(2.0))
    assert paths(census(m)) == ["loose.data_", "loose.scale"]


class PackedTensor(TwoPartTensor):
    """Keeps its inner tensors in a private list: only __tensor_flatten__ names them."""

    def __init__(self, data: torch.Tensor, scale: torch.Tensor) -> None:
        self._parts = [data, scale]

    @property  # type: ignore[override]
    def data_(self) -> torch.Tensor:
        return self._parts[0]

    @property  # type: ignore[override]
    def scale(self) -> torch.Tensor:
        return self._parts[1]


def test_wrapper_inner_tensors_are_named_by_flatten() -> None:
    m = torch.nn.Module()
    m.packed = PackedTensor(torch.ones(3, dtype=torch.int8), torch.tensor(2.0))
    (data, scale) = census(m).entries
    assert (data.path, data.aliases) == ("packed.data_", ("packed._parts[0]",))
    assert (scale.path, scale.aliases) == ("packed.scale", ("packed._parts[1]",))


def test_untyped_storage_attribute_is_found() -> None:
    m = torch.nn.Module()
    m.raw = torch.zeros(3).untyped_storage()
    (entry,) = census(m).entries
    assert (entry.path, entry.dtype, entry.nbytes) == ("raw", torch.uint8, 12)


def test_out_of_reach_by_design() -> None:
    class WithClassTable(torch.nn.Module):
        TABLE = torch.ones(3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + GLOBAL_TABLE + self.TABLE

    m = WithClassTable()
    m.torch_module = torch
    m.gen = torch.Generator()
    assert census(m).entries == ()


# ------------------------------------------------ holders and registration


def test_holder_tensor_is_found_until_registered() -> None:
    layer = torch.nn.Linear(2, 2)
    layer.qm = Holder(torch.zeros(4))
    (entry,) = census(layer).entries
    assert entry.path == "qm.sort_idx"
    assert "holder qm declares it" in entry.fix
    assert "register_held_tensors" in entry.fix
    register_held_tensors(layer)
    assert census(layer).entries == ()


def test_bad_holder_raises_naming_path_and_key() -> None:
    class Bad:
        def persistent_tensors(self) -> dict[str, Any]:
            return {"workspace": torch.ones(1), "count": 3}

    m = torch.nn.Sequential(torch.nn.Linear(2, 2))
    m[0].qm = [Bad()]
    with pytest.raises(TypeError) as err:
        census(m)
    assert "holder 0.qm[0] (test_bad_holder_raises_naming_path_and_key.<locals>.Bad)" in str(
        err.value
    )
    assert "persistent_tensors()['count'] is int" in str(err.value)


# --------------------------------------------- runtime state and allowlist


def test_runtime_state_is_exempt_with_reason() -> None:
    attn = torch.nn.Module()
    attn.kv_cache = [torch.zeros(16)]
    attn.alias = attn.kv_cache[0][:4]
    result = census(attn)
    assert result.entries == ()
    (exempt,) = result.exempt
    assert exempt.path == "kv_cache[0]"
    assert exempt.aliases == ("alias",)
    assert exempt.reason == RUNTIME_STATE_ATTRS["kv_cache"]


def test_runtime_state_on_plain_objects_and_closures() -> None:
    m = torch.nn.Module()
    m.state = types.SimpleNamespace(kv_cache=torch.zeros(2), rope=torch.ones(3))
    workspace = torch.zeros(4)
    m.kernel = lambda x: x + workspace
    result = census(m)
    assert paths(result) == ["state.rope"]
    assert [e.path for e in result.exempt] == ["state.kv_cache", "kernel.workspace"]


def test_exemption_applies_to_a_storage_reached_first_elsewhere() -> None:
    m = torch.nn.Module()
    cache = torch.zeros(4)
    m.first = cache
    m.k_cache = cache
    result = census(m)
    assert result.entries == ()
    assert [(e.path, e.aliases) for e in result.exempt] == [("first", ("k_cache",))]


def test_custom_runtime_attrs() -> None:
    m = torch.nn.Module()
    m.my_scratch = torch.zeros(4)
    m.kv_cache = torch.zeros(4)
    result = census(m, runtime_attrs={"my_scratch": "per-step scratch"})
    assert [e.path for e in result.exempt] == ["my_scratch"]
    assert result.exempt[0].reason == "per-step scratch"
    assert paths(result) == ["kv_cache"]


def test_runtime_state_attrs_documented() -> None:
    for name, reason in RUNTIME_STATE_ATTRS.items():
        assert name.isidentifier()
        assert len(reason) > 20
    with pytest.raises(TypeError):
        RUNTIME_STATE_ATTRS["x"] = "y"  # type: ignore[index]


def test_a_glob_of_many_stars_matches_in_linear_time() -> None:
    # Translated to a regular expression, a run of '*' backtracked exponentially on a path it
    # does not match: an allowlist line of 40 stars hung the census (a hostile tester's).
    m = torch.nn.Module()
    m.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2)])
    m.layers[0].weight_scale_inv_of_a_rather_long_name_here = torch.ones(3)
    # No clock here (speed is bench/'s): a backtracking matcher would not end within the tier's
    # timeout; the linear one is held by its C++ tests (tests/unit/glob_test.cc).
    hostile = ["*" * 40 + "z", "*a" * 30 + "b", "**." * 20 + "q"]
    result = census(m, allow=hostile)
    assert result.stale_allow == tuple(hostile)
    assert paths(result) == ["layers.0.weight_scale_inv_of_a_rather_long_name_here"]
    # The checker's matcher: a run of stars holding '**' crosses components.
    assert census(m, allow=["***here"]).allowed[0].reason == "***here"
    assert census(m, allow=["*here"]).stale_allow == ("*here",)


def test_allow_globs_and_stale_entries() -> None:
    m = torch.nn.Module()
    m.experts = [torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)]
    m.rope = torch.ones(3)
    m.other = torch.ones(2)
    result = census(m, allow=["experts[*].weight", "rope", "gone.*"])
    assert paths(result) == ["experts[0].bias", "experts[1].bias", "other"]
    assert [(e.path, e.reason) for e in result.allowed] == [
        ("experts[0].weight", "experts[*].weight"),
        ("experts[1].weight", "experts[*].weight"),
        ("rope", "rope"),
    ]
    assert result.stale_allow == ("gone.*",)
    assert not result.ok
    assert census(m, allow=["experts[1].bias", "other"]).allowed[0].path == "experts[1].bias"
    overlapping = census(m, allow=["experts[*]**", "experts[0].weight", "*"])
    assert overlapping.stale_allow == ()
    assert overlapping.entries == ()
    assert {e.reason for e in overlapping.allowed} == {"experts[*]**", "*"}
    # '*' stays within one path component; '**' crosses them.
    within = census(m, allow=["experts[*]*", "*"])
    assert within.stale_allow == ("experts[*]*",)
    assert {e.reason for e in within.allowed} == {"*"}
    assert sorted(paths(within)) == ["experts[0].bias", "experts[0].weight", "experts[1].bias",
                                     "experts[1].weight"]  # fmt: skip


def test_allow_matches_aliases_and_ok() -> None:
    m = torch.nn.Module()
    m.a = torch.ones(2)
    m.b = m.a
    result = census(m, allow=["b"])
    assert result.entries == ()
    assert result.ok


def test_bad_allow() -> None:
    with pytest.raises(TypeError, match="not a str"):
        census(torch.nn.Module(), allow="rope")
    with pytest.raises(TypeError, match="allow globs must be str, got 3"):
        census(torch.nn.Module(), allow=[3])  # type: ignore[list-item]


# ------------------------------------------------- cycles, bounds, bad input


class Node:
    def __init__(self) -> None:
        self.next: Node | None = None
        self.payload: torch.Tensor | None = None


def test_cycles_terminate() -> None:
    m = torch.nn.Module()
    a, b = Node(), Node()
    a.next, b.next = b, a
    b.payload = torch.ones(2)
    loop: list[Any] = []
    loop.append(loop)
    m.ring = a
    m.loop = loop
    m.me = m
    m.methods = {"self": m.forward}
    assert paths(census(m)) == ["ring.next.payload"]


def test_depth_bound_is_reported() -> None:
    head = node = Node()
    for _ in range(80):
        node.next = Node()
        node = node.next
    node.payload = torch.ones(1)
    m = torch.nn.Module()
    m.chain = head
    shallow = census(m)
    assert shallow.entries == ()
    assert len(shallow.truncated) == 1
    assert shallow.truncated[0].startswith("chain.next.next.")
    deep = census(m, max_depth=100)
    assert paths(deep) == ["chain" + ".next" * 80 + ".payload"]
    assert deep.truncated == ()
    with pytest.raises(ValueError, match=r"max_depth must be in \[1, 256\], got 0"):
        census(m, max_depth=0)


def test_non_module_model() -> None:
    with pytest.raises(TypeError, match=r"model must be a torch.nn.Module, got dict: \{'w': "):
        census({"w": torch.ones(1)})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got Tensor"):
        census(torch.ones(1))  # type: ignore[arg-type]


def test_str_is_a_readable_table() -> None:
    m = torch.nn.Module()
    m.rope = torch.ones(3)
    m.kv_cache = torch.ones(2)
    text = str(census(m, allow=["stale"]))
    lines = text.splitlines()
    assert lines[0].startswith("census: 1 unregistered storage(s), 12 bytes; 0 allowed, 1 exempt")
    assert lines[1].split() == ["path", "shape", "dtype", "device", "nbytes", "storage", "aliases"]
    assert lines[2].split()[:5] == ["rope", "(3,)", "float32", "cpu", "12"]
    assert "exempt (runtime state):" in lines
    assert "stale allow glob: 'stale'" in lines


# ------------------------------------------------------------------- runtime state by name

_DOCS = Path(__file__).resolve().parents[2] / "docs" / "python-contract.md"


def _documented_runtime_names() -> dict[str, str]:
    """Name -> reason, from the table of docs/python-contract.md ("Runtime state")."""
    text = _DOCS.read_text(encoding="utf-8").split("### Runtime state", 1)[1].split("###", 1)[0]
    rows: dict[str, str] = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            for name in re.findall(r"`([^`]+)`", cells[0]):
                rows[name] = cells[1]
    return rows


@pytest.mark.parametrize("name", sorted(RUNTIME_STATE_ATTRS))
def test_every_runtime_name_is_exempt_with_its_documented_reason(name: str) -> None:
    model = torch.nn.Module()
    model.layer = torch.nn.Module()
    setattr(model.layer, name, torch.zeros(4))
    found = census(model)
    assert not found.entries
    assert [(e.path, e.reason) for e in found.exempt] == [
        (f"layer.{name}", RUNTIME_STATE_ATTRS[name])
    ]
    documented = _documented_runtime_names()
    assert name in documented, f"{name} has no row in {_DOCS.name}"
    assert len(documented[name].split()) >= 4, f"{name}: the documented reason says why"


def test_the_documented_table_names_nothing_outside_the_set() -> None:
    assert set(_documented_runtime_names()) == set(RUNTIME_STATE_ATTRS)


def test_a_rebound_per_request_tensor_is_a_finding_not_runtime_state() -> None:
    """Qwen-VL's rope_deltas: rebound at every prefill, so a captured graph would read the old
    tensor. It must be reported, whatever its contents mean."""

    class VisionLanguage(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)
            self.rope_deltas: torch.Tensor | None = None

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.rope_deltas = x.sum(-1, keepdim=True)  # rebound per request, as Qwen2VLModel
            return self.proj(x) + self.rope_deltas

    model = VisionLanguage()
    model(torch.ones(2, 4))
    first = model.rope_deltas
    assert [e.path for e in census(model).entries] == ["rope_deltas"]
    model(torch.ones(2, 4) * 2)
    assert model.rope_deltas is not first  # a new tensor at a new address: not in place


def test_a_module_reached_through_a_detour_is_named_by_its_place_in_the_tree() -> None:
    """vLLM's attention layers hold the engine config, whose forward context maps every
    layer's name to the layer module: the walk reaches later layers through it first."""

    class Config:
        def __init__(self) -> None:
            self.static_forward_context: dict[str, torch.nn.Module] = {}

    config = Config()

    class Layer(torch.nn.Module):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.proj = torch.nn.Linear(2, 2)
            self.proj.packed = torch.ones(2)  # what the census must report, by its tree path
            self.config = config
            config.static_forward_context[name] = self

    model = torch.nn.Module()
    model.layers = torch.nn.ModuleList([Layer("layers.0"), Layer("layers.1")])
    found = census(model)
    assert sorted(e.path for e in found.entries) == ["layers.0.proj.packed", "layers.1.proj.packed"]
    assert all("static_forward_context" not in a for e in found.entries for a in e.aliases)
