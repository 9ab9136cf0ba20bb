"""How captures and settings reach graphcheck.watch (issue 11 §1): the capture hooks on a
stand-in for torch.cuda.CUDAGraph, the GRAPHCHECK_* settings, the post-import hook, and the
import hook installed with the package (graphcheck_watch.pth) in a fresh interpreter."""

from __future__ import annotations

import gc
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import graphcheck
from graphcheck._watch import import_hook
from graphcheck._watch import settings as watch_settings
from graphcheck.reference import ReferenceConfig, build_reference_model, reference_inputs
from watch_fakes import PLANTED, FakeCUDAGraph, capture_fake, fake_watch, owners, write_package


@pytest.fixture(autouse=True)
def no_watch_left(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("GRAPHCHECK", "GRAPHCHECK_MODE", "GRAPHCHECK_DIR", "GRAPHCHECK_ALLOW"):
        monkeypatch.delenv(name, raising=False)
    original = FakeCUDAGraph.capture_begin
    yield
    active = graphcheck.current_watch()
    if active is not None:
        active.close()
    assert FakeCUDAGraph.capture_begin is original, "a watch left its hook installed"


def test_a_graph_capture_is_recorded_and_checked_when_it_ends() -> None:
    gc.collect()  # fewer models of earlier tests for the discovery to find
    watch = fake_watch()
    assert watch.capture_hooks.endswith("FakeCUDAGraph.capture_begin/capture_end wrapped")
    model = build_reference_model(ReferenceConfig(variant="legacy"), 0)
    inputs = reference_inputs(model)
    for name, tensor in inputs.items():  # the static inputs the engine refills before replay
        watch.declare_input(name, tensor)
    graph = capture_fake(model, **inputs)
    assert graph.captured and len(watch.graphs) == 1 and watch.graphs[0].kind == "cuda"
    result = watch.last
    # Discovery: no model was given, the root modules with parameters on the device were
    # found (this one, and any other test's model still alive: each under its type's name).
    assert result.label == "capture" and result.model.endswith("[found on cpu]")
    found = {
        re.sub(r"^ReferenceModel(_\d+)?\.", "", o) for o in owners(result.report)["unregistered"]
    }
    assert found == PLANTED and set(owners(result.report)) == {"unregistered"}
    # CUDA replays the graph, not graphcheck: the window kept no ops and no intermediates
    # (an engine's shared pool reuses what a capture freed, as without the watch).
    record = watch.graphs[0].capture._record
    assert record.private_bytes == 0 and record.node_count > 0
    with pytest.raises(graphcheck.GraphcheckError, match="replay"):
        watch.graphs[0].capture.replay()
    del graph  # a freed graph is no longer watched
    assert watch.graphs == []


def test_a_failed_capture_records_nothing() -> None:
    watch = fake_watch()
    model = torch.nn.Linear(4, 4)
    graph = FakeCUDAGraph()
    graph.capture_begin()
    model(torch.ones(1, 4))
    graph.fail_end = True
    with pytest.raises(RuntimeError, match="capture invalidated"):
        graph.capture_end()
    assert watch.graphs == [] and watch.results == []
    capture_fake(model, input=torch.ones(1, 4))  # the window was closed: the next one works
    assert len(watch.results) == 1


def test_a_failure_after_a_successful_capture_never_reaches_the_engine(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The capture succeeded: a failure in graphcheck's own recording (here the allocator's
    # segments cannot be read) is logged, never raised out of capture_end, where
    # torch.cuda.graph would skip restoring the caller's stream and the engine would see a
    # failed capture of a good graph. Error mode too: only its FindingsError is raised there.
    def unreadable() -> list[dict[str, object]]:
        raise RuntimeError("segments unreadable")

    model = torch.nn.Linear(4, 4)
    watch = fake_watch(model=model, graph_segments=unreadable, mode="error")
    with caplog.at_level("ERROR", logger="graphcheck.watch"):
        graph = capture_fake(model, input=torch.ones(1, 4))
    assert graph.captured and watch.graphs == [] and watch.results == []
    assert "after its capture failed (the capture itself succeeded" in caplog.text
    assert "segments unreadable" in caplog.text


def test_the_capture_bodys_own_exception_is_the_one_the_caller_sees(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # torch.cuda.graph's __exit__ ends the capture when its body raised; error mode's findings
    # must not replace the body's exception (they are recorded and logged instead).
    class GraphContext:
        def __init__(self, graph: FakeCUDAGraph) -> None:
            self.graph = graph

        def __enter__(self) -> None:
            self.graph.capture_begin()

        def __exit__(self, *exc: object) -> None:
            self.graph.capture_end()

    watch = fake_watch(mode="error")
    model = build_reference_model(ReferenceConfig(variant="legacy"), 0)
    inputs = reference_inputs(model)
    with (
        caplog.at_level("WARNING", logger="graphcheck.watch"),
        pytest.raises(ValueError, match="the engine's own error"),
        torch.no_grad(),
        GraphContext(FakeCUDAGraph()),
    ):
        model(**inputs)
        raise ValueError("the engine's own error")
    assert watch.last is not None and not watch.last.ok  # recorded, not raised
    assert "not raised while the capture's own ValueError propagates" in caplog.text
    with pytest.raises(graphcheck.FindingsError):  # without an exception in flight: raised
        capture_fake(model, **inputs)


class _StreamContext:
    """Stands in for the ``torch.cuda.stream`` context ``torch.cuda.graph`` exits last."""

    def __init__(self) -> None:
        self.exited = False

    def __exit__(self, *exc: object) -> None:
        self.exited = True


def _torch_cuda_graph_context(graph: FakeCUDAGraph) -> Any:
    """A ``torch.cuda.graph`` whose ``__exit__`` is torch's own code, on stand-ins."""
    context = object.__new__(torch.cuda.graph)  # its __init__ makes CUDA streams
    context.cuda_graph = graph  # type: ignore[attr-defined]
    context.stream_ctx = _StreamContext()  # type: ignore[attr-defined]
    context._enable_annotations = False  # type: ignore[attr-defined]
    return context


def test_error_mode_raises_after_torch_cuda_graph_restored_the_stream() -> None:
    # torch.cuda.graph.__exit__ calls capture_end, then restores the caller's stream: findings
    # raised out of capture_end skipped the restore, and the engine that went on after the
    # error ran everything on the capture's side stream.
    watch = fake_watch(mode="error")
    model = build_reference_model(ReferenceConfig(variant="legacy"), 0)
    inputs = reference_inputs(model)
    context = _torch_cuda_graph_context(FakeCUDAGraph())
    with torch.no_grad():
        context.cuda_graph.capture_begin()
        model(**inputs)
    with pytest.raises(graphcheck.FindingsError):
        context.__exit__(None, None, None)
    assert context.stream_ctx.exited and context.cuda_graph.captured
    assert watch.last is not None and not watch.last.ok
    # The body's own exception still wins, and the stream is restored under it too.
    context = _torch_cuda_graph_context(FakeCUDAGraph())
    with torch.no_grad():
        context.cuda_graph.capture_begin()
        model(**inputs)
    try:
        raise ValueError("the engine's own error")
    except ValueError as error:
        assert context.__exit__(ValueError, error, error.__traceback__) is None
    assert context.stream_ctx.exited
    watch.close()
    assert not hasattr(torch.cuda.graph.__exit__, "__graphcheck_original__")


def test_torch_accelerator_graph_captures_reach_the_watch_too() -> None:
    # torch 2.13's torch.accelerator.Graph calls torch._C._acceleratorGraph, not
    # torch.cuda.CUDAGraph: wrapping only the latter would miss an engine that moved to it.
    from graphcheck._watch.cuda_hooks import CaptureHooks

    graph = getattr(getattr(torch, "accelerator", None), "Graph", None)
    if graph is None:
        pytest.skip("this torch has no torch.accelerator.Graph")
    before = {c: (c.capture_begin, c.capture_end) for c in (torch.cuda.CUDAGraph, graph)}
    seen: list[object] = []
    hooks = CaptureHooks(seen.append, seen.append, seen.append, hooks_module=None)
    how = hooks.install()
    assert how.endswith("wrapped (and torch.accelerator.graphs.Graph's)")
    try:
        for cls, (begin, end) in before.items():
            assert cls.capture_begin is not begin and cls.capture_end is not end
    finally:
        hooks.remove()
    assert {c: (c.capture_begin, c.capture_end) for c in before} == before


def test_a_capture_ended_on_another_thread_is_not_watched_and_breaks_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Its ATen window is thread-local: closed from the ending thread, it is abandoned and
    # freed by the thread that opened it at its next op (it was freed under that thread's
    # callback before, which then wrote into freed memory).
    import threading

    watch = fake_watch()
    model = torch.nn.Linear(4, 4)
    graph = FakeCUDAGraph()
    began = threading.Event()
    ended = threading.Event()
    kept: list[FakeCUDAGraph] = []  # a freed graph is no longer watched

    def capturing_thread() -> None:
        graph.capture_begin()
        model(torch.ones(1, 4))
        began.set()
        ended.wait()
        model(torch.ones(1, 4))  # its next op frees the abandoned window
        kept.append(capture_fake(model, input=torch.ones(1, 4)))  # a new window opens here

    thread = threading.Thread(target=capturing_thread)
    with caplog.at_level("WARNING", logger="graphcheck.watch"):
        thread.start()
        began.wait()
        graph.capture_end()
        ended.set()
        thread.join()
    assert "ended its capture on another thread than it began on" in caplog.text
    assert kept[0].captured and [g.id for g in watch.graphs] == [2]


def test_a_graph_freed_on_another_thread_while_the_watch_is_busy_waits_for_nothing() -> None:
    # A graph's finalizer runs wherever the collector runs: on the watch's writer thread, while
    # a check point holds the watch's lock and waits for that writer, it took the lock and
    # both waited forever (seen with graphs in reference cycles, 3 runs in 3).
    import threading

    watch = fake_watch()
    model = torch.nn.Linear(4, 4)
    held = [capture_fake(model, input=torch.ones(1, 4))]
    assert len(watch.graphs) == 1

    def free_it() -> None:
        held.clear()
        gc.collect()

    with watch._lock:  # as a check point holds it
        thread = threading.Thread(target=free_it)
        thread.start()
        thread.join(timeout=10)
        finished = not thread.is_alive()
    thread.join()
    assert finished, "the finalizer waited for the watch's lock"
    assert watch.graphs == []


def test_a_dropped_model_s_weights_are_freed_with_it() -> None:
    # The watch's cached registry held every parameter: an engine that dropped its model and
    # graphs (a model swap, an in-process engine rebuilt) kept the old weights until the next
    # census, on a GPU a whole model's memory.
    import weakref

    watch = fake_watch()
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 64))
    graph = capture_fake(model, input=torch.ones(2, 64))
    weight = weakref.ref(model[0].weight)
    assert watch.graphs
    del model, graph
    gc.collect()
    assert weight() is None
    kept = torch.nn.Linear(8, 8)  # a model alive: its registry stays cached between captures
    watch.add_model(kept)
    computed = watch._registry.computed
    # (Its graphs kept alive: once every graph is freed the registry is taken anew.)
    graphs = [capture_fake(kept, input=torch.ones(1, 8)) for _ in range(2)]
    assert watch._registry.computed == computed + 1 and len(graphs) == 2


def test_registered_model_given_to_watch_is_clean() -> None:
    model = build_reference_model(ReferenceConfig(variant="registered"), 0)
    watch = fake_watch(model=model)
    inputs = reference_inputs(model)
    for name, tensor in inputs.items():
        watch.declare_input(name, tensor)
    graph = capture_fake(model, **inputs)
    assert watch.last.ok, str(watch.last.report)
    assert watch.last.model == "model (ReferenceModel) [given]"
    assert graphcheck.checkpoint("after_reload").ok and graph.captured


def test_settings_from_the_environment(tmp_path: Path) -> None:
    allow = tmp_path / "allow.txt"
    allow.write_text("# planted\nlayers.*.quant_method.*\n")
    env = {"GRAPHCHECK": "1", "GRAPHCHECK_MODE": "ERROR", "GRAPHCHECK_ALLOW": str(allow)}
    settings = watch_settings.settings_from_env(env)
    assert settings.mode == "error" and settings.allow == ("layers.*.quant_method.*",)
    assert settings.out_dir == os.path.abspath("graphcheck-reports") and not settings.problems
    off = watch_settings.settings_from_env({"GRAPHCHECK_DIR": str(tmp_path)})
    assert off.out_dir == str(tmp_path)
    bad = watch_settings.settings_from(
        {"mode": "loud", "allow": str(tmp_path / "none.txt"), "colour": 1}, source="cfg"
    )
    assert bad.mode == "warn" and bad.allow == ()
    assert bad.problems[0] == "cfg mode 'loud': expected one of warn, error; using warn"
    assert "cfg allow: " in bad.problems[1] and "no allowlist is used" in bad.problems[1]
    assert bad.problems[2] == "cfg: unknown keys ['colour'] (known: mode, dir, allow, enabled)"
    for value, on in (("1", True), ("yes", True), ("", False), ("0", False), (" Off ", False)):
        assert watch_settings.flag_on({"GRAPHCHECK": value}) is on


def test_watch_takes_its_defaults_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GRAPHCHECK_MODE", "error")
    monkeypatch.setenv("GRAPHCHECK_DIR", str(tmp_path))
    watch = fake_watch()
    assert watch.mode == "error" and watch.out_dir == str(tmp_path)


def test_when_imported_runs_after_the_module_and_logs_failures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    write_package(tmp_path, {"gc_late/mod.py": "VALUE = 3\n"})
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[int] = []
    import_hook.when_imported("gc_late.mod", lambda m: seen.append(m.VALUE))
    import_hook.when_imported("gc_late.mod", lambda m: 1 / 0)
    with caplog.at_level(logging.ERROR, logger="graphcheck.watch"):
        import gc_late.mod  # noqa: F401

    assert seen == [3]
    assert "the post-import hook for gc_late.mod failed" in caplog.text
    assert sys.modules["gc_late.mod"].__loader__.__class__.__name__ != "_PostImportLoader"
    import_hook.when_imported("gc_late.mod", lambda m: seen.append(-m.VALUE))  # already there
    assert seen == [3, -3]
    assert not any(isinstance(f, import_hook._PostImportFinder) for f in sys.meta_path)
    for name in ("gc_late.mod", "gc_late"):
        del sys.modules[name]


_PROBE = (
    "import sys; import torch, graphcheck; w = graphcheck.current_watch(); "
    "print(w.origin if w else 'none', w.capture_hooks if w else '', w.mode if w else '')"
)


def _run_probe(env: dict[str, str], code: str = _PROBE) -> str:
    full = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHCHECK")}
    full.update(env)
    done = subprocess.run(
        [sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_import_hook_starts_the_watch_when_torch_is_imported(tmp_path: Path) -> None:
    pth = Path(graphcheck.__file__).resolve().parents[1] / "graphcheck_watch.pth"
    assert pth.is_file(), f"the import hook is not installed beside the package ({pth})"
    out = _run_probe(
        {"GRAPHCHECK": "1", "GRAPHCHECK_MODE": "error", "GRAPHCHECK_DIR": str(tmp_path)}
    )
    # torch 2.13's torch.accelerator.Graph is a class of its own: wrapped too.
    accelerator = (
        " (and torch.accelerator.graphs.Graph's)"
        if hasattr(getattr(torch, "accelerator", None), "Graph")
        else ""
    )
    assert out == (
        "GRAPHCHECK=1 import hook torch.cuda.graphs.CUDAGraph.capture_begin/capture_end wrapped"
        f"{accelerator} "
        "error"
    )


def test_the_import_hook_is_inert_without_the_flag() -> None:
    code = (
        "import sys; import torch; "
        "print(sorted(m for m in sys.modules if m.startswith('graphcheck')), "
        "torch.cuda.CUDAGraph.capture_begin.__qualname__)"
    )
    assert _run_probe({"GRAPHCHECK": "0"}, code) == "[] CUDAGraph.capture_begin"


def test_allocator_frames_label_what_the_census_does_not_reach() -> None:
    from graphcheck._watch.allocator_history import (
        TORCH_GRAPH_STATE,
        allocator_sites,
        frame_label,
        torch_graph_state,
    )
    from graphcheck._watch.registry import outside

    torch_file = str(Path(torch.__file__).parent / "nn" / "modules" / "module.py")
    user = {"filename": "/srv/engine/runner.py", "line": 42, "name": "alloc_buffers"}
    internal = {"filename": torch_file, "line": 7, "name": "to"}
    native = {"filename": "??", "line": 0, "name": "c10::alloc"}
    graphs_file = str(Path(torch.__file__).parent / "cuda" / "graphs.py")
    begin = {"filename": graphs_file, "line": 250, "name": "capture_begin"}
    snapshot = {
        "segments": [
            {
                "blocks": [
                    {"state": "active_allocated", "address": 4096, "size": 512,
                     "frames": [native, internal, user]},
                    {"state": "inactive", "address": 8192, "size": 512, "frames": [user]},
                    {"state": "active_allocated", "address": 16384, "size": 256,
                     "history": [{"frames": [internal]}]},
                    {"state": "active_allocated", "address": 32768, "size": 64,
                     "history": [{"frames": [user]}]},
                    # Freed while a stream still uses it: live, as the epochs hold it.
                    {"state": "active_pending_free", "address": 65536, "size": 128,
                     "frames": [user]},
                    # torch's generator state for graphs: runtime state, not a site.
                    {"state": "active_allocated", "address": 131072, "size": 512,
                     "frames": [native, begin, user]},
                ]
            }
        ]
    }  # fmt: skip
    label = "/srv/engine/runner.py:42 in alloc_buffers"
    assert allocator_sites(snapshot) == [
        (4096, 4608, label),
        (32768, 32832, label),
        (65536, 65664, label),
    ]
    assert torch_graph_state(snapshot) == [(131072, 131584, *TORCH_GRAPH_STATE)]
    assert frame_label([internal], [str(Path(torch.__file__).parent) + os.sep]) is None
    # Census paths win: a frame label overlapping a census range is dropped.
    taken = [(4000, 4200, "model.x")]
    assert outside(allocator_sites(snapshot), taken) == [
        (32768, 32832, label),
        (65536, 65664, label),
    ]


def test_a_history_disabled_before_cuda_starts_never_switches_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # torch queues the switch until CUDA's initialization and cannot drop it: a watch closed
    # before then must not leave every later allocation recording a Python stack.
    from graphcheck._watch.allocator_history import AllocatorHistory

    queued: list[Any] = []
    switched: list[dict[str, Any]] = []
    monkeypatch.setattr(torch.cuda, "_lazy_call", queued.append)
    monkeypatch.setattr(torch._C, "_cuda_isHistoryEnabled", lambda: False, raising=False)
    monkeypatch.setattr(
        torch.cuda.memory, "_record_memory_history", lambda **kw: switched.append(kw)
    )
    closed_early, kept = AllocatorHistory(), AllocatorHistory()
    closed_early.enable()
    kept.enable()
    closed_early.disable()
    for call in queued:  # CUDA initializes
        call()
    assert not closed_early.owned and kept.owned
    assert switched == [{"enabled": "state", "context": "alloc", "stacks": "python"}]


def test_captures_inside_a_profiling_window_are_not_watched() -> None:
    watch = fake_watch(model=torch.nn.Linear(4, 4))
    model = torch.nn.Linear(4, 4)  # not the watched model: its weights would be findings
    with watch.profiling("engine.profile"), watch.profiling("inner"):
        first = capture_fake(model, input=torch.ones(1, 4))
        second = capture_fake(model, input=torch.ones(2, 4))
    assert first.captured and second.captured
    assert watch.graphs == [] and watch.results == []
    assert watch.checkpoint("after_profiling") is None  # nothing checked: the note waits
    watched = capture_fake(model, input=torch.ones(1, 4))
    assert [g.id for g in watch.graphs] == [1] and watched.captured
    # The outermost window names the step; its note goes to the next check point only.
    profiled = (
        "2 graph(s) captured during engine.profile (the engine's memory profiling, freed "
        "before it serves) were not watched"
    )
    assert [n for n in watch.last.notes if "memory profiling" in n] == [profiled]
    assert not watch.last.ok
    capture_fake(model, input=torch.ones(1, 4))
    assert [n for n in watch.last.notes if "memory profiling" in n] == []


def test_profiling_captures_without_a_watch_does_nothing() -> None:
    from graphcheck import integrations

    assert graphcheck.current_watch() is None
    with integrations.profiling_captures("engine.profile"):
        graph = capture_fake(torch.nn.Linear(4, 4), input=torch.ones(1, 4))
    assert graph.captured and graphcheck.current_watch() is None
