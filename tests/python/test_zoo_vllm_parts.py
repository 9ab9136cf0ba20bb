"""The vLLM engine of the zoo, the parts that run without vLLM: memory torch does not own, the
config fitting, the W8A8 checkpoint, the engine table, and the report's vLLM rows. The engine
itself runs in the vllm tier (tests/vllm, the vLLM environment)."""

from __future__ import annotations

import ctypes
import importlib.util
import math
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from graphcheck.integrations._vllm_foreign import (
    EMPTIED,
    HANDLE,
    emptied_parameters,
    native_mapping,
    split_foreign,
)
from graphcheck.zoo import report as rep
from graphcheck.zoo.__main__ import main as zoo_main
from graphcheck.zoo.catalog import Arch
from graphcheck.zoo.engines import ENGINES, engine
from graphcheck.zoo.tiny_config import Sizes, shrink
from graphcheck.zoo.vllm_engine.catalog import VARIANT_ARCHS, VARIANTS, variant_of
from graphcheck.zoo.vllm_engine.checkpoint import _quantize
from graphcheck.zoo.vllm_engine.configs import VLLM_SIZES, fit_for_vllm, save_as


def finding(path: str, owner: str, attribute: str, dtype: str = "int64", shape: Any = ()) -> dict:
    return {
        "path": path,
        "shape": list(shape),
        "dtype": dtype,
        "nbytes": 8,
        "site": {"owner": owner, "attribute": attribute, "file": "x.py"},
    }


class NativeBuffer:
    """A native object: memory that ctypes allocates outside torch, alive while this is."""

    def __init__(self) -> None:
        self.memory = ctypes.create_string_buffer(256)
        self.address = ctypes.addressof(self.memory)


class Packer:
    """Keeps a pointer to its native object in a 0-d int64 tensor, under an ordinary name."""

    def __init__(self, native: NativeBuffer) -> None:
        self.native = native
        self.state = torch.tensor(native.address, dtype=torch.int64)


class PackedLinear(torch.nn.Module):
    """vLLM's CPU linear after processing: an empty weight, the weights behind a closure."""

    def __init__(self, native: NativeBuffer) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(0), requires_grad=False)
        self.bias = torch.nn.Parameter(torch.zeros(4), requires_grad=False)
        packer = Packer(native)
        self.cpu_linear = lambda x, weight, bias: x + packer.state


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.native = NativeBuffer()
        self.proj = PackedLinear(self.native)
        self.plain = torch.nn.Linear(4, 4)
        self.plain.unused = torch.nn.Parameter(torch.empty(0))  # empty, but holds no handle
        self.counter = torch.nn.Module()
        self.counter.handle = torch.tensor(7, dtype=torch.int64)  # named so; holds no pointer
        self.counter.own = torch.tensor(self.plain.weight.data_ptr(), dtype=torch.int64)
        self.counter.handles = torch.tensor([self.native.address] * 4)  # not 0-d: a tensor
        self.scale = torch.tensor(1.0)


def test_handles_are_decided_by_what_they_are_not_by_their_name() -> None:
    model = Model()
    findings = [
        finding("proj.cpu_linear.packer.state", "tests.Packer", "state"),
        finding("counter.handle", "torch.nn.Module", "handle"),
        finding("counter.own", "torch.nn.Module", "own"),  # points into a torch storage
        finding("counter.handles", "torch.nn.Module", "handles", shape=(4,)),
        finding("scale", "tests.Model", "scale", "float32"),
    ]
    ordinary, handles = split_foreign(findings, model)
    assert [f["path"] for f in handles] == ["proj.cpu_linear.packer.state"]
    assert [f["path"] for f in ordinary] == [
        "counter.handle", "counter.own", "counter.handles", "scale"
    ]  # fmt: skip
    assert handles[0]["kind"] == HANDLE and "reload must repack" in handles[0]["fix"]
    assert f"{model.native.address:#x}" in handles[0]["what"]
    assert "tests.Packer.state" in handles[0]["what"]
    assert native_mapping(model.native.address)
    assert not native_mapping(7) and not native_mapping(0)


def test_a_known_holder_says_what_its_handle_is() -> None:
    model = Model()
    onednn = finding("proj.cpu_linear.packer.state", "vllm._custom_ops.CPUDNNLGEMMHandler",
                     "handler_tensor")  # fmt: skip
    _, handles = split_foreign([onednn], model)
    assert "oneDNN matmul primitive" in handles[0]["what"]


def test_emptied_parameters_are_those_beside_a_handle() -> None:
    model = Model()
    found = emptied_parameters(model, ["proj.cpu_linear.packer.state"])
    assert [(f["path"], f["kind"], f["shape"]) for f in found] == [("proj.weight", EMPTIED, [0])]
    assert "proj.cpu_linear.packer.state" in found[0]["fix"]
    assert "PackedLinear" in found[0]["what"]
    assert emptied_parameters(model, []) == []
    # The values kept as a tensor of the layer's closure (vLLM's AMX kernels): the same.
    packed = emptied_parameters(model, ["proj.cpu_linear.packed_weight", "counter.handle"])
    assert [f["path"] for f in packed] == ["proj.weight"]
    assert "held by proj.cpu_linear.packed_weight" in packed[0]["fix"]


def test_vllm_sizes_give_the_cpu_attention_head_size() -> None:
    base = {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32,
            "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 11008}  # fmt: skip
    d = shrink(base, sizes=VLLM_SIZES)
    assert (d["hidden_size"], d["num_attention_heads"], d["num_key_value_heads"]) == (64, 2, 1)
    assert d["head_dim"] == 32 == VLLM_SIZES.head_dim
    assert shrink(base)["head_dim"] == Sizes().head_dim == 16  # the transformers zoo's


def test_fit_for_vllm_gives_mla_its_only_cpu_head_size() -> None:
    d = {"model_type": "deepseek_v3", "kv_lora_rank": 32, "qk_rope_head_dim": 8,
         "qk_nope_head_dim": 32, "qk_head_dim": 40,
         "text_config": {"model_type": "deepseek_v2", "kv_lora_rank": 32}}  # fmt: skip
    fit_for_vllm(d)
    assert d["kv_lora_rank"] + d["qk_rope_head_dim"] == 576
    assert d["qk_head_dim"] == 32 + 64
    assert d["text_config"]["kv_lora_rank"] == 512
    plain = {"model_type": "llama", "head_dim": 32}
    fit_for_vllm(plain)
    assert plain == {"model_type": "llama", "head_dim": 32}


def test_fit_for_vllm_keeps_nope_mla_without_rope() -> None:
    # GLM-5 Next's DSA layers have no rotary part (its config class refuses one): the CPU
    # MLA's one head size is then the latent alone.
    d = {"model_type": "glm5_next_text", "kv_lora_rank": 512, "qk_rope_head_dim": 0,
         "qk_nope_head_dim": 32, "qk_head_dim": 32}  # fmt: skip
    fit_for_vllm(d)
    assert (d["kv_lora_rank"], d["qk_rope_head_dim"], d["qk_head_dim"]) == (576, 0, 32)


def test_fit_for_vllm_gives_mla_no_head_dim_its_class_reads_as_a_rope_width() -> None:
    # transformers' Glm4MoeLiteConfig reads head_dim as qk_rope_head_dim (its attribute_map):
    # a head_dim from the width (64 / 2) would set the rope width back to 32 (MLA head 544).
    transformers = pytest.importorskip("transformers")
    d = {"model_type": "glm4_moe_lite", "hidden_size": 64, "num_attention_heads": 2,
         "kv_lora_rank": 32, "qk_rope_head_dim": 8, "qk_nope_head_dim": 32}  # fmt: skip
    fit_for_vllm(d)
    assert "head_dim" not in d
    config = transformers.Glm4MoeLiteConfig.from_dict(d)
    assert config.kv_lora_rank + config.qk_rope_head_dim == 576
    plain = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 2}
    fit_for_vllm(plain)
    assert plain["head_dim"] == 32  # a config without MLA still gets one


def test_save_as_renames_to_the_checkpoints_names_and_leaves_out_derived_fields() -> None:
    written = {"text_config": {"dim": 64}, "vision_config": {"enc_dim": 64}, "config": {},
               "wrapped_model_config": {"model_type": "llama"}}  # fmt: skip
    save_as(written, {"wrapped_model_config": "text_config", "vision_config": "", "absent": ""})
    assert written == {"text_config": {"model_type": "llama"}, "config": {}}


def test_w8a8_checkpoint_is_int8_with_one_scale_per_output_channel() -> None:
    weight = torch.tensor([[0.5, -1.0], [0.25, 0.125]])
    out = _quantize({"m.q_proj.weight": weight, "m.norm.weight": torch.ones(2),
                     "m.embed_tokens.weight": torch.ones(4, 2),
                     "lm_head.weight": torch.ones(4, 2)}, "w8a8_int8")  # fmt: skip
    q, scale = out["m.q_proj.weight"], out["m.q_proj.weight_scale"]
    assert q.dtype == torch.int8 and scale.shape == (2, 1)
    assert torch.equal(q, torch.tensor([[64, -127], [127, 64]], dtype=torch.int8))
    assert torch.allclose(q.float() * scale, weight, atol=1 / 127)
    for kept in ("m.norm.weight", "m.embed_tokens.weight", "lm_head.weight"):
        assert out[kept].dtype == torch.float32, kept


def test_variants() -> None:
    assert variant_of(Arch("LlamaForCausalLM", "LlamaForCausalLM", "llama")).dtype == "float32"
    bf16 = variant_of(Arch("X@bf16", "X", "x", "bf16"))
    assert (bf16.dtype, bf16.kv_cache_dtype, bf16.quantization) == ("bfloat16", "auto", "")
    assert VARIANTS["w8a8"].quantization == "w8a8_int8"
    assert VARIANTS["fp8_kv"].kv_cache_dtype == "fp8"
    assert all(v in VARIANTS for names in VARIANT_ARCHS.values() for v in names)


def test_engine_table() -> None:
    assert sorted(ENGINES) == ["transformers", "vllm"]
    assert engine("transformers").name == "transformers"
    vllm = engine("vllm")
    assert vllm.baseline.name == "baseline_allow.txt" and vllm.baseline.parent.name == "vllm_engine"
    assert "scripts/bootstrap.sh vllm" in vllm.missing
    with pytest.raises(ValueError, match=r"unknown engine 'sglang'; expected one of"):
        engine("sglang")


def test_report_rows_for_foreign_memory_reload_and_refused_replays() -> None:
    built: dict[str, Any] = {
        "status": "built", "variant": "", "level": "tiny", "findings": [], "error": "",
        "forward": {"eligible": True, "ran": True}, "capture_status": "ran",
        "capture": {"summary": {}, "unregistered": []},
        "foreign": [{"kind": HANDLE, "path": "l.0.h"}, {"kind": HANDLE, "path": "l.1.h"},
                    {"kind": EMPTIED, "path": "l.0.weight"}],
        "reload": {"status": "ran"},
        "steps": [{"label": "capture", "outputs_equal": True, "replay": "ran"},
                  {"label": "after_reload", "outputs_equal": False, "replay": "refused: x"},
                  {"label": "after_rebind", "outputs_equal": False,
                   "error": "replay: GraphcheckError: op 3 (aten::nonzero) returned shape [2]"}],
        "seconds": {},
    }  # fmt: skip
    other = {
        **built,
        "foreign": [],
        "steps": [],
        "reload": {"status": "not run: transformers has no X"},
    }
    results = {"A": built, "B": other}
    summary = rep.summarize(results, rep.evaluate(results, []), 1.0, 2)
    assert summary["foreign"] == {HANDLE: 2, EMPTIED: 1}
    assert summary["foreign_architectures"] == 1
    assert summary["reload"] == {"ran": 1, "not run: transformers has no X": 1}
    label = "after_reload: not replayed: reads memory freed since the capture (dangling)"
    assert summary["steps"][label] == 1
    # A step whose replay or eager forward raised (ReplayStep.error) was checked, not compared.
    assert summary["steps"]["after_rebind: not compared (replay raised)"] == 1
    table = rep.format_table(summary, "0.32.0", "vllm")
    assert table.startswith("vllm ")
    assert f"memory torch does not own  1 architectures: {EMPTIED} 1, {HANDLE} 2" in table
    doc = rep.to_json(results, rep.evaluate(results, []), summary, "0.32.0", engine="vllm")
    assert list(doc)[:2] == ["engine", "vllm"] and doc["vllm"] == "0.32.0"


@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is not None, reason="vLLM is installed in this environment"
)
def test_the_vllm_engine_without_vllm_says_how_to_get_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    environ = dict(os.environ)
    assert zoo_main(["--engine", "vllm", "--list"]) == 2
    err = capsys.readouterr().err
    assert "graphcheck.zoo: vllm is required" in err
    assert "scripts/bootstrap.sh vllm" in err
    assert dict(os.environ) == environ  # nothing configured for an engine that is not there


def test_steps_compare_nan_at_the_same_position_as_equal() -> None:
    from graphcheck._utils import compare_tensors as _compare
    from graphcheck.integrations._vllm_forward import compare as steps_compare

    nan = float("nan")
    left, same = torch.tensor([1.0, nan]), torch.tensor([1.0, nan])
    assert not _compare(left, same)[0]  # the helper's default: NaN never equals NaN
    assert steps_compare(left, same) == (True, 0.0)
    equal, diff = steps_compare(left, torch.tensor([nan, nan]))
    assert not equal and diff != diff  # NaN where only one side has NaN
    assert steps_compare(left, torch.tensor([3.0, nan])) == (False, 2.0)


def test_a_draft_without_attention_metadata_takes_its_targets() -> None:
    # vLLM's proposer runs a draft in the dummy batch without attention metadata, which leaves
    # its attention's output unwritten; the target's forward in the same batch has metadata
    # for the draft's layers too (_vllm_forward._draft_context).
    from dataclasses import dataclass

    from graphcheck.integrations._vllm_forward import _draft_context

    @dataclass
    class Context:
        attn_metadata: Any
        slot_mapping: Any
        num_tokens: int = 16

    target = Context({"l.0": "m0", "l.1": "m1"}, {"l.0": "s0", "l.1": "s1"})
    draft = Context(None, {"l.1": "d1"}, num_tokens=8)
    taken = _draft_context(draft, target)
    assert taken.attn_metadata is target.attn_metadata
    assert taken.slot_mapping is target.slot_mapping
    assert taken.num_tokens == 8  # the rest of the draft's context is its own
    assert draft.attn_metadata is None and draft.slot_mapping == {"l.1": "d1"}  # not changed
    # Kept as recorded: no target, metadata of its own, a layer the target's lacks, no layers.
    assert _draft_context(draft, None) is draft
    own = Context({"l.1": "own"}, {"l.1": "d1"})
    assert _draft_context(own, target) is own
    other = Context(None, {"l.1": "d1", "l.2": "d2"})
    assert _draft_context(other, target) is other
    empty = Context(None, {})
    assert _draft_context(empty, target) is empty


def test_a_replay_is_compared_by_its_outputs_and_its_cache_writes() -> None:
    # Some forwards return nothing (vLLM's hidden-state extractor writes its KV cache), and a
    # replay that writes other slots is wrong whatever it returns.
    from types import SimpleNamespace

    from graphcheck.integrations._vllm_forward import _caches_kept, _compare_effects

    nan = float("nan")
    cache = torch.tensor([[nan, 0.0], [0.0, 0.0]])  # an uninitialized NaN slot stays put
    fp8 = torch.zeros(4).to(torch.float8_e4m3fn)  # no comparison on the CPU: bits are compared
    runner = SimpleNamespace(kv_caches=[(cache, fp8)])

    def effects(row: int, value: float) -> tuple[Any, Any]:
        with _caches_kept(runner) as kept:
            cache[row, 1] = value
            fp8[row] = value
            writes = kept.writes()
        return None, writes

    assert torch.equal(cache[1:], torch.zeros(1, 2)) and cache[0, 0].isnan()  # put back
    assert not fp8.float().any()
    assert _compare_effects(effects(1, 2.0), effects(1, 2.0)) == (True, 0.0)
    assert _compare_effects(effects(1, 2.0), effects(1, 3.0)) == (False, 1.0)
    assert _compare_effects(effects(1, 2.0), effects(0, 2.0)) == (False, math.inf)
    # Outputs count too: equal writes, other outputs.
    (_, writes) = effects(1, 2.0)
    assert _compare_effects((torch.ones(2), writes), (torch.zeros(2), writes)) == (False, 1.0)


def test_a_forward_that_returns_nothing_is_compared_not_taken_for_a_refusal() -> None:
    from types import SimpleNamespace

    from graphcheck.integrations._vllm_forward import EngineForward

    forward = EngineForward.__new__(EngineForward)  # no vLLM runner: its parts stood in
    forward.runner = SimpleNamespace(kv_caches=[torch.zeros(4)])
    replay: tuple[Any, str] = (None, "ran")
    forward.replay = lambda capture: replay  # type: ignore[method-assign]
    forward.eager = lambda: None  # type: ignore[method-assign]
    ran = forward.replay_and_eager(capture=None)  # type: ignore[arg-type]
    assert ran.equal and ran.diff == 0.0 and ran.replay == "ran"
    replay = (None, "refused: reads freed memory")
    refused = forward.replay_and_eager(capture=None)  # type: ignore[arg-type]
    assert not refused.equal and math.isnan(refused.diff) and refused.replay.startswith("refused")


def test_caches_past_the_limit_are_not_copied_and_nothing_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A 2 GiB KV cache took 7.8 s per copy and compare, with 2 GiB more memory, three times
    # per reload, while the engine served nothing.
    from types import SimpleNamespace

    from graphcheck.integrations import _vllm_forward
    from graphcheck.integrations._vllm_cpu import _replay_note

    def must_not_run(*_: object) -> Any:
        raise AssertionError("ran although the caches are past the limit")

    forward = _vllm_forward.EngineForward.__new__(_vllm_forward.EngineForward)
    forward.runner = SimpleNamespace(kv_caches=[torch.zeros(4), [torch.zeros(4)]])  # 32 bytes
    forward.replay = must_not_run  # type: ignore[method-assign]
    forward.eager = must_not_run  # type: ignore[method-assign]
    forward.refreshed = must_not_run  # type: ignore[method-assign]
    monkeypatch.setattr(_vllm_forward, "COMPARE_LIMIT_BYTES", 31)
    skipped = forward.replay_and_eager(capture=None, refresh=True)  # type: ignore[arg-type]
    assert skipped.replay.startswith("not compared: the KV caches and states hold 0.0 GiB")
    assert not skipped.equal and math.isnan(skipped.diff)
    note = _replay_note(skipped)
    assert note.endswith(
        "graphcheck copies to compare (a copy would stall the engine for "
        "seconds and double their memory)"
    )
    assert "would read that memory" not in note


def test_a_drafter_the_dummy_batch_does_not_run_is_run_by_its_own_dummy_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # vLLM's dummy batch runs EAGLE-style drafters only; Medusa's heads run in their own.
    import sys
    import types

    from graphcheck.integrations._vllm_forward import DUMMY_TOKENS, EngineForward

    recorded = types.SimpleNamespace(attn_metadata=None, slot_mapping={})  # a profiling pass's
    context = types.ModuleType("vllm.forward_context")
    context.get_forward_context = lambda: recorded  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.forward_context", context)
    target, heads = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)

    class Drafter:
        def dummy_run(self, num_tokens: int) -> None:
            heads(torch.zeros(num_tokens, 2))

    class Runner:
        drafter = Drafter()

        def _dummy_run(self, num_tokens: int, force_attention: bool) -> None:
            target(torch.zeros(num_tokens, 2))  # the target only, as for Medusa

        def get_model(self) -> torch.nn.Module:
            return target

    forward = EngineForward(Runner(), heads, forward_module=heads)
    assert forward.args[0].shape == (DUMMY_TOKENS, 2)
    assert forward.context is recorded
    assert "forward" not in vars(heads) and "forward" not in vars(target)  # unwrapped


def test_an_encoder_decoder_models_batch_is_run_as_a_gpu_worker_runs_it_to_capture() -> None:
    # is_graph_capturing gives the cross-attention its encoder's full length (a warm-up batch
    # gives it none); other models keep the warm-up's batch (decode-only capture builders
    # refuse a mixed one), and a runner without the argument runs without it.
    import types

    from graphcheck.integrations._vllm_forward import DUMMY_TOKENS, _capture_batch

    calls: list[tuple[Any, ...]] = []

    class Capturing:
        def __init__(self, encoder_decoder: bool) -> None:
            self.model_config = types.SimpleNamespace(is_encoder_decoder=encoder_decoder)

        def _dummy_run(
            self, num_tokens: int, force_attention: bool = False, is_graph_capturing: bool = False
        ) -> None:
            calls.append((num_tokens, force_attention, is_graph_capturing))

    class Older(Capturing):
        def _dummy_run(self, num_tokens: int, force_attention: bool = False) -> None:  # type: ignore[override]
            calls.append((num_tokens, force_attention))

    _capture_batch(Capturing(encoder_decoder=True))
    _capture_batch(Capturing(encoder_decoder=False))
    _capture_batch(Older(encoder_decoder=True))
    assert calls == [(DUMMY_TOKENS, True, True), (DUMMY_TOKENS, True, False), (DUMMY_TOKENS, True)]


def test_a_runner_with_a_draft_model_has_two_forwards_over_one_registry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The server flag's CPU twins: the served model's forward, then its draft's, each checked
    # with both models under the names the watch's census gives them.
    import sys
    import types

    from graphcheck.integrations._vllm_forward import NotCalled, TargetAndDraft, served_forwards

    recorded = types.SimpleNamespace(attn_metadata={"a": 1}, slot_mapping={"a": 2})
    context = types.ModuleType("vllm.forward_context")
    context.get_forward_context = lambda: recorded  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "vllm", types.ModuleType("vllm"))
    monkeypatch.setitem(sys.modules, "vllm.forward_context", context)
    target, draft = torch.nn.Linear(2, 2), torch.nn.Linear(2, 3)
    calls = {"draft": True}

    class Runner:  # a drafter's own dummy run that does not call its model either
        drafter = types.SimpleNamespace(model=draft, dummy_run=lambda num_tokens: None)

        def _dummy_run(self, num_tokens: int, force_attention: bool) -> None:
            target(torch.zeros(num_tokens, 2))
            if calls["draft"]:
                draft(torch.zeros(num_tokens, 2))

        def get_model(self) -> torch.nn.Module:
            return target

    x = torch.ones(1, 2)
    forwards = served_forwards(Runner())
    assert len(forwards) == 2
    served, drafted = forwards
    assert not isinstance(served, NotCalled) and not isinstance(drafted, NotCalled)
    for forward in forwards:
        assert isinstance(forward.model, TargetAndDraft)
        names = {n for n, _ in forward.model.named_parameters()}
        assert names == {"model.weight", "model.bias", "draft_model.weight", "draft_model.bias"}
    assert torch.equal(served.model(x), target(x))  # the served model's graph
    assert torch.equal(drafted.model(x), draft(x))  # the draft's
    assert "forward" not in vars(target) and "forward" not in vars(draft)  # unwrapped

    calls["draft"] = False  # a drafter nothing runs: the served model's twin stays
    served, missing = served_forwards(Runner())
    assert not isinstance(served, NotCalled) and isinstance(missing, NotCalled)

    # n-gram: a proposer without a model.
    Runner.drafter = types.SimpleNamespace(model=None, dummy_run=None)
    (alone,) = served_forwards(Runner())
    assert not isinstance(alone, NotCalled) and alone.model is target


# ------------------------------------------------------------------- the run's exit status
# What the vLLM zoo exists to find fails a run unless the baseline lists it: memory torch does
# not own (a native handle, the parameter it emptied) and what a reload leaves dangling.


def llama_like(**changes: Any) -> dict[str, Any]:
    """A built architecture as the vLLM worker records it: one layer's handle and weight."""
    result: dict[str, Any] = {
        "status": "built", "variant": "", "level": "tiny", "error": "",
        "forward": {"eligible": True, "ran": True}, "capture_status": "ran",
        "findings": [{"path": "model.layers.0.attn._k_scale_cpu"}],
        "foreign": [
            {"kind": HANDLE, "path": "model.layers.0.proj.cpu_linear.handler.handler_tensor"},
            {"kind": EMPTIED, "path": "model.layers.0.proj.weight"},
        ],
        "capture": {"summary": {}, "unregistered": [],
                    "foreign": ["model.layers.0.proj.cpu_linear.handler.handler_tensor"]},
        "reload": {"status": "ran"},
        "steps": [
            {"label": "capture", "outputs_equal": True, "replay": "ran", "owners": {}},
            {"label": "after_reload", "outputs_equal": False, "replay": "refused: x",
             "owners": {"dangling": ["model.layers.0.proj.cpu_linear.handler.handler_tensor"]}},
        ],
        "seconds": {},
    }  # fmt: skip
    result.update(changes)
    return result


BASELINE_OF_LLAMA = [
    rep.AllowEntry("Llama", "model.layers.*.attn._k_scale_cpu"),
    rep.AllowEntry("Llama", "model.layers.*.proj.cpu_linear.handler.handler_tensor"),
    rep.AllowEntry("Llama", "model.layers.*.proj.weight"),
    rep.AllowEntry("Llama", "model.layers.*.proj.cpu_linear.handler.handler_tensor",
                   verdict="dangling"),
]  # fmt: skip


def test_what_the_baseline_lists_passes() -> None:
    ev = rep.evaluate({"Llama": llama_like()}, BASELINE_OF_LLAMA)
    assert not ev.failed(), ev
    assert ev.later_allowed["Llama"] == [
        "after_reload dangling model.layers.0.proj.cpu_linear.handler.handler_tensor"
    ]


def test_a_planted_foreign_handle_fails_the_run() -> None:
    planted = llama_like()
    planted["foreign"].append(
        {"kind": HANDLE, "path": "model.layers.0.mlp.cpu_linear.handler.handler_tensor"}
    )
    ev = rep.evaluate({"Llama": planted}, BASELINE_OF_LLAMA)
    assert ev.failed()
    assert ev.new["Llama"] == ["model.layers.0.mlp.cpu_linear.handler.handler_tensor"]


def test_a_planted_emptied_parameter_fails_the_run() -> None:
    planted = llama_like()
    planted["foreign"].append({"kind": EMPTIED, "path": "model.layers.0.mlp.weight"})
    ev = rep.evaluate({"Llama": planted}, BASELINE_OF_LLAMA)
    assert ev.failed() and ev.new["Llama"] == ["model.layers.0.mlp.weight"]


def test_a_planted_dangling_read_after_reload_fails_the_run() -> None:
    planted = llama_like()
    planted["steps"][1]["owners"]["dangling"].append("model.layers.0.attn.impl.alibi_slopes")
    ev = rep.evaluate({"Llama": planted}, BASELINE_OF_LLAMA)
    assert ev.failed()
    assert ev.later_new["Llama"] == ["after_reload dangling model.layers.0.attn.impl.alibi_slopes"]
    # An entry for the census site does not allow the same owner dangling after a reload.
    listed = [*BASELINE_OF_LLAMA, rep.AllowEntry("Llama", "model.layers.*.attn.impl.alibi_slopes")]
    assert rep.evaluate({"Llama": planted}, listed).failed()
    summary = rep.summarize({"Llama": planted}, ev, 1.0, 1, "avx2")
    assert summary["later_with_findings"] == 1
    table = rep.format_table(summary, "0.32.0", "vllm")
    assert "after_reload dangling model.layers.*.attn.impl.alibi_slopes" in table


def test_a_verdict_entry_nothing_matches_is_stale_where_a_reload_was_judged() -> None:
    fixed = llama_like()
    fixed["steps"][1]["owners"] = {}
    ev = rep.evaluate({"Llama": fixed}, BASELINE_OF_LLAMA)
    assert [str(e) for e in ev.stale] == [
        "[verdict=dangling] Llama:model.layers.*.proj.cpu_linear.handler.handler_tensor"
    ]
    not_reloaded = llama_like(steps=[llama_like()["steps"][0]])
    ev = rep.evaluate({"Llama": not_reloaded}, BASELINE_OF_LLAMA)
    assert not ev.stale and len(ev.unverified) == 1


def test_the_written_baseline_lists_foreign_memory_and_later_verdicts(tmp_path: Path) -> None:
    results = {"Llama": llama_like()}
    out = tmp_path / "baseline.txt"
    rep.write_allowlist(out, results, "0.32.0", engine="vllm")
    entries = rep.read_zoo_allowlist(out)
    assert sorted(str(e) for e in entries) == sorted(str(e) for e in BASELINE_OF_LLAMA)
    assert not rep.evaluate(results, entries).failed()
