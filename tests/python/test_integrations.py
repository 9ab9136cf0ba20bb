"""The vLLM and SGLang plugins (issue 11 §2, §3) on fake engine packages shaped like vLLM 0.33's
Worker and SGLang 0.5.23's ModelRunner, scheduler weight updater and HookRegistry: patched by
name, inert without GRAPHCHECK (or vLLM's additional_config), check points after capture, wake
and reloads, what could not be patched logged, error-mode findings failing the engine call."""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import graphcheck
from graphcheck import integrations
from graphcheck.integrations import sglang, vllm
from watch_fakes import PLANTED, fake_watch, forget_modules, owners, write_package

VLLM_WORKER = """
import torch
from graphcheck.reference import ReferenceConfig, build_reference_model, reference_inputs
import graphcheck
from watch_fakes import capture_fake


class VllmConfig:
    def __init__(self, additional_config):
        self.additional_config = additional_config


class Drafter:
    # A speculative-decoding proposer with its own model (as EAGLE's), loaded by the runner.

    def __init__(self):
        self.model = None


class ModelRunner:
    def __init__(self, draft_variant=None):
        self.model = None
        self.static_inputs = []  # engine state: the runner refills them before each replay
        self.graphs = []
        self.drafter = Drafter() if draft_variant else None
        self.draft_variant = draft_variant


class Worker:
    def __init__(self, additional_config=None, variant="legacy", draft_variant=None):
        self.vllm_config = VllmConfig(additional_config or {})
        self.model_runner = ModelRunner(draft_variant)
        self.variant = variant
        self.arena = None

    def load_model(self, *, load_dummy_weights: bool = False) -> None:
        self.arena = graphcheck.WeightsArena(1 << 30)
        config = ReferenceConfig(variant=self.variant)
        self.model_runner.model = build_reference_model(config, 0, self.arena)
        runner = self.model_runner
        if runner.drafter is not None:
            draft = ReferenceConfig(variant=runner.draft_variant)
            runner.drafter.model = build_reference_model(draft, 1, self.arena)

    def get_model(self):
        return self.model_runner.model

    def determine_available_memory(self) -> int:
        # vLLM's memory profiling: graphs captured against a minimal KV cache no registry
        # knows (kept alive here, so that only the profiling window keeps them unwatched).
        model = self.model_runner.model
        inputs = reference_inputs(model, 4)
        kv_cache = torch.zeros(64)
        self.model_runner.profiled = [
            capture_fake(model, **inputs), capture_fake(lambda: kv_cache + 1)
        ]
        return 1 << 30

    def compile_or_warm_up_model(self) -> float:
        model = self.model_runner.model
        # The runner's static inputs exist before the first capture (vLLM allocates them at
        # its construction): two batch sizes, two graphs.
        self.model_runner.static_inputs = [reference_inputs(model, t) for t in (4, 8)]
        for inputs in self.model_runner.static_inputs:
            self.model_runner.graphs.append(capture_fake(model, **inputs))
        drafter = self.model_runner.drafter
        if drafter is not None:
            inputs = reference_inputs(drafter.model, 4)
            self.model_runner.static_inputs.append(inputs)
            self.model_runner.graphs.append(capture_fake(drafter.model, **inputs))
        return 0.0

    def sleep(self, level: int = 1) -> None:
        self.arena.sleep(level, self.model_runner.model)

    def wake_up(self, tags=None) -> None:
        self.arena.wake_up()

    def reload_weights(self, *args, **kwargs) -> None:
        with self.arena.loading(), torch.no_grad():
            for parameter in self.model_runner.model.parameters():
                parameter.data = parameter.data.clone()

    def finish_weight_update(self) -> None:
        pass
"""

SGLANG_HOOKS = """
import enum
import functools
import importlib


class HookType(enum.Enum):
    BEFORE = "before"
    AFTER = "after"


class HookRegistry:
    hooks = []

    @classmethod
    def register(cls, target, hook, hook_type=HookType.AFTER):
        cls.hooks.append((target, hook, hook_type))

    @classmethod
    def apply_hooks(cls):
        for target, hook, hook_type in cls.hooks:
            module_name, owner_name, name = target.rsplit(".", 2)
            owner = getattr(importlib.import_module(module_name), owner_name)
            setattr(owner, name, cls._wrap_fn(getattr(owner, name), hook))

    @staticmethod
    def _wrap_fn(fn, hook):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            result = fn(*args, **kwargs)
            hook(result, *args, **kwargs)
            return result

        return wrapped
"""

SGLANG_RUNNER = """
import graphcheck
from graphcheck.reference import ReferenceConfig, build_reference_model, reference_inputs
from watch_fakes import capture_fake


class ModelRunner:
    def __init__(self, variant="legacy"):
        self.variant = variant
        self.model = None
        self.arena = None
        self.graphs = []

    def load_model(self):
        self.arena = graphcheck.WeightsArena(1 << 30)
        self.model = build_reference_model(ReferenceConfig(variant=self.variant), 0, self.arena)

    def init_cuda_graphs(self, capture_decode_cuda_graph=True):
        self.static_inputs = reference_inputs(self.model, 8)
        self.graphs.append(capture_fake(self.model, **self.static_inputs))

    def init_decode_cuda_graph(self):
        pass

    def init_prefill_cuda_graph(self, force_for_draft_worker=False):
        pass
"""

SGLANG_UPDATER = """
import dataclasses


@dataclasses.dataclass
class Output:
    success: bool


class SchedulerWeightUpdaterManager:
    def __init__(self, runner):
        self.runner = runner

    def resume_memory_occupation(self, recv_req):
        self.runner.arena.wake_up()
        return Output(True)

    def update_weights_from_disk(self, recv_req):
        return Output(recv_req.ok)

    def update_weights_from_ipc(self, recv_req):
        return Output(True)

    def end_weight_update(self, recv_req):
        return Output(True)
"""


class Request:
    """A request object as SGLang's handlers get it."""

    def __init__(self, tags: Any = None, ok: bool = True) -> None:
        self.tags = tags
        self.ok = ok


@pytest.fixture(autouse=True)
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    for name in ("GRAPHCHECK", "GRAPHCHECK_MODE", "GRAPHCHECK_DIR", "GRAPHCHECK_ALLOW"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sglang, "_STATE", sglang._State())
    monkeypatch.syspath_prepend(str(tmp_path / "engines"))
    yield from _closing(forget_modules("vllm"), forget_modules("sglang"))


def _closing(*generators: Iterator[None]) -> Iterator[None]:
    for g in generators:
        next(g)
    yield
    active = graphcheck.current_watch()
    if active is not None:
        active.close()
    for g in generators:
        next(g, None)


def vllm_worker_module(tmp_path: Path) -> Any:
    write_package(tmp_path / "engines", {"vllm/v1/worker/gpu_worker.py": VLLM_WORKER})
    vllm.register()  # what vLLM's plugin loader does: patches once the worker is imported
    return importlib.import_module(vllm.WORKER_MODULE)


def test_vllm_plugin_is_inert_without_the_flag(tmp_path: Path) -> None:
    module = vllm_worker_module(tmp_path)
    assert getattr(module.Worker.load_model, "__graphcheck_point__", None) == (
        "vllm.worker.load_model"
    )
    worker = module.Worker()
    worker.load_model()
    worker.compile_or_warm_up_model()
    worker.sleep(2)
    worker.wake_up()
    assert graphcheck.current_watch() is None


def test_vllm_plugin_checks_capture_wake_and_reloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("GRAPHCHECK", "1")
    monkeypatch.setenv("GRAPHCHECK_DIR", str(tmp_path / "reports"))
    watch = fake_watch()  # what the import hook starts (here hooked on the fake graph class)
    with caplog.at_level(logging.INFO, logger="graphcheck.integrations"):
        module = vllm_worker_module(tmp_path)
    patched = (
        "vllm.worker.load_model, vllm.worker.compile_or_warm_up_model, "
        "vllm.worker.determine_available_memory, vllm.worker.wake_up, "
        "vllm.worker.reload_weights, vllm.worker.finish_weight_update"
    )
    assert f"vllm 0.33.0: patched {patched}" in caplog.text
    worker = module.Worker()
    worker.load_model()
    # The census of the served model is the first check point: the planted sites by path.
    assert watch.check_on_capture is False and [r.label for r in watch.results] == ["load"]
    load = watch.last
    assert not load.ok and load.graphs == () and load.role == "worker"
    assert {line.split(":")[0] for line in load.census} == PLANTED
    assert (
        f"census: {len(PLANTED)} unregistered storage(s)"
        in Path(load.files["report_text"]).read_text()
    )
    # The graphs vLLM captures to measure memory are not watched, though still alive.
    assert worker.determine_available_memory() == 1 << 30
    assert watch.graphs == [] and [r.label for r in watch.results] == ["load"]
    worker.compile_or_warm_up_model()
    capture = watch.last
    assert capture.label == "capture" and capture.graphs == (1, 2)
    assert [n for n in capture.notes if "memory profiling" in n] == [
        "2 graph(s) captured during vllm.worker.determine_available_memory (the engine's "
        "memory profiling, freed before it serves) were not watched"
    ]
    assert owners(capture.report) == {"unregistered": PLANTED}
    # The runner's static inputs are engine state, not findings; the files are written.
    assert capture.report.summary["runtime"] > 0
    assert Path(capture.files["report_text"]).parent == tmp_path / "reports"
    worker.sleep(2)
    worker.wake_up(tags=["weights"])
    # A stand-in CUDA capture has no memory tracker (the CUPTI one on a GPU): what sleep
    # discarded is not seen as lost here, the sites stay named (the CPU twin sees lost).
    assert watch.last.label == "after_wake[weights]"
    assert owners(watch.last.report) == {"unregistered": PLANTED}
    worker.reload_weights()
    assert watch.last.label == "after_reload" and "stale" in owners(watch.last.report)
    worker.finish_weight_update()
    assert [r.label for r in watch.results][-1] == "after_weight_update"


def test_vllm_draft_model_is_checked_as_a_model_not_runtime_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The target model keeps everything registered; the EAGLE-style draft model the runner
    # holds keeps the legacy sites. Reached through the runner (engine state), they used to
    # count as runtime state: the draft model's graph looked clean.
    monkeypatch.setenv("GRAPHCHECK", "1")
    monkeypatch.setenv("GRAPHCHECK_DIR", str(tmp_path / "reports"))
    watch = fake_watch()
    module = vllm_worker_module(tmp_path)
    worker = module.Worker(variant="registered", draft_variant="legacy")
    worker.load_model()
    worker.compile_or_warm_up_model()
    capture = watch.last
    assert capture.graphs == (1, 2, 3)
    assert owners(capture.report) == {"unregistered": {f"draft_model.{p}" for p in PLANTED}}


def test_vllm_additional_config_turns_it_on_and_error_mode_fails_the_call(
    tmp_path: Path,
) -> None:
    watch = fake_watch()
    module = vllm_worker_module(tmp_path)
    worker = module.Worker({"graphcheck": {"mode": "error", "dir": str(tmp_path / "out")}})
    with pytest.raises(graphcheck.FindingsError, match="check point #1 'load': 0 graph"):
        worker.load_model()  # the census at load: the legacy sites fail the load in error mode
    assert watch.mode == "error" and watch.out_dir == str(tmp_path / "out")
    with pytest.raises(graphcheck.FindingsError, match="check point #2 'capture': 2 graph"):
        worker.compile_or_warm_up_model()
    assert len(worker.model_runner.graphs) == 2  # the capture itself completed
    off = module.Worker({"graphcheck": {"enabled": False}})
    assert vllm.settings_for(off) is None
    assert vllm.settings_for(module.Worker({"graphcheck": True})) is not None


def patched_worker(
    tmp_path: Path, source: str, caplog: pytest.LogCaptureFixture
) -> integrations.PatchReport:
    """Patches the Worker of a fake vllm whose worker module is ``source``; returns the report."""
    write_package(tmp_path / "engines", {"vllm/v1/worker/gpu_worker.py": source})
    module = importlib.import_module(vllm.WORKER_MODULE)
    with caplog.at_level(logging.INFO, logger="graphcheck.integrations"):
        return vllm.patch_worker(module)


def test_vllm_missing_method_is_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("GRAPHCHECK", "1")
    source = VLLM_WORKER.replace("def finish_weight_update", "def renamed_update")
    report = patched_worker(tmp_path, source, caplog)
    assert report.ok and "vllm.worker.finish_weight_update" not in report.patched
    assert "could not patch vllm.worker.finish_weight_update" in caplog.text
    assert "class Worker has no method finish_weight_update" in caplog.text


def test_vllm_required_method_moved_leaves_it_inert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("GRAPHCHECK", "1")
    source = VLLM_WORKER.replace("def compile_or_warm_up_model", "def compile_model")
    report = patched_worker(tmp_path, source, caplog)
    assert not report.ok and report.patched == []
    assert report.required_missing == ["vllm.worker.compile_or_warm_up_model"]
    worker = importlib.import_module(vllm.WORKER_MODULE).Worker
    assert not hasattr(worker.load_model, "__graphcheck_point__")
    assert "class Worker has no method compile_or_warm_up_model" in caplog.text
    assert "the integration stays inert" in caplog.text


def sglang_modules(tmp_path: Path) -> tuple[Any, Any, Any]:
    write_package(
        tmp_path / "engines",
        {
            "sglang/srt/plugins/hook_registry.py": SGLANG_HOOKS,
            "sglang/srt/model_executor/model_runner.py": SGLANG_RUNNER,
            "sglang/srt/managers/scheduler_components/weight_updater.py": SGLANG_UPDATER,
        },
    )
    hooks = importlib.import_module("sglang.srt.plugins.hook_registry")
    runner = importlib.import_module("sglang.srt.model_executor.model_runner")
    updater = importlib.import_module("sglang.srt.managers.scheduler_components.weight_updater")
    return hooks, runner, updater


def test_sglang_plugin_registers_nothing_without_the_flag(tmp_path: Path) -> None:
    hooks, _, _ = sglang_modules(tmp_path)
    assert sglang.register() is None and hooks.HookRegistry.hooks == []


def test_sglang_plugin_checks_capture_wake_and_reloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("GRAPHCHECK", "1")
    monkeypatch.setenv("GRAPHCHECK_DIR", str(tmp_path / "reports"))
    hooks, runner_module, updater_module = sglang_modules(tmp_path)
    watch = fake_watch()
    with caplog.at_level(logging.INFO, logger="graphcheck.integrations"):
        report = sglang.register()
        hooks.HookRegistry.apply_hooks()  # SGLang's load_plugins does this next
    assert report is not None and report.ok
    assert len(hooks.HookRegistry.hooks) == len(report.patched) == 8
    assert "SGLang applied the hooks on sglang.runner.load_model" in caplog.text
    runner = runner_module.ModelRunner()
    runner.load_model()
    runner.init_cuda_graphs()
    assert watch.last.label == "capture" and owners(watch.last.report) == {"unregistered": PLANTED}
    assert "model (ReferenceModel) [given]" in watch.last.model
    updater = updater_module.SchedulerWeightUpdaterManager(runner)
    runner.arena.sleep(2, runner.model)
    updater.resume_memory_occupation(Request(tags=["weights"]))
    assert watch.last.label == "after_wake[weights]"
    assert owners(watch.last.report) == {"unregistered": PLANTED}
    seq = watch.last.seq
    updater.update_weights_from_disk(Request(ok=False))  # failed update: no check point
    assert watch.last.seq == seq
    updater.update_weights_from_disk(Request())
    updater.end_weight_update(Request())
    assert [r.label for r in watch.results][-2:] == ["after_reload", "after_weight_update"]


def test_sglang_hook_not_applied_is_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("GRAPHCHECK", "1")
    hooks, _, _ = sglang_modules(tmp_path)
    fake_watch()
    assert sglang.register() is not None
    hooks.HookRegistry.hooks = [h for h in hooks.HookRegistry.hooks if "end_weight" not in h[0]]
    with caplog.at_level(logging.INFO, logger="graphcheck.integrations"):
        hooks.HookRegistry.apply_hooks()
    assert "did not apply the hook on sglang.manager.end_weight_update" in caplog.text


def test_patch_methods_reports_and_undoes() -> None:
    class Engine:
        def load(self) -> int:
            return 1

        def capture(self, size: int) -> None:
            pass

    calls: list[tuple[Any, ...]] = []
    points = [
        integrations.PatchPoint(
            "e.load", "Engine.load", integrations.Action.REGISTER_MODEL, integrations.Need.REQUIRED
        ),
        integrations.PatchPoint(
            "e.gone", "Engine.gone", integrations.Action.NEW_EPOCH, integrations.Need.OPTIONAL
        ),
    ]
    report = integrations.PatchReport("test engine")
    module = type(sys)("fake_engine_module")
    module.Engine = Engine  # type: ignore[attr-defined]
    undo = integrations.patch_methods(
        module, points, lambda p: lambda *a, **k: calls.append((p.key, *a)), report
    )
    assert report.patched == ["e.load"] and report.ok
    assert len(report.missing) == 1 and report.missing[0].startswith("e.gone (Engine.gone): ")
    assert report.missing[0].endswith("Engine has no method gone")
    engine = Engine()
    assert engine.load() == 1 and calls == [("e.load", 1, engine)]
    for restore in undo:
        restore()
    assert "load" in Engine.__dict__ and not hasattr(Engine.load, "__graphcheck_point__")


def test_a_profiling_window_that_cannot_open_never_breaks_the_engine(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # The window opens before the engine's own method runs, flag on or off (vLLM's
    # additional_config may turn it on per worker): with graphcheck's compiled modules
    # unloadable, an ImportError came out of Worker.determine_available_memory.
    from graphcheck.integrations import _wiring

    class Worker:
        def determine_available_memory(self) -> int:
            return 7

    def unloadable(what: str) -> Any:
        raise ImportError("graphcheck._torch: undefined symbol")

    monkeypatch.setattr(_wiring, "profiling_captures", unloadable)
    point = integrations.PatchPoint(
        "w.memory",
        "Worker.determine_available_memory",
        integrations.Action.PROFILE_CAPTURES,
        integrations.Need.REQUIRED,
    )
    module = type(sys)("fake_worker_module")
    module.Worker = Worker  # type: ignore[attr-defined]
    report = integrations.PatchReport("test engine")
    undo = integrations.patch_methods(module, [point], lambda p: lambda *a, **k: None, report)
    with caplog.at_level(logging.ERROR, logger="graphcheck.integrations"):
        assert Worker().determine_available_memory() == 7
    assert "the profiling window of w.memory could not open, the engine goes on" in caplog.text
    assert "ImportError: graphcheck._torch: undefined symbol" in caplog.text
    for restore in undo:
        restore()


def test_a_failing_hook_never_breaks_the_engine(caplog: pytest.LogCaptureFixture) -> None:
    point = integrations.PatchPoint(
        "e.x", "E.x", integrations.Action.NEW_EPOCH, integrations.Need.OPTIONAL
    )

    def broken(*args: Any, **kwargs: Any) -> None:
        raise KeyError("boom")

    with caplog.at_level(logging.ERROR, logger="graphcheck.integrations"):
        integrations.run_hook(broken, point, None, (), {})
    assert "the hook after e.x failed, the engine goes on" in caplog.text
    assert "KeyError: 'boom'" in caplog.text and "Traceback" not in caplog.text
    assert integrations.tags_label("after_wake", ["weights", "kv_cache"]) == (
        "after_wake[weights,kv_cache]"
    )
