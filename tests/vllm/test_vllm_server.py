"""A real vLLM OpenAI server on this CPU (vllm_server.py): the end-to-end tier of the plugin.

Each test starts ``python -m vllm.entrypoints.openai.api_server`` on a tiny local Llama
checkpoint (three processes: the API server, the engine core, the worker), talks to it over
HTTP and stops its process group. About a minute per server on two cores, most of it three
interpreters importing torch and vLLM one after another.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from graphcheck.zoo.vllm_engine.environment import runtime_dir
from vllm_server import VllmServer, write_checkpoint, write_eagle_draft

PROMPT = "t10 t11 t12 t13"
TOKENS = 8


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two checkpoints of the same tiny Llama with different weights (seeds 0 and 1)."""
    root = tmp_path_factory.mktemp("checkpoints")
    return write_checkpoint(root / "a", seed=0), write_checkpoint(root / "b", seed=1)


def graphcheck_errors(log: str) -> list[str]:
    """The log's ERROR lines that name graphcheck (the environment's own path, which holds
    ``graphcheck``, removed first)."""
    lines = (line.replace(sys.prefix, "<venv>") for line in log.splitlines())
    return [line for line in lines if "ERROR" in line and "graphcheck" in line.lower()]


def test_server_without_the_flag_serves_and_writes_no_reports(
    checkpoints: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = checkpoints
    cwd = tmp_path / "cwd"
    # The registry's inspection of the model class is cached where the zoo keeps it.
    with VllmServer(a, tmp_path / "runtime", cwd=cwd, vllm_cache=runtime_dir() / "vllm") as server:
        assert "GRAPHCHECK" not in server.env
        server.wait_healthy(timeout=240)
        first = server.complete(PROMPT, TOKENS)
        assert len(first.split()) == TOKENS, first
        assert server.complete(PROMPT, TOKENS) == first  # greedy: the same answer again

        # vLLM's in-place reload through the dev endpoint, once per worker.
        assert server.collective_rpc("reload_weights", {"weights_path": str(b)}) == [None]
        other = server.complete(PROMPT, TOKENS)
        assert other != first, "the completion did not change with the other weights"
        assert server.collective_rpc("reload_weights", {"weights_path": str(a)}) == [None]
        assert server.complete(PROMPT, TOKENS) == first
    assert server.returncode == 0, server
    assert not any(p.name.startswith("graphcheck") for p in cwd.rglob("*")), sorted(cwd.rglob("*"))
    assert not (tmp_path / "runtime" / "graphcheck-reports").exists()
    assert not graphcheck_errors(server.log_text()), server


# --- GRAPHCHECK=1 ----------------------------------------------------------------------------

# The dense layers' oneDNN handles (float32 on this machine's CPU backend): what the vLLM corpus
# finds in LlamaForCausalLM (docs/vllm-zoo.md, "memory torch does not own").
HANDLE = "model.layers.0.self_attn.qkv_proj.cpu_linear.handler.handler_tensor"
# The attention layers' host copies of their KV-cache scales: the corpus's baseline site.
SCALE = "model.layers.0.self_attn.attn._k_scale_cpu"


def index(folder: Path) -> list[dict[str, Any]]:
    """The check points the watch wrote into ``folder`` (``index.jsonl``), in order."""
    lines = (folder / "index.jsonl").read_text().splitlines()
    return sorted((json.loads(line) for line in lines), key=lambda e: (e["time"], e["seq"]))


def report(entry: dict[str, Any]) -> dict[str, Any]:
    """The JSON report of one check point."""
    return json.loads(Path(entry["files"]["report_json"]).read_text())


def owners(entry: dict[str, Any], verdicts: set[str]) -> set[str]:
    """The owners of the check point's findings with one of ``verdicts``."""
    return {f["owner"] for f in report(entry)["findings"] if f["verdict"] in verdicts}


def serve_reload_serve(server: VllmServer, b: Path, workers: int) -> tuple[str, str]:
    """Healthy, a completion, a reload with ``b``'s weights through the server's endpoint, a
    completion again: the two answers."""
    server.wait_healthy(timeout=300)
    first = server.complete(PROMPT, TOKENS)
    assert server.collective_rpc("reload_weights", {"weights_path": str(b)}) == [None] * workers
    return first, server.complete(PROMPT, TOKENS)


def assert_worker_reports(entries: list[dict[str, Any]], role: str) -> None:
    """One worker's check points: the census at load, the CPU twin's capture, the reload."""
    mine = [e for e in entries if e["role"] == role]
    assert [e["label"] for e in mine] == ["load", "capture", "after_reload"], mine
    load, capture, reload = mine
    # The census names the corpus's sites in the served model, by path, before any capture.
    census = {line.split(":")[0] for line in load["census"]}
    assert HANDLE in census and SCALE in census, load["census"]
    assert not load["ok"]
    # The CPU twin reads the dense layers' handles: unregistered, named as memory torch does
    # not own, with the replay equal to an eager forward at capture.
    assert HANDLE in owners(capture, {"unregistered"})
    assert any("memory torch does not own" in n and "oneDNN" in n for n in capture["notes"])
    assert any(n.endswith(": equal") for n in capture["notes"]), capture["notes"]
    # vLLM's reload repacks every dense layer into a new primitive: the graph still reads the
    # old handles (moved: stale, or freed: dangling), and its replay no longer matches.
    assert HANDLE in owners(reload, {"stale", "dangling"}), report(reload)["summary"]
    assert any(
        "replayed against an eager forward" in n and ": equal" not in n for n in reload["notes"]
    )
    for entry in mine:
        assert Path(entry["files"]["report_text"]).is_file()


def test_server_with_the_flag_checks_load_capture_and_reload(
    checkpoints: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = checkpoints
    reports = tmp_path / "reports"
    env = {"GRAPHCHECK": "1", "GRAPHCHECK_DIR": str(reports)}
    with VllmServer(a, tmp_path / "runtime", env=env, vllm_cache=runtime_dir() / "vllm") as server:
        first, other = serve_reload_serve(server, b, workers=1)
        assert len(first.split()) == TOKENS and other != first  # still served, new weights
    assert server.returncode == 0, server
    entries = index(reports)
    assert {e["role"] for e in entries} == {"worker rank 0"}  # only the worker checks
    assert_worker_reports(entries, "worker rank 0")
    log = server.log_text()
    assert "graphcheck[worker rank 0]: check point #2 'capture'" in log
    assert "WARNING" in next(line for line in log.splitlines() if "#2 'capture'" in line)
    assert not graphcheck_errors(log), server


def findings_of(entry: dict[str, Any], graph: int) -> dict[str, set[str]]:
    """Verdict -> the owners of graph ``graph``'s findings in the check point."""
    out: dict[str, set[str]] = {}
    for f in report(entry)["findings"]:
        if f["graph"] == graph:
            out.setdefault(f["verdict"], set()).add(f["owner"])
    return out


def test_a_speculative_decoding_draft_is_a_twin_of_its_own(
    checkpoints: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = checkpoints
    draft = write_eagle_draft(tmp_path / "draft", seed=0)
    spec = {"method": "eagle", "model": str(draft), "num_speculative_tokens": 2}
    reports = tmp_path / "reports"
    env = {"GRAPHCHECK": "1", "GRAPHCHECK_DIR": str(reports)}
    with VllmServer(
        a,
        tmp_path / "runtime",
        env=env,
        extra_args=("--speculative-config", json.dumps(spec)),
        vllm_cache=runtime_dir() / "vllm",
    ) as server:
        first, other = serve_reload_serve(server, b, workers=1)
        assert len(first.split()) == TOKENS and other != first
    assert server.returncode == 0, server
    assert not graphcheck_errors(server.log_text()), server
    load, capture, reload = index(reports)
    assert [load["label"], capture["label"], reload["label"]] == ["load", "capture", "after_reload"]
    # The served model and its draft are one registry, named as the load census names them.
    target_handle, draft_handle = (
        f"model.{HANDLE}",
        "draft_model.model.fc.cpu_linear.handler.handler_tensor",
    )
    census = {line.split(":")[0] for line in load["census"]}
    assert {target_handle, draft_handle} <= census, load["census"]
    # Two twins: the served model's graph and the draft's, each replay equal to eager.
    assert capture["graphs"] == [1, 2], capture
    assert any(
        "graph 2 is the CPU twin of the speculative-decoding draft" in n
        and "EagleLlamaForCausalLM" in n
        for n in capture["notes"]
    ), capture["notes"]
    for graph in (1, 2):
        assert any(
            n.startswith(f"graph {graph}: ") and n.endswith(": equal") for n in capture["notes"]
        ), capture["notes"]
    target, drafted = findings_of(capture, 1), findings_of(capture, 2)
    assert target_handle in target["unregistered"], target
    assert draft_handle in drafted["unregistered"], drafted
    assert all(o.startswith("model.") for owners in target.values() for o in owners), target
    assert all(o.startswith("draft_model.") for owners in drafted.values() for o in owners)
    # vLLM's reload loads the served model only: the target's graph reads its old handles and
    # no longer matches; the draft's graph, whose weights stay, still does.
    target = findings_of(reload, 1)
    assert target_handle in target.get("stale", set()) | target.get("dangling", set()), target
    assert any(n.startswith("graph 1: ") and "differ" in n for n in reload["notes"])
    assert any(n.startswith("graph 2: ") and n.endswith(": equal") for n in reload["notes"])
    assert draft_handle in findings_of(reload, 2)["unregistered"]


def test_tensor_parallel_2_checks_each_rank(checkpoints: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = checkpoints
    reports = tmp_path / "reports"
    # One NUMA node here: vLLM binds each CPU worker to its own node unless told (two cores,
    # one per rank); the ranks talk over gloo.
    env = {"GRAPHCHECK": "1", "GRAPHCHECK_DIR": str(reports), "VLLM_CPU_OMP_THREADS_BIND": "0|1"}
    with VllmServer(
        a,
        tmp_path / "runtime",
        env=env,
        extra_args=("--tensor-parallel-size", "2"),
        vllm_cache=runtime_dir() / "vllm",
    ) as server:
        first, other = serve_reload_serve(server, b, workers=2)
        assert len(first.split()) == TOKENS and other != first
    entries = index(reports)
    assert {e["role"] for e in entries} == {"worker rank 0", "worker rank 1"}
    for role in ("worker rank 0", "worker rank 1"):
        assert_worker_reports(entries, role)
    assert len({e["pid"] for e in entries}) == 2  # two worker processes, each its own reports
    assert not graphcheck_errors(server.log_text()), server
    # One summary of both ranks (the CLI; CTest names the build's binary).
    cli = os.environ.get("GRAPHCHECK_CLI")
    if cli is None:
        pytest.skip("GRAPHCHECK_CLI is not set (CTest sets it to the build's graphcheck binary)")
    merged = subprocess.run([cli, "report", str(reports)], capture_output=True, text=True)
    assert merged.returncode == 1, merged.stderr  # findings
    assert "6 check points from 2 processes, 3 labels" in merged.stdout
    # Found on both ranks (how many references depends on the ops the CPU twin logs); every
    # layer's handle is one line of the family (layers.{0-1}...: 2 owners).
    family = re.escape(HANDLE).replace(r"layers\.0\.", r"layers\.(?:0|\{0-\d+\})\.")
    assert re.search(
        r"(?:STALE|DANGLING) " + family + r": (?:\d+ owners, )?\d+ references, on worker rank 0, "
        r"worker rank 1\n",
        merged.stdout,
    ), merged.stdout


def test_bad_settings_are_one_log_line_each_and_the_server_serves(
    checkpoints: tuple[Path, Path], tmp_path: Path
) -> None:
    a, b = checkpoints
    not_a_folder = tmp_path / "reports-is-a-file"
    not_a_folder.write_text("graphcheck cannot write its reports under a file\n")
    not_an_allowlist = tmp_path / "allow-is-a-folder"
    not_an_allowlist.mkdir()
    env = {
        "GRAPHCHECK": "1",
        "GRAPHCHECK_DIR": str(not_a_folder),
        "GRAPHCHECK_ALLOW": str(not_an_allowlist),
        "GRAPHCHECK_MODE": "loud",
    }
    with VllmServer(a, tmp_path / "runtime", env=env, vllm_cache=runtime_dir() / "vllm") as server:
        first, other = serve_reload_serve(server, b, workers=1)
        assert len(first.split()) == TOKENS and other != first  # served, reloaded, served
    assert server.returncode == 0, server
    lines = [line for line in server.log_text().splitlines() if "graphcheck" in line]
    worker = [line for line in lines if line.startswith("(Worker")]
    # Each bad setting is named once in the worker's log, with what was used instead.
    assert (
        sum("GRAPHCHECK_MODE 'loud': expected one of warn, error; using warn" in x for x in worker)
        == 1
    )
    assert sum("allow" in x and "no allowlist is used" in x for x in worker) == 1
    # Every check point still ran and says in one line that its files could not be written.
    unwritten = [x for x in worker if "could not write reports to" in x]
    assert len(unwritten) == 3, lines  # load, capture, after_reload
    summaries = [x for x in worker if "graphcheck[worker rank 0]: check point #" in x]
    assert len(summaries) == 3  # and, with no files, each report's text follows in the log
    assert not any("Traceback" in x for x in lines)
