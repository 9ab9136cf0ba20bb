"""New weights for the reload step, in a checkpoint's own format.

vLLM reloads in place from checkpoint-format weights (names and layouts as a
Hugging Face checkpoint has them: ``q_proj``, ``k_proj`` and ``v_proj`` apart,
which its loader fuses into ``qkv_proj``). The zoo makes them the way a
checkpoint is made: the transformers class of the same name, built from the
same tiny config with fresh random values, saved with ``save_pretrained`` (which
writes the checkpoint layout: transformers 5 keeps MoE experts fused in memory
and splits them per expert on save) and read back from the safetensors. For the
W8A8 variant each linear weight is quantized the way a compressed-tensors
checkpoint stores it (int8 ``weight`` and a per-channel ``weight_scale``).
An architecture transformers has no class for gets no checkpoint (the reason is
reported; the step is not faked).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

__all__ = ["NoCheckpoint", "checkpoint_weights"]


class NoCheckpoint(Exception):
    """No checkpoint-format weights can be made for this architecture (the message says why)."""


def _quantize_w8a8(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Linear weights as compressed-tensors int8 (symmetric, one scale per output channel)."""
    out: dict[str, torch.Tensor] = {}
    for name, value in weights.items():
        linear = (
            name.endswith(".weight") and value.dim() == 2 and "embed" not in name
        ) and not name.startswith("lm_head")
        if not linear:
            out[name] = value
            continue
        scale = value.float().abs().amax(dim=1, keepdim=True).clamp(min=1e-8) / 127.0
        out[name] = torch.round(value.float() / scale).clamp(-128, 127).to(torch.int8)
        out[name.removesuffix("weight") + "weight_scale"] = scale
    return out


def checkpoint_weights(config: Any, class_name: str, seed: int, *, w8a8: bool) -> dict[str, Any]:
    """``state_dict()`` of transformers' ``class_name`` built from ``config``, new values.

    Raises :class:`NoCheckpoint` when transformers has no such class or cannot
    build it from this config.
    """
    import transformers

    cls = getattr(transformers, class_name, None)
    if cls is None or not hasattr(cls, "_from_config"):
        raise NoCheckpoint(f"transformers {transformers.__version__} has no class {class_name}")
    torch.manual_seed(seed)
    try:
        model = cls._from_config(config, dtype=torch.float32)
    except Exception as exc:
        raise NoCheckpoint(
            f"transformers' {class_name} cannot be built from the tiny config: "
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        ) from exc
    weights = _saved(model)
    return _quantize_w8a8(weights) if w8a8 else weights


def _saved(model: Any) -> dict[str, torch.Tensor]:
    """The tensors ``model.save_pretrained`` writes, by checkpoint name."""
    import tempfile

    from safetensors.torch import load_file

    with tempfile.TemporaryDirectory(prefix="vllm-zoo-checkpoint-") as folder:
        model.save_pretrained(folder, safe_serialization=True)
        weights: dict[str, torch.Tensor] = {}
        for shard in sorted(Path(folder).glob("*.safetensors")):
            weights.update(load_file(shard))
    if not weights:
        raise NoCheckpoint(f"{type(model).__name__}.save_pretrained wrote no safetensors")
    return weights
