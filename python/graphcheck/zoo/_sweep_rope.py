"""Rope variants: each rope type's parameters, scaled so that the tiny forward takes its path.

The shared rope code (``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS``)
computes the frequencies of every rope type; a config selects one with
``rope_parameters["rope_type"]`` plus the parameters that type requires. The
values are those of published checkpoints (Llama 3.1's llama3 factors, YaRN
Llama 2, DeepSeek-V3's YaRN with ``mscale``, Phi-3's longrope), scaled to the
tiny sizes: original lengths below the 16-token warm-up where the scaled path
depends on the length (longrope's long factors, dynamic NTK's growth).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphcheck.zoo.tiny_config import POSITIONS

__all__ = ["DEEPSEEK_KEYS", "apply_rope"]

Dict = dict[str, Any]

#: Keys whose presence in a modeling source means it reads DeepSeek's YaRN parameters.
DEEPSEEK_KEYS = frozenset({"mscale_all_dim"})


def _rotary_dim(d: Dict, rope: Dict) -> int:
    head_dim = d.get("head_dim") or (d["hidden_size"] // d["num_attention_heads"])
    factor = rope.get("partial_rotary_factor", d.get("partial_rotary_factor", 1.0)) or 1.0
    return int(head_dim * factor)


def _factors(value: float) -> Callable[[Dict, Dict], list[float]]:
    return lambda d, rope: [value] * (_rotary_dim(d, rope) // 2)


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
#: rope type -> its parameters (values or ``f(config_dict, rope_dict)``).
PARAMETERS: dict[str, Dict] = {
    "linear": {"factor": 8.0},
    "dynamic": {"factor": 2.0},
    "yarn": _YARN,
    "longrope": _LONGROPE,
    "llama3": _LLAMA3,
    # Gemma 4's global layers: a quarter of the head rotates.
    "proportional": {"partial_rotary_factor": 0.25},
}


_KEPT = ("rope_theta", "partial_rotary_factor")


def _targets(d: Dict) -> list[Dict]:
    """The rope dicts to set: the one dict, or per layer type the global layers' one.

    Checkpoints with per-layer-type rope (Gemma 3) scale the full-attention
    layers only (a sliding window never outgrows the original length); without
    a ``full_attention`` entry every layer type is set.
    """
    rope = d.get("rope_parameters")
    if not isinstance(rope, dict):
        rope = {}
        d["rope_parameters"] = rope
    nested = bool(rope) and all(isinstance(v, dict) for v in rope.values())
    if not nested:
        return [rope]
    if "full_attention" in rope:
        return [rope["full_attention"]]
    return list(rope.values())


def apply_rope(d: Dict, rope_type: str, deepseek: bool = False) -> None:
    """Sets ``rope_type`` with its parameters in the tiny config dict ``d``.

    ``deepseek``: the model reads DeepSeek's YaRN parameters (``mscale``,
    ``mscale_all_dim``): its YaRN variant gets them. A rope type without a
    parameter table gets none (its config then fails to validate: a build
    failure row naming what it needs).
    """
    params = _YARN_DEEPSEEK if (deepseek and rope_type == "yarn") else PARAMETERS.get(rope_type, {})
    for target in _targets(d):
        theta = target.get("rope_theta", d.get("rope_theta", 10000.0))
        # The model's own keys stay (multimodal sections); another type's parameters go.
        kept = {k: v for k, v in target.items() if k in _KEPT or k.startswith("mrope")}
        target.clear()
        target.update(kept)
        target.update({"rope_type": rope_type, "rope_theta": theta})
        for key, value in params.items():
            if key == "partial_rotary_factor" and key in kept:
                continue  # the model's own partial rotation
            target[key] = value(d, target) if callable(value) else value
    if rope_type == "dynamic":
        # Dynamic NTK recomputes inv_freq once a sequence outgrows max_position_embeddings: a
        # short maximum makes the 16-token warm-up take that path.
        d["max_position_embeddings"] = 8
