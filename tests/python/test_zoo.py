"""Tests of graphcheck.zoo: tiny configs, sites, allowlist, isolated runner, and the fixed subset.

The unit tests need neither transformers nor a model. The subset test runs
``python -m graphcheck.zoo --subset --baseline`` in a fresh process (the way
`make test` uses it) and is skipped when transformers (the ``zoo`` extra) is
not installed.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from graphcheck.zoo import BASELINE
from graphcheck.zoo import report as rep
from graphcheck.zoo.__main__ import main as zoo_main
from graphcheck.zoo.catalog import Arch, filter_architectures, split_name
from graphcheck.zoo.runner import run
from graphcheck.zoo.sites import generalize, resolve_site, split_path
from graphcheck.zoo.subset import FAMILIES, SUBSET
from graphcheck.zoo.tiny_config import (
    HEADS,
    KV_HEADS,
    LAYERS,
    RESERVED_IDS,
    VOCAB,
    WIDTH,
    fit_mrope_section,
    shrink,
)

HAVE_TRANSFORMERS = importlib.util.find_spec("transformers") is not None


# ------------------------------------------------------------------ catalog


def archs(*names: str) -> list[Arch]:
    return [Arch(n, split_name(n)[0], "t", split_name(n)[1]) for n in names]


def test_split_name() -> None:
    assert split_name("LlamaModel@rope_yarn") == ("LlamaModel", "rope_yarn")
    assert split_name("BertModel") == ("BertModel", "")


def test_filter_globs_select_classes_and_variants() -> None:
    corpus = archs("LlamaModel", "LlamaModel@rope_yarn", "LlamaForCausalLM", "Qwen2Model@rope_yarn")
    names = lambda sel: [a.name for a in sel]  # noqa: E731
    assert names(filter_architectures(corpus, ["LlamaModel"])) == ["LlamaModel"]
    assert names(filter_architectures(corpus, ["LlamaModel*"])) == [
        "LlamaModel",
        "LlamaModel@rope_yarn",
    ]
    assert names(filter_architectures(corpus, ["*@rope_yarn"])) == [
        "LlamaModel@rope_yarn",
        "Qwen2Model@rope_yarn",
    ]
    assert names(filter_architectures(corpus, [])) == names(corpus)
    assert filter_architectures(corpus, ["Nope*"]) == []


# -------------------------------------------------------------- tiny config


def hybrid_config() -> dict[str, Any]:
    return {
        "model_type": "toy",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 8,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 152064,
        "max_position_embeddings": 32768,
        "num_experts": 64,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 3,
        "layer_types": ["linear_attention"] * 3 + ["full_attention"] + ["linear_attention"] * 4,
        "mlp_layer_types": ["dense"] * 3 + ["sparse"] * 5,
        "fullatt_block_indexes": [3, 7],
        "pad_token_id": 151643,
        "image_token_id": 151655,
        "bos_token_id": 1,
        "use_cache": True,
        "dtype": "bfloat16",
        "vision_config": {
            "model_type": "toy_vision",
            "hidden_size": 1280,
            "depth": 32,
            "num_heads": 16,
            "image_size": 448,
            "patch_size": 14,
            "out_hidden_size": 4096,
        },
        "text_config": {"model_type": "toy_text", "vocab_size": 152064, "pad_token_id": 151643},
    }


def test_shrink_keeps_every_layer_kind_and_renumbers_indices() -> None:
    d = shrink(hybrid_config(), "tiny")
    assert set(d["layer_types"]) == {"linear_attention", "full_attention"}
    assert set(d["mlp_layer_types"]) == {"dense", "sparse"}
    assert d["num_hidden_layers"] == len(d["layer_types"]) == len(d["mlp_layer_types"])
    assert LAYERS <= d["num_hidden_layers"] < 8
    assert all(0 <= i < d["num_hidden_layers"] for i in d["fullatt_block_indexes"])
    assert d["first_k_dense_replace"] < d["num_hidden_layers"]


def test_shrink_widths_heads_experts_vocab_positions() -> None:
    d = shrink(hybrid_config(), "tiny")
    assert (d["hidden_size"], d["num_attention_heads"], d["head_dim"]) == (WIDTH, HEADS, 16)
    assert d["num_key_value_heads"] == 2 and d["num_attention_heads"] % 2 == 0
    assert (d["num_experts"], d["num_experts_per_tok"]) == (4, 2)
    assert d["vocab_size"] == VOCAB and d["max_position_embeddings"] == 128
    assert d["use_cache"] is False and d["dtype"] == "float32"
    # One width everywhere: the vision tower's projection matches the text width.
    assert d["vision_config"]["hidden_size"] == d["vision_config"]["out_hidden_size"] == WIDTH
    assert d["vision_config"]["depth"] == LAYERS
    assert d["vision_config"]["image_size"] == 14 * 4


def test_mrope_sections_split_the_rotary_part_of_the_head() -> None:
    # Half the rotary dimension: all of a 16-wide head, or the half GLM-4.5V rotates.
    full = {"mrope_section": [16, 24, 24]}
    fit_mrope_section(full, 16)
    assert full["mrope_section"] == [3, 3, 2]
    partial = {"mrope_section": [8, 12, 12], "partial_rotary_factor": 0.5}
    fit_mrope_section(partial, 16)
    assert partial["mrope_section"] == [2, 1, 1]


def test_shrink_moves_special_tokens_consistently_across_subconfigs() -> None:
    d = shrink(hybrid_config(), "tiny")
    assert VOCAB - RESERVED_IDS <= d["pad_token_id"] < VOCAB
    assert VOCAB - RESERVED_IDS <= d["image_token_id"] < VOCAB
    assert d["pad_token_id"] != d["image_token_id"]
    assert d["text_config"]["pad_token_id"] == d["pad_token_id"]
    assert d["bos_token_id"] == 1


def test_shrink_levels() -> None:
    narrow = shrink(hybrid_config(), "narrow")
    # narrow keeps images up to 256 pixels a side (a multiple of the patch size)
    assert narrow["hidden_size"] == WIDTH and narrow["vision_config"]["image_size"] == 252
    # narrow keeps the named layers instead of renumbering them
    assert narrow["num_hidden_layers"] == 8 and narrow["fullatt_block_indexes"] == [3, 7]
    shallow = shrink(hybrid_config(), "shallow")
    assert shallow["hidden_size"] == 4096 and shallow["vocab_size"] == VOCAB
    original = hybrid_config()
    shrink(original, "tiny")
    assert original == hybrid_config()  # the input is not modified
    with pytest.raises(ValueError, match="level must be one of"):
        shrink(hybrid_config(), "huge")


def test_shrink_runs_fixups_last() -> None:
    seen: list[tuple[int, str]] = []
    shrink(
        hybrid_config(), "narrow", fixups=lambda d, level: seen.append((d["hidden_size"], level))
    )
    assert seen == [(WIDTH, "narrow")]


def test_shrink_keeps_per_stage_ties() -> None:
    backbone = {
        "model_type": "hgnet_v2",
        "stem_channels": [3, 32, 48],
        "stage_in_channels": [48, 128, 512, 1024],
        "stage_out_channels": [128, 512, 1024, 2048],
        "hidden_sizes": [256, 512, 1024, 2048],
        "out_indices": [2, 3, 4],
    }
    detector = {
        "model_type": "d_fine",
        "d_model": 256,
        "num_queries": 300,
        "encoder_in_channels": [512, 1024, 2048],
        "decoder_in_channels": [256, 256, 256],
        "backbone_config": backbone,
    }
    d = shrink(detector, "tiny")
    bb = d["backbone_config"]
    # a chain: each stage takes what the one before gives, the first what the stem gives
    assert bb["stage_in_channels"] == [48, *bb["stage_out_channels"][:-1]]
    # the backbone's channels at its out_indices; a list of hidden sizes; fewer queries
    assert d["encoder_in_channels"] == [bb["stage_out_channels"][i - 1] for i in bb["out_indices"]]
    assert d["decoder_in_channels"] == [d["d_model"]] * 3 and d["num_queries"] == 16
    sam2 = {
        "model_type": "sam2_vision_model",
        "backbone_channel_list": [768, 384, 192, 96],
        "backbone_feature_sizes": [[256, 256], [128, 128], [64, 64]],
        "backbone_config": {
            "model_type": "sam2_hiera_det_model",
            "hidden_size": 96,
            "patch_size": 16,
            "image_size": 1024,
            "embed_dim_per_stage": [96, 192, 384, 768],
        },
    }
    d = shrink(sam2, "tiny")
    hiera = d["backbone_config"]
    # a top-down list follows the stage list; the first stage's width stays the hidden size
    assert d["backbone_channel_list"] == hiera["embed_dim_per_stage"][::-1]
    assert hiera["hidden_size"] == hiera["embed_dim_per_stage"][0]
    # feature-map sizes scale with the image
    side = hiera["image_size"]
    assert d["backbone_feature_sizes"] == [[side // 4] * 2, [side // 8] * 2, [side // 16] * 2]


def test_shrink_per_layer_flags_named_like_index_lists() -> None:
    flags = [1, 1, 1, 0] * 12
    d = shrink(
        {
            "model_type": "llama4_text",
            "num_hidden_layers": 48,
            "no_rope_layers": flags,
            "moe_layers": list(range(48)),
            "num_attention_heads": 16,
            "num_key_value_heads_per_layer": [16, 8] * 24,
        },
        "tiny",
    )
    n = d["num_hidden_layers"]
    assert sorted(set(d["no_rope_layers"])) == [0, 1] and len(d["no_rope_layers"]) == n
    assert d["moe_layers"] == list(range(n))
    assert set(d["num_key_value_heads_per_layer"]) == {HEADS, KV_HEADS}


# -------------------------------------------------------------------- sites


class Rotary(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("inv_freq", torch.ones(4), persistent=False)
        self._cos_cached = torch.zeros(3)
        bias = torch.zeros(2)
        self.act = lambda x: x + bias


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList([Rotary(), Rotary()])
        self.tables = {"rope": [torch.ones(2)]}


def test_split_and_generalize_paths() -> None:
    assert split_path("layers.0.tables['rope'][1].x") == [
        ("attr", "layers"),
        ("attr", "0"),
        ("attr", "tables"),
        ("key", "rope"),
        ("item", "1"),
        ("attr", "x"),
    ]
    assert generalize("encoder.layer.11.attn._cos_cached") == "encoder.layer.*.attn._cos_cached"
    assert generalize("experts[3].weight") == "experts[*].weight"
    assert generalize("0.quant[2]") == "*.quant[*]"


def test_resolve_site_names_owner_class_attribute_and_file() -> None:
    net = Net()
    site = resolve_site(net, "layers.1._cos_cached")
    assert site["owner"].endswith("Rotary") and site["attribute"] == "_cos_cached"
    assert site["file"].endswith("test_zoo.py")
    closure = resolve_site(net, "layers.0.act.bias")
    assert closure["attribute"] == "bias" and closure["owner"].endswith("<lambda>")
    item = resolve_site(net, "tables['rope'][0]")
    assert item["owner"].endswith("Net") and item["attribute"] == "tables['rope'][*]"
    assert resolve_site(net, "layers.5.gone")["owner"] == "?"


# ---------------------------------------------------------------- allowlist


def result(status: str, *paths: str) -> dict[str, Any]:
    def site(path: str) -> dict[str, str]:
        # one site per last component, as resolve_site gives for these paths
        return {"owner": "m.C", "attribute": path.rsplit(".", 1)[-1], "file": "f.py"}

    return {
        "status": status,
        "model_type": "t",
        "findings": [{"path": p, "aliases": [], "site": site(p)} for p in paths],
    }


def test_read_zoo_allowlist_and_errors(tmp_path: Path) -> None:
    f = tmp_path / "allow.txt"
    f.write_text("# comment\n\nEsmModel@rotary:encoder.layer.*._cos_cached\n*:x[*]\n")
    assert [str(e) for e in rep.read_zoo_allowlist(f)] == [
        "EsmModel@rotary:encoder.layer.*._cos_cached",
        "*:x[*]",
    ]
    f.write_text("EsmModel:ok\nno-colon-here\n")
    with pytest.raises(ValueError, match=r"allow.txt:2: expected 'Arch:path-glob'"):
        rep.read_zoo_allowlist(f)
    f.write_text("Gemma3nForCausalLM:aten:aten::maximum\n")
    with pytest.raises(ValueError, match=r"allow.txt:1: 'aten:aten::maximum' is an op label"):
        rep.read_zoo_allowlist(f)


def test_evaluate_new_allowed_stale_unverified() -> None:
    results = {
        "A": result("built", "layers.0.c", "layers.1.c", "other"),
        "B": result("built"),
        "C": result("failed"),
    }
    entries = [
        rep.AllowEntry("A", "layers.*.c"),
        rep.AllowEntry("B", "gone"),
        rep.AllowEntry("C", "x"),
        rep.AllowEntry("NotRun", "y"),
    ]
    ev = rep.evaluate(results, entries)
    assert ev.allowed["A"] == ["layers.0.c", "layers.1.c"] and ev.new["A"] == ["other"]
    assert [str(e) for e in ev.stale] == ["B:gone"]
    assert [str(e) for e in ev.unverified] == ["C:x"]


def test_capture_owners_and_allocation_labels() -> None:
    captured = result("built", "layers.0.c")
    captured["capture"] = {"summary": {}, "unregistered": ["layers.0.c", "aten:aten::view"]}
    results = {"A": captured, "B": result("built", "x")}  # B: no capture ran
    entries = [
        rep.AllowEntry("A", "layers.*.c"),
        rep.AllowEntry("B", "x"),
        rep.AllowEntry("B", "aten:aten::view"),  # only a capture can match it
        rep.AllowEntry("A", "aten:aten::mm"),  # the capture ran and did not find it
    ]
    ev = rep.evaluate(results, entries)
    assert ev.capture_allowed["A"] == ["layers.0.c"] and ev.capture_new["A"] == ["aten:aten::view"]
    assert "B" not in ev.capture_new
    assert [str(e) for e in ev.stale] == ["A:aten:aten::mm"]
    assert [str(e) for e in ev.unverified] == ["B:aten:aten::view"]
    assert rep.is_allocation_label("aten:aten::view") and rep.is_allocation_label("f.py:3 in g")
    assert not rep.is_allocation_label("tables['a:b'].x")
    text = rep.allowlist_text(results, "9.9.9")
    assert text.count("A:layers.*.c") == 1
    # An op label names no site: written as a note, never an entry, and refused when read.
    assert "A:aten:aten::view" not in text
    assert "# not allowlisted: aten:aten::view is an op label" in text


def test_creation_site_owners_are_written_without_their_line(tmp_path: Path) -> None:
    site = "pkg/m.py:213 in C.index (cached: C.index)"
    captured = result("built")
    captured["capture"] = {"summary": {}, "unregistered": [site, "aten:aten::mm"]}
    out = tmp_path / "baseline.txt"
    rep.write_allowlist(out, {"A": captured}, "9.9.9")
    text = out.read_text()
    assert "# unregistered owner at capture (creation site), not reached by the census" in text
    entries = rep.read_zoo_allowlist(out)
    assert [str(e) for e in entries] == ["A:pkg/m.py:* in C.index (cached: C.index)"]
    moved = dict(captured, capture={"summary": {}, "unregistered": [site.replace("213", "250")]})
    ev = rep.evaluate({"A": moved}, entries)  # the line moved: the entry still allows it
    assert ev.capture_allowed["A"] == [site.replace("213", "250")] and not ev.stale


def test_site_globs_name_each_path_shape_exactly() -> None:
    # One glob per path shape, the layer numbers as '*': never a glob across components.
    assert rep.site_globs(["enc.a.0.pad", "enc.a.3.b.1.pad", "dec.a.0.pad", "enc.a.1.pad"]) == [
        "dec.a.*.pad", "enc.a.*.b.*.pad", "enc.a.*.pad"
    ]  # fmt: skip
    assert rep.site_globs(["q.s.layers.0.cb._e", "q.a.layers.3.cb._e"]) == [
        "q.a.layers.*.cb._e", "q.s.layers.*.cb._e"
    ]  # fmt: skip
    assert rep.site_globs(["s.0.cache['cpu']", "s.1.cache['cpu']"]) == ["s.*.cache['cpu']"]
    assert rep.site_globs(["a.x", "b.y"]) == ["a.x", "b.y"]
    assert all("**" not in g for g in rep.site_globs(["x.0.y", "x.1.z.y"]))


def test_the_shipped_baselines_name_exact_sites() -> None:
    """No glob across path components and no op label in a shipped baseline (issue 30 §3)."""
    from graphcheck.zoo.vllm_engine import BASELINE as VLLM_BASELINE

    for baseline in (BASELINE, VLLM_BASELINE):
        for entry in rep.read_zoo_allowlist(baseline):
            assert "**" not in entry.path, (baseline.name, entry.line, str(entry))
            assert not entry.path.startswith("aten:"), (baseline.name, entry.line, str(entry))
            assert not entry.path.startswith("*"), (baseline.name, entry.line, str(entry))


def test_written_allowlist_allows_exactly_the_findings(tmp_path: Path) -> None:
    results = {
        "A@v": result("built", "layers.0.c", "layers.1.c", "enc.t[2]", "dec.u.t[0]"),
        "B": result("built"),
    }
    out = tmp_path / "baseline.txt"
    rep.write_allowlist(out, results, "9.9.9")
    text = out.read_text()
    assert "# === A@v (t)" in text and "# transformers 9.9.9" not in text
    entries = [str(e) for e in rep.read_zoo_allowlist(out)]
    assert entries == ["A@v:layers.*.c", "A@v:enc.t[*]", "A@v:dec.u.t[*]"]
    ev = rep.evaluate(results, rep.read_zoo_allowlist(out))
    assert not any(ev.new.values()) and not ev.stale


# ------------------------------------------------------------------- runner


def fake_worker(arch: Arch, emit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    partial = {"status": "built", "capture_status": "", "seconds": {}}
    if arch.name == "crash":
        os.kill(os.getpid(), signal.SIGSEGV)
    if arch.name == "hang":
        time.sleep(60)
    if arch.name == "raise":
        raise RuntimeError("boom\nsecond line")
    if arch.name == "partial_then_crash":
        emit(partial)
        print("about to die", flush=True)
        os._exit(7)
    if arch.name == "patch":
        torch.add = None  # a global change: must not reach the next architecture
    return {"status": "built", "ok": torch.add is not None, "seconds": {}}


def skeleton(arch: Arch) -> dict[str, Any]:
    return {"status": "failed", "error": "", "capture_status": "", "seconds": {}}


def test_runner_isolates_crash_hang_and_global_changes() -> None:
    names = ["ok1", "crash", "hang", "patch", "raise", "partial_then_crash", "ok2"]
    done: list[str] = []
    results = run(
        archs(*names),
        jobs=3,
        timeout=3.0,
        worker=fake_worker,
        skeleton=skeleton,
        on_done=lambda a, r: done.append(a.name),
    )
    assert list(results) == names and sorted(done) == sorted(names)
    assert results["ok1"]["ok"] is True and results["ok2"]["ok"] is True
    assert results["patch"]["ok"] is False
    assert results["crash"]["status"] == "failed"
    assert results["crash"]["error"] == "WorkerCrash: killed by SIGSEGV"
    assert results["hang"]["error"] == "Timeout: no result after 3 s"
    assert results["raise"]["error"] == "WorkerError: RuntimeError: boom"
    kept = results["partial_then_crash"]
    assert kept["status"] == "built"
    assert kept["capture_status"] == "WorkerCrash: exit status 7 (last output: about to die)"
    assert all(r["seconds"]["wall"] > 0 for r in results.values())


def test_runner_rejects_bad_options() -> None:
    with pytest.raises(ValueError, match="jobs must be at least 1"):
        run([], jobs=0, timeout=1, worker=fake_worker, skeleton=skeleton)
    with pytest.raises(ValueError, match="timeout must be positive"):
        run([], jobs=1, timeout=0, worker=fake_worker, skeleton=skeleton)


# ---------------------------------------------------------------------- cli


def test_cli_bad_usage_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("just-a-path-glob\n")
    assert zoo_main(["--allow", str(bad)]) == 2
    assert "bad.txt:1: expected 'Arch:path-glob'" in capsys.readouterr().err
    assert zoo_main(["--allow", str(tmp_path / "missing.txt")]) == 2
    assert "cannot read allowlist" in capsys.readouterr().err
    assert zoo_main(["--jobs", "0"]) == 2
    assert "--jobs must be >= 1" in capsys.readouterr().err


@pytest.mark.skipif(not HAVE_TRANSFORMERS, reason="transformers (the zoo extra) is not installed")
def test_cli_selection_that_matches_nothing_exits_2() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "graphcheck.zoo", "--only", "NoSuchModel*", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 2 and "no architecture matches ['NoSuchModel*']" in proc.stderr


# ------------------------------------------------------------------- subset


def test_subset_spans_the_families() -> None:
    assert len(SUBSET) >= 30 and len(set(SUBSET)) == len(SUBSET)
    assert set(FAMILIES) == {
        "decoder LM",
        "MoE",
        "hybrid or state-space",
        "encoder",
        "encoder-decoder",
        "vision",
        "vision-language",
        "audio",
    }
    assert all(len(names) >= 2 for names in FAMILIES.values())
    assert sorted(SUBSET) == sorted(n for names in FAMILIES.values() for n in names)


def test_baseline_parses() -> None:
    entries = rep.read_zoo_allowlist(BASELINE)
    assert entries, "the baseline allowlist is empty"
    assert len({str(e) for e in entries}) == len(entries)


@pytest.mark.skipif(not HAVE_TRANSFORMERS, reason="transformers (the zoo extra) is not installed")
def test_subset_against_baseline(tmp_path: Path) -> None:
    out = tmp_path / "zoo.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "graphcheck.zoo",
            "--subset",
            "--baseline",
            "--jobs",
            "2",
            "--timeout",
            "120",
            "--no-progress",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    table = proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    arch = doc["architectures"]
    assert sorted(arch) == sorted(SUBSET), table
    failed = {n: r["error"] for n, r in arch.items() if r["status"] != "built"}
    assert not failed, table
    no_forward = {
        n: r["forward"]["error"]
        for n, r in arch.items()
        if r["forward"]["eligible"] and not r["forward"]["ran"]
    }
    assert not no_forward, table
    new = {n: r["new_findings"] for n, r in arch.items() if r["new_findings"]}
    assert not new, f"new census findings (not in the baseline):\n{new}\n{table}"
    new = {n: r["capture_new_findings"] for n, r in arch.items() if r["capture_new_findings"]}
    assert not new, f"new unregistered owners at capture (not in the baseline):\n{new}\n{table}"
    stale = [e for e in doc["summary"]["stale_allow"] if e.split(":")[0] in SUBSET]
    assert not stale, f"stale baseline entries:\n{stale}"
    assert proc.returncode == 0, table
    for name, r in arch.items():
        assert {"status", "census", "capture", "steps", "seconds"} <= set(r), name
        assert {"build", "census", "capture", "steps"} <= set(r["seconds"]), name
        if r["capture"] is None:
            assert r["capture_status"].startswith("not available in this build"), name
    assert doc["transformers"] == __import__("transformers").__version__
