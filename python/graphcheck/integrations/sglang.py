"""The SGLang plugin: ``GRAPHCHECK=1``.

SGLang (0.5.11 and later) runs every plugin of the entry-point group ``sglang.srt.plugins``
(graphcheck's is ``graphcheck = graphcheck.integrations.sglang:register``) with no argument,
in every process that loads plugins, then applies the hooks they registered with its
``HookRegistry``. :func:`register` does nothing unless ``GRAPHCHECK`` is on (``apply_hooks``
imports every hooked module in every such process: an inert plugin registers nothing).
Otherwise it registers AFTER hooks, by the names :mod:`graphcheck.integrations.targets` lists
for the installed SGLang release, each checked first against the live method's parameters:

- ``ModelRunner.load_model``: the runner's model (read as ``runner.model`` at every check: a
  disk update may rebind it) and the runner (its KV pools and graph runners' static inputs are
  runtime state) are registered; target and draft runners each under their own name;
- ``ModelRunner.init_cuda_graphs`` (``init_device_graphs`` before 0.5.14),
  ``init_decode_cuda_graph`` and ``init_prefill_cuda_graph``: every graph captured is checked;
- the scheduler's ``resume_memory_occupation`` (``after_wake``, with the tags),
  ``update_weights_from_disk``/``_ipc`` and, before 0.5.21, ``_tensor``/``_distributed``
  (``after_reload``), and since 0.5.21 ``end_weight_update`` (``after_weight_update``): a new
  epoch is checked when the update succeeded.

SGLang logs and swallows a hook it cannot apply, so the plugin verifies its own: right after
``HookRegistry.apply_hooks`` (or, failing that, at its first hook call) it logs which targets
carry its hooks and which do not. Graphs reach the watch through its hook on
``torch.cuda.CUDAGraph`` capture. The CUDA path is unverified (no GPU run yet); the CPU tier
tests this module with a fake ``HookRegistry`` and fake engine classes shaped like SGLang
0.5.23's.
"""

from __future__ import annotations

import functools
import itertools
import logging
import threading
import weakref
from typing import Any

from graphcheck._watch.settings import flag_on, settings_from_env

from . import _wiring
from .targets import (
    NEWEST_CHECKED,
    OLDEST_CHECKED,
    Action,
    Framework,
    parse_version,
    patch_points,
)

__all__ = ["register"]

log = logging.getLogger("graphcheck.integrations")

_HOOKS_MODULE = "sglang.srt.plugins.hook_registry"
_ORIGIN = "SGLang plugin"
_LABELS = {"end_weight_update": "after_weight_update"}


class _State:
    """What ``register`` set up in this process: the hooks to verify and the runners seen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.pending: list[tuple[_wiring.PatchPoint, type, str, Any]] = []
        self.report: _wiring.PatchReport | None = None
        self.names: dict[int, str] = {}
        self.counter = itertools.count(1)


_STATE = _State()


def _succeeded(result: Any) -> bool:
    """Whether an update handler's output says it succeeded (``.success``, or a tuple's first)."""
    success = getattr(result, "success", None)
    if isinstance(success, bool):
        return success
    if isinstance(result, tuple) and result and isinstance(result[0], bool):
        return result[0]
    return True


def _runner_name(runner: Any) -> str:
    with _STATE.lock:
        name = _STATE.names.get(id(runner))
        if name is None:
            n = next(_STATE.counter)
            name = _STATE.names[id(runner)] = "model" if n == 1 else f"model_{n}"
        return name


def _model_getter(runner: Any) -> Any:
    ref = weakref.ref(runner)

    def get_model() -> Any:
        live = ref()
        return getattr(live, "model", None) if live is not None else None

    return get_model


def _hook(point: _wiring.PatchPoint) -> _wiring.AfterHook | None:
    if point.action is Action.REGISTER_MODEL:

        def registered(result: Any, runner: Any, *args: Any, **kwargs: Any) -> None:
            verify()
            name = _runner_name(runner)
            _wiring.model_loaded(
                _model_getter(runner),
                name=name,
                engine_state={f"{name}_runner": runner},
                settings=settings_from_env(),
                origin=_ORIGIN,
            )

        return registered
    if point.action is Action.CHECK_CAPTURE:

        def captured(result: Any, runner: Any, *args: Any, **kwargs: Any) -> None:
            verify()
            _wiring.graphs_captured()

        return captured
    if point.action is Action.NEW_EPOCH:
        method = point.qualname.rpartition(".")[2]

        def epoch(result: Any, handler: Any, *args: Any, **kwargs: Any) -> None:
            verify()
            if point.point == "wake":
                request = kwargs.get("recv_req", args[0] if args else None)
                label = _wiring.tags_label("after_wake", getattr(request, "tags", None))
            elif not _succeeded(result):
                return
            else:
                label = _LABELS.get(method, "after_reload")
            _wiring.new_epoch(label)

        return epoch
    return None


def _safe(hook: _wiring.AfterHook, point: _wiring.PatchPoint) -> _wiring.AfterHook:
    """SGLang calls hooks bare: graphcheck's failures are logged, error-mode findings raise."""

    @functools.wraps(hook)
    def run(result: Any, *args: Any, **kwargs: Any) -> None:
        _wiring.run_hook(hook, point, result, args, kwargs)

    return run


def _wraps(current: Any, original: Any) -> bool:
    seen = 0
    function = getattr(current, "__func__", current)
    while function is not None and seen < 32:
        if function is original:
            return True
        function = getattr(function, "__wrapped__", None)
        seen += 1
    return False


def verify() -> list[str]:
    """Log which registered hooks SGLang applied and which it did not (once); returns the latter."""
    with _STATE.lock:
        pending, _STATE.pending = _STATE.pending, []
    if not pending:
        return []
    applied: list[str] = []
    failed: list[str] = []
    for point, owner, name, original in pending:
        current = owner.__dict__.get(name, getattr(owner, name, None))
        ok = current is not original and _wraps(current, original)
        (applied if ok else failed).append(point.key)
    log.info("graphcheck: SGLang applied the hooks on %s", ", ".join(applied) or "nothing")
    for key in failed:
        log.error("graphcheck: SGLang did not apply the hook on %s: that check point is off", key)
    return failed


def _verify_after_apply(registry: type) -> None:
    """Verify right after ``HookRegistry.apply_hooks`` (a classmethod), when it is one."""
    raw = registry.__dict__.get("apply_hooks")
    if not isinstance(raw, classmethod) or getattr(raw.__func__, "__graphcheck_verify__", False):
        return
    apply = raw.__func__

    @functools.wraps(apply)
    def apply_hooks(cls: type, *args: Any, **kwargs: Any) -> Any:
        result = apply(cls, *args, **kwargs)
        verify()
        return result

    apply_hooks.__graphcheck_verify__ = True  # type: ignore[attr-defined]
    registry.apply_hooks = classmethod(apply_hooks)  # type: ignore[attr-defined]


def register() -> _wiring.PatchReport | None:
    """SGLang's plugin entry point: register graphcheck's hooks when ``GRAPHCHECK`` is on.

    Called with no argument in every process that loads plugins. Returns the report of what
    was registered (None when off); never raises into SGLang.
    """
    if not flag_on():
        return None
    try:
        return _register()
    except Exception:  # a plugin must never stop SGLang
        log.exception("graphcheck: the SGLang plugin could not register its hooks")
        return None


def _register() -> _wiring.PatchReport | None:
    import importlib

    try:
        hooks = importlib.import_module(_HOOKS_MODULE)
        registry, hook_type = hooks.HookRegistry, hooks.HookType
    except (ImportError, AttributeError) as exc:
        log.error(
            "graphcheck: SGLang has no HookRegistry (%s; it appeared in %s): the plugin is inert",
            exc,
            OLDEST_CHECKED[Framework.SGLANG],
        )
        return None
    version = _wiring.engine_version("sglang") or NEWEST_CHECKED[Framework.SGLANG]
    if parse_version(version) > parse_version(NEWEST_CHECKED[Framework.SGLANG]):
        log.info(
            "graphcheck: SGLang %s is newer than the newest release checked (%s)",
            version,
            NEWEST_CHECKED[Framework.SGLANG],
        )
    report = _wiring.PatchReport(f"sglang {version}")
    points = _wiring.points_from_targets(patch_points(Framework.SGLANG, version))
    chosen: list[tuple[_wiring.PatchPoint, _wiring.AfterHook, type, str, Any]] = []
    for point in points:
        hook = _hook(point)
        if hook is None:
            continue
        module = point.dotted[: -len(point.qualname) - 1]
        try:
            owner, name, function = _wiring.resolve_method(module, point.qualname)
        except LookupError as exc:
            report.miss(point, str(exc))
            continue
        problems = _wiring.signature_problems(point, function)
        if problems:
            report.miss(point, "; ".join(problems))
            continue
        chosen.append((point, hook, owner, name, owner.__dict__.get(name, function)))
    if report.required_missing:
        report.log()
        return report
    with _STATE.lock:
        for point, hook, owner, name, original in chosen:
            registry.register(point.dotted, _safe(hook, point), hook_type.AFTER)
            report.patched.append(point.key)
            _STATE.pending.append((point, owner, name, getattr(original, "__func__", original)))
        _STATE.report = report
    _verify_after_apply(registry)
    report.log()
    return report
