"""graphcheck.watch and graphcheck.checkpoint on the CPU twin (issue 11 §1): captures through
Watch.capture, check points after sleep, wake and reloads, the report files, error mode."""

from __future__ import annotations

import gc
import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import graphcheck
from graphcheck._watch.output import merge_reports, safe_label
from graphcheck.reference import ReferenceConfig, build_reference_model, reference_inputs
from watch_fakes import PLANTED, READ_PARAMETERS, owners


@pytest.fixture(autouse=True)
def no_watch_left(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("GRAPHCHECK", "GRAPHCHECK_MODE", "GRAPHCHECK_DIR", "GRAPHCHECK_ALLOW"):
        monkeypatch.delenv(name, raising=False)
    original = torch.cuda.CUDAGraph.capture_begin
    yield
    active = graphcheck.current_watch()
    if active is not None:
        active.close()
    assert torch.cuda.CUDAGraph.capture_begin is original, "a watch left its hook installed"


def model_in_arena(variant: str) -> tuple[torch.nn.Module, graphcheck.WeightsArena]:
    arena = graphcheck.WeightsArena(1 << 30)
    return build_reference_model(ReferenceConfig(variant=variant), 0, arena), arena


def test_checkpoint_without_a_watch_is_a_no_op() -> None:
    assert graphcheck.current_watch() is None
    assert graphcheck.checkpoint("after_wake") is None


def test_watch_is_one_per_process_and_close_removes_the_hooks() -> None:
    first = graphcheck.watch(allocator_history=False)
    assert "capture_begin/capture_end wrapped" in first.capture_hooks
    assert torch.cuda.CUDAGraph.capture_begin.__graphcheck_original__ is not None
    second = graphcheck.watch(mode="error")
    assert second is first and first.mode == "error"
    with pytest.raises(ValueError, match="mode must be one of"):
        first.mode = "loud"
    first.close()
    assert graphcheck.current_watch() is None
    assert not hasattr(torch.cuda.CUDAGraph.capture_begin, "__graphcheck_original__")
    assert graphcheck.watch(allocator_history=False) is not first


def test_legacy_story_names_the_sites_in_every_check_point(tmp_path: Path) -> None:
    watch = graphcheck.watch(out_dir=tmp_path, allocator_history=False)
    model, arena = model_in_arena("legacy")
    cap = watch.capture(model, **reference_inputs(model))
    capture = watch.last
    assert capture is not None and capture.label == "capture" and capture.graphs == (1,)
    assert owners(capture.report) == {"unregistered": PLANTED}
    arena.sleep(1)
    arena.wake_up()
    assert owners(graphcheck.checkpoint("after_wake").report) == {"unregistered": PLANTED}
    arena.sleep(2, model)
    arena.wake_up()
    after = graphcheck.checkpoint("after_wake")
    assert after.label == "after_wake" and owners(after.report) == {"lost": PLANTED}
    assert cap.epochs == ["capture", "after_wake", "after_wake-2"]
    assert after.report.epoch == "after_wake" and after.report.baseline == "capture"
    assert [r.seq for r in watch.results] == [1, 2, 3]


def test_registered_story_is_clean_through_level_2_and_stale_after_rebinding() -> None:
    watch = graphcheck.watch(allocator_history=False)
    model, arena = model_in_arena("registered")
    cap = watch.capture(model, **reference_inputs(model))
    assert watch.last.ok and watch.last.report.summary["registered"] > 0
    arena.sleep(2, model)
    arena.wake_up()
    assert graphcheck.checkpoint("after_wake").ok
    with arena.loading(), torch.no_grad():
        for parameter in model.parameters():
            parameter.data = parameter.data.clone()
    rebound = graphcheck.checkpoint("after_reload")
    assert owners(rebound.report) == {"stale": READ_PARAMETERS}
    assert cap.replay() is cap.output  # the CPU twin still replays


def test_files_one_pair_per_check_point_sorting_by_time(tmp_path: Path) -> None:
    watch = graphcheck.watch(out_dir=tmp_path / "out", allocator_history=False)
    model, arena = model_in_arena("legacy")
    watch.capture(model, **reference_inputs(model))
    arena.sleep(2, model)
    arena.wake_up()
    result = graphcheck.checkpoint("after wake/level 2")
    out = tmp_path / "out"
    texts = sorted(out.glob("*.report.txt"))
    assert len(texts) == 2 and len(sorted(out.glob("*.report.json"))) == 2
    assert texts[-1].name.endswith("-002-after-wake-level-2.report.txt")  # the last sorts last
    assert texts[-1] == Path(result.files["report_text"])
    text = texts[-1].read_text()
    assert text.startswith("graphcheck watch: check point #2 'after wake/level 2' in process ")
    assert str(result.report) in text and "LOST layers.{0-1}" in text
    report = graphcheck.parse_report(Path(result.files["report_json"]).read_text())
    assert report == result.report
    index = [json.loads(line) for line in (out / "index.jsonl").read_text().splitlines()]
    assert [e["label"] for e in index] == ["capture", "after wake/level 2"]
    assert index[1]["summary"]["lost"] == 26 and index[1]["files"] == result.files
    # Each check point's page (the report embedded, the graph's map) and one index page.
    page = Path(result.files["report_html"]).read_text()
    assert page.startswith("<!DOCTYPE html>") or page.lower().startswith("<!doctype html>")
    assert '"lost":26' in page.replace(" ", "") and "after wake/level 2" in page
    listing = (out / "index.html").read_text()
    assert listing.count('<tr id="checkpoint-') == 2 and "lost 26" in listing
    assert f'href="{Path(result.files["report_html"]).name}"' in listing
    # The graph's snapshot holds every epoch so far: the CLI reproduces the check.
    snapshot = graphcheck.read_snapshot(result.files["snapshot:1"])
    assert [e.label for e in snapshot.epochs] == ["capture", "after wake/level 2"]
    assert graphcheck.check(snapshot, epoch="after wake/level 2") == report


def test_error_mode_raises_with_the_text_report_after_recording(tmp_path: Path) -> None:
    watch = graphcheck.watch(mode="error", out_dir=tmp_path, allocator_history=False)
    model, _ = model_in_arena("legacy")
    with pytest.raises(graphcheck.FindingsError) as raised:
        watch.capture(model, **reference_inputs(model))
    message = str(raised.value)
    assert message.startswith("graphcheck: check point #1 'capture': 1 graph(s)")
    assert "UNREGISTERED layers.{0-1}.self_attn.qkv_proj.quant_method.packed" in message
    assert "report file: " in message
    assert isinstance(raised.value, graphcheck.GraphcheckError)
    assert raised.value.result is watch.last and len(watch.graphs) == 1


def test_warn_mode_logs_the_summary_and_the_report(caplog: pytest.LogCaptureFixture) -> None:
    watch = graphcheck.watch(allocator_history=False)
    model, _ = model_in_arena("legacy")
    with caplog.at_level("WARNING", logger="graphcheck.watch"):
        watch.capture(model, **reference_inputs(model))
    assert "check point #1 'capture': 1 graph(s), 548 references: unregistered 26" in caplog.text
    # The line alone names what to look at: the first owners, a numbered family as one name
    # (as the text report shows it), and how many more owners.
    assert (
        "unregistered 26 in 19 owner(s): layers.{0-1}.self_attn.qkv_proj.quant_method.packed, "
        "layers.0.self_attn.qkv_proj.quant_method.sign_table, "
        "layers.{0-1}.self_attn.qkv_proj.quant_method.scale and 14 more"
    ) in caplog.text
    assert "op aten::copy_" in caplog.text  # no files: the text report goes to the log


def test_a_shared_table_says_every_path_that_reaches_it() -> None:
    # The legacy model's int8 sign tables: one storage per shape, kept by every layer's quant
    # method and by a module-level list. Named by the first path only, the report read as if
    # layer 0 alone kept it.
    watch = graphcheck.watch(allocator_history=False)
    model, _ = model_in_arena("legacy")
    watch.capture(model, **reference_inputs(model))
    result = watch.last
    assert result is not None
    owner = "layers.0.mlp.down_proj.quant_method.sign_table"
    assert owner in {f.owner for f in result.report.findings}
    assert result.aliases[owner] == (
        "layers.1.mlp.down_proj.quant_method.sign_table",
        "sign_tables[1]",
    )
    assert set(result.aliases) <= {f.owner for f in result.report.findings}
    assert (
        f"shared: {owner} is one storage, also reached as "
        "layers.1.mlp.down_proj.quant_method.sign_table, sign_tables[1] (3 paths)"
    ) in result.header().splitlines()
    watch.close()


def test_check_on_capture_off_waits_for_check_pending() -> None:
    watch = graphcheck.watch(allocator_history=False)
    watch.check_on_capture = False
    model, _ = model_in_arena("legacy")
    watch.capture(model, **reference_inputs(model, tokens=4))
    watch.capture(model, **reference_inputs(model, tokens=8))
    assert watch.results == []
    result = watch.check_pending()
    assert result.graphs == (1, 2) and result.report.summary["graphs"] == 2
    assert result.report.summary["unregistered"] == 52
    assert [f.graph for f in result.report.findings][:1] == [1]
    assert watch.check_pending() is None


def _legacy_report(allow: list[str], caplog: pytest.LogCaptureFixture) -> graphcheck.Report:
    """The legacy model's capture, checked with ``allow``, its warnings in ``caplog``."""
    watch = graphcheck.watch(allow=allow)
    model, _ = model_in_arena("legacy")
    with caplog.at_level("WARNING", logger="graphcheck.watch"):
        watch.capture(model, **reference_inputs(model))
    assert watch.last is not None
    return watch.last.report


def test_allowlist_and_stale_globs(caplog: pytest.LogCaptureFixture) -> None:
    report = _legacy_report(["layers.*.*.*.quant_method.*", "nothing.matches"], caplog)
    assert report.summary["allowed"] == 24  # the quantization methods' tensors
    assert owners(report) == {"unregistered": {"layers.0.self_attn.rotary_emb.cos_sin_cache"}}
    assert report.stale_allow == ["nothing.matches"]
    assert "allowlist globs that matched nothing: nothing.matches" in caplog.text


def test_a_stale_glob_that_slipped_says_how(caplog: pytest.LogCaptureFixture) -> None:
    # `*` stays within one dotted name: the natural first try at the quant methods' tensors.
    report = _legacy_report(["layers.*.quant_method.packed", "lm_head.weight # comment"], caplog)
    assert report.stale_allow == ["layers.*.quant_method.packed", "lm_head.weight # comment"]
    assert report.stale_allow_hints == [
        "'*' stays within one dotted name: layers.**.quant_method.packed would match 8 "
        "owner(s) with findings",
        "a comment must be on a line of its own: this glob ends in '# comment'",
    ]
    assert "layers.*.quant_method.packed ('*' stays within one dotted name: " in caplog.text


def test_a_freed_model_is_skipped_with_why() -> None:
    watch = graphcheck.watch(allocator_history=False)
    model, _ = model_in_arena("registered")
    watch.capture(model, **reference_inputs(model))
    del model
    gc.collect()
    result = graphcheck.checkpoint("after_reload")
    assert result.graphs == () and len(result.skipped) == 1
    assert "graph 1:" in result.skipped[0] and "was freed" in result.skipped[0]


def test_declarations_apply_to_recorded_and_later_graphs() -> None:
    watch = graphcheck.watch(allocator_history=False)
    model, _ = model_in_arena("registered")
    scratch = torch.zeros(16)

    class WithScratch(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(16, 16)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.lin(x) + scratch

    small = WithScratch()
    watch.capture(small, torch.ones(2, 16))
    assert watch.last.report.summary["unregistered"] == 1
    watch.declare_runtime(scratch, "scratch", "rewritten before each read")
    assert graphcheck.checkpoint("declared").ok
    watch.capture(small, torch.ones(2, 16))
    assert watch.last.ok


def _mul_in_a_forked_task(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.jit.wait(torch.jit.fork(torch.mul, x, w)) + 1


class _ForksItsRead(torch.nn.Module):
    """Reads an unregistered tensor only in a task ``torch.jit.fork`` runs on another thread
    (scripted code forks; eager code runs the task in place)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.hidden = torch.randn(8)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # torch.jit.script's notice
            self.forked = torch.jit.script(_mul_in_a_forked_task)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.forked(self.lin(x), self.hidden)


def test_ops_on_forked_threads_are_said_to_be_unchecked() -> None:
    # The twin records the capturing thread's ops: the forked task's read of `hidden` is
    # missing from the graph, and silence would read as a clean check of it.
    watch = graphcheck.watch(allocator_history=False)
    watch.capture(_ForksItsRead(), torch.ones(2, 8))
    capture = watch.last
    assert capture is not None and capture.report.summary["unregistered"] == 0
    (note,) = capture.notes
    assert note.startswith("graph 1: ") and "op(s) of the forward ran on other threads" in note
    assert "what those ops read is not checked" in note
    later = graphcheck.checkpoint("after_wake")
    assert later is not None and later.notes == capture.notes  # every check point repeats it
    plain = torch.nn.Linear(8, 8)
    watch.capture(plain, torch.ones(2, 8))
    assert watch.last is not None and watch.last.notes == ()


class _ReadsATable(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.table = torch.zeros(16)  # registered nowhere

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + self.table


def test_a_capture_inside_a_profiler_leaves_the_profiler_its_slot() -> None:
    # Torch profilers read the thread's profiler slot as their own state: the window's
    # allocation watcher pushed there made this capture crash or hang (3 runs in 3).
    watch = graphcheck.watch(allocator_history=False)
    model = _ReadsATable()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        watch.capture(model, torch.ones(2, 16))
    assert any(e.name == "aten::linear" for e in prof.events())  # the profiler still records
    profiled = watch.last
    assert profiled is not None
    (note,) = profiled.notes
    assert note.startswith("graph 1: a torch profiler was running on the capturing thread")
    # Without allocations the window cannot tell an intermediate a kernel allocated itself
    # from older memory: such extras carry an aten:<op> label, as the note says.
    found = owners(profiled.report)["unregistered"]
    assert "table" in found and all(o.startswith("aten:") for o in found - {"table"})
    watch.capture(model, torch.ones(2, 16))  # no profiler: allocations watched, no note
    assert watch.last is not None and watch.last.notes == ()
    assert owners(watch.last.report) == {"unregistered": {"table"}}


def test_a_check_point_with_nothing_watched_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    watch = graphcheck.watch(allocator_history=False)
    with caplog.at_level("INFO", logger="graphcheck.watch"):
        assert watch.checkpoint("after_wake") is None
        assert watch.checkpoint("after_reload") is None
    said = [r.getMessage() for r in caplog.records if "no CUDA graph is watched" in r.getMessage()]
    assert len(said) == 1, said  # silence would read as a clean check; once is enough
    assert "check point 'after_wake'" in said[0]
    assert "captures reach it through: " in said[0]


def test_bad_arguments() -> None:
    watch = graphcheck.watch(allocator_history=False)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        watch.capture(lambda x: x, torch.ones(1))
    with pytest.raises(ValueError, match="warmup must be an int"):
        watch.capture(torch.nn.Linear(2, 2), torch.ones(1, 2), warmup=-1)
    with pytest.raises(ValueError, match="expected a non-empty label"):
        watch.checkpoint("")
    with pytest.raises(
        graphcheck.GraphcheckTypeError, match="checkpoint: label: expected a str, got int"
    ):
        watch.checkpoint(5)  # type: ignore[arg-type]
    assert watch.checkpoint("nothing_watched") is None
    with pytest.raises(TypeError, match="a model must be a torch.nn.Module or a callable"):
        watch.add_model(3)  # type: ignore[arg-type]


def test_merge_reports_adds_and_intersects() -> None:
    data = Path(__file__).resolve().parents[1] / "data"
    a = graphcheck.check(data / "verdict_stale.json", allow=["x.*", "model.layers.*"])
    b = graphcheck.check(data / "verdict_registered.json", allow=["x.*"])
    merged = merge_reports([a, b], "after", "capture")
    for key in ("graphs", "nodes", "references", *graphcheck.VERDICTS):
        assert merged.summary[key] == a.summary[key] + b.summary[key]
    assert len(merged.findings) == len(a.findings) + len(b.findings)
    assert merged.stale_allow == ["x.*"]  # model.layers.* allowed something in a
    assert merged.epoch == "after" and merged.baseline == "capture"
    assert safe_label("a b/c[d]") == "a-b-c-d" and safe_label("///") == "checkpoint"
