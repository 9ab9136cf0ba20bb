"""What runs on one vLLM architecture, inside its own worker process.

:func:`run_architecture` writes the tiny config, builds the model with dummy
weights through vLLM's engine (``LLM(...)`` in this process: load,
``process_weights_after_loading``, KV cache, warm-up: what the CPU worker
serves), takes the census (memory torch does not own split out by
:mod:`~graphcheck.integrations._vllm_foreign`), then hands over to
:mod:`~graphcheck.zoo.vllm_engine.steps` for the capture and the reload.
Every failure is recorded in the result (exception class and first line),
never raised; ``emit(result)`` runs after each phase so that the runner keeps
what finished when a later phase crashes or hangs.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from graphcheck.zoo._util import error_line
from graphcheck.zoo.catalog import Arch
from graphcheck.zoo.vllm_engine.catalog import variant_of

__all__ = ["ENGINE_ARGS", "new_result", "run_architecture"]

Result = dict[str, Any]

#: The engine's arguments for every architecture (the variant adds dtype and KV cache dtype).
ENGINE_ARGS: dict[str, Any] = {
    "load_format": "dummy",
    "max_model_len": 128,
    "max_num_seqs": 8,
    "max_num_batched_tokens": 256,
    "enforce_eager": True,
    "kv_cache_memory_bytes": 1 << 26,
    "distributed_executor_backend": "uni",
    "seed": 0,
}

# Multimodal processors need the hub's processor files: those architectures run their
# language model only (vLLM's --language-model-only; their encoders are not built).
_LANGUAGE_MODEL_ONLY = {"multimodal"}

# vLLM's registry lists these as embedding models, but its default runner serves a base
# model (LlamaModel, MistralModel, Qwen2Model, Gemma2Model) as its *ForCausalLM, which cannot
# read that model's own checkpoint (names without ``model.``); a hub checkpoint's
# sentence-transformers files, or ``--runner pooling``, make vLLM serve it as the embedding
# model whose loader does. Served with the pooling runner, as a user serves one.
_POOLING_RUNNER = {"embedding"}


def new_result(arch: Arch) -> Result:
    """The result skeleton of ``arch``: the transformers zoo's fields, plus vLLM's."""
    from graphcheck.zoo.worker import new_result as base

    result = base(arch)
    result.update(
        {
            "category": arch.tasks[0] if arch.tasks else "",
            # The weights' dtype: a row in another than its class's float32 row runs other
            # kernels, and requires only the baseline entries that name it (evaluation).
            "dtype": variant_of(arch).dtype,
            "config_source": "",
            "engine": {},
            "foreign": [],
            "reload": None,
            "capture_status": "not run: the build failed",
        }
    )
    return result


def classify(model: Any, phase: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(findings, foreign)`` of ``model`` now, each entry tagged with ``phase``."""
    from graphcheck.integrations._vllm_foreign import emptied_parameters, split_foreign
    from graphcheck.zoo.worker import census_entries

    findings, handles = split_foreign(census_entries(model), model)
    holders = [h["path"] for h in handles] + [f["path"] for f in findings]
    foreign = handles + emptied_parameters(model, holders)
    for entry in (*findings, *foreign):
        entry["phase"] = phase
    return findings, foreign


class Engine:
    """An ``LLM`` built in this process and the parts of it the steps use.

    ``model`` is what is checked: the runner's model, or with a drafter that
    has a model, the target and the draft together
    (:class:`~graphcheck.integrations._vllm_forward.TargetAndDraft`).
    ``forward_module`` is the module whose call in the dummy batch is captured
    (the draft's, when there is one).
    """

    def __init__(self, llm: Any) -> None:
        from graphcheck.integrations._vllm_forward import TargetAndDraft, draft_model

        self.llm = llm
        core = llm.llm_engine.engine_core.engine_core
        self.worker = core.model_executor.driver_worker.worker
        self.runner = self.worker.model_runner
        target = self.runner.get_model()
        self.draft = draft_model(self.runner)
        self.model = target if self.draft is None else TargetAndDraft(target, self.draft)
        self.forward_module = self.draft if self.draft is not None else target


def build_engine(folder: Path, dtype: str, kv_cache_dtype: str, **extra: Any) -> Engine:
    """``LLM(model=folder, ...)`` with :data:`ENGINE_ARGS`, in this process."""
    from vllm import LLM

    args = {**ENGINE_ARGS, "dtype": dtype, "kv_cache_dtype": kv_cache_dtype, **extra}
    return Engine(LLM(model=str(folder), **args))


def engine_options(arch: Arch, config: Any = None) -> dict[str, Any]:
    """Arguments beyond :data:`ENGINE_ARGS` that ``arch``'s category and ``config`` need.

    An embedding architecture is served with the pooling runner.
    A table entry served ``whole`` keeps its encoders; its ``engine`` arguments are added.
    A model with fewer positions than :data:`ENGINE_ARGS`' ``max_model_len`` (CLIP's text
    tower: 77) is served with its own: vLLM refuses a longer one.
    """
    from graphcheck.zoo.vllm_engine.tables import TABLE

    options: dict[str, Any] = {}
    entry = TABLE.get(arch.class_name)
    if set(arch.tasks) & _LANGUAGE_MODEL_ONLY and not (entry is not None and entry.whole):
        options["language_model_only"] = True
    if set(arch.tasks) & _POOLING_RUNNER:
        options["runner"] = "pooling"
    if entry is not None:
        options.update(entry.engine)
    positions = _positions(config)
    if positions is not None and positions < ENGINE_ARGS["max_model_len"]:
        options["max_model_len"] = positions
    return options


def _positions(config: Any) -> int | None:
    """The text model's ``max_position_embeddings`` of ``config``, where it has one."""
    try:
        text = config.get_text_config() if config is not None else None
    except Exception:
        text = config
    value = getattr(text, "max_position_embeddings", None)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclasses.dataclass
class Served:
    """What ``arch`` is served from: the model's config and class, and the engine options.

    ``config`` and ``class_name`` are the served (reloaded) model's: a draft
    architecture's target's.
    """

    config: Any
    class_name: str
    source: str
    options: dict[str, Any]


def write_served(folder: Path, arch: Arch) -> Served:
    """Writes the configs ``arch`` is served from (``folder``, and ``folder/draft``).

    A draft architecture (:data:`~graphcheck.zoo.vllm_engine.speculative.DRAFTS`)
    is served by its target: the target's folder is the model, the draft's (or
    the target's own MTP layers) the ``speculative_config``.
    """
    from graphcheck.zoo.vllm_engine.catalog import category, registry_module
    from graphcheck.zoo.vllm_engine.configs import write_config
    from graphcheck.zoo.vllm_engine.speculative import DRAFTS

    variant = variant_of(arch)
    draft = DRAFTS.get(arch.class_name)
    if draft is None:
        config, source = write_config(folder, arch, variant)
        return Served(config, arch.class_name, source, engine_options(arch, config))
    # The target's row as the catalog lists it (its registry module too, by which a config
    # only vLLM's registry module names is found: Kimi-K3's), so that the draft's target is
    # served from the config its own row is.
    module = registry_module(draft.target)
    target = Arch(draft.target, draft.target, module, arch.variant, (category(draft.target),))
    extra = {"num_nextn_predict_layers": 1} if draft.method == "mtp" else {}
    config, source = write_config(folder, target, variant, extra={**extra, **draft.target_fields})
    spec: dict[str, Any] = {"method": draft.method, "num_speculative_tokens": 1, **draft.spec}
    options = engine_options(target, config)
    if draft.own_config:
        _, draft_source = write_config(folder / "draft", arch, variant)
        source = f"{draft_source}; target: {source}"
        spec["model"] = str(folder / "draft")
    source += f"; served as the {draft.method} draft of {draft.target}"
    return Served(config, draft.target, source, {**options, "speculative_config": spec})


def _check_draft(engine: Engine, arch: Arch) -> None:
    """Raises when a draft architecture was not built as the runner's draft model."""
    from vllm.model_executor.models.registry import ModelRegistry

    from graphcheck.zoo.vllm_engine.speculative import DRAFTS

    if arch.class_name not in DRAFTS:
        return
    registered = ModelRegistry.models.get(arch.class_name)
    expected = str(getattr(registered, "class_name", arch.class_name))
    built = type(engine.draft).__name__ if engine.draft is not None else "no draft model"
    if built != expected:
        raise RuntimeError(f"vLLM built {built} as the draft of {arch.class_name}, not {expected}")


def run_architecture(arch: Arch, emit: Callable[[Result], None] | None = None) -> Result:
    """Builds ``arch`` through vLLM, takes its census, captures and reloads it; never raises.

    One config level (``tiny``) and one engine: vLLM's parallel groups and
    forward context are process-wide, so a second engine in the same worker
    would inherit the first one's state (and its errors).
    """
    result = new_result(arch)
    emit = emit or (lambda _r: None)
    with tempfile.TemporaryDirectory(prefix="vllm-zoo-") as folder:
        return _run(arch, Path(folder), result, emit)


def _run(arch: Arch, root: Path, result: Result, emit: Callable[[Result], None]) -> Result:
    from graphcheck.zoo.vllm_engine.reasons import explain, vllm_frame
    from graphcheck.zoo.vllm_engine.steps import run_steps

    variant = variant_of(arch)
    seconds = result["seconds"]
    attempt: dict[str, Any] = {"level": "tiny", "error": "", "forward_error": ""}
    result["attempts"].append(attempt)
    t0 = time.perf_counter()
    try:
        served = write_served(root, arch)
        result["config_source"] = served.source
    except Exception as exc:
        attempt["error"] = result["error"] = f"config: {error_line(exc)}"
        result["failure"] = explain(result["error"], vllm_frame(exc), arch.class_name)
        seconds["build"] = time.perf_counter() - t0
        return result
    try:
        # One engine per process: vLLM's parallel groups and forward context are global.
        engine = build_engine(root, variant.dtype, variant.kv_cache_dtype, **served.options)
        result["engine"] = {**served.options}
        _check_draft(engine, arch)
    except Exception as exc:
        attempt["error"] = result["error"] = error_line(exc)
        result["failure"] = explain(result["error"], vllm_frame(exc), arch.class_name)
        return result
    finally:
        seconds["build"] = time.perf_counter() - t0
    result["level"] = "tiny"
    result["status"] = "built"
    result["engine"].update(
        model_class=type(engine.forward_module).__qualname__,
        dtype=variant.dtype,
        kv_cache_dtype=variant.kv_cache_dtype,
        quantization=variant.quantization or None,
        runner=type(engine.runner).__qualname__,
    )
    result["parameters"] = int(sum(p.numel() for p in engine.model.parameters()))
    t0 = time.perf_counter()
    try:
        result["findings"], result["foreign"] = classify(engine.model, "static")
    except Exception as exc:
        result["status"], result["error"] = "failed", f"census: {error_line(exc)}"
        return result
    seconds["census"] += time.perf_counter() - t0
    result["census"] = [f["path"] for f in result["findings"]]
    emit(result)
    run_steps(engine, arch, served, zlib.crc32(arch.name.encode()), result, emit)
    return result
