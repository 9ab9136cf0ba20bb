"""The capture and reload steps of one vLLM architecture (inside its worker process).

Capture: the model runner's own dummy batch (``_dummy_run`` with attention
metadata forced, the batch vLLM warms up and captures CUDA graphs with) runs
once with the model's ``forward`` wrapped, which records the forward's
arguments and vLLM's forward context (attention metadata, KV cache slots).
The same forward is then captured in the ATen window
(:func:`graphcheck.capture`) under that context, with the model runner and the
context declared engine state (their tensors are runtime state), replayed and
compared with an eager forward (their outputs and what each wrote into the KV
caches and states), and checked.

Reload: new checkpoint-format weights
(:mod:`~graphcheck.zoo.vllm_engine.checkpoint`) go through vLLM's own in-place
reload (``model_runner.reload_weights(weights_iterator=...)``: layerwise
restore, ``load_weights``, ``process_weights_after_loading``, copy back into
the original storages); the capture is checked in a new epoch and replayed
again. A replay that would read freed memory is refused by graphcheck and
recorded as such (a CUDA graph would read the freed memory).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterable
from typing import Any

from graphcheck.integrations._vllm_forward import Comparison, EngineForward, compare
from graphcheck.zoo._util import error_line
from graphcheck.zoo.catalog import Arch
from graphcheck.zoo.vllm_engine.catalog import variant_of

__all__ = ["run_steps"]

Result = dict[str, Any]


def _owners(report: Any, verdicts: Iterable[str]) -> dict[str, list[str]]:
    wanted = set(verdicts)
    found: dict[str, set[str]] = {}
    for f in report.findings:
        if f.verdict in wanted:
            found.setdefault(f.verdict, set()).add(str(f.owner))
    return {v: sorted(owners) for v, owners in sorted(found.items())}


def _split_owners(owners: Iterable[str], foreign_paths: set[str]) -> tuple[list[str], list[str]]:
    plain = sorted(o for o in owners if o not in foreign_paths)
    return plain, sorted(o for o in owners if o in foreign_paths)


def _step(label: str, comparison: Comparison, report: Any) -> dict[str, Any]:
    return {
        "label": label,
        "outputs_equal": comparison.equal,
        "max_abs_diff": comparison.diff,
        "replay": comparison.replay,
        "summary": dict(report.summary),
        "owners": _owners(report, ("unregistered", "dangling", "stale", "lost")),
    }


def run_steps(
    engine: Any, arch: Arch, served: Any, seed: int, result: Result, emit: Callable[[Result], None]
) -> None:
    """Fills ``capture``, ``steps``, ``reload`` and ``capture_status`` of ``result``.

    ``served`` (:class:`~graphcheck.zoo.vllm_engine.worker.Served`) names the
    model the reload's checkpoint is made for (a draft's target).
    """
    foreign_paths = {f["path"] for f in result["foreign"]}
    t0 = time.perf_counter()
    try:
        forward = EngineForward(engine.runner, engine.model, engine.forward_module)
        result["forward"].update(eligible=True, ran=True, inputs=sorted(forward.kwargs))
        capture = forward.capture()
        comparison = forward.replay_and_eager(capture)
        report = capture.check("capture")
        step = _step("capture", comparison, report)
    except Exception as exc:
        from graphcheck.zoo.vllm_engine.reasons import explain, vllm_frame

        result["forward"]["eligible"] = True
        result["capture_status"] = f"failed: {error_line(exc)}"
        result["failure"] = explain(result["capture_status"], vllm_frame(exc), arch.class_name)
        result["seconds"]["capture"] = time.perf_counter() - t0
        return
    result["seconds"]["capture"] = time.perf_counter() - t0
    plain, foreign = _split_owners(step["owners"].get("unregistered", []), foreign_paths)
    result["capture"] = {"summary": step["summary"], "unregistered": plain, "foreign": foreign}
    result["steps"] = [step]
    result["capture_status"] = "ran"
    emit(result)
    _reload(engine, arch, served, seed, forward, capture, result)


def _engine_config(engine: Any) -> Any:
    """The engine's vLLM config made current, for building transformers' class of the model.

    vLLM's Transformers backend (``TransformersForCausalLM``: Glm, Phi, OLMo, Starcoder2 and
    the others its registry maps to it) decorates transformers' own decoder class in place
    (``support_torch_compile`` in ``vllm/model_executor/models/transformers/base.py``), so
    that class's ``__init__`` now asks for the current vLLM config and fails outside one.
    The engine's config has ``enforce_eager``: the decorated ``__init__`` compiles nothing.
    """
    from vllm.config import set_current_vllm_config

    return set_current_vllm_config(engine.runner.vllm_config)


def _reload(
    engine: Any,
    arch: Arch,
    served: Any,
    seed: int,
    forward: EngineForward,
    capture: Any,
    result: Result,
) -> None:
    from graphcheck.zoo.vllm_engine.checkpoint import NoCheckpoint, checkpoint_weights
    from graphcheck.zoo.vllm_engine.worker import classify

    variant = variant_of(arch)
    t0 = time.perf_counter()
    notes: list[str] = []
    try:
        with _engine_config(engine):
            weights = checkpoint_weights(
                served.config,
                served.class_name,
                seed + 1,
                quantization=variant.quantization,
                notes=notes,
            )
    except NoCheckpoint as exc:
        result["reload"] = {"status": f"not run: {exc}"}
        return
    reload: dict[str, Any] = {"status": "", "weights": len(weights)}
    if notes:
        reload["checkpoint_notes"] = notes
    result["reload"] = reload
    try:
        before = forward.eager()
        engine.runner.reload_weights(weights_iterator=iter(weights.items()))
        gc.collect()  # what the reload replaced is freed now, not at the collector's next pass
        findings, foreign = classify(engine.model, "after_reload")
        known = {f["path"] for f in (*result["findings"], *result["foreign"])}
        result["findings"] += [f for f in findings if f["path"] not in known]
        result["foreign"] += [f for f in foreign if f["path"] not in known]
        capture.epoch("after_reload")
        report = capture.check("after_reload")
        comparison = forward.replay_and_eager(capture)
        step = _step("after_reload", comparison, report)
        step["eager_changed"] = not compare(before, comparison.eager)[0]
        reload["status"] = "ran"
        reload["eager_changed"] = step["eager_changed"]
        result["steps"].append(step)
    except Exception as exc:
        reload["status"] = f"failed: {error_line(exc)}" + "".join(f" ({n})" for n in notes)
    finally:
        result["seconds"]["steps"] = time.perf_counter() - t0
