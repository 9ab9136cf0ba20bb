"""New weights for the reload step, in a checkpoint's own format.

vLLM reloads in place from checkpoint-format weights (names and layouts as a
Hugging Face checkpoint has them: ``q_proj``, ``k_proj`` and ``v_proj`` apart,
which its loader fuses into ``qkv_proj``). The zoo makes them the way a
checkpoint is made: the transformers class of the same name, built from the
same tiny config with fresh random values, saved with ``save_pretrained`` (which
writes the checkpoint layout: transformers 5 keeps MoE experts fused in memory
and splits them per expert on save) and read back from the safetensors. What
transformers 5 renames on load inside a nested model and does not rename back on
save (a CLIP or SigLIP tower's ``vision_model.`` prefix inside LLaVA, Gemma 3,
PaliGemma, ...) is renamed back here, and a level transformers 5.19 writes twice
(Qwen2-Audio's ``language_model.model.model.*``) once, so the names are the hub
checkpoints' that vLLM's name mappers read (:func:`_nested_prefixes`,
:func:`_single_levels`). For the
W8A8 variant each linear weight is quantized the way a compressed-tensors
checkpoint stores it (int8 ``weight`` and a per-channel ``weight_scale``).
An architecture transformers has no class for gets no checkpoint (the reason is
reported; the step is not faked).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import torch

__all__ = ["NoCheckpoint", "checkpoint_weights"]


class NoCheckpoint(Exception):
    """No checkpoint-format weights can be made for this architecture (the message says why)."""


def _is_linear(name: str, value: torch.Tensor) -> bool:
    """Whether a checkpoint tensor is a linear layer's weight that quantization replaces."""
    return (
        name.endswith(".weight")
        and value.dim() == 2
        and "embed" not in name
        and not name.startswith("lm_head")
    )


def _w8a8(weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """compressed-tensors int8: symmetric, one scale per output channel."""
    scale = weight.float().abs().amax(dim=1, keepdim=True).clamp(min=1e-8) / 127.0
    q = torch.round(weight.float() / scale).clamp(-128, 127).to(torch.int8)
    return {"weight": q, "weight_scale": scale}


_GROUP = 32  # configs.AWQ_INT4 / GPTQ_INT4 group_size
#: AutoAWQ packs eight 4-bit values of one row in this order of output columns.
_AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)


def _int32(packed: torch.Tensor) -> torch.Tensor:
    """Unsigned 32-bit words (held in int64) as the int32 a checkpoint stores them."""
    return torch.where(packed >= 2**31, packed - 2**32, packed).to(torch.int32)


def _pack(values: torch.Tensor, dim: int, order: tuple[int, ...] = tuple(range(8))) -> torch.Tensor:
    """Eight 4-bit ``values`` per int32 word along ``dim``, the i-th nibble from ``order[i]``."""
    moved = values.to(torch.int64).movedim(dim, -1)
    moved = moved.reshape(*moved.shape[:-1], -1, 8)[..., list(order)]
    shifts = torch.arange(0, 32, 4, dtype=torch.int64)
    return _int32((moved << shifts).sum(-1)).movedim(-1, dim).contiguous()


def _groups(weight: torch.Tensor) -> torch.Tensor:
    """``weight`` [out, in] as [in / 32, 32, out]: groups of 32 inputs."""
    return weight.float().t().reshape(-1, _GROUP, weight.shape[0])


def _awq(weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """AutoAWQ's GEMM layout: asymmetric 4-bit per group, packed along the output."""
    g = _groups(weight)
    low, high = g.amin(dim=1, keepdim=True), g.amax(dim=1, keepdim=True)
    scale = ((high - low) / 15).clamp(min=1e-8)
    zero = torch.round(-low / scale).clamp(0, 15)
    q = (torch.round(g / scale) + zero).clamp(0, 15).reshape(-1, weight.shape[0])
    return {
        "qweight": _pack(q, 1, _AWQ_ORDER),
        "qzeros": _pack(zero.squeeze(1), 1, _AWQ_ORDER),
        "scales": scale.squeeze(1).to(torch.float16),
    }


def _gptq(weight: torch.Tensor) -> dict[str, torch.Tensor]:
    """AutoGPTQ's layout: symmetric 4-bit per group, packed along the input.

    The zero point 8 is stored minus one (AutoGPTQ's v1 format); ``g_idx`` names each input's
    group (no activation order).
    """
    g = _groups(weight)
    scale = (g.abs().amax(dim=1, keepdim=True) / 7).clamp(min=1e-8)
    q = (torch.round(g / scale) + 8).clamp(0, 15).reshape(-1, weight.shape[0])
    groups = scale.shape[0]
    return {
        "qweight": _pack(q, 0),
        "qzeros": _pack(torch.full((groups, weight.shape[0]), 7), 1),
        "scales": scale.squeeze(1).to(torch.float16),
        "g_idx": torch.arange(weight.shape[1], dtype=torch.int32) // _GROUP,
    }


#: Variant.quantization -> how one linear weight is stored (names after the layer's prefix).
_QUANTIZERS = {"w8a8_int8": _w8a8, "awq": _awq, "gptq": _gptq}


def _quantize(weights: dict[str, torch.Tensor], quantization: str) -> dict[str, torch.Tensor]:
    quantize = _QUANTIZERS[quantization]
    out: dict[str, torch.Tensor] = {}
    for name, value in weights.items():
        if not _is_linear(name, value):
            out[name] = value
            continue
        prefix = name.removesuffix("weight")
        out.update({prefix + part: tensor for part, tensor in quantize(value).items()})
    return out


def checkpoint_weights(
    config: Any,
    class_name: str,
    seed: int,
    *,
    quantization: str = "",
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """``state_dict()`` of transformers' ``class_name`` built from ``config``, new values.

    ``quantization`` (a variant's: ``w8a8_int8``, ``awq``, ``gptq``; "" for none) stores
    the linear weights as that checkpoint does. Raises :class:`NoCheckpoint` when
    transformers has no such class or cannot build it from this config. Where the class
    was built from a config that took transformers' defaults for fields the served one
    lacks, a line saying which is appended to ``notes``: a reload that then fails may fail
    for those values, not for vLLM.
    """
    import transformers

    cls = getattr(transformers, class_name, None)
    if cls is None or not hasattr(cls, "_from_config"):
        raise NoCheckpoint(f"transformers {transformers.__version__} has no class {class_name}")
    torch.manual_seed(seed)
    try:
        taken, defaulted = _config_for(cls, config)
        model = cls._from_config(taken, dtype=torch.float32)
    except Exception as exc:
        raise NoCheckpoint(
            f"transformers' {class_name} cannot be built from the tiny config: "
            f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        ) from exc
    if defaulted and notes is not None:
        notes.append(
            f"the checkpoint's config is transformers' {type(taken).__name__} made from the "
            f"served {type(config).__name__}, with transformers' defaults for "
            + ", ".join(defaulted)
        )
    weights = _saved(model)
    return _quantize(weights, quantization) if quantization else weights


def _config_for(cls: Any, config: Any) -> tuple[Any, list[str]]:
    """``config`` as transformers' ``cls`` takes it, and the fields given defaults.

    The served config may be a composite whose text model ``cls`` is (Qwen3.5's
    ``Qwen3_5ForCausalLM`` takes the ``Qwen3_5TextConfig``), or vLLM's own class of the
    model type (``vllm/transformers_utils/configs/``), which transformers' model does not
    read: then transformers' class of it is made from the same fields, its defaults filling
    what the served one leaves out (top-level fields and those of its sub-configs, named
    ``sub.field``).
    """
    wanted = getattr(cls, "config_class", None)
    if not isinstance(wanted, type) or isinstance(config, wanted):
        return config, []
    text = config.get_text_config()
    if isinstance(text, wanted):
        return text, []
    served = config.to_dict()
    made: Any = cast(Any, wanted).from_dict(served)  # a transformers config class
    return made, _defaulted(made.to_dict(), served)


def _defaulted(made: dict[str, Any], served: dict[str, Any], prefix: str = "") -> list[str]:
    """The fields of ``made`` that ``served`` does not have, sub-config dicts included."""
    out: list[str] = []
    for key, value in made.items():
        if key not in served:
            out.append(prefix + key)
        elif isinstance(value, dict) and isinstance(served[key], dict):
            out += _defaulted(value, served[key], f"{prefix}{key}.")
    return sorted(out)


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
    own = list(model.state_dict())
    return _single_levels(model, own, _nested_prefixes(model, own, weights))


def _removed_prefixes(submodule: Any) -> list[str]:
    """The prefixes transformers removes on load from the checkpoint names of ``submodule``.

    Its conversion table's ``PrefixChange(prefix_to_remove=...)`` entries without a
    model prefix (``CLIPVisionModel`` and the towers aliased to it: ``vision_model``).
    """
    try:
        from transformers.conversion_mapping import extract_weight_conversions_for_model
        from transformers.core_model_loading import PrefixChange
    except ImportError:  # a transformers without conversion tables renames nothing
        return []
    conversions = extract_weight_conversions_for_model(submodule) or []
    return [
        str(c.prefix_to_remove)
        for c in conversions
        if isinstance(c, PrefixChange) and c.prefix_to_remove and not c.model_prefix
    ]


def _nested_prefixes(
    model: Any, own: list[str], weights: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """``weights`` with the prefixes of nested models that ``save_pretrained`` did not restore.

    transformers 5.19 and 5.24 reverse a model's renames on save but drop every
    ``PrefixChange`` of a model not loaded by ``from_pretrained``
    (``core_model_loading.revert_weight_conversion``: it cannot tell whether the
    prefix was there), so a LLaVA's CLIP tower is saved as ``vision_tower.embeddings.*``
    where the hub's checkpoints, and vLLM's loaders, have
    ``vision_tower.vision_model.embeddings.*``. For each nested model whose
    conversion removes a prefix, the saved names of its tensors (its own names under
    the prefix the root's renames gave it, found as the saved prefix under which
    most of them are) get the prefix back; names that already have it are kept.
    """
    from transformers import PreTrainedModel

    renamed = dict.fromkeys(weights)
    for path, submodule in model.named_modules():
        if not path or not isinstance(submodule, PreTrainedModel):
            continue
        for prefix in _removed_prefixes(submodule):
            rests = [k[len(path) + 1 :] for k in own if k.startswith(path + ".")]
            heads: dict[str, int] = {}
            for rest in rests:
                for name in weights:
                    if name == rest or name.endswith("." + rest):
                        head = name[: len(name) - len(rest)]
                        heads[head] = heads.get(head, 0) + 1
            if not heads:
                continue
            head = max(heads, key=lambda h: (heads[h], -len(h)))
            if head.endswith(prefix + "."):
                continue
            for rest in rests:
                if head + rest in renamed:
                    renamed[head + rest] = f"{head}{prefix}.{rest}"
    return {renamed[name] or name: value for name, value in weights.items()}


def _doubled(parts: list[str], level: str) -> bool:
    return any(a == b == level for a, b in zip(parts, parts[1:], strict=False))


def _single_levels(
    model: Any, own: list[str], weights: dict[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """``weights`` with a level that ``save_pretrained`` wrote twice written once.

    For Qwen2-Audio's kind (Qwen2-Audio, Voxtral, AudioFlamingo 3, GLM-ASR, Granite Speech)
    transformers 5.19 reverses both the root's ``language_model.model`` rename and its
    nested model's, and writes ``language_model.model.model.*`` where the hub's
    checkpoints, and vLLM's loaders, have ``language_model.model.*``. A name is changed
    only where transformers itself loads both spellings into the same tensor of the model
    (its load-time renames, ``rename_source_key``) and the model's own name has no such
    doubled level; every other name is kept.
    """
    try:
        from transformers.conversion_mapping import get_model_conversion_mapping
        from transformers.core_model_loading import (
            WeightConverter,
            WeightRenaming,
            rename_source_key,
        )
    except ImportError:  # a transformers without conversion tables renames nothing
        return weights
    conversions = get_model_conversion_mapping(model)
    renamings = [c for c in conversions if isinstance(c, WeightRenaming)]
    converters = [c for c in conversions if isinstance(c, WeightConverter)]
    names = set(own)

    def loaded(name: str) -> str:
        return str(rename_source_key(name, renamings, converters)[0])

    out: dict[str, torch.Tensor] = {}
    for name, value in weights.items():
        parts = name.split(".")
        # Every name goes through the renames, in order, as transformers' loader does: a
        # grouped rename is activated by an earlier name.
        target = loaded(name)
        for i in range(len(parts) - 1):
            if parts[i] != parts[i + 1] or target not in names:
                continue
            single = ".".join(parts[:i] + parts[i + 1 :])
            if _doubled(target.split("."), parts[i]) or single in weights:
                continue
            if loaded(single) == target:
                name = single
                break
        out[name] = value
    return out
