"""The zoo's dtype passes: ``--dtype bfloat16`` rows, their allowlist, their baseline blocks.

The bfloat16 pass runs each class as ``Arch@bf16``: the class's baseline entries cover its
rows, a class entry whose site only float32 has stays unverified (not stale), and
``python -m graphcheck.zoo.baseline --new-only`` writes only what the pass adds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graphcheck.zoo import report as rep
from graphcheck.zoo.vllm_engine.catalog import DTYPE_PASSES, pass_globs

SCALE = "model.layers.0.self_attn.attn._k_scale_cpu"
PACKED = "model.layers.0.mlp.down_proj.cpu_linear.packed_weight"
FLOAT32_ONLY = "model.layers.0.mlp.down_proj.weight_copy"


def _site(path: str) -> dict[str, Any]:
    attribute = path.rsplit(".", 1)[-1]
    return {"path": path, "site": {"owner": "vllm.X", "attribute": attribute, "file": "x.py"}}


def built(cls: str, *paths: str, owners: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "status": "built",
        "class": cls,
        "model_type": "t",
        "forward": {"eligible": True, "ran": True},
        "findings": [_site(p) for p in paths],
        "capture": {"summary": {}, "unregistered": list(owners)},
    }


def _entries(tmp_path: Path) -> list[rep.AllowEntry]:
    f = tmp_path / "allow.txt"
    f.write_text(
        "L:model.layers.*.self_attn.attn._k_scale_cpu\n"
        "L:model.layers.*.mlp.down_proj.weight_copy\n"
        "[cpu=amx] L@bf16:model.layers.*.mlp.down_proj.cpu_linear.packed_weight\n"
    )
    return rep.read_zoo_allowlist(f)


def test_a_bfloat16_pass_leaves_a_float32_only_class_entry_unverified(tmp_path: Path) -> None:
    entries = _entries(tmp_path)
    ev = rep.evaluate({"L@bf16": built("L", SCALE, PACKED)}, entries, "amx")
    assert not ev.failed(), ev
    assert ev.allowed == {"L@bf16": [SCALE, PACKED]}
    assert [str(e) for e in ev.unverified] == ["L:model.layers.*.mlp.down_proj.weight_copy"]
    assert not ev.stale


def test_with_the_class_row_the_same_entry_is_stale(tmp_path: Path) -> None:
    entries = _entries(tmp_path)
    results = {"L": built("L", SCALE), "L@bf16": built("L", SCALE, PACKED)}
    ev = rep.evaluate(results, entries, "amx")
    assert [str(e) for e in ev.stale] == ["L:model.layers.*.mlp.down_proj.weight_copy"]
    assert ev.failed()


def test_a_variant_entry_is_stale_when_its_row_does_not_find_it(tmp_path: Path) -> None:
    ev = rep.evaluate({"L@bf16": built("L", SCALE)}, _entries(tmp_path), "amx")
    stale = "[cpu=amx] L@bf16:model.layers.*.mlp.down_proj.cpu_linear.packed_weight"
    assert [str(e) for e in ev.stale] == [stale]


# vLLM's W8A8, AWQ and GPTQ variants run in bfloat16 too: their rows say so, and a class entry
# only the float32 row has is left unverified by them, as by ``@bf16`` (an emulated AVX2 run of
# the CPU-dependent rows, without the float32 class row, called 14 such entries stale on AMX).
# A variant in the class's own dtype (an fp8 KV cache) requires the class entries as before.
def test_a_quantized_variant_in_bfloat16_leaves_a_float32_only_class_entry_unverified(
    tmp_path: Path,
) -> None:
    entries = _entries(tmp_path)
    quantized = {"L@w8a8": {**built("L", SCALE), "dtype": "bfloat16"}}
    ev = rep.evaluate(quantized, entries, "avx2")
    assert not ev.failed(), ev
    assert [str(e) for e in ev.unverified] == ["L:model.layers.*.mlp.down_proj.weight_copy"]
    same_dtype = {"L@fp8_kv": {**built("L", SCALE), "dtype": "float32"}}
    ev = rep.evaluate(same_dtype, entries, "avx2")
    assert [str(e) for e in ev.stale] == ["L:model.layers.*.mlp.down_proj.weight_copy"]


def test_a_report_whose_rows_do_not_say_their_dtype_is_judged_by_the_variants_name(
    tmp_path: Path,
) -> None:
    from graphcheck.zoo import evaluation
    from graphcheck.zoo.vllm_engine.catalog import VARIANTS

    # The names stand in for the rows' dtype: the variants that are not float32, no other.
    not_float32 = {n for n, v in VARIANTS.items() if v.dtype != "float32"}
    assert not_float32 == evaluation._OTHER_DTYPES
    ev = rep.evaluate({"L@awq": built("L", SCALE)}, _entries(tmp_path), "avx2")
    assert not ev.stale and not ev.failed(), ev


def test_vllm_rows_say_their_weights_dtype() -> None:
    from graphcheck.zoo.catalog import Arch
    from graphcheck.zoo.vllm_engine.worker import new_result

    def row(variant: str) -> str:
        name = f"LlamaForCausalLM@{variant}" if variant else "LlamaForCausalLM"
        arch = Arch(name, "LlamaForCausalLM", "llama", variant, ("generate",))
        return str(new_result(arch)["dtype"])

    assert [row(v) for v in ("", "bf16", "w8a8", "awq", "gptq", "fp8_kv")] == [
        "float32", "bfloat16", "bfloat16", "bfloat16", "bfloat16", "float32"
    ]  # fmt: skip


def test_the_summary_counts_classes_by_their_rows() -> None:
    results = {
        "A": built("A"),
        "A@bf16": built("A"),
        "B": {"status": "failed", "class": "B", "error": "RuntimeError: refused"},
        "B@bf16": built("B"),
        "C@bf16": {"status": "failed", "class": "C", "error": "RuntimeError: refused"},
    }
    ev = rep.evaluate(results, [])
    summary = rep.summarize(results, ev, 1.0, 1, "amx")
    assert (summary["classes"], summary["variants"]) == (3, 2)
    assert (summary["built"], summary["classes_built"]) == (3, 2)
    assert "; 2 of 3 classes" in rep.format_table(summary, "0", "vllm")


def test_class_globs_select_the_bfloat16_rows() -> None:
    assert DTYPE_PASSES == {"float32": "", "bfloat16": "bf16"}
    assert pass_globs(["L", "Q*", "M@w8a8"], "float32") == ["L", "Q*", "M@w8a8"]
    assert pass_globs(["L", "Q*", "M@w8a8"], "bfloat16") == [
        "L",
        "Q*",
        "M@w8a8",
        "L@bf16",
        "Q*@bf16",
    ]


def test_the_transformers_engine_refuses_a_bfloat16_pass(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from graphcheck.zoo.__main__ import main

    assert main(["--dtype", "bfloat16", "--list"]) == 2
    err = capsys.readouterr().err
    assert "--dtype bfloat16: the transformers engine runs float32 only" in err


def test_the_merge_writes_only_what_the_pass_adds(tmp_path: Path) -> None:
    from graphcheck.zoo.baseline import main as merge

    row = built("L", SCALE, PACKED, owners=(PACKED,))
    row["steps"] = [
        {"label": "capture"},
        {"label": "after_reload", "owners": {"dangling": [PACKED, SCALE]}},
    ]
    # What a --baseline run recorded as outside the allowlist: the bfloat16 packed weight.
    row["new_findings"] = [PACKED]
    row["capture_new_findings"] = [PACKED]
    row["later_new_findings"] = [f"after_reload dangling {PACKED}"]
    doc = {"engine": "vllm", "vllm": "0.32.0", "cpu_capability": "amx"}
    report = tmp_path / "bf16.json"
    report.write_text(json.dumps(doc | {"architectures": {"L@bf16": row}}))
    out = tmp_path / "added.txt"
    assert merge(["--new-only", "--output", str(out), str(report)]) == 0
    assert {str(e) for e in rep.read_zoo_allowlist(out)} == {
        "[cpu=amx] L@bf16:model.layers.*.mlp.down_proj.cpu_linear.packed_weight",
        "[cpu=amx] [verdict=dangling] L@bf16:model.layers.*.mlp.down_proj.cpu_linear.packed_weight",
    }
    # Without --new-only the same report gives every site, unconditionally (one rung).
    assert merge(["--output", str(out), str(report)]) == 0
    entries = {str(e) for e in rep.read_zoo_allowlist(out)}
    assert "L@bf16:model.layers.*.self_attn.attn._k_scale_cpu" in entries
    assert "[verdict=dangling] L@bf16:model.layers.*.self_attn.attn._k_scale_cpu" in entries
