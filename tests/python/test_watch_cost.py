"""What keeps a watched capture cheap (issue 32 §2), on the stand-in for torch.cuda.CUDAGraph:
one census for graphs captured back to back unless the model's registered tensors changed, a
check at capture that writes its files on the watch's writer thread, and every other check
point that waits for them."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import graphcheck
from graphcheck import _torch
from graphcheck._model_registry import model_registry
from graphcheck._watch import quiet
from graphcheck._watch.output import merge_reports
from graphcheck._watch.registry import RegistryCache, registered_fingerprint
from graphcheck._watch.writer import BackgroundWriter
from graphcheck.reference import ReferenceConfig, build_reference_model, reference_inputs
from watch_fakes import capture_fake, fake_watch


@pytest.fixture(autouse=True)
def no_watch_left(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("GRAPHCHECK", "GRAPHCHECK_MODE", "GRAPHCHECK_DIR", "GRAPHCHECK_ALLOW"):
        monkeypatch.delenv(name, raising=False)
    yield
    active = graphcheck.current_watch()
    if active is not None:
        active.close()


def _model() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    model = build_reference_model(ReferenceConfig(hidden=64, head_dim=16), 0)
    return model, reference_inputs(model, 8)


def test_graphs_captured_back_to_back_share_one_census() -> None:
    model, inputs = _model()
    watch = fake_watch(model=model)
    graphs = [capture_fake(model, **inputs) for _ in range(3)]
    assert len(watch.graphs) == 3 and all(g.checked for g in watch.graphs)
    assert watch._registry.computed == 1  # each capture was checked, against one census
    assert watch.checkpoint("after") is not None
    assert watch._registry.computed == 2  # a check point takes a fresh census
    del graphs


def test_a_parameter_rebound_between_captures_is_seen_at_the_next_capture() -> None:
    model, inputs = _model()
    watch = fake_watch(model=model)
    watch.check_on_capture = False  # the engine flow: captures first, one check point after
    for name, tensor in inputs.items():
        watch.declare_input(name, tensor)
    first = capture_fake(model, **inputs)
    norm = model.layers[0].input_layernorm
    old = norm.weight
    with torch.no_grad():  # a reload that rebinds instead of copying in place
        norm.weight = torch.nn.Parameter(old.detach().clone())
    second = capture_fake(model, **inputs)
    assert watch._registry.computed == 2
    result = watch.check_pending()
    # Each graph judged in its capture epoch: the first reads the old weight, registered when
    # it was captured; the second the new one, registered at its own capture (with the
    # first capture's registry it would be memory no span covers).
    assert result is not None and len(result.graphs) == 2
    assert result.report.findings == [], result.text()
    del first, second, old


def test_the_fingerprint_changes_with_what_the_registry_spans() -> None:
    model, _ = _model()
    before = registered_fingerprint(model)
    assert registered_fingerprint(model) == before
    with torch.no_grad():
        norm = model.layers[0].input_layernorm
        norm.weight.data = norm.weight.data.clone()  # new data, same object
    moved = registered_fingerprint(model)
    assert moved != before
    model.register_buffer("extra", torch.zeros(3))
    with_buffer = registered_fingerprint(model)
    assert with_buffer != moved
    layer = model.layers[0]
    same = torch.nn.Parameter(norm.weight.data)  # another object over the same data
    norm.weight = same
    rebound = registered_fingerprint(model)
    assert rebound != with_buffer
    del norm.weight  # removed from the registry
    assert registered_fingerprint(model) != rebound
    norm.weight = same
    assert registered_fingerprint(model) == rebound  # back as it was
    # One module under a second name: named_parameters() lists its tensors once, so do the
    # registry and the fingerprint.
    layer.add_module("shared", norm)
    assert registered_fingerprint(model) == rebound


def test_the_fingerprint_changes_with_a_storage_size_at_the_same_address() -> None:
    model, _ = _model()
    norm = model.layers[0].input_layernorm
    count = norm.weight.numel()
    memory = np.ones(2 * count, dtype=np.float32)
    with torch.no_grad():
        norm.weight.data = torch.from_numpy(memory)[:count]  # a view of a larger storage
    larger = registered_fingerprint(model)
    with torch.no_grad():
        norm.weight.data = torch.from_numpy(memory[:count])  # a storage of just the view
    assert norm.weight.data_ptr() == memory.ctypes.data
    # Same object, same data address; the registry's span (the whole storage) is smaller.
    assert registered_fingerprint(model) != larger


def _epoch_rows(epoch: graphcheck.Epoch) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    spans = [(s.begin, s.size, s.kind, s.name, s.reason) for s in epoch.spans]
    allocations = [(a.begin, a.size, a.pool, a.generation, a.label) for a in epoch.allocations]
    return spans, allocations


def test_a_capture_epoch_of_registry_spans_equals_one_of_the_registry_lists() -> None:
    model, inputs = _model()
    hidden = torch.full((32,), 5.0)  # read by the forward, registered nowhere
    window = _torch.CaptureWindow(None, 1, replay_ops="drop")
    try:
        with torch.no_grad():
            model(**inputs)
            hidden.add(1.0)
        record = window.finish()
    finally:
        window.close()
    registry = model_registry(model, [])
    weight = model.layers[0].input_layernorm.weight
    cache = torch.zeros(16)
    runtime = [("kv_cache", cache, "KV cache"), ("weight_alias", weight, "declared too")]
    declared = [("input_ids", inputs["input_ids"], "static graph input")]
    labels = [*registry.labels, (hidden.data_ptr(), hidden.data_ptr() + 128, "model.hidden")]
    spans = _torch.RegistrySpans(
        registry.parameters, registry.buffers, registry.runtime_ranges, labels
    )
    tensors = (*registry.parameters, *registry.buffers)
    assert len(spans) == len({t.untyped_storage().data_ptr() for _, t in tensors})
    lists = record.capture_epoch(
        registry.parameters, registry.buffers, runtime, declared, registry.runtime_ranges, labels
    )
    from_spans = record.capture_epoch_from(spans, runtime, declared)
    assert _epoch_rows(from_spans) == _epoch_rows(lists)
    rows, allocations = _epoch_rows(from_spans)
    kinds = {name: kind for _, _, kind, name, _ in rows}
    assert kinds["kv_cache"] == "runtime" and kinds["input_ids"] == "input"
    assert "weight_alias" not in kinds  # the parameter's storage stays the parameter's
    assert "model.hidden" in {label for *_, label in allocations}, allocations
    # One RegistrySpans serves many epochs: a second equals the first.
    assert _epoch_rows(record.capture_epoch_from(spans, runtime, declared)) == (rows, allocations)


def test_graphs_captured_back_to_back_share_the_registrys_spans_until_a_rebind() -> None:
    model, inputs = _model()
    watch = fake_watch(model=model)
    watch.check_on_capture = False
    with pytest.raises(graphcheck.GraphcheckError, match="no registry yet"):
        RegistryCache().spans()
    graphs = [capture_fake(model, **inputs)]
    spans = watch._registry.spans()
    graphs.append(capture_fake(model, **inputs))
    assert watch._registry.spans() is spans  # made once for the census both captures used
    norm = model.layers[0].input_layernorm
    with torch.no_grad():
        norm.weight = torch.nn.Parameter(norm.weight.detach().clone())
    graphs.append(capture_fake(model, **inputs))
    assert watch._registry.computed == 2
    assert watch._registry.spans() is not spans
    epoch = watch.graphs[-1].capture.snapshot.epochs[0]
    names = {s.name: s.begin for s in epoch.spans}
    assert names["layers.0.input_layernorm.weight"] == norm.weight.data_ptr()
    del graphs


def test_the_fingerprint_refuses_what_is_no_module() -> None:
    with pytest.raises(
        graphcheck.GraphcheckTypeError, match="expected a torch.nn.Module, got list"
    ):
        registered_fingerprint([torch.zeros(2)])  # type: ignore[arg-type]


def test_a_check_at_capture_writes_its_files_after_it_and_flush_waits(tmp_path: Path) -> None:
    model, inputs = _model()
    watch = fake_watch(model=model, out_dir=tmp_path)
    graphs = [capture_fake(model, **inputs) for _ in range(4)]
    results = watch.results
    assert [r.label for r in results] == ["capture"] * 4
    watch.flush()
    for result in results:  # the names were known at the check point, the files follow
        assert {"report_json", "report_text", "report_html"} <= set(result.files)
        for path in result.files.values():
            assert Path(path).is_file(), path
    index = [json.loads(line) for line in (tmp_path / "index.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in index] == [r.seq for r in results]  # in order
    page = (tmp_path / "index.html").read_text()
    assert all(Path(r.files["report_html"]).name in page for r in results)
    # Each page links the next: the pages were written in order on one thread.
    first = Path(results[0].files["report_html"]).read_text()
    assert Path(results[1].files["report_html"]).name in first
    del graphs


def test_other_check_points_wait_for_the_pending_files(tmp_path: Path) -> None:
    model, inputs = _model()
    watch = fake_watch(model=model, out_dir=tmp_path)
    graph = capture_fake(model, **inputs)
    result = watch.checkpoint("after_wake")  # no flush: a check point writes before it returns
    assert result is not None
    for done in (watch.results[0], result):
        assert all(Path(path).is_file() for path in done.files.values())
    # The capture's page was rendered before the check point recorded its epoch.
    capture_page = Path(watch.results[0].files["report_html"]).read_text()
    assert '"after_wake"' not in capture_page  # no epoch of that label in its data
    assert '"after_wake"' in Path(result.files["report_html"]).read_text()
    del graph


def test_error_mode_writes_the_files_before_it_raises(tmp_path: Path) -> None:
    model = build_reference_model(ReferenceConfig(variant="legacy", hidden=64, head_dim=16), 0)
    inputs = reference_inputs(model, 8)
    fake_watch(model=model, out_dir=tmp_path, mode="error")
    with pytest.raises(graphcheck.FindingsError) as raised:
        capture_fake(model, **inputs)
    files = raised.value.result.files
    assert files and all(Path(path).is_file() for path in files.values())


def test_a_write_that_fails_is_logged_and_the_next_ones_still_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model, inputs = _model()
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    watch = fake_watch(model=model, out_dir=blocked)
    graph = capture_fake(model, **inputs)
    watch.flush()
    assert "could not write reports to" in caplog.text and str(blocked) in caplog.text
    watch.out_dir = tmp_path / "reports"
    assert watch.checkpoint("later") is not None
    assert (tmp_path / "reports" / "index.html").is_file()
    del graph


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_does_not_wait_for_its_parents_files(tmp_path: Path) -> None:
    model, inputs = _model()
    watch = fake_watch(model=model, out_dir=tmp_path)
    graphs = [capture_fake(model, **inputs) for _ in range(3)]  # files pending in the parent
    pid = os.fork()
    if pid == 0:  # the child: its writer starts empty, flush returns at once
        try:
            watch.flush()
            os._exit(0)
        except BaseException:
            os._exit(1)
    deadline = time.monotonic() + 60
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        assert time.monotonic() < deadline, "the forked child hung in flush()"
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0
    watch.flush()
    assert len((tmp_path / "index.jsonl").read_text().splitlines()) == 3
    del graphs


def test_one_report_under_its_own_labels_is_not_merged_again() -> None:
    model, inputs = _model()
    report = graphcheck.capture(model, **inputs).check("capture")
    assert merge_reports([report], report.epoch, report.baseline) is report
    relabelled = merge_reports([report], "later", report.baseline)
    assert relabelled is not report and relabelled.epoch == "later"
    assert relabelled.summary == report.summary


def test_a_background_writer_outside_a_watch_writes_in_order(tmp_path: Path) -> None:
    model, inputs = _model()
    watch = fake_watch(model=model)  # no files: the writer below gets the results
    graphs = [capture_fake(model, **inputs) for _ in range(2)]
    writer = BackgroundWriter(tmp_path)
    pairs = zip(watch.results, watch.graphs, strict=True)
    names = [writer.submit(r, [(g.id, g.capture)], ()) for r, g in pairs]
    writer.flush()
    assert len(names) == 2
    for files in names:
        assert {"report_json", "report_text", "report_html"} <= set(files)
        assert all(Path(p).is_file() for p in files.values())
    index = [json.loads(line) for line in (tmp_path / "index.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in index] == [r.seq for r in watch.results]  # in order
    # The first page links the second: written in the order submitted.
    assert Path(names[1]["report_html"]).name in Path(names[0]["report_html"]).read_text()
    del graphs


def test_the_writer_waits_for_the_burst_to_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("graphcheck._watch.quiet.QUIET_S", 3600.0)
    model, inputs = _model()
    watch = fake_watch(model=model, out_dir=tmp_path)
    graphs = [capture_fake(model, **inputs) for _ in range(2)]
    time.sleep(0.3)  # long enough for a worker that does not wait to have started a job
    # Queued, none started: a worker that ran a job at once is seen running it, however long
    # the job takes (the folder alone could not tell a slow write from a wait).
    workers = [w for w in list(quiet._LIVE) if w.pending]
    assert sum(w.waiting for w in workers) == 2
    assert not any(w.running for w in workers)
    assert not (tmp_path / "index.jsonl").exists()  # the captures did not write
    watch.flush()  # writes now, without waiting for the quiet
    assert not any(w.pending for w in workers)
    assert len((tmp_path / "index.jsonl").read_text().splitlines()) == 2
    del graphs


def _writers() -> int:
    return sum(t.name == "graphcheck-writer" for t in threading.enumerate())


def test_the_writer_thread_runs_from_the_watch_start_to_its_close(tmp_path: Path) -> None:
    model, inputs = _model()
    before = _writers()
    watch = fake_watch(model=model, out_dir=tmp_path / "a")
    assert _writers() == before + 1  # started with the watch, not inside its first capture
    watch.out_dir = tmp_path / "b"  # the old folder's writer ends, the new one starts
    assert _writers() == before + 1
    graph = capture_fake(model, **inputs)
    watch.close()  # writes what is queued, then the thread ends
    assert _writers() == before
    assert (tmp_path / "b" / "index.html").is_file()
    assert watch.checkpoint("after_close") is not None  # a later check point writes again
    assert (tmp_path / "b" / "index.jsonl").read_text().count("\n") == 2
    del graph


def test_the_same_findings_are_logged_in_full_once(caplog: pytest.LogCaptureFixture) -> None:
    # An engine captures one graph per batch size of one model: each check at capture finds
    # the same owners. Without a folder the text report goes to the log: once, not per graph.
    model = build_reference_model(ReferenceConfig(variant="legacy", hidden=64, head_dim=16), 0)
    inputs = reference_inputs(model, 8)
    watch = fake_watch(model=model)
    with caplog.at_level("WARNING", logger="graphcheck.watch"):
        graphs = [capture_fake(model, **inputs) for _ in range(3)]
    first, *later = watch.results
    assert not first.ok and all(r.report.summary == first.report.summary for r in later)
    lines = [r.getMessage() for r in caplog.records if "check point #" in r.getMessage()]
    assert len(lines) == 3 and "to fix" in lines[0]
    for line, result in zip(lines[1:], later, strict=True):
        assert f"check point #{result.seq} 'capture'" in line
        assert f"the same verdicts and owners as check point #{first.seq}, logged there" in line
        assert "to fix" not in line
    norm = model.layers[0].input_layernorm
    with torch.no_grad():  # a rebinding reload: a stale parameter, other findings, in full
        norm.weight = torch.nn.Parameter(norm.weight.detach().clone())
    with caplog.at_level("WARNING", logger="graphcheck.watch"):
        after = watch.checkpoint("after")
    assert after is not None and after.report.summary["stale"] > 0
    assert "to fix" in caplog.records[-1].getMessage()
    del graphs


def test_a_check_point_over_many_graphs_names_each_reader_once() -> None:
    model = build_reference_model(ReferenceConfig(hidden=64, head_dim=16), 0)
    inputs = reference_inputs(model, 8)
    watch = fake_watch(model=model)
    watch.check_on_capture = False
    graphs = [capture_fake(model, **inputs) for _ in range(3)]
    result = watch.check_pending()
    assert result is not None
    assert "\nread by: graphs 1-3: aten-dispatcher\n" in result.header() + "\n"
    del graphs


def test_with_a_folder_the_same_owners_are_named_once_too(
    caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    # With a folder each check point's line points to its report; its owners, the same at
    # every capture of one model, were listed on every line (a review counted 10 alike).
    model = build_reference_model(ReferenceConfig(variant="legacy", hidden=64, head_dim=16), 0)
    inputs = reference_inputs(model, 8)
    watch = fake_watch(model=model, out_dir=tmp_path)
    with caplog.at_level("WARNING", logger="graphcheck.watch"):
        graphs = [capture_fake(model, **inputs) for _ in range(3)]
        watch.flush()
    first, *later = watch.results
    lines = [r.getMessage() for r in caplog.records if "check point #" in r.getMessage()]
    assert len(lines) == 3 and " owner(s): " in lines[0] and "(report: " in lines[0]
    for line, result in zip(lines[1:], later, strict=True):
        assert " owner(s)" not in line and "to fix" not in line
        assert line.endswith(
            f"(the same verdicts and owners as check point #{first.seq}; "
            f"report: {result.files['report_text']})"
        )
    del graphs


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda w: w.declare_input("x", "not a tensor"), "declare_input.*expected a torch.Tensor"),
        (lambda w: w.declare_input("", torch.zeros(2)), "declare_input.*name"),
        (lambda w: w.declare_runtime(torch.zeros(2), "kv", ""), "declare_runtime: reason"),
        (lambda w: w.declare_runtime(torch.zeros(0), "kv", "r"), "no memory graphcheck can see"),
    ],
)
def test_a_bad_declaration_is_refused_when_it_is_made(call: Any, match: str) -> None:
    # Declarations go into each new graph's capture epoch: a bad one must not wait for a capture.
    model, inputs = _model()
    watch = fake_watch(model=model)
    with pytest.raises(graphcheck.GraphcheckError, match=match):
        call(watch)
    graph = capture_fake(model, **inputs)  # the capture after it is recorded as usual
    assert len(watch.graphs) == 1
    del graph
