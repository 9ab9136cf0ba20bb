"""The capture phase of the zoo: where capture, check and the replay steps plug in.

Issue 10 §2 runs, after the warm-up forward, ``capture`` and ``check`` at
capture, then sleep level 2 with wake and in-place reload of the same weights
and a reload of a second random checkpoint by rebinding, each with a replay
compared to an eager forward and a check. That needs the capture, replay and
sleep/wake API of the Python package (``graphcheck.capture``,
``graphcheck.testing.check_graph_replay``), which this build may not have:
:func:`capture_api` says whether it does, and :func:`run_capture_phase` fills
the ``capture``/``steps`` entries of a result only then. Until then they stay
``null`` with ``capture_status`` saying why: the zoo never fabricates a
capture result.

The API is imported here, lazily, in the worker process: importing the zoo
never loads the compiled torch module.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from graphcheck.zoo._util import error_line

__all__ = ["CAPTURE_UNAVAILABLE", "capture_api", "run_capture_phase"]

CAPTURE_UNAVAILABLE = "not available in this build"


def capture_api() -> Any | None:
    """``graphcheck.testing`` when the capture/replay API exists in this build, else ``None``."""
    try:
        testing = importlib.import_module("graphcheck.testing")
    except ImportError:
        return None
    return testing if callable(getattr(testing, "check_graph_replay", None)) else None


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return str(value)


def run_capture_phase(
    factory: Callable[[], Any],
    make_inputs: Callable[[Any], dict[str, Any]],
    result: dict[str, Any],
    seed: int | None = None,
) -> None:
    """Fills ``result["capture"]``, ``result["steps"]`` and ``result["capture_status"]``.

    ``factory()`` builds a fresh model (same config, new random weights: the
    second checkpoint), ``make_inputs(model)`` the forward's keyword
    arguments. Without the API both entries are ``None`` and the status says
    so. With it, ``check_graph_replay`` (issue 9 §6) runs the steps; the
    capture summary and its unregistered owners come from the first step.
    ``seed`` seeds the generators before each replay and each eager forward
    (``check_graph_replay(seed=...)``), so that a forward that draws random
    numbers (MAE masking, VITS noise, ...) is compared with the same draws.
    """
    api = capture_api()
    if api is None:
        result["capture"] = None
        result["steps"] = None
        result["capture_status"] = CAPTURE_UNAVAILABLE
        return
    try:
        run = api.check_graph_replay(factory, make_inputs, second_checkpoint=factory, seed=seed)
    except Exception as exc:  # a finding-free failure of the phase is a result, not a crash
        result["capture"] = None
        result["steps"] = None
        result["capture_status"] = f"failed: {error_line(exc)}"
        return
    steps = list(getattr(run, "steps", run))
    first = steps[0] if steps else None
    findings = list(getattr(first, "findings", []) or [])
    result["capture"] = {
        "summary": _plain(getattr(first, "summary", {})),
        "unregistered": sorted(
            {
                str(getattr(f, "owner", ""))
                for f in findings
                if getattr(f, "verdict", "") == "unregistered"
            }
        ),
    }
    result["steps"] = [
        {
            "label": str(getattr(s, "label", "")),
            "outputs_equal": bool(getattr(s, "outputs_equal", False)),
            "summary": _plain(getattr(s, "summary", {})),
            # Why the outputs were not compared (ReplayStep.error); the step was checked.
            "error": str(getattr(s, "error", "")),
        }
        for s in steps
    ]
    result["capture_status"] = "ran"
