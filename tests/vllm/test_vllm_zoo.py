"""The vLLM zoo's subset on vLLM's own code (issue 17): every kind of model vLLM's CPU backend
runs, built by vLLM's engine with dummy weights, through the census, the capture of the engine's
own forward and vLLM's in-place reload, against the shipped baseline.

One run of ``python -m graphcheck.zoo --engine vllm --subset --baseline`` in a fresh process
(the way `make test` and a user run it); the tests read its JSON report. The baseline holds on
every CPU of this machine kind: the run compares against this CPU's sites, and the
architectures whose code paths depend on the CPU run again as on the lower rungs this CPU can
emulate (``--cpu-capability``, graphcheck.zoo.cpu).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from graphcheck.integrations._vllm_foreign import EMPTIED, HANDLE
from graphcheck.zoo import cpu
from graphcheck.zoo import report as rep
from graphcheck.zoo.vllm_engine import BASELINE
from graphcheck.zoo.vllm_engine.catalog import BF16_ONLY
from graphcheck.zoo.vllm_engine.subset import (
    BUILD_LIMITS,
    CAPTURE_LIMITS,
    RELOAD_LIMITS,
    SUBSET,
)

#: The rungs below this CPU's that the tier emulates (graphcheck.zoo.cpu): the AVX2 machines and
#: the AVX-512 BF16 ones without AMX (AMD Zen 4/5) take other code paths in vLLM.
EMULATED = ("avx2", "avx512_bf16")
#: The subset's architectures whose code paths depend on the CPU (bfloat16 and int8 kernels).
CPU_DEPENDENT = (
    "LlamaForCausalLM@bf16",
    "LlamaForCausalLM@w8a8",
    "LlamaForCausalLM@awq",
    "Qwen3NextForCausalLM",
    "DeepseekV2ForCausalLM",
    "DeepseekV2ForCausalLM@bf16",
)


def limit(limits: dict[str, dict[str, str]], name: str, level: str) -> str:
    """The words of the error for ``name`` on a CPU of capability ``level`` ("*": every CPU)."""
    return limits.get(name, {}).get(level) or limits.get(name, {}).get("*", "")


def check_every_kind(doc: dict[str, Any], table: str, level: str) -> None:
    """Every architecture of ``doc`` built, captured and reloaded, but for the named limits."""
    for name, r in doc["architectures"].items():
        build = limit(BUILD_LIMITS, name, level)
        if build:
            assert r["status"] != "built" and build in r["error"], (name, level, r["error"])
            continue
        assert r["status"] == "built", (name, level, r["error"], table)
        capture = limit(CAPTURE_LIMITS, name, level)
        if capture:
            assert capture in r["capture_status"], (name, level, r["capture_status"])
            continue
        assert r["capture_status"] == "ran", (name, r["capture_status"], table)
        assert r["steps"][0]["label"] == "capture", name
        # Drafts too: recorded with their target's attention metadata, their forward is
        # repeatable (docs/vllm-zoo.md, "Open questions"). Outputs and KV cache writes.
        assert r["steps"][0]["outputs_equal"], (name, r["steps"][0]["max_abs_diff"])
        status = str((r["reload"] or {}).get("status"))
        reload = limit(RELOAD_LIMITS, name, level)
        assert status == "ran" if not reload else reload in status, (name, level, status)


def zoo(out: Path, *options: str) -> tuple[dict[str, Any], str, int]:
    """One run of the zoo on vLLM in a fresh process, against the baseline, and its report."""
    proc = subprocess.run(
        [sys.executable, "-m", "graphcheck.zoo", "--engine", "vllm", "--baseline",
         "--jobs", "2", "--timeout", "240", "--no-progress", "--json", str(out), *options],
        capture_output=True, text=True, timeout=840, check=False,
    )  # fmt: skip
    table = proc.stdout + proc.stderr[-4000:]
    assert out.exists(), table
    return json.loads(out.read_text()), table, proc.returncode


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, int]:
    return zoo(tmp_path_factory.mktemp("vllm-zoo") / "vllm-zoo.json", "--subset")


def test_every_kind_builds_captures_and_reloads(run: tuple[dict[str, Any], str, int]) -> None:
    doc, table, _ = run
    assert doc["engine"] == "vllm" and doc["vllm"] == __import__("vllm").__version__
    assert sorted(doc["architectures"]) == sorted(SUBSET), table
    check_every_kind(doc, table, cpu.native())


def test_against_the_baseline(run: tuple[dict[str, Any], str, int]) -> None:
    doc, table, code = run
    assert doc["cpu_capability"] == cpu.native(), "the run records the CPU it had"
    arch = doc["architectures"]
    for key in ("new_findings", "capture_new_findings", "later_new_findings"):
        new = {n: r[key] for n, r in arch.items() if r[key]}
        assert not new, f"{key} (not in the baseline on {cpu.native()}):\n{new}\n{table}"
    assert not doc["summary"]["stale_allow"], table
    assert code == 0, table
    # The table pads its labels to the longest one, which depends on the rows.
    assert re.search(rf"^CPU capability +{cpu.native()}:", table, re.M), table


@pytest.mark.parametrize("level", EMULATED)
def test_the_baseline_holds_on_a_lower_cpu(
    level: str, tmp_path: Path, run: tuple[dict[str, Any], str, int]
) -> None:
    if cpu.rank(level) >= cpu.rank(cpu.native()):
        pytest.skip(f"this CPU ({cpu.native()}) cannot emulate {level}: not below it")
    only = [option for name in CPU_DEPENDENT for option in ("--only", name)]
    doc, table, code = zoo(tmp_path / "emulated.json", "--cpu-capability", level, *only)
    assert doc["cpu_capability"] == level and doc["native_cpu_capability"] == cpu.native()
    check_every_kind(doc, table, level)
    assert code == 0, table
    # The sites that depend on the CPU differ from the native run's: the emulation is real.
    native = run[0]["architectures"]
    differ = [
        name
        for name in CPU_DEPENDENT
        if (native[name]["status"], {f["path"] for f in native[name]["findings"]})
        != (doc["architectures"][name]["status"],
            {f["path"] for f in doc["architectures"][name]["findings"]})
    ]  # fmt: skip
    assert differ or cpu.native() == level, table


def test_what_the_baseline_lists_for_vllm_fails_a_run_without_it(
    run: tuple[dict[str, Any], str, int],
) -> None:
    """The real run's findings against the baseline without the entries of each kind."""
    doc, _, _ = run
    entries = rep.read_zoo_allowlist(BASELINE)
    llama = {"LlamaForCausalLM": doc["architectures"]["LlamaForCausalLM"]}
    assert not rep.evaluate(llama, entries, cpu.native()).failed()
    kinds = {
        HANDLE: lambda e: not e.verdict and e.path.endswith(".handler_tensor"),
        EMPTIED: lambda e: not e.verdict and e.path.endswith("_proj.weight"),
        "dangling": lambda e: e.verdict == "dangling",
    }
    for kind, drop in kinds.items():
        kept = [e for e in entries if not (e.arch == "LlamaForCausalLM" and drop(e))]
        assert len(kept) < len(entries), kind
        ev = rep.evaluate(llama, kept, cpu.native())
        assert ev.failed(), kind
        new = [*ev.new["LlamaForCausalLM"], *ev.later_new["LlamaForCausalLM"]]
        assert new and all(("dangling" in n) == (kind == "dangling") for n in new), (kind, new)


def test_the_cpu_linear_weights_are_memory_torch_does_not_own(
    run: tuple[dict[str, Any], str, int],
) -> None:
    doc, _, _ = run
    llama = doc["architectures"]["LlamaForCausalLM"]
    kinds = {f["kind"] for f in llama["foreign"]}
    assert kinds == {HANDLE, EMPTIED}
    handles = [f for f in llama["foreign"] if f["kind"] == HANDLE]
    emptied = [f for f in llama["foreign"] if f["kind"] == EMPTIED]
    # Every dense projection of both layers: qkv, o, gate_up, down.
    assert {f["path"] for f in emptied} >= {
        f"model.layers.{i}.{p}.weight"
        for i in (0, 1)
        for p in ("self_attn.qkv_proj", "self_attn.o_proj", "mlp.gate_up_proj", "mlp.down_proj")
    }
    assert all(f["shape"] == [0] for f in emptied)
    assert all(f["dtype"] == "int64" and f["shape"] == [] for f in handles)
    assert all("oneDNN" in f["what"] for f in handles)
    # Never ordinary findings: the census findings hold no handle.
    assert not [f for f in llama["findings"] if "handler_tensor" in f["path"]]
    # The graph reads the handles: reported apart from the unregistered owners.
    assert llama["capture"]["unregistered"] == []
    assert llama["capture"]["foreign"]
    assert all(o.endswith("cpu_linear.handler.handler_tensor") for o in llama["capture"]["foreign"])


def test_vllms_reload_frees_what_a_captured_graph_reads(
    run: tuple[dict[str, Any], str, int],
) -> None:
    doc, _, _ = run
    llama = doc["architectures"]["LlamaForCausalLM"]
    assert llama["reload"]["status"] == "ran" and llama["reload"]["eager_changed"]
    capture, after = llama["steps"]
    assert capture["outputs_equal"] and capture["replay"] == "ran"
    # process_weights_after_loading packs the new weights into new oneDNN primitives and frees
    # the old ones: the captured graph's handles dangle, and graphcheck refuses to replay it.
    assert after["label"] == "after_reload"
    assert after["replay"].startswith("refused: CapturedGraph::replay: op")
    assert "_C::onednn_mm" in after["replay"]
    assert set(after["owners"]["dangling"]) == set(llama["capture"]["foreign"])
    assert not after["outputs_equal"]
    # Each dangling handle is a finding of its layer after the reload, which the baseline
    # lists as vLLM's (docs/vllm-zoo.md): without the entry the run fails (test above).
    assert sorted(llama["later_allowlisted"]) == sorted(
        f"after_reload dangling {o}" for o in llama["capture"]["foreign"]
    )
    assert "after_reload dangling" in "".join(llama["later_allowlisted"])


def test_a_draft_model_is_checked_with_its_target(run: tuple[dict[str, Any], str, int]) -> None:
    doc, _, _ = run
    eagle = doc["architectures"]["EagleLlamaForCausalLM"]
    assert eagle["engine"]["speculative_config"]["method"] == "eagle"
    assert eagle["engine"]["model_class"] == "EagleLlamaForCausalLM"
    paths = [f["path"] for f in (*eagle["findings"], *eagle["foreign"])]
    assert any(p.startswith("draft_model.") for p in paths), paths
    assert any(p.startswith("model.") for p in paths), paths
    # The target and the draft are one registry: what the draft reaches of its target (its
    # attention layers, through vLLM's config) is registered, so only the plain attributes are
    # findings, whichever path reached them first.
    sites = {f["site"]["attribute"] for f in eagle["findings"]}
    assert sites == {"_k_scale_cpu", "_v_scale_cpu"}, sites
    assert eagle["capture_status"] == "ran"


def test_the_report_is_the_zoos_shape(run: tuple[dict[str, Any], str, int]) -> None:
    doc, table, _ = run
    assert list(doc)[:2] == ["engine", "vllm"]
    summary = doc["summary"]
    assert summary["foreign"][HANDLE] > 0 and summary["foreign"][EMPTIED] > 0
    assert "memory torch does not own" in table and table.startswith("vllm ")
    for name, r in doc["architectures"].items():
        assert {"status", "census", "capture", "steps", "seconds", "foreign", "reload"} <= set(r)
        assert r["category"] in {"text", "multimodal", "embedding", "speculative",
                                 "transformers", "classification", "reward",
                                 "late_interaction", "other"}, name  # fmt: skip
    assert Path(BASELINE).read_text().startswith("# graphcheck.zoo baseline allowlist for vllm")


def _listed(*options: str) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "graphcheck.zoo", "--engine", "vllm", "--list", *options],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    return proc.stdout.split()


def test_the_bfloat16_pass_runs_each_class_once_as_its_bf16_row() -> None:
    classes = [n for n in _listed() if "@" not in n]
    rows = _listed("--dtype", "bfloat16")
    assert [n.partition("@")[0] for n in rows] == classes
    # A class whose CPU kernels are bfloat16-only runs as itself: its plain row is bfloat16.
    assert [n for n in rows if "@" not in n] == [c for c in classes if c in BF16_ONLY]
    assert all(n.endswith("@bf16") for n in rows if "@" in n)
    assert _listed("--dtype", "bfloat16", "--only", "LlamaForCausalLM") == ["LlamaForCausalLM@bf16"]


_SERVED_CONFIGS = """
import sys, tempfile
from pathlib import Path
from graphcheck.zoo.vllm_engine.catalog import enumerate_architectures
from graphcheck.zoo.vllm_engine.worker import write_served
rows = {a.name: a for a in enumerate_architectures(with_variants=False)}
with tempfile.TemporaryDirectory() as folder:
    for name in sys.argv[1:]:
        served = write_served(Path(folder) / name, rows[name])
        print(name, type(served.config).__name__, served.class_name)
"""


def test_a_drafts_target_is_served_from_the_config_of_its_own_row() -> None:
    # Kimi-K3's config is one only vLLM's registry module names (vllm/models/kimi_k3): its MTP
    # draft's target is written from it too, not from the Llama config the zoo falls back to.
    names = ["KimiK3ForConditionalGeneration", "KimiK3MTPModel"]
    proc = subprocess.run(
        [sys.executable, "-c", _SERVED_CONFIGS, *names],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    lines = [line.split() for line in proc.stdout.splitlines() if line.startswith("Kimi")]
    assert lines == [
        ["KimiK3ForConditionalGeneration", "KimiK3Config", "KimiK3ForConditionalGeneration"],
        ["KimiK3MTPModel", "KimiK3Config", "KimiK3ForConditionalGeneration"],
    ], proc.stdout + proc.stderr
