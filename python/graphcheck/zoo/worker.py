"""What runs on one architecture, inside its own worker process.

:func:`run_architecture` builds the model from its tiny config (trying the
levels of :mod:`graphcheck.zoo.tiny_config` in order), takes the static census,
runs the warm-up forward where the main input is token ids, pixel values or
input features, takes the census again (tensors that the forward created and
kept, such as lazily built rotary caches), and leaves the capture phase to
:mod:`graphcheck.zoo.capture_phase`. The build and the warm-up forward run inside
:func:`graphcheck.record_sites`: a tensor they leave in a process-global cache or a module
global, which the capture reads later, is labelled by its creation site. Every failure is
recorded in the result (exception class and first line), never raised.

The result is a JSON-ready dict; ``emit(result)`` is called after each phase
so that the runner keeps what finished when a later phase crashes or hangs.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from typing import Any

from graphcheck.zoo._util import error_line
from graphcheck.zoo.capture_phase import CAPTURE_UNAVAILABLE, capture_api, run_capture_phase
from graphcheck.zoo.catalog import Arch

__all__ = ["MAX_PARAMETERS", "NOT_INSTALLABLE", "census_entries", "new_result", "run_architecture"]

#: Packages transformers asks for that cannot be installed here (scripts/versions.env): a build
#: that fails for want of one names this reason instead of transformers' install hint.
NOT_INSTALLABLE = {
    "natten": "PyPI serves only sources, and its releases since 0.20 no longer export "
    "natten2dqkrpb/natten2dav, which transformers' DiNAT imports",
    "detectron2": "not on PyPI (built from its repository against a local torch)",
}

#: A level whose model would hold more parameters than this is skipped (memory guard).
MAX_PARAMETERS = 150_000_000

Result = dict[str, Any]


def new_result(arch: Arch) -> Result:
    """The result skeleton of ``arch``: failed until the build succeeds."""
    return {
        "status": "failed",
        "error": "",
        "class": arch.class_name,
        "model_type": arch.model_type,
        "variant": arch.variant,
        "tasks": list(arch.tasks),
        "level": None,
        "attempts": [],
        "parameters": 0,
        "main_input": None,
        "forward": {"eligible": False, "ran": False, "error": ""},
        "census": [],
        "census_after_forward": [],
        "findings": [],
        "capture": None,
        "steps": None,
        "capture_status": CAPTURE_UNAVAILABLE,
        "seconds": {"build": 0.0, "census": 0.0, "forward": 0.0, "capture": None, "steps": None},
    }


def _model_class(name: str, model_type: str = "") -> Any:
    """The class ``name`` from ``transformers``, or from its model's own module.

    A few classes the auto tables name are not exported at the top level; the
    module ``transformers.models.<type>.modeling_<type>`` defines them.
    """
    import importlib

    import transformers

    try:
        return getattr(transformers, name)
    except AttributeError as exc:
        package = model_type.replace("-", "_")
        try:
            module = importlib.import_module(f"transformers.models.{package}.modeling_{package}")
            return getattr(module, name)
        except (ImportError, AttributeError):
            pass
        raise ImportError(f"transformers has no class {name}: {exc}") from exc


def _config_dict(cls: Any, arch: Arch) -> dict[str, Any]:
    """The default config of ``cls`` as a dict, with the override table's edits."""
    from graphcheck.zoo.overrides import prepare_base

    config_class = getattr(cls, "config_class", None)
    if config_class is None:
        raise TypeError(f"{arch.class_name} has no config_class")
    base: dict[str, Any] = config_class().to_dict()
    prepare_base(arch, base)
    return base


def _make_config(cls: Any, arch: Arch, base: dict[str, Any], level: str) -> Any:
    from graphcheck.zoo.overrides import apply_fixups
    from graphcheck.zoo.tiny_config import shrink
    from graphcheck.zoo.variants import apply_variant

    def fixups(d: dict[str, Any], lvl: str) -> None:
        apply_fixups(arch, d, lvl)
        if arch.variant:
            apply_variant(arch.model_type, arch.variant, d, arch.class_name)

    config = cls.config_class.from_dict(shrink(base, level, fixups=fixups))
    _fit_derived(config)
    return config


def _field(cfg: Any, name: str) -> Any:
    """A config field, or ``None`` (heterogeneous configs raise for per-layer fields)."""
    try:
        return getattr(cfg, name, None)
    except Exception:
        return None


def _fit_derived(config: Any) -> None:
    """Fits what a config's ``__post_init__`` filled from class defaults to the tiny sizes.

    Multimodal rope sections (``mrope_section``) are set by some configs when the
    dict has none: they must still sum to half the (tiny) head dimension.
    """
    from graphcheck.zoo.tiny_config import fit_mrope_section

    seen: set[int] = set()
    stack = [config]
    while stack:
        cfg = stack.pop()
        if id(cfg) in seen:
            continue
        seen.add(id(cfg))
        stack.extend(
            v for v in vars(cfg).values() if hasattr(v, "to_dict") and hasattr(v, "model_type")
        )
        rope = _field(cfg, "rope_parameters")
        head_dim = _field(cfg, "qk_rope_head_dim") or _field(cfg, "head_dim")
        if not isinstance(head_dim, int):
            hidden = _field(cfg, "hidden_size")
            heads = _field(cfg, "num_attention_heads")
            if not (isinstance(hidden, int) and isinstance(heads, int) and heads > 0):
                continue
            head_dim = hidden // heads
        if isinstance(rope, dict):
            if "mrope_section" in (getattr(cfg, "ignore_keys_at_rope_validation", None) or ()):
                # The model falls back to a full-size section when the dict has none.
                rope.setdefault("mrope_section", [head_dim, head_dim, head_dim])
            fit_mrope_section(rope, head_dim)
            for value in rope.values():
                if isinstance(value, dict):
                    fit_mrope_section(value, head_dim)


def _build(cls: Any, config: Any, level: str) -> Any:
    import torch

    if level == "shallow":
        # Widths keep their defaults here: count the parameters on meta first.
        try:
            with torch.device("meta"):
                meta = cls._from_config(config, attn_implementation="eager", dtype=torch.float32)
            n = sum(p.numel() for p in meta.parameters())
        except Exception:  # the guard is best effort: a model that cannot build on meta
            n = 0
        if n > MAX_PARAMETERS:
            raise MemoryError(
                f"{n} parameters at level shallow, over the zoo's limit of {MAX_PARAMETERS}"
            )
    model = cls._from_config(config, attn_implementation="eager", dtype=torch.float32)
    return model.eval()


def census_entries(model: Any) -> list[dict[str, Any]]:
    """The census findings of ``model`` as JSON-ready dicts, each with its site."""
    from graphcheck import census
    from graphcheck.zoo.sites import resolve_site

    return [
        {
            "path": e.path,
            "aliases": list(e.aliases),
            "shape": list(e.shape),
            "dtype": str(e.dtype).removeprefix("torch."),
            "nbytes": e.nbytes,
            "site": resolve_site(model, e.path),
        }
        for e in census(model).entries
    ]


def _census(model: Any) -> tuple[list[dict[str, Any]], float]:
    t0 = time.perf_counter()
    entries = census_entries(model)
    return entries, time.perf_counter() - t0


def _forward(model: Any, main_input: str, seed: int) -> tuple[str, list[str]]:
    """Runs one forward; returns the input set that ran and its argument names.

    The input sets of :func:`graphcheck.zoo.inputs.input_attempts` are tried
    in order (a dual encoder such as CLIP needs ``pixel_values`` beside its
    token ids, a codec raw audio with a channel dimension); the first error is
    raised when none runs.
    """
    import torch

    from graphcheck.zoo.inputs import input_attempts, make_inputs, prepare_model

    prepare_model(model)
    first: Exception | None = None
    with torch.no_grad():
        for attempt in input_attempts(model, main_input):
            try:
                inputs = make_inputs(
                    model, main_input, torch.Generator().manual_seed(seed), attempt=attempt
                )
                model(**inputs)
            except Exception as exc:
                first = first or exc
                continue
            return attempt, list(inputs)
    assert first is not None  # input_attempts is never empty
    raise first


def run_architecture(arch: Arch, emit: Callable[[Result], None] | None = None) -> Result:
    """Builds, takes the census of, and runs the forward of ``arch``; never raises.

    Levels are tried in order until one builds and its forward (when the main
    input is eligible) runs; when no level's forward runs, the first level
    that built is kept with its forward error. ``shallow`` (default widths) is
    tried only when neither ``tiny`` nor ``narrow`` built, and not when both
    failed with the same error (a cause the shrinking does not touch).
    ``status`` is ``"built"`` once a level built, otherwise ``"failed"`` with
    the last level's error.
    """
    from graphcheck.zoo.tiny_config import LEVELS

    result = new_result(arch)
    seed = zlib.crc32(arch.name.encode())
    emit = emit or (lambda _r: None)
    seconds = result["seconds"]
    t0 = time.perf_counter()
    try:
        cls = _model_class(arch.class_name, arch.model_type)
        base = _config_dict(cls, arch)
    except Exception as exc:
        result["error"] = error_line(exc)
        seconds["build"] = time.perf_counter() - t0
        return _build_failed(result)
    seconds["build"] = time.perf_counter() - t0
    kept: _Level | None = None
    for level in LEVELS:
        if kept is not None and level == "shallow":
            break  # shallow keeps default widths: only worth it when nothing built
        errors = [a["error"] for a in result["attempts"]]
        if level == "shallow" and len(errors) >= 2 and errors[-1] == errors[-2]:
            break  # the same error at two levels does not come from the shrinking
        current = _try_level(cls, arch, base, level, seed, result)
        if current is None:
            continue
        if kept is None or current.forward_ran:
            kept = current
        if not current.eligible or current.forward_ran:
            break
    if kept is None:
        result["error"] = result["attempts"][-1]["error"]
        return _build_failed(result)
    result["status"] = "built"
    result["level"] = kept.level
    result["parameters"] = int(sum(p.numel() for p in kept.model.parameters()))
    result["main_input"] = kept.main_input
    result["forward"]["eligible"] = kept.eligible
    result["forward"]["ran"] = kept.forward_ran
    result["forward"]["inputs"] = kept.inputs or ([kept.main_input] if kept.main_input else [])
    if kept.eligible and not kept.forward_ran:
        errors = [a["forward_error"] for a in result["attempts"] if a["forward_error"]]
        result["forward"]["error"] = errors[0] if errors else ""
    for e in kept.static:
        e["phase"] = "static"
    for e in kept.after:
        e["phase"] = "after_forward"
    result["census"] = [e["path"] for e in kept.static]
    result["census_after_forward"] = [e["path"] for e in kept.after]
    result["findings"] = kept.static + kept.after
    emit(result)
    if kept.forward_ran and kept.main_input is not None:
        _capture(cls, arch, base, kept, seed, result)
    elif capture_api() is not None:
        result["capture_status"] = (
            "not run: the warm-up forward did not run"
            if kept.eligible
            else f"not run: main input {kept.main_input!r} has no input rule (zoo/inputs.py)"
        )
    return result


def _build_failed(result: Result) -> Result:
    for package, why in NOT_INSTALLABLE.items():
        if f"requires the {package} library" in result["error"]:
            result["error"] = f"{package}: not installable here ({why})"
    if capture_api() is not None:
        result["capture_status"] = "not run: the build failed"
    return result


class _Level:
    """A level that built: its model, census before and after the forward, forward outcome."""

    def __init__(self, level: str, model: Any, main_input: str | None, eligible: bool) -> None:
        self.level = level
        self.model = model
        self.main_input = main_input
        self.eligible = eligible
        self.forward_ran = False
        self.attempt = "plain"
        self.inputs: list[str] = []
        self.static: list[dict[str, Any]] = []
        self.after: list[dict[str, Any]] = []


def _try_level(
    cls: Any, arch: Arch, base: dict[str, Any], level: str, seed: int, result: Result
) -> _Level | None:
    import torch

    from graphcheck import record_sites
    from graphcheck.zoo.inputs import MAIN_INPUTS

    seconds = result["seconds"]
    attempt: dict[str, Any] = {"level": level, "error": "", "forward_error": ""}
    result["attempts"].append(attempt)
    t0 = time.perf_counter()
    try:
        torch.manual_seed(seed)
        with record_sites():
            model = _build(cls, _make_config(cls, arch, base, level), level)
    except Exception as exc:
        attempt["error"] = error_line(exc)
        return None
    finally:
        seconds["build"] += time.perf_counter() - t0
    main_input = getattr(model, "main_input_name", None)
    if isinstance(main_input, (list, tuple)) and main_input:
        main_input = main_input[0]  # OneFormer names two: pixel values and its task tokens
    main_input = main_input if isinstance(main_input, str) else None
    current = _Level(level, model, main_input, main_input in MAIN_INPUTS)
    try:
        current.static, took = _census(model)
    except Exception as exc:
        attempt["error"] = f"census: {error_line(exc)}"
        return None
    seconds["census"] += took
    if not current.eligible or main_input is None:
        return current
    t1 = time.perf_counter()
    try:
        with record_sites():  # a process-global cache filled here is read by the capture
            current.attempt, current.inputs = _forward(model, main_input, seed)
    except Exception as exc:
        attempt["forward_error"] = error_line(exc)
        return current
    finally:
        seconds["forward"] += time.perf_counter() - t1
    current.forward_ran = True
    static_paths = {e["path"] for e in current.static}
    try:
        after, took = _census(model)
    except Exception as exc:
        attempt["error"] = f"census after forward: {error_line(exc)}"
        return current
    seconds["census"] += took
    current.after = [e for e in after if e["path"] not in static_paths]
    return current


def _capture(
    cls: Any, arch: Arch, base: dict[str, Any], kept: _Level, seed: int, result: Result
) -> None:
    import torch

    from graphcheck.zoo.inputs import make_inputs, prepare_model

    def factory() -> Any:
        # The same tiny config; the torch generator has moved on, so each call draws new
        # random weights (the second checkpoint is a second call).
        model = _build(cls, _make_config(cls, arch, base, kept.level), kept.level)
        prepare_model(model)
        return model

    def inputs(model: Any) -> dict[str, Any]:
        g = torch.Generator().manual_seed(seed)
        return make_inputs(model, str(kept.main_input), g, attempt=kept.attempt)

    t0 = time.perf_counter()
    run_capture_phase(factory, inputs, result, seed=seed)
    if result["capture"] is not None:
        # check_graph_replay runs the capture and its steps together: the time is the sum.
        result["seconds"]["capture"] = time.perf_counter() - t0
