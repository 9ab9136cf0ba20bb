"""``Arch@variant``: config switches that select other code paths, as checkpoints set them.

A config's defaults are not what every checkpoint runs: position embedding
types, rope scaling, relative position biases and attention variants select
other modules (and other tensors) than the default path. For each model type
the table lists the variants that published checkpoints of that architecture
use (the checkpoint family is named beside each one), applied to the base
model class (the ``MODEL_MAPPING_NAMES`` row) on top of the tiny config.

The checkpoints were not downloaded (the zoo never touches the hub): the
settings are those of their published ``config.json`` files, scaled to the
tiny widths (rope factors and original lengths are chosen so that the tiny
forward of 16 tokens takes the scaled path: longrope's long factors and the
growth of dynamic NTK).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from graphcheck.zoo.tiny_config import POSITIONS

__all__ = ["VARIANTS", "Variant", "apply_variant", "variants_for"]

Dict = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Variant:
    """One variant: its name, the checkpoints that use it, and the edit of the tiny config dict."""

    name: str
    checkpoints: str
    edit: Callable[[Dict], None]


def _set(**values: Any) -> Callable[[Dict], None]:
    def edit(d: Dict) -> None:
        d.update(values)

    return edit


def _rotary_dim(d: Dict, rope: Dict) -> int:
    head_dim = d.get("head_dim") or (d["hidden_size"] // d["num_attention_heads"])
    factor = rope.get("partial_rotary_factor", d.get("partial_rotary_factor", 1.0)) or 1.0
    return int(head_dim * factor)


def _rope(
    rope_type: str, layer_type: str | None = None, /, **params: Any
) -> Callable[[Dict], None]:
    """An edit that sets ``rope_parameters`` (or its ``layer_type`` entry) to ``rope_type``.

    ``rope_type`` and ``layer_type`` are positional-only, so that ``**params`` (the
    parameter tables below, unpacked) can never fill them.
    """

    def edit(d: Dict) -> None:
        rope = d.get("rope_parameters") or {}
        target = rope.setdefault(layer_type, {}) if layer_type else rope
        theta = target.get("rope_theta", d.get("rope_theta", 10000.0))
        kept = {k: v for k, v in target.items() if k in ("rope_theta", "partial_rotary_factor")}
        target.clear()
        target.update(kept)
        target.update({"rope_type": rope_type, "rope_theta": theta})
        resolved = {k: (v(d, target) if callable(v) else v) for k, v in params.items()}
        target.update(resolved)
        d["rope_parameters"] = rope

    return edit


def _factors(value: float) -> Callable[[Dict, Dict], list[float]]:
    return lambda d, rope: [value] * (_rotary_dim(d, rope) // 2)


def _dynamic(d: Dict) -> None:
    # Dynamic NTK recomputes inv_freq once a sequence outgrows max_position_embeddings: a
    # short maximum makes the 16-token warm-up take that path.
    _rope("dynamic", factor=2.0)(d)
    d["max_position_embeddings"] = 8


_LLAMA3 = {
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": POSITIONS // 4,
}
_YARN = {"factor": 4.0, "original_max_position_embeddings": POSITIONS // 4}
_YARN_DEEPSEEK = {
    "factor": 40.0,
    "original_max_position_embeddings": POSITIONS // 4,
    "beta_fast": 32.0,
    "beta_slow": 1.0,
    "mscale": 1.0,
    "mscale_all_dim": 1.0,
}
_LONGROPE = {
    "short_factor": _factors(1.0),
    "long_factor": _factors(4.0),
    # Shorter than the 16-token warm-up, so that it runs with the long factors.
    "original_max_position_embeddings": 8,
    "factor": POSITIONS / 8,
}

VARIANTS: dict[str, tuple[Variant, ...]] = {
    "llama": (
        Variant("rope_llama3", "Llama 3.1, 3.2, 3.3", _rope("llama3", **_LLAMA3)),
        Variant(
            "rope_linear",
            "LongChat (lmsys/longchat-*-16k), linear position interpolation",
            _rope("linear", factor=8.0),
        ),
        Variant("rope_dynamic", "dynamic NTK fine-tunes of Llama 2", _dynamic),
        Variant("rope_yarn", "YaRN Llama 2 (NousResearch/Yarn-Llama-2-*)", _rope("yarn", **_YARN)),
    ),
    "mistral": (
        Variant(
            "no_sliding_window",
            "Mistral 7B v0.2 and later (sliding_window null)",
            _set(sliding_window=None),
        ),
    ),
    "qwen2": (
        Variant("rope_yarn", "Qwen2.5 instruct, long-context setting", _rope("yarn", **_YARN)),
    ),
    "qwen3": (Variant("rope_yarn", "Qwen3, long-context setting", _rope("yarn", **_YARN)),),
    "qwen3_moe": (Variant("rope_yarn", "Qwen3 MoE, long-context setting", _rope("yarn", **_YARN)),),
    "phi3": (
        Variant("rope_longrope", "Phi-3-mini-128k, Phi-3.5-mini", _rope("longrope", **_LONGROPE)),
    ),
    "phimoe": (Variant("rope_longrope", "Phi-3.5-MoE", _rope("longrope", **_LONGROPE)),),
    "deepseek_v2": (Variant("rope_yarn", "DeepSeek-V2", _rope("yarn", **_YARN_DEEPSEEK)),),
    "deepseek_v3": (Variant("rope_yarn", "DeepSeek-V3, R1", _rope("yarn", **_YARN_DEEPSEEK)),),
    "gemma3_text": (
        Variant(
            "rope_linear",
            "Gemma 3 4B/12B/27B (linear factor 8 on global layers)",
            _rope("linear", "full_attention", factor=8.0),
        ),
    ),
    "falcon": (
        Variant("alibi", "Falcon-RW (tiiuae/falcon-rw-1b)", _set(alibi=True)),
        Variant(
            "new_decoder",
            "Falcon 40B/180B (new_decoder_architecture)",
            _set(new_decoder_architecture=True, num_kv_heads=2),
        ),
    ),
    "granitemoehybrid": (
        Variant(
            "rope",
            "Granite 4.0 dense (position_embedding_type rope)",
            _set(position_embedding_type="rope"),
        ),
    ),
    "esm": (Variant("rotary", "ESM-2 (facebook/esm2_*)", _set(position_embedding_type="rotary")),),
    "deberta": (
        Variant(
            "relative",
            "DeBERTa (microsoft/deberta-base)",
            _set(
                relative_attention=True,
                pos_att_type=["c2p", "p2c"],
                position_biased_input=False,
                max_relative_positions=-1,
            ),
        ),
    ),
    "deberta-v2": (
        Variant(
            "relative",
            "DeBERTa-v3 (microsoft/deberta-v3-base)",
            _set(
                relative_attention=True,
                pos_att_type=["p2c", "c2p"],
                position_buckets=16,
                norm_rel_ebd="layer_norm",
                share_att_key=True,
                position_biased_input=False,
                max_relative_positions=-1,
            ),
        ),
    ),
    "big_bird": (
        Variant(
            "original_full",
            "BigBird on inputs shorter than its blocks (attention_type original_full)",
            _set(attention_type="original_full"),
        ),
    ),
    "bigbird_pegasus": (
        Variant(
            "original_full", "BigBird-Pegasus on short inputs", _set(attention_type="original_full")
        ),
    ),
    "longt5": (
        Variant(
            "tglobal",
            "LongT5 TGlobal (google/long-t5-tglobal-*)",
            _set(encoder_attention_type="transient-global"),
        ),
    ),
    "wav2vec2-conformer": (
        Variant(
            "rotary",
            "facebook/wav2vec2-conformer-rope-large-960h-ft",
            _set(position_embeddings_type="rotary"),
        ),
    ),
    "beit": (
        Variant(
            "relative_bias",
            "microsoft/beit-base-patch16-224 (fine-tuned)",
            _set(use_relative_position_bias=True),
        ),
        Variant(
            "shared_relative_bias",
            "microsoft/beit-base-patch16-224-pt22k (pre-trained)",
            _set(use_shared_relative_position_bias=True),
        ),
    ),
    "data2vec-vision": (
        Variant(
            "relative_bias",
            "facebook/data2vec-vision-base-ft1k",
            _set(use_relative_position_bias=True),
        ),
    ),
}


def variants_for(model_type: str) -> tuple[str, ...]:
    """The variant names of ``model_type`` (empty when it has none)."""
    return tuple(v.name for v in VARIANTS.get(model_type, ()))


def apply_variant(model_type: str, name: str, d: Dict) -> None:
    """Applies variant ``name`` of ``model_type`` to the tiny config dict ``d``.

    Raises ``KeyError`` naming the known variants when there is no such one.
    """
    for variant in VARIANTS.get(model_type, ()):
        if variant.name == name:
            variant.edit(d)
            return
    known = ", ".join(variants_for(model_type)) or "none"
    raise KeyError(f"no variant {name!r} for model type {model_type!r} (known: {known})")
