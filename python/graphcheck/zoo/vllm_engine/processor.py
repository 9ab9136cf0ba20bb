"""A processor for a tiny multimodal config, written beside its ``config.json`` (no hub).

vLLM builds a multimodal model's processor while the engine starts (its dummy inputs for
the profiling forward come from it), and a checkpoint ships the processor's files. The zoo
writes them the way a checkpoint does: transformers' processor class of the model type,
made from its image processor or feature extractor with its defaults, the image size and
patch size of the tiny vision config, and the zoo's tokenizer
(:mod:`~graphcheck.zoo.vllm_engine.tokenizer`), saved with ``save_pretrained``. A model
type transformers has no processor for gets none (vLLM then says what it missed).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["write_processor"]


def _component(table: Any, model_type: str) -> Any:
    """The class of ``model_type`` in an auto table (the torchvision one where both exist)."""
    import transformers

    names = table.get(model_type)
    if isinstance(names, dict):
        names = names.get("torchvision") or names.get("pil")
    if isinstance(names, (list, tuple)):
        names = next((n for n in names if n), None)
    return getattr(transformers, names, None) if isinstance(names, str) else None


def _vision_size(config: Any) -> tuple[int | None, int | None]:
    """``(image_size, patch_size)`` of ``config``'s vision sub-config, where it names them."""
    vision = getattr(config, "vision_config", None) or config
    size = getattr(vision, "image_size", None)
    patch = getattr(vision, "patch_size", None)
    return (size if isinstance(size, int) else None, patch if isinstance(patch, int) else None)


def _size_keys(size: Any) -> set[str] | None:
    """The keys a processor's ``size`` sets: a dict's, or a ``SizeDict``'s not None (5.x)."""
    if isinstance(size, dict):
        return set(size)
    fields = getattr(size, "__dataclass_fields__", None)
    if fields is None:
        return None
    return {k for k in fields if getattr(size, k, None) is not None}


def _image_processor(cls: Any, config: Any) -> Any:
    """``cls()`` sized for the tiny vision tower (its image size, else its defaults)."""
    processor = cls()
    size, patch = _vision_size(config)
    current = _size_keys(getattr(processor, "size", None))
    if size is not None and current is not None:
        if "height" in current:
            processor.size = {"height": size, "width": size}
        elif "shortest_edge" in current and "longest_edge" not in current:
            processor.size = {"shortest_edge": size}
        if _size_keys(getattr(processor, "crop_size", None)) is not None:
            processor.crop_size = {"height": size, "width": size}
    if patch is not None and hasattr(processor, "patch_size"):
        processor.patch_size = patch
    if getattr(processor, "image_seq_length", 0) is None and size and patch:
        # A processor that repeats the image token a fixed number of times (PaliGemma's,
        # ColPali's) reads it off its image processor, which a checkpoint's
        # preprocessor_config.json sets: one token per patch of the tower.
        processor.image_seq_length = (size // patch) ** 2
    merge = getattr(processor, "merge_size", None)
    if isinstance(merge, int) and isinstance(processor.patch_size, int):
        # Qwen2-VL's kind bounds an image by its pixel count (shortest_edge, longest_edge):
        # one to four merged patches, so that the dummy image fits the zoo's token budget.
        unit = (processor.patch_size * merge) ** 2
        processor.size = {"shortest_edge": unit, "longest_edge": 4 * unit}
    return processor


def _processor_fields(config: Any, wanted: Any) -> dict[str, Any]:
    """What a processor counts its placeholder tokens with, from the tiny config.

    A checkpoint's processor carries them (LLaVA's ``patch_size`` and feature selection,
    LLaVA-OneVision's tokens per tile);
    the processor's defaults leave them None, and its token count fails without them.
    """
    size, patch = _vision_size(config)
    fields: dict[str, Any] = {}
    if "patch_size" in wanted and patch is not None:
        fields["patch_size"] = patch
    if "num_image_tokens" in wanted and size is not None and patch is not None:
        # LLaVA-OneVision's tokens per tile: the tower's patch grid.
        fields["num_image_tokens"] = (size // patch) ** 2
    strategy = getattr(config, "vision_feature_select_strategy", None)
    if "vision_feature_select_strategy" in wanted and isinstance(strategy, str):
        fields["vision_feature_select_strategy"] = strategy
    return fields


def write_processor(
    folder: Path,
    config: Any,
    tokenizer: Any,
    model_type: str = "",
    whole: bool = True,
    video: Mapping[str, Any] | None = None,
) -> str:
    """Writes the processor of ``config``'s model type into ``folder``; returns its class name.

    ``model_type`` names another model type's processor (a config table's ``processor``);
    with ``whole`` False only its image processor and feature extractor are written, for a
    model whose processor class is vLLM's own or the hub's (they load those parts by the
    auto classes). ``video``: arguments of its video processor (a table's
    ``video_processor``). Returns "" when transformers has no processor for the model type,
    or cannot make and save one with its defaults (vLLM then reports the missing file).
    """
    from transformers.models.auto import (
        feature_extraction_auto,
        image_processing_auto,
        processing_auto,
    )

    model_type = model_type or str(getattr(config, "model_type", ""))
    # transformers' auto tables are module attributes it does not export (read by name).
    cls = _component(vars(processing_auto)["PROCESSOR_MAPPING_NAMES"], model_type)
    if not whole:
        cls = None
    image = _component(vars(image_processing_auto)["IMAGE_PROCESSOR_MAPPING_NAMES"], model_type)
    audio = _component(vars(feature_extraction_auto)["FEATURE_EXTRACTOR_MAPPING_NAMES"], model_type)
    parts: dict[str, Any] = {}
    try:
        if image is not None:
            parts["image_processor"] = _image_processor(image, config)
        if audio is not None:
            parts["feature_extractor"] = audio()
        if cls is None:
            _save(folder, *parts.values())
            return ", ".join(type(p).__name__ for p in parts.values())
        wanted = inspect.signature(cls.__init__).parameters
        args = {k: v for k, v in parts.items() if k in wanted}
        if "audio_processor" in wanted and "feature_extractor" in parts:
            # Granite Speech's processor takes its feature extractor by this name.
            args["audio_processor"] = parts["feature_extractor"]
        if "tokenizer" in wanted:
            args["tokenizer"] = tokenizer
        args.update(_processor_fields(config, wanted))
        if "video_processor" in wanted and "image_processor" in args:
            video_class = _component(_video_table(), model_type)
            if video_class is not None:
                args["video_processor"] = video_class(**(video or {}))
        processor = cls(**args)
        _save(folder, processor)
    except Exception:  # a processor transformers cannot make from its defaults: none written
        return ""
    return str(cls.__name__)


def _save(folder: Path, *parts: Any) -> None:
    """``save_pretrained`` of each part into ``folder``, all of them or no file at all.

    A save that fails half-way (Ernie 4.5 VL's video processor refuses to write its config
    without the checkpoint's font file) would leave an empty ``processor_config.json``, which
    vLLM then reports as invalid JSON instead of a missing processor.
    """
    import tempfile

    with tempfile.TemporaryDirectory(dir=folder, prefix=".processor-") as staging:
        for part in parts:
            part.save_pretrained(staging)
        for path in sorted(Path(staging).iterdir()):
            path.replace(folder / path.name)


def _video_table() -> Any:
    try:
        from transformers.models.auto import video_processing_auto
    except ImportError:  # a transformers without video processors
        return {}
    return vars(video_processing_auto)["VIDEO_PROCESSOR_MAPPING_NAMES"]
