"""A check at capture in warn mode runs off the capture's path (issue 32 §2), on the stand-in for
torch.cuda.CUDAGraph: on the watch's thread once the burst of captures ended, or at once when
anyone waits for it, with the result a check inside capture_end gave; error mode still raises
inside capture_end."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch

import graphcheck
from graphcheck._capture import Capture
from graphcheck._watch.quiet import QuietWorker
from graphcheck.reference import ReferenceConfig, build_reference_model, reference_inputs
from watch_fakes import capture_fake, fake_watch, owners

HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def no_flag_in_the_environment(monkeypatch: pytest.MonkeyPatch, no_watch_left: None) -> None:
    """No GRAPHCHECK_* setting leaks in; the process watch a test left is closed."""
    for name in ("GRAPHCHECK", "GRAPHCHECK_MODE", "GRAPHCHECK_DIR", "GRAPHCHECK_ALLOW"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def no_quiet_spell(monkeypatch: pytest.MonkeyPatch) -> None:
    """The queued checks run only when someone waits for them."""
    monkeypatch.setattr("graphcheck._watch.quiet.QUIET_S", 3600.0)


def _legacy() -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    model = build_reference_model(ReferenceConfig(variant="legacy", hidden=64, head_dim=16), 0)
    return model, reference_inputs(model, 8)


class _WithTable(torch.nn.Module):
    """Reads one tensor it keeps outside its parameters and buffers."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(16, 16)
        self.table = table

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + self.table


def _checks_threads() -> int:
    return sum(t.name == "graphcheck-checks" for t in threading.enumerate())


def test_the_check_runs_on_the_watchs_thread_with_the_result_of_a_check_at_capture(
    no_quiet_spell: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    check = Capture.check

    def noting(self: Capture, *args: object, **kwargs: object) -> graphcheck.Report:
        threads.append(threading.current_thread().name)
        return check(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Capture, "check", noting)
    model, inputs = _legacy()
    watch = fake_watch(model=model)
    graphs = [capture_fake(model, **inputs) for _ in range(2)]
    assert threads == [] and watch._deferred.pending == 2  # nothing ran inside capture_end
    results = watch.results  # waits for them
    assert threads == ["graphcheck-checks"] * 2
    assert [r.label for r in results] == ["capture"] * 2 and [r.seq for r in results] == [1, 2]
    assert all(g.checked for g in watch.graphs)
    # The same report a check of the graph in its capture epoch gives now.
    for result, graph in zip(results, watch.graphs, strict=True):
        again = graph.capture.check("capture")
        assert not result.ok and result.report.summary == again.summary
        assert result.report.to_json() == again.to_json()
    del graphs


def test_without_anyone_waiting_the_check_runs_once_the_burst_ended(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("graphcheck._watch.quiet.QUIET_S", 0.05)
    model, inputs = _legacy()
    watch = fake_watch(model=model)
    with caplog.at_level("WARNING", logger="graphcheck.watch"):
        graph = capture_fake(model, **inputs)
        deadline = time.monotonic() + 30
        while not watch._points.all():  # the list itself: reading results would wait
            assert time.monotonic() < deadline, "the queued check never ran"
            time.sleep(0.01)
    assert "check point #1 'capture': 1 graph(s)" in caplog.text
    assert watch._deferred.pending == 0
    del graph


def test_error_mode_checks_inside_capture_end(monkeypatch: pytest.MonkeyPatch) -> None:
    model, inputs = _legacy()
    watch = fake_watch(model=model, mode="error")
    with pytest.raises(graphcheck.FindingsError) as raised:
        capture_fake(model, **inputs)
    assert watch._deferred.pending == 0 and raised.value.result.seq == 1


def test_a_declaration_after_the_capture_leaves_its_check_at_capture_as_it_was(
    no_quiet_spell: None,
) -> None:
    table = torch.zeros(16)
    model = _WithTable(table)
    watch = fake_watch(model=model)
    graph = capture_fake(model, x=torch.ones(2, 16))
    watch.declare_runtime(table, "table", "rewritten before each read")
    at_capture, after = watch.results[0], watch.checkpoint("declared")
    # Checked before the declaration: the table was unregistered then, runtime state after.
    assert "table" in owners(at_capture.report).get("unregistered", set())
    assert at_capture.report.summary["runtime"] == 0
    assert after is not None and "table" not in owners(after.report).get("unregistered", set())
    assert after.report.summary["runtime"] == 1
    del graph


def test_check_pending_finds_nothing_a_queued_check_at_capture_covers(
    no_quiet_spell: None,
) -> None:
    model, inputs = _legacy()
    watch = fake_watch(model=model)
    graph = capture_fake(model, **inputs)
    assert watch.check_pending() is None
    assert [r.label for r in watch.results] == ["capture"]
    del graph


def test_a_check_that_fails_is_logged_and_the_next_ones_still_run(
    no_quiet_spell: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    check = Capture.check
    calls = iter(range(100))

    def failing_once(self: Capture, *args: object, **kwargs: object) -> graphcheck.Report:
        if next(calls) == 0:
            raise RuntimeError("the first check broke")
        return check(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Capture, "check", failing_once)
    model, inputs = _legacy()
    watch = fake_watch(model=model)
    graphs = [capture_fake(model, **inputs) for _ in range(2)]
    with caplog.at_level("ERROR", logger="graphcheck.watch"):
        watch.flush()
    assert "a check at capture failed (the graph is unchecked): the first check broke" in (
        caplog.text
    )
    assert len(watch.results) == 1 and [g.checked for g in watch.graphs] == [False, True]
    later = watch.check_pending()  # the graph the failed check left unchecked
    assert later is not None and later.graphs == (watch.graphs[0].id,)
    del graphs


def test_the_checks_thread_runs_from_the_watch_start_to_its_close() -> None:
    model, inputs = _legacy()
    before = _checks_threads()
    watch = fake_watch(model=model)
    assert _checks_threads() == before + 1  # started with the watch, not inside a capture
    graph = capture_fake(model, **inputs)
    watch.close()  # runs what is queued, then the thread ends
    assert _checks_threads() == before
    assert [r.label for r in watch.results] == ["capture"]
    del graph


def test_a_process_that_exits_right_after_its_capture_still_logs_the_check(
    tmp_path: Path,
) -> None:
    script = textwrap.dedent(
        """
        import graphcheck._watch.quiet as quiet
        quiet.QUIET_S = 3600.0  # only the exit hook runs the queued check
        from graphcheck.reference import ReferenceConfig, build_reference_model, reference_inputs
        from watch_fakes import capture_fake, fake_watch, owners
        model = build_reference_model(ReferenceConfig(variant="legacy", hidden=64, head_dim=16), 0)
        watch = fake_watch(model=model, out_dir={folder!r})
        graph = capture_fake(model, **reference_inputs(model, 8))
        assert watch._deferred.pending == 1
        """
    ).format(folder=str(tmp_path))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "check point #1 'capture': 1 graph(s)" in done.stderr
    # The check's files too: the writer drained after the check queued them.
    assert len((tmp_path / "index.jsonl").read_text().splitlines()) == 1
    assert list(tmp_path.glob("*-capture.report.html"))


def test_a_queued_check_uses_the_settings_of_its_capture(
    no_quiet_spell: None, tmp_path: Path
) -> None:
    model, inputs = _legacy()
    watch = fake_watch(model=model, out_dir=tmp_path / "first")
    graph = capture_fake(model, **inputs)
    # The process's watch is given other settings before the queued check runs.
    graphcheck.watch(allow=["*"], out_dir=tmp_path / "second")
    (result,) = watch.results
    assert not result.ok and result.report.summary["unregistered"] > 0  # not allowed then
    assert all(Path(p).parent == tmp_path / "first" for p in result.files.values())
    del graph


def test_a_graph_check_pending_took_is_not_checked_again_by_its_queued_check(
    no_quiet_spell: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, inputs = _legacy()
    watch = fake_watch(model=model)
    graph = capture_fake(model, **inputs)
    drain = watch._deferred.drain
    with monkeypatch.context() as patched:  # as if the capture came right after its drain
        patched.setattr(watch._deferred, "drain", lambda: None)
        pending = watch.check_pending()
    assert pending is not None and watch._deferred.pending == 1
    drain()  # the queued check finds its graph checked
    assert [(r.seq, r.graphs) for r in watch.results] == [(1, (watch.graphs[0].id,))]
    del graph


def test_check_points_keep_the_order_of_their_captures(no_quiet_spell: None) -> None:
    model, inputs = _legacy()
    watch = fake_watch(model=model)
    graph = capture_fake(model, **inputs)  # queued
    watch.capture(model, **inputs)  # checked now: after the queued one
    assert [r.graphs for r in watch.results] == [(1,), (2,)]
    del graph


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_while_a_check_holds_the_watchs_lock_can_take_it() -> None:
    model, _ = _legacy()
    watch = fake_watch(model=model)
    held, release = threading.Event(), threading.Event()

    def check() -> None:  # as the checks thread holds it while it checks
        with watch._lock, watch._points._lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=check)
    holder.start()
    assert held.wait(30)
    pid = os.fork()
    if pid == 0:
        ok = watch._lock.acquire(timeout=5) and watch._points._lock.acquire(timeout=5)
        os._exit(0 if ok else 1)
    release.set()
    holder.join()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_job_that_raises_systemexit_stops_no_later_one(caplog: pytest.LogCaptureFixture) -> None:
    worker = QuietWorker("graphcheck-test", "graphcheck: a test job failed")
    ran: list[int] = []

    def leave(last: bool) -> None:
        raise SystemExit(3)

    worker.submit(leave)
    worker.submit(lambda last: ran.append(1))
    with caplog.at_level("ERROR", logger="graphcheck.watch"):
        worker.drain()
    assert ran == [1] and worker.pending == 0
    assert "graphcheck: a test job failed: 3" in caplog.text
    worker.close()


def test_the_registry_is_taken_anew_after_a_graph_is_freed_or_on_another_device() -> None:
    model, inputs = _legacy()
    devices = iter(["cpu"] * 4 + ["meta"] * 2)
    watch = fake_watch(model=model, device_of=lambda graph: torch.device(next(devices)))
    watch.check_on_capture = False
    kept = [capture_fake(model, **inputs), capture_fake(model, **inputs)]
    assert watch._registry.computed == 1  # back to back: one census
    del kept[0]  # one graph freed of two: torch's generator state stays
    gc.collect()
    kept.append(capture_fake(model, **inputs))
    assert watch._registry.computed == 1
    kept.clear()  # every graph freed: torch allocates its generator's graph state anew
    gc.collect()
    kept.append(capture_fake(model, **inputs))
    assert watch._registry.computed == 2
    kept.append(capture_fake(model, **inputs))  # another device: its generator state
    assert watch._registry.computed == 3
    kept.append(capture_fake(model, **inputs))
    assert watch._registry.computed == 3
