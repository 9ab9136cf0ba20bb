"""Tests of the zoo's swept variants: the AST scan, the denylist, rope variants, names, a real run.

The scan tests read synthetic modeling sources and need nothing installed;
the others read the installed transformers (the ``zoo`` extra) and are skipped
without it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from graphcheck.zoo import report as rep
from graphcheck.zoo import sweep
from graphcheck.zoo._sweep_scan import BOOL, scan_switches
from graphcheck.zoo.catalog import Arch, filter_architectures, split_name

HAVE_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
needs_transformers = pytest.mark.skipif(
    not HAVE_TRANSFORMERS, reason="transformers (the zoo extra) is not installed"
)

# ------------------------------------------------------------------- the scan

SOURCE = """
from ...activations import ACT2FN

POSITION_CLASSES = {"sinusoidal": Sin, "learned": Learned}
NOT_A_TABLE = {1: "a"}


class Embeddings(nn.Module):
    def __init__(self, config, kind=None):
        self.kind = kind or config.embedding_kind
        self.position_embedding_type = getattr(config, "position_embedding_type", "absolute")
        self.use_alibi = config.alibi
        self.act = ACT2FN[config.hidden_act]
        self.table = POSITION_CLASSES[config.table_type]
        self.other = NOT_A_TABLE[config.other_type]
        if self.position_embedding_type == "rotary":
            self.rotary = Rotary()
        if self.kind in ("relative_key", "relative_key_query"):
            self.distance = nn.Embedding(8, 4)
        self.bias = Bias(config) if config.use_relative_position_bias else None
        if config.output_attentions:
            pass
        if "c2p" in config.pos_att_type:
            pass
        if config.hidden_act == "gelu":
            pass

    def forward(self, x):
        if self.use_alibi:
            x = x + 1
        if not self.config.scale_embedding and self.config.other_flag:
            x = x * 2
        if "global" != self.config.attention_type:
            x = x
        if self.config.text_config.norm_type == "rms":
            x = x
        match config.encoder_type:
            case "lite" | "full":
                pass
            case _:
                pass
        return x if config.use_post_norm is True else -x
"""


def test_scan_finds_every_switch_pattern() -> None:
    found = scan_switches(SOURCE)
    assert found["position_embedding_type"] == {"rotary"}  # getattr(...) through self.attr
    assert found["embedding_kind"] == {"relative_key", "relative_key_query"}  # `kind or config.X`
    assert found["alibi"] == {BOOL}  # through the alias self.use_alibi
    assert found["use_relative_position_bias"] == {BOOL}  # x if config.X else y
    assert found["scale_embedding"] == {BOOL} and found["other_flag"] == {BOOL}  # not / and
    assert found["attention_type"] == {"global"}  # literal on the left, !=
    assert found["text_config.norm_type"] == {"rms"}  # a sub-config's option
    assert found["encoder_type"] == {"lite", "full"}  # match / case, MatchOr
    assert found["use_post_norm"] == {BOOL}  # `is True`
    assert found["table_type"] == {"sinusoidal", "learned"}  # module-level dispatch table


def test_scan_skips_what_is_not_a_value_switch() -> None:
    found = scan_switches(SOURCE)
    assert "pos_att_type" not in found  # `"c2p" in config.X`: membership of a list option
    assert "other_type" not in found  # a dict with non-string keys is no dispatch table
    # `config.hidden_act == "gelu"` is a switch; `ACT2FN[config.hidden_act]` adds no value.
    assert found["hidden_act"] == {"gelu"}
    assert "config" not in found and "self" not in found


def test_denylist() -> None:
    for option in (
        "hidden_act",
        "activation_function",
        "attention_dropout",
        "hidden_dropout_prob",
        "initializer_range",
        "output_attentions",
        "return_dict",
        "use_cache",
        "pad_token_id",
        "image_token_index",
        "_attn_implementation",
        "is_decoder",
        "text_config.hidden_act",
        "summary_type",
        "freeze_backbone_batch_norms",
    ):
        assert sweep.denied(option), option
    for option in (
        "position_embedding_type",
        "use_relative_position_bias",
        "alibi",
        "attention_type",
        "text_config.norm_type",
    ):
        assert not sweep.denied(option), option


def test_variant_names_parse() -> None:
    assert sweep.parse_variant("rope_type=yarn") == ("rope_type", "yarn")
    assert sweep.parse_variant("alibi=True") == ("alibi", True)
    assert sweep.parse_variant("text_config.x=False") == ("text_config.x", False)
    assert sweep.Swept("alibi", True).name == "alibi=True"
    assert split_name("BeitModel@use_relative_position_bias=True") == (
        "BeitModel",
        "use_relative_position_bias=True",
    )
    with pytest.raises(ValueError, match="not a swept variant"):
        sweep.parse_variant("relative")


def test_sweep_counts_and_table_row() -> None:
    def r(variant: str, model_type: str, status: str = "built") -> dict[str, Any]:
        return {"variant": variant, "model_type": model_type, "status": status}

    results = {
        "A": r("", "a"),
        "A@rope_type=yarn": r("rope_type=yarn", "a"),
        "A@rope_type=linear": r("rope_type=linear", "a", "failed"),
        "B@rope_type=yarn": r("rope_type=yarn", "b"),
        "B@alibi=True": r("alibi=True", "b"),
        "C@relative": r("relative", "c"),
    }
    counts = sweep.sweep_counts(results)
    assert counts == {
        "options": 3,
        "option_names": 2,
        "model_types": 2,
        "values": 4,
        "variants": 4,
        "built": 3,
        "presets": 1,
    }
    row = rep._sweep_row(counts)
    assert row == "3 options (2 names) of 2 model types, 4 values: 4 variants, 3 built; 1 presets"


def test_class_entries_cover_variants() -> None:
    def built(*paths: str) -> dict[str, Any]:
        site = {"owner": "m.C", "attribute": "x", "file": "f.py"}
        return {
            "status": "built",
            "findings": [{"path": p, "aliases": [], "site": site} for p in paths],
        }

    results = {
        "M": built("pad"),
        "M@rope_type=dynamic": built("pad", "rotary_emb.max_seq_len_cached"),
        "MX@rope_type=dynamic": built("pad"),  # another class: M's entry does not reach it
        "N@alibi=True": built(),
    }
    entries = [
        rep.AllowEntry("M", "pad"),
        rep.AllowEntry("*@rope_type=dynamic", "rotary_emb.*max_seq_len_cached"),
        rep.AllowEntry("N", "gone"),
    ]
    ev = rep.evaluate(results, entries)
    assert ev.allowed["M@rope_type=dynamic"] == ["pad", "rotary_emb.max_seq_len_cached"]
    assert ev.new["MX@rope_type=dynamic"] == ["pad"]
    assert [str(e) for e in ev.stale] == ["N:gone"]  # a variant of N built: it could match


# ------------------------------------------------------------ real transformers


@pytest.fixture(scope="module")
def corpus() -> list[Arch]:
    from graphcheck.zoo.catalog import enumerate_architectures

    return enumerate_architectures()


@needs_transformers
def test_rope_variants_of_a_real_config() -> None:
    from transformers import Gemma3TextConfig, LlamaConfig
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    from graphcheck.zoo.tiny_config import shrink

    names = {s.name for s in sweep.derive("LlamaModel", "llama")}
    rope_types = {t for t in ROPE_INIT_FUNCTIONS if t != "default"}
    # Pinned, so that an empty or shrunk table (the sweep reads the same one) fails here.
    assert {"linear", "dynamic", "yarn", "longrope", "llama3"} <= rope_types
    expected = {f"rope_type={t}" for t in rope_types}
    assert {n for n in names if n.startswith("rope_type=")} == expected
    deepseek = {s.value: s.deepseek for s in sweep.derive("DeepseekV3Model", "deepseek_v3")}
    assert deepseek["yarn"] is True and deepseek["linear"] is False  # it reads mscale_all_dim
    for rope_type in sorted(rope_types):
        d = shrink(LlamaConfig().to_dict(), "tiny")
        sweep.apply_swept("LlamaModel", "llama", f"rope_type={rope_type}", d)
        config = LlamaConfig.from_dict(d)  # validates the parameters of the type
        assert config.rope_parameters["rope_type"] == rope_type
        assert (config.max_position_embeddings == 8) == (rope_type == "dynamic")
    # Per-layer-type rope: the global layers are scaled, the sliding ones keep theirs.
    d = shrink(Gemma3TextConfig().to_dict(), "tiny")
    sliding = dict(d["rope_parameters"]["sliding_attention"])
    sweep.apply_swept("Gemma3TextModel", "gemma3_text", "rope_type=linear", d)
    assert d["rope_parameters"]["full_attention"]["rope_type"] == "linear"
    assert d["rope_parameters"]["sliding_attention"] == sliding
    with pytest.raises(KeyError, match="no swept variant"):
        sweep.apply_swept("LlamaModel", "llama", "rope_type=nope", d)


@needs_transformers
def test_options_of_real_configs() -> None:
    esm = {s.name for s in sweep.derive("EsmModel", "esm")}
    assert "position_embedding_type=rotary" in esm
    assert "position_embedding_type=absolute" not in esm  # the default is no new variant
    falcon = {s.name for s in sweep.derive("FalconModel", "falcon")}
    assert {"alibi=True", "new_decoder_architecture=True"} <= falcon
    options = {n.partition("=")[0] for n in esm | falcon} - {"rope_type"}  # from rope_parameters
    assert options and not any(sweep.denied(o) for o in options)


@needs_transformers
def test_sweep_cache_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(sweep, "_TABLE", {})
    sweep.prime([("EsmModel", "esm")])
    first = sweep.swept_variants("EsmModel", "esm")
    assert first and list(tmp_path.glob("graphcheck/zoo-sweep-*.json"))

    def no_derive(*args: object) -> tuple[sweep.Swept, ...]:
        raise AssertionError("derived again despite the cache")

    monkeypatch.setattr(sweep, "_TABLE", {})
    monkeypatch.setattr(sweep, "derive", no_derive)
    assert sweep.swept_variants("EsmModel", "esm") == first


@needs_transformers
def test_corpus_names_and_selection(corpus: list[Arch]) -> None:
    swept = [a for a in corpus if "=" in a.variant]
    assert len(swept) > 500
    assert all(split_name(a.name) == (a.class_name, a.variant) for a in corpus)
    assert all("base" in a.tasks for a in swept)  # variants of base model classes only
    rope = filter_architectures(corpus, ["*@rope_type=*"])
    assert rope and all(a.variant.startswith("rope_type=") for a in rope)
    assert {"LlamaModel@rope_type=yarn", "Phi3Model@rope_type=longrope"} <= {a.name for a in rope}
    names = {a.name for a in corpus}
    # Every variant the baseline and the subset name exists (no stale or unverified entry).
    from graphcheck.zoo import BASELINE
    from graphcheck.zoo.subset import SUBSET

    named = {e.arch for e in rep.read_zoo_allowlist(BASELINE)} | set(SUBSET)
    assert {n for n in named if "@" in n and "*" not in n} <= names
    assert all(filter_architectures(corpus, [n]) for n in named if "*" in n)


@needs_transformers
def test_swept_variants_run(tmp_path: Path) -> None:
    out = tmp_path / "zoo.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "graphcheck.zoo",
            "--only",
            "EsmModel@position_embedding_type=rotary",
            "--only",
            "LlamaModel@rope_type=dynamic",
            "--baseline",
            "--jobs",
            "2",
            "--no-progress",
            "--json",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
    )
    table = proc.stdout + proc.stderr
    doc = json.loads(out.read_text())
    arch = doc["architectures"]
    assert set(arch) == {"EsmModel@position_embedding_type=rotary", "LlamaModel@rope_type=dynamic"}
    for r in arch.values():
        assert r["status"] == "built" and r["forward"]["ran"], table
    # Dynamic NTK's growth branch ran: it keeps the length as a plain tensor (on the baseline).
    dynamic = arch["LlamaModel@rope_type=dynamic"]
    assert dynamic["allowlisted"] == ["rotary_emb.max_seq_len_cached"], table
    assert doc["summary"]["sweep"]["variants"] == 2 and doc["summary"]["sweep"]["built"] == 2
    assert "swept variants" in table and proc.returncode == 0, table
