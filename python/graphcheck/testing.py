"""The graph-replay test helper: capture, sleep, wake, reload, replay, compare, check.

:func:`check_graph_replay` runs the story that breaks engines for any model a
factory builds, on the CPU (the twin of ``graph_replay.h`` in C++):

1. ``capture``: the model is built inside a :class:`~graphcheck.WeightsArena`
   loading scope, a forward is captured (:func:`graphcheck.capture`);
2. ``after_wake_l1``: sleep level 1 and wake (everything restored);
3. ``after_wake_l2_reload``: sleep level 2 (buffers kept), wake, and an
   in-place reload of the weights the model had (``reload_in_place`` of the
   contract, with post-processing);
4. ``after_reload_rebind`` (only with ``second_checkpoint``): a reload of a
   second checkpoint by rebinding the parameters (``param.data = new``), the
   bug RL weight updates hit, with post-processing.

After each step the captured graph is replayed (:meth:`Capture.replay`, which
never calls the model), its output is compared with an eager forward of the
model as it now is, and the capture is checked in the step's epoch. A clean
model has equal outputs and no findings at every step; a model that keeps
tensors outside the contract shows findings by attribute path, and after a
level-2 sleep NaN outputs (0xFF poison). A reload by rebinding is ``stale``
and differs even for a registered model: that step shows what a rebinding
reload does to a captured graph.

The pytest plugin (``graphcheck.pytest_plugin``) gives the ``graphcheck``
fixture with this helper.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import torch

from graphcheck import _core
from graphcheck._capture import CAPTURE_EPOCH, Capture, capture
from graphcheck._errors import GraphcheckKeyError, GraphcheckTypeError
from graphcheck._utils import clone_tensors, compare_tensors
from graphcheck.arena import DEFAULT_CAPACITY, WeightsArena
from graphcheck.contract import Rebind, reload_in_place

__all__ = [
    "STEP_LABELS",
    "GraphReplayResult",
    "ReplayStep",
    "check_graph_replay",
    "process_weights_after_loading",
]

#: The step (and epoch) labels, in order; the last runs only with a second checkpoint.
STEP_LABELS = (CAPTURE_EPOCH, "after_wake_l1", "after_wake_l2_reload", "after_reload_rebind")


@dataclasses.dataclass(frozen=True)
class ReplayStep:
    """One step of :func:`check_graph_replay`.

    ``outputs_equal``: the replayed graph's output equals an eager forward of
    the model as it now is (``torch.equal`` per tensor: same shape and values;
    NaN never equals NaN). ``max_abs_diff`` is NaN where either side has NaN,
    ``inf`` for a shape mismatch. ``report`` is the capture checked in this
    step's epoch (baseline: ``capture``); ``summary`` and ``findings`` are
    its. ``rebinds`` lists what post-processing rebound during an in-place
    reload (``reload_in_place``'s reports). ``error`` says why the outputs were
    not compared in a step after the capture (``outputs_equal`` is then False and
    ``max_abs_diff`` NaN): ``"replay: ..."`` when the graph could not replay
    (an op of data-dependent shape, such as a MoE router's ``nonzero``, returned
    another shape after a reload: a graph bakes the captured one; an op raised on
    the garbage sleep left in memory it reads; a storage it reads was freed),
    ``"eager forward: ..."`` when the model's own forward raised on what the
    step left (an index tensor outside the registry that sleep discarded). The
    step's check ran all the same.
    """

    label: str
    outputs_equal: bool
    max_abs_diff: float
    report: _core.Report
    rebinds: tuple[Rebind, ...] = ()
    error: str = ""

    @property
    def summary(self) -> dict[str, int]:
        """Graph, node and reference counts and the count of each of the nine verdicts."""
        return self.report.summary

    @property
    def findings(self) -> list[_core.Finding]:
        """The report's findings (verdicts ``unregistered``, ``dangling``, ``stale``, ``lost``)."""
        return self.report.findings

    @property
    def ok(self) -> bool:
        """Outputs equal and no findings."""
        return self.outputs_equal and self.report.ok


@dataclasses.dataclass
class GraphReplayResult:
    """The steps of :func:`check_graph_replay`, the capture and its arena.

    Iterating gives the steps; ``result["after_wake_l1"]`` looks one up by
    label. The capture's snapshot holds every step's epoch
    (``result.capture.save(path)`` writes it for ``graphcheck check``).
    """

    steps: list[ReplayStep]
    capture: Capture
    arena: WeightsArena
    #: The model the steps ran: held here, since the capture keeps only a weak reference
    #: (as a graph does not own its model), so that ``capture.check()`` works afterwards.
    model: torch.nn.Module | None = None

    def __iter__(self) -> Iterator[ReplayStep]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def __getitem__(self, label: str) -> ReplayStep:
        for step in self.steps:
            if step.label == label:
                return step
        raise GraphcheckKeyError(
            f"no step {label!r}; the steps are {[s.label for s in self.steps]}"
        )

    @property
    def ok(self) -> bool:
        """Every step's outputs equal and no findings."""
        return all(step.ok for step in self.steps)

    def problems(self) -> list[str]:
        """One line per step whose outputs differ and per owner with findings, by path."""
        lines = []
        for step in self.steps:
            if step.error:
                lines.append(f"{step.label}: outputs not compared: {step.error}")
            elif not step.outputs_equal:
                lines.append(
                    f"{step.label}: the replayed graph's output differs from an eager forward "
                    f"(max abs diff {step.max_abs_diff})"
                )
            by_owner: dict[tuple[str, str, str], list[_core.Finding]] = {}
            for f in step.findings:
                by_owner.setdefault((f.verdict, f.owner, f.owner_kind or ""), []).append(f)
            for (verdict, owner, kind), found in by_owner.items():
                first = found[0]
                where = f"{first.kernel} {first.operand or f'param {first.param}'}".strip()
                lines.append(
                    f"{step.label}: {verdict} {owner or '<unlabelled>'} "
                    f"({kind or 'allocation label'}): {len(found)} reference(s), e.g. {where} "
                    f"at {_core.format_address(first.address)}; fix: {first.fix}"
                )
        return lines

    def assert_clean(self) -> None:
        """Raise ``AssertionError`` listing each finding by path and each differing step."""
        problems = self.problems()
        if problems:
            raise AssertionError(
                "graph replay is not clean:\n" + "\n".join(f"  {p}" for p in problems)
            )

    def __str__(self) -> str:
        lines = [f"graph replay of {self.capture!r}"]
        for step in self.steps:
            counts = ", ".join(
                f"{v} {step.summary[v]}" for v in _core.FINDING_VERDICTS if step.summary[v]
            )
            lines.append(
                f"  {step.label:<22} outputs {'equal' if step.outputs_equal else 'DIFFER'}"
                f"  findings: {counts or 'none'}"
            )
        return "\n".join(lines)


def process_weights_after_loading(module: torch.nn.Module) -> None:
    """The default post-processing: ``module.process_weights_after_loading()`` if it has one."""
    process = getattr(module, "process_weights_after_loading", None)
    if callable(process):
        process()


def _split_inputs(inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(inputs, Mapping):
        return (), dict(inputs)
    if isinstance(inputs, (tuple, list)):
        return tuple(inputs), {}
    return (inputs,), {}


def _weights_of(checkpoint: Any) -> dict[str, torch.Tensor]:
    """A second checkpoint as weights: a mapping, or what a callable returns (model or mapping)."""
    value = (
        checkpoint() if callable(checkpoint) and not isinstance(checkpoint, Mapping) else checkpoint
    )
    if isinstance(value, torch.nn.Module):
        value = value.state_dict()
    if not isinstance(value, Mapping):
        raise GraphcheckTypeError(
            f"check_graph_replay: second_checkpoint must be a mapping of str to Tensor, a "
            f"module, or a callable returning one, got {type(value).__qualname__}"
        )
    return dict(value)


def _rebind(
    model: torch.nn.Module,
    weights: Mapping[str, torch.Tensor],
    process: Callable[[torch.nn.Module], object],
) -> None:
    """Reload by rebinding: every parameter and persistent buffer gets a fresh tensor."""
    slots: dict[str, tuple[torch.nn.Module, str]] = {}
    for path, module in model.named_modules(remove_duplicate=False):
        prefix = f"{path}." if path else ""
        for name, t in module._parameters.items():
            if t is not None:
                slots[prefix + name] = (module, name)
        for name, t in module._buffers.items():
            if t is not None and name not in module._non_persistent_buffers_set:
                slots[prefix + name] = (module, name)
    unknown = sorted(set(weights) - set(slots))
    if unknown:
        raise GraphcheckKeyError(
            f"check_graph_replay: second_checkpoint has keys that are no parameter or "
            f"persistent buffer of the model: {unknown}"
        )
    with torch.no_grad():
        for key, value in weights.items():
            module, name = slots[key]
            if name in module._parameters:
                parameter = module._parameters[name]
                assert parameter is not None
                parameter.data = value.to(parameter.device, parameter.dtype, copy=True)
            else:
                buffer = module._buffers[name]
                assert buffer is not None
                module._buffers[name] = value.to(buffer.device, buffer.dtype, copy=True)
    seen: set[int] = set()
    for module in reversed(list(model.modules())):  # children before their parents
        if id(module) not in seen:
            seen.add(id(module))
            process(module)


@contextlib.contextmanager
def _seeded(seed: int | None) -> Iterator[None]:
    """Seeds torch's generators for one replay or eager forward; restores the CPU one after."""
    if seed is None:
        yield
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


@contextlib.contextmanager
def _seeded_forwards(model: torch.nn.Module, seed: int | None) -> Iterator[None]:
    """Seeds torch's generators at the start of each forward of ``model``.

    The warm-up and the captured forward: a shape the capture bakes from a random draw (VITS'
    durations) is then the one the seeded replays and eager forwards draw. The CPU generator
    is restored after.
    """
    if seed is None:
        yield
        return

    def reseed(module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        torch.manual_seed(seed)  # returns the generator: a pre-hook must return None

    with torch.random.fork_rng(devices=[]):
        handle = model.register_forward_pre_hook(reseed)
        try:
            yield
        finally:
            handle.remove()


def check_graph_replay(
    factory: Callable[[], torch.nn.Module],
    make_inputs: Callable[[torch.nn.Module], Any],
    *,
    second_checkpoint: Any = None,
    allow: Iterable[str] = (),
    process: Callable[[torch.nn.Module], object] = process_weights_after_loading,
    warmup: int = 1,
    capacity: int = DEFAULT_CAPACITY,
    seed: int | None = None,
) -> GraphReplayResult:
    """Run capture, sleep and wake at both levels, reloads; replay, compare, check each step.

    ``factory()`` builds the model; it runs inside the loading scope of a new
    :class:`~graphcheck.WeightsArena` (of ``capacity`` bytes of address
    space), so every CPU tensor it allocates lives there. ``make_inputs(model)``
    returns the forward's inputs: a mapping (keyword arguments), a tuple or
    list (positional arguments) or one value; it runs outside the arena, and
    its tensors are the graph's static inputs. The in-place reload after the
    level-2 sleep loads the ``state_dict()`` the model had before the capture,
    with ``process(module)`` run on every module after its own tensors are
    copied (default: its ``process_weights_after_loading()`` if it has one).
    ``second_checkpoint`` (a mapping of ``state_dict()`` keys to tensors, a
    module, or a callable returning either, called outside the arena) adds the
    rebinding reload; None skips it. ``allow`` globs apply to every check.
    ``seed`` (for a forward that draws random numbers: masking, noise, sampling)
    seeds torch's generators before each replay and before each eager forward, and
    at the start of the forwards the capture runs, so that all draw the same
    numbers (the replay re-runs the recorded random ops, which draw from the
    default generator as the eager forward does, and a shape the capture baked
    from a draw is the one they draw); the caller's CPU generator state is
    restored after each. None leaves the
    generators alone, and such a forward then differs at every step.

    Returns a :class:`GraphReplayResult`; call its :meth:`~GraphReplayResult.assert_clean` in a
    test. Raises what the factory or the forward at capture raises,
    :class:`~graphcheck.GraphcheckTypeError` when the factory returns no module, and
    :class:`graphcheck.GraphcheckError` when the replay at capture cannot run; after the
    capture a replay or a forward that raises is the step's ``error``. The arena's loading
    scopes are closed on every path. Not thread-safe: the process-wide CPU allocator is switched
    while loading.
    """
    allow = list(allow) if not isinstance(allow, str) else allow  # _core.check refuses a str
    arena = WeightsArena(capacity)
    with arena.loading():
        model = factory()
    if not isinstance(model, torch.nn.Module):
        raise GraphcheckTypeError(
            f"check_graph_replay: factory() must return a torch.nn.Module, got "
            f"{type(model).__qualname__}"
        )
    args, kwargs = _split_inputs(make_inputs(model))
    # A state_dict may hold other values beside tensors (a dynamically quantized Linear's
    # packed-parameter dtype): they are no weights to reload (an AttributeError before).
    weights = {
        k: v.detach().clone() for k, v in model.state_dict().items() if isinstance(v, torch.Tensor)
    }
    second = _weights_of(second_checkpoint) if second_checkpoint is not None else None
    with _seeded_forwards(model, seed):
        graph = capture(model, *args, warmup=warmup, arena=arena, **kwargs)
    steps: list[ReplayStep] = []

    def run_step(label: str, rebinds: Iterable[Rebind] = ()) -> None:
        # After the capture step, a replay or forward that cannot run is the step's result
        # (ReplayStep.error), and the step is still checked; at capture it is raised.
        what = "replay"
        try:
            with _seeded(seed):
                replayed = clone_tensors(graph.replay())
            what = "eager forward"
            with _seeded(seed), torch.no_grad():
                eager = model(*args, **kwargs)
            equal, diff, error = *compare_tensors(replayed, eager), ""
        except Exception as exc:
            if label == CAPTURE_EPOCH:
                raise
            equal, diff, error = False, math.nan, f"{what}: {type(exc).__name__}: {exc}"
        if label != CAPTURE_EPOCH:
            graph.epoch(label)
        report = graph.check(label, allow=allow)
        steps.append(ReplayStep(label, equal, diff, report, tuple(rebinds), error))

    run_step(STEP_LABELS[0])
    arena.sleep(1)
    arena.wake_up()
    run_step(STEP_LABELS[1])
    arena.sleep(2, model)
    arena.wake_up()
    with arena.loading():
        rebinds = reload_in_place(model, weights, process)
    run_step(STEP_LABELS[2], rebinds)
    if second is not None:
        with arena.loading():
            _rebind(model, second, process)
        run_step(STEP_LABELS[3])
    return GraphReplayResult(steps, graph, arena, model)
