"""The zoo's CPU capabilities: baseline entries that hold on some CPUs only, and emulation.

A baseline written on one CPU must hold on every CPU of the machines `make test` runs on: an
entry with a CPU condition (``[cpu=avx512_bf16,amx] Arch:glob``) is compared only on those
capabilities, and is neither required nor stale elsewhere. The comparison is tested here for
each rung of the ladder with fabricated results (no engine needed); the emulation, which runs
a lower rung's code paths on a higher CPU, in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from graphcheck.zoo import cpu
from graphcheck.zoo import report as rep
from graphcheck.zoo.vllm_engine import BASELINE as VLLM_BASELINE

CONV = "model.layers.0.linear_attn.conv1d._cpu_unpacked_conv_weight"
SCALE = "model.layers.0.self_attn.attn._k_scale_cpu"


def built(*paths: str, owners: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "status": "built",
        "forward": {"eligible": True, "ran": True},
        "findings": [{"path": p} for p in paths],
        "capture": {"summary": {}, "unregistered": list(owners)},
    }


def _entries(tmp_path: Path) -> list[rep.AllowEntry]:
    f = tmp_path / "allow.txt"
    f.write_text(
        "*:model.layers.*.self_attn.attn._k_scale_cpu\n"
        "[cpu=avx512_bf16,amx] Qwen3NextForCausalLM:model.layers.*.linear_attn.conv1d."
        "_cpu_unpacked_conv_weight\n"
        "[cpu=default,avx2, avx512] L@bf16:model.layers.*.mlp.down_proj.weight_copy\n"
    )
    return rep.read_zoo_allowlist(f)


def test_a_cpu_condition_is_read_and_written_back(tmp_path: Path) -> None:
    entries = _entries(tmp_path)
    assert [e.cpus for e in entries] == [
        (), ("avx512_bf16", "amx"), ("default", "avx2", "avx512")
    ]  # fmt: skip
    assert str(entries[2]) == (
        "[cpu=default,avx2,avx512] L@bf16:model.layers.*.mlp.down_proj.weight_copy"
    )
    assert entries[0].holds_on("default") and not entries[1].holds_on("avx512")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("[cpu=avx1024] A:x", r"allow.txt:1: condition '\[cpu=avx1024\]': expected capabilities "
                              r"among default, avx2, avx512, avx512_bf16, amx, found avx1024"),
        ("[cpu=] A:x", r"allow.txt:1: condition '\[cpu=\]': .* found none"),
        ("[gpu=amx] A:x", r"allow.txt:1: expected a condition such as '\[cpu=avx512_bf16,amx\]"),
        ("[cpu=amx A:x", r"allow.txt:1: expected a condition such as"),
        ("[verdict=gone] A:x", r"allow.txt:1: condition '\[verdict=gone\]': expected one verdict "
                               r"of dangling, stale, lost, found gone"),
        ("[verdict=stale,lost] A:x", r"expected one verdict of .* found stale, lost"),
    ],
)  # fmt: skip
def test_a_bad_condition_names_the_line_and_what_it_expects(
    tmp_path: Path, line: str, message: str
) -> None:
    f = tmp_path / "allow.txt"
    f.write_text(line + "\n")
    with pytest.raises(ValueError, match=message):
        rep.read_zoo_allowlist(f)


# What each rung of vLLM's CPU backend finds in Qwen3-Next (the conv weight's unpacked copy
# exists from AVX-512 BF16 up) and in a bfloat16 Llama (a site of the lower rungs only).
COPY = "model.layers.0.mlp.down_proj.weight_copy"
RUNS = {
    "default": {"L@bf16": (COPY,), "Qwen3NextForCausalLM": ()},
    "avx2": {"L@bf16": (COPY,), "Qwen3NextForCausalLM": ()},
    "avx512": {"L@bf16": (COPY,), "Qwen3NextForCausalLM": ()},
    "avx512_bf16": {"L@bf16": (), "Qwen3NextForCausalLM": (CONV,)},
    "amx": {"L@bf16": (), "Qwen3NextForCausalLM": (CONV,)},
}


@pytest.mark.parametrize("level", cpu.LEVELS)
def test_each_rung_is_compared_against_its_own_sites(tmp_path: Path, level: str) -> None:
    entries = _entries(tmp_path)
    results = {name: built(SCALE, *extra) for name, extra in RUNS[level].items()}
    ev = rep.evaluate(results, entries, level)
    assert not any(ev.new.values()), ev.new
    assert not ev.stale, [str(e) for e in ev.stale]
    other = {str(e) for e in ev.other_cpu}
    assert other == {str(e) for e in entries if e.cpus and level not in e.cpus}
    summary = rep.summarize(results, ev, 1.0, 1, level)
    assert summary["cpu_capability"] == level
    assert summary["other_cpu_allow"] == sorted(other, key=[str(e) for e in entries].index)
    assert f"CPU capability       {level}: {len(other)} allow entries" in rep.format_table(
        summary, "0", "vllm"
    )


@pytest.mark.parametrize("level", cpu.LEVELS)
def test_a_site_of_another_rung_is_a_new_finding_and_its_entry_is_stale(
    tmp_path: Path, level: str
) -> None:
    # The run finds the sites of the opposite half of the ladder: what a wrong baseline says.
    opposite = "amx" if cpu.rank(level) < cpu.rank("avx512_bf16") else "avx2"
    entries = _entries(tmp_path)
    results = {name: built(SCALE, *extra) for name, extra in RUNS[opposite].items()}
    ev = rep.evaluate(results, entries, level)
    new = {n: paths for n, paths in ev.new.items() if paths}
    assert new == {n: list(p) for n, p in RUNS[opposite].items() if p}
    assert [str(e) for e in ev.stale] == [str(e) for e in entries if level in e.cpus]


def test_without_a_cpu_every_entry_takes_part(tmp_path: Path) -> None:
    ev = rep.evaluate({"Qwen3NextForCausalLM": built(SCALE)}, _entries(tmp_path))
    assert not ev.other_cpu and [e.line for e in ev.stale] == [2]


def test_the_ladder() -> None:
    assert cpu.native() in cpu.LEVELS and cpu.current() == cpu.native()
    assert [cpu.rank(level) for level in cpu.LEVELS] == list(range(len(cpu.LEVELS)))
    with pytest.raises(ValueError, match="unknown CPU capability 'sse'; expected one of default"):
        cpu.rank("sse")


_PROBE = """
import json, os, sys
from graphcheck.zoo import cpu
level = cpu.emulate(sys.argv[1])
import torch
print(json.dumps({
    "level": level, "current": cpu.current(), "native": cpu.native(),
    "amx": torch.cpu._is_amx_tile_supported(), "bf16": torch.cpu._is_avx512_bf16_supported(),
    "avx512": torch.cpu._is_avx512_supported(), "avx2": torch.cpu._is_avx2_supported(),
    "caps_amx": torch.cpu.get_capabilities().get("amx_tile"),
    "caps_avx512": torch.cpu.get_capabilities().get("avx512_f"),
    "aten": torch.backends.cpu.get_cpu_capability(),
    "aten_env": os.environ.get("ATEN_CPU_CAPABILITY"),
    "onednn": os.environ.get("ONEDNN_MAX_CPU_ISA"),
}))
"""


def _emulated(level: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, level], capture_output=True, text=True, check=True
    )
    return dict(json.loads(out.stdout))


@pytest.mark.parametrize("level", cpu.LEVELS)
def test_emulation_masks_the_probes_above_the_rung(level: str) -> None:
    top = cpu.native()
    if cpu.rank(level) > cpu.rank(top):
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE, level], capture_output=True, text=True, check=False
        )
        assert proc.returncode != 0
        assert f"cannot emulate CPU capability {level!r} on a CPU whose capability" in proc.stderr
        return
    got = _emulated(level)
    assert (got["level"], got["current"], got["native"]) == (level, level, top)
    rank = cpu.rank(level)
    assert got["amx"] is (rank >= cpu.rank("amx"))
    assert got["bf16"] is (rank >= cpu.rank("avx512_bf16"))
    assert got["avx512"] is (rank >= cpu.rank("avx512"))
    assert got["avx2"] is (rank >= cpu.rank("avx2"))
    assert got["caps_amx"] is (rank >= cpu.rank("amx"))
    assert got["caps_avx512"] is (rank >= cpu.rank("avx512"))
    if level != top:
        assert got["aten_env"] == cpu.ATEN_NAMES[level]
        assert got["aten"].lower() == cpu.ATEN_NAMES[level]
        # oneDNN capped too: vLLM's bfloat16 matmul exists only from AVX-512 up.
        assert got["onednn"] == cpu.ONEDNN_ISAS[level]
    else:
        assert got["onednn"] is None


def test_the_zoo_refuses_a_capability_this_cpu_lacks_before_running() -> None:
    from graphcheck.zoo.__main__ import main

    top = cpu.native()
    if top == cpu.LEVELS[-1]:
        assert main(["--cpu-capability", "avx9000", "--list"]) == 2
        return
    above = cpu.LEVELS[cpu.rank(top) + 1]
    assert main(["--cpu-capability", above, "--list"]) == 2


def test_the_vllm_baseline_names_capabilities_that_exist() -> None:
    entries = rep.read_zoo_allowlist(VLLM_BASELINE)
    conditioned = [e for e in entries if e.cpus]
    assert conditioned, "the vLLM baseline records which sites depend on the CPU"
    assert all(set(e.cpus) <= set(cpu.LEVELS) for e in conditioned)


def _doc(level: str, results: dict[str, Any]) -> dict[str, Any]:
    return {"engine": "vllm", "vllm": "0.32.0", "cpu_capability": level, "architectures": results}


def _site(path: str, attribute: str) -> dict[str, Any]:
    return {"path": path, "site": {"owner": "vllm.X", "attribute": attribute, "file": "x.py"}}


def test_runs_on_several_cpus_merge_into_one_baseline(tmp_path: Path) -> None:
    from graphcheck.zoo.baseline import main as merge

    docs = {}
    for level in ("avx2", "avx512_bf16", "amx"):
        results: dict[str, Any] = {}
        for name, extra in RUNS[level].items():
            r = built(*(), owners=())
            r["findings"] = [_site(SCALE, "_k_scale_cpu")] + [
                _site(p, p.rsplit(".", 1)[-1]) for p in extra
            ]
            r["model_type"] = "t"
            results[name] = r
        results["OnlyNative"] = dict(built(), findings=[_site("a.0.b", "b")], model_type="t")
        if level != "amx":
            del results["OnlyNative"]
        # A class that does not build on AMX (vLLM's AMX MLA refuses float32) while its
        # variant does: the class's sites are unknown there, so its entries hold where it built.
        results["M"] = dict(built(), findings=[_site("m.0.h", "h")], model_type="t")
        results["M@bf16"] = dict(built(), findings=[_site("m.0.p", "p")], model_type="t")
        if level == "amx":
            results["M"] = {"status": "failed", "error": "AssertionError", "model_type": "t"}
        docs[level] = _doc(level, results)
        (tmp_path / f"{level}.json").write_text(json.dumps(docs[level]))
    out = tmp_path / "baseline.txt"
    assert merge(["--output", str(out), *(str(tmp_path / f"{lv}.json") for lv in docs)]) == 0
    text = out.read_text()
    assert "from runs on the CPU capabilities avx2, avx512_bf16, amx" in text
    entries = {str(e) for e in rep.read_zoo_allowlist(out)}
    assert entries == {
        "L@bf16:model.layers.*.self_attn.attn._k_scale_cpu",
        "Qwen3NextForCausalLM:model.layers.*.self_attn.attn._k_scale_cpu",
        "[cpu=avx2] L@bf16:model.layers.*.mlp.down_proj.weight_copy",
        "[cpu=avx512_bf16,amx] Qwen3NextForCausalLM:"
        "model.layers.*.linear_attn.conv1d._cpu_unpacked_conv_weight",
        "OnlyNative:a.*.b",  # ran on one capability only: unconditional
        "[cpu=avx2,avx512_bf16] M:m.*.h",
        "M@bf16:m.*.p",
    }
    for level, doc in docs.items():
        ev = rep.evaluate(doc["architectures"], rep.read_zoo_allowlist(out), level)
        assert not ev.failed(), (level, ev)


def test_the_merge_refuses_reports_it_cannot_place(tmp_path: Path) -> None:
    from graphcheck.zoo.baseline import main as merge

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"engine": "vllm", "vllm": "0.32.0", "architectures": {}}))
    assert merge(["--output", str(tmp_path / "o.txt"), str(bad)]) == 2
    other = tmp_path / "other.json"
    other.write_text(json.dumps(_doc("amx", {}) | {"vllm": "0.33.0"}))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_doc("avx2", {})))
    assert merge(["--output", str(tmp_path / "o.txt"), str(good), str(other)]) == 2
    assert merge(["--output", str(tmp_path / "o.txt"), str(tmp_path / "missing.json")]) == 2


def test_a_baseline_is_brought_in_line_with_a_run_on_another_rung(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from graphcheck.zoo.baseline import main as merge
    from graphcheck.zoo.baseline import updated_text

    baseline = tmp_path / "baseline.txt"
    baseline.write_text(
        "# a baseline from runs on avx512_bf16 and amx\n"
        "\n"
        "# === A (t; ran on avx512_bf16, amx)\n"
        "A:m.*.kept\n"  # found on avx2 too: unchanged
        "A:m.*.handle\n"  # stale on avx2: holds above it only
        "[cpu=avx2,amx] A:m.*.packed\n"  # stale on avx2: loses the rung
        "[cpu=avx2] A:m.*.gone\n"  # stale on its only rung: removed
        "[cpu=amx] A:m.*.scale\n"  # found on avx2 too: widened
        "[cpu=amx] [verdict=dangling] A:m.*.scale\n"  # another verdict: not widened
        "# === B (t; ran on amx)\n"
        "[cpu=amx] B:b.*.w\n"  # B does not build on avx2: untouched
    )
    run = _doc(
        "avx2",
        {
            "A": dict(
                built(),
                model_type="t",
                findings=[
                    _site("m.0.kept", "kept"),
                    _site("m.0.scale", "scale"),
                    _site("m.0.fresh", "fresh"),
                ],
            ),
            "B": {"status": "failed", "error": "refused", "model_type": "t"},
        },
    )
    before = rep.read_zoo_allowlist(baseline)
    text, counts = updated_text(baseline, run)
    assert counts == {"narrowed": 2, "removed": 1, "widened": 1, "added": 1}
    assert text.splitlines() == [
        "# a baseline from runs on avx512_bf16 and amx",
        "",
        "# === A (t; ran on avx512_bf16, amx)",
        "A:m.*.kept",
        "[cpu=avx512,avx512_bf16,amx] A:m.*.handle",
        "[cpu=amx] A:m.*.packed",
        "[cpu=avx2,amx] A:m.*.scale",
        "[cpu=amx] [verdict=dangling] A:m.*.scale",
        "# === B (t; ran on amx)",
        "[cpu=amx] B:b.*.w",
        "",
        "# === A (t; ran on avx2)",
        "# vllm.X.fresh (x.py): 1 storage(s), static",
        "[cpu=avx2] A:m.*.fresh",
    ]
    after_file = tmp_path / "after.txt"
    after_file.write_text(text)
    after = rep.read_zoo_allowlist(after_file)
    assert not rep.evaluate(run["architectures"], after, "avx2").failed()
    assert rep.evaluate(run["architectures"], before, "avx2").failed()  # the run needed it
    # Nothing changes on the rungs the run did not have.
    for level in ("avx512", "avx512_bf16", "amx"):
        held = [
            {(e.arch, e.path, e.verdict) for e in es if e.holds_on(level)} for es in (before, after)
        ]
        assert held[0] == held[1], level
    # The command line: in place, one line of counts per report; one of --output/--update.
    report = tmp_path / "avx2.json"
    report.write_text(json.dumps(run))
    assert merge(["--update", str(baseline), str(report)]) == 0
    assert baseline.read_text() == text
    assert "2 narrowed, 1 removed, 1 widened, 1 added" in capsys.readouterr().out
    assert merge(["--update", str(baseline), str(report)]) == 0  # again: nothing left to do
    assert baseline.read_text() == text
    assert "0 narrowed, 0 removed, 0 widened, 0 added" in capsys.readouterr().out
    assert merge([str(report)]) == 2
    assert "one of them; got neither" in capsys.readouterr().err
    assert merge(["--update", str(baseline), "--new-only", str(report)]) == 2
    assert "--update keeps the file's own lines" in capsys.readouterr().err
    assert baseline.read_text() == text
