"""Tiny configs: a config class's defaults, shrunk so that the model builds in milliseconds.

The shrinking works on the config's ``to_dict()`` (the form a checkpoint's
``config.json`` has), recursing into every sub-config (a nested dict with a
``model_type``: text, vision, audio, encoder, decoder, backbone, ...), and
rebuilds the config with ``from_dict`` so that its ``__post_init__`` derives
and validates everything from the new values, as loading a checkpoint would.

One width everywhere: every hidden size becomes :data:`WIDTH`, so that the
couplings between sub-configs (a projector's output equal to the text model's
hidden size, a Q-Former's cross-attention width equal to the vision model's)
hold without knowing them. Likewise one vocabulary size (:data:`VOCAB`) in
every sub-config, and every special token id that no longer fits below
``VOCAB - RESERVED_IDS`` moved to the top :data:`RESERVED_IDS` ids (the same
old id always to the same new one, across sub-configs); random input ids
avoid every special id the config names (:mod:`graphcheck.zoo.inputs`), so
that they never hit an image, audio or other placeholder token.

Three levels, tried in order until the model builds and, where it has one,
its forward runs (:mod:`graphcheck.zoo.worker`):

- ``tiny``: layers, widths, heads, experts, vocabulary, positions, image,
  patch and audio sizes, per-stage lists;
- ``narrow``: the same but spatial and audio sizes and per-stage lists keep
  their defaults (images capped at :data:`MAX_IMAGE` pixels a side), and
  layer counts stay above every layer index a config names;
- ``shallow``: only layer counts, experts and vocabulary shrink (widths keep
  their defaults).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from graphcheck.zoo._layers import _backbone_stages, _feature_layers, _layer_key, _shrink_layers
from graphcheck.zoo._sizes import (
    _EXPERTS_KEYS,
    _POSITION_KEYS,
    _STAGE_DEPTH_KEYS,
    _STAGE_WIDTH_KEYS,
    _TOKEN_RE,
    _TOPK_KEYS,
    _VOCAB_RE,
    EXPERTS,
    FFN,
    HEAD_DIM,
    HEADS,
    KV_HEADS,
    LAYERS,
    LEVELS,
    LOW_IDS,
    MAX_IMAGE,
    POSITIONS,
    QUERIES,
    RESERVED_IDS,
    TOP_K,
    VOCAB,
    WIDTH,
    Dict,
    Sizes,
    _Ctx,
    _int_list,
    _is_subconfig,
    _rope_dicts,
    _scale_list,
)
from graphcheck.zoo._stages import couple_stages
from graphcheck.zoo._widths import (
    _fix_head_dims,
    _groups,
    _mamba,
    _mrope,
    _shrink_widths,
    _tied_head_dims,
    _tied_widths,
    fit_mrope_section,
)

__all__ = [
    "FFN",
    "fit_mrope_section",
    "HEADS",
    "HEAD_DIM",
    "KV_HEADS",
    "LAYERS",
    "LEVELS",
    "LOW_IDS",
    "POSITIONS",
    "RESERVED_IDS",
    "Sizes",
    "VOCAB",
    "WIDTH",
    "shrink",
]


def _shrink_experts(d: Dict) -> None:
    for key in _EXPERTS_KEYS:
        value = d.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > EXPERTS:
            d[key] = EXPERTS
    has_experts = any(
        isinstance(d.get(k), int) and not isinstance(d.get(k), bool) and d[k] > 0
        for k in _EXPERTS_KEYS
    )
    for key in _TOPK_KEYS:
        value = d.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > TOP_K:
            d[key] = TOP_K
        elif key in d and value is None and has_experts:
            d[key] = TOP_K  # routing reads it; the default leaves it to the checkpoint
    for key in ("n_group", "num_expert_group"):
        if isinstance(d.get(key), int) and d[key] > 2:
            d[key] = 2
    for key in ("topk_group",):
        if isinstance(d.get(key), int) and d[key] > 1:
            d[key] = 1
    for key in ("n_shared_experts", "num_shared_experts", "moe_num_shared_experts"):
        if isinstance(d.get(key), int) and d[key] > 1:
            d[key] = 1


def _shrink_vocab_and_tokens(d: Dict, ctx: _Ctx) -> None:
    if "vocab_size" in d and d["vocab_size"] is None:
        d["vocab_size"] = VOCAB  # configs that leave it to the tokenizer (ESM)
    for key, value in list(d.items()):
        if _VOCAB_RE.search(key) and isinstance(value, int) and value > VOCAB:
            d[key] = VOCAB
        elif _TOKEN_RE.search(key):
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                d[key] = ctx.token(value)
            elif isinstance(value, list) and all(isinstance(x, int) for x in value):
                d[key] = [ctx.token(x) if x >= 0 else x for x in value]


def _shrink_positions(d: Dict) -> None:
    for key in _POSITION_KEYS:
        value = d.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > POSITIONS:
            d[key] = POSITIONS
    if isinstance(d.get("sliding_window"), int) and d["sliding_window"] > 8:
        d["sliding_window"] = 8
    if isinstance(d.get("max_source_positions"), int) and d["max_source_positions"] > 64:
        d["max_source_positions"] = 64
    rope = d.get("rope_parameters")
    for params in _rope_dicts(rope):
        omp = params.get("original_max_position_embeddings")
        if isinstance(omp, int) and omp > POSITIONS // 2:
            params["original_max_position_embeddings"] = POSITIONS // 2


def _shrink_queries(d: Dict) -> None:
    # Object queries: two-stage detectors (RT-DETR, D-FINE, RF-DETR) pick the top num_queries
    # of the encoder's tokens, and a tiny image has fewer than the default 300 (64 pixels at
    # strides 8, 16, 32: 84); EoMT appends its queries to the patch tokens.
    if isinstance(d.get("num_queries"), int) and d["num_queries"] > QUERIES:
        d["num_queries"] = QUERIES


def _shrink_spatial(d: Dict) -> None:
    patch = d.get("patch_size")
    patch_int = patch if isinstance(patch, int) else (patch[0] if _int_list(patch) else None)
    for key in ("image_size", "img_size", "input_size_image"):
        value = d.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            d[key] = _tiny_image(value, patch_int)
        elif _int_list(value) and len(value) == 2:
            d[key] = [_tiny_image(v, patch_int) for v in value]
    size = d.get("image_size")
    if isinstance(d.get("image_embedding_size"), int) and isinstance(size, int) and patch_int:
        # Derived by __post_init__ (image // patch) and written by to_dict: the stale value
        # from the dict would win (SAM's prompt encoder).
        d["image_embedding_size"] = size // patch_int
    window = d.get("window_size")
    depths = d.get("depths")
    if isinstance(window, int) and window > 2 and _int_list(depths) and patch_int:
        # Swin-style stages halve the resolution: the last one still holds one 2x2 window.
        d["window_size"] = 2
        side = patch_int * 2 ** (len(depths) - 1) * 2
        for key in ("image_size", "img_size"):
            if isinstance(d.get(key), int):
                d[key] = side
            elif _int_list(d.get(key)) and len(d[key]) == 2:
                d[key] = [side, side]
    for key in _STAGE_WIDTH_KEYS:
        if _int_list(d.get(key)) and len(d[key]) > 1:
            d[key] = _scale_list(d[key], 16)
    for key in _STAGE_DEPTH_KEYS:
        if _int_list(d.get(key)):
            d[key] = [min(v, 1) if v > 0 else v for v in d[key]]


def _cap_images(d: Dict) -> None:
    """At the narrow level images keep their default size up to :data:`MAX_IMAGE`."""
    patch = d.get("patch_size")
    step = patch if isinstance(patch, int) and patch > 0 else 32
    for key in ("image_size", "img_size"):
        value = d.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_IMAGE:
            d[key] = max(step, MAX_IMAGE // step * step)
        elif _int_list(value) and len(value) == 2 and max(value) > MAX_IMAGE:
            d[key] = [max(step, min(v, MAX_IMAGE) // step * step) for v in value]


def _tiny_image(value: int, patch: int | None) -> int:
    if patch and patch > 0:
        tiles = 8 if patch <= 8 else 4
        return min(value, patch * tiles)
    return min(value, 64)


def _fill_missing(d: Dict, ctx: _Ctx) -> None:
    """Fields some defaults leave ``None`` for a checkpoint to set, that models read as numbers."""
    heads = d.get("num_attention_heads")
    hidden = d.get("hidden_size")
    if "num_key_value_heads" in d and d["num_key_value_heads"] is None and isinstance(heads, int):
        d["num_key_value_heads"] = heads
    if (
        "head_dim" in d
        and d["head_dim"] is None
        and isinstance(heads, int)
        and isinstance(hidden, int)
        and heads > 0
    ):
        d["head_dim"] = hidden // heads
    if "moe_intermediate_size" in d and d["moe_intermediate_size"] is None:
        d["moe_intermediate_size"] = FFN if ctx.level != "shallow" else d.get("intermediate_size")
    if "prediction_length" in d and d["prediction_length"] is None:
        d["prediction_length"] = 8
    label, context = d.get("label_length"), d.get("context_length") or d.get("prediction_length")
    if isinstance(label, int) and isinstance(context, int) and label > context:
        # Autoformer's decoder starts from the last label_length steps of the context.
        d["label_length"] = context
    rope = d.get("rope_parameters")
    if isinstance(rope, dict) and not rope and ("rope_theta" in d or "layer_types" in d):
        theta = d.get("rope_theta") or 10000.0
        if isinstance(d.get("layer_types"), list):
            d["rope_parameters"] = {
                t: {"rope_type": "default", "rope_theta": theta} for t in set(d["layer_types"])
            }
        else:
            d["rope_parameters"] = {"rope_type": "default", "rope_theta": theta}


def _shrink_dict(d: Dict, ctx: _Ctx) -> None:
    for value in d.values():
        if _is_subconfig(value):
            _shrink_dict(value, ctx)
        elif isinstance(value, list):
            for item in value:
                if _is_subconfig(item):
                    _shrink_dict(item, ctx)
    if "dtype" in d:
        d["dtype"] = "float32"
    if "torch_dtype" in d:
        d["torch_dtype"] = "float32"
    if "use_cache" in d:
        d["use_cache"] = False
    if "use_timm_backbone" in d:
        d["use_timm_backbone"] = False
    if "use_pretrained_backbone" in d:
        d["use_pretrained_backbone"] = False
    before = dict(d)
    key = _layer_key(d)
    old_layers = d.get(key) if key else None
    _shrink_layers(d, ctx)
    _backbone_stages(d, old_layers, key)
    _shrink_experts(d)
    _shrink_vocab_and_tokens(d, ctx)
    _feature_layers(d)
    if ctx.level in ("tiny", "narrow"):
        _shrink_widths(d, ctx)
        _tied_widths(d, before)
        _fix_head_dims(d)
        _shrink_positions(d)
        _mamba(d, ctx)
        _groups(d)
    _fill_missing(d, ctx)
    _tied_head_dims(d, before)
    _mrope(d)
    if ctx.level == "tiny":
        _shrink_queries(d)
        _shrink_spatial(d)
    elif ctx.level == "narrow":
        _cap_images(d)


def shrink(
    config_dict: Mapping[str, Any],
    level: str = "tiny",
    *,
    fixups: Callable[[Dict, str], None] | None = None,
    sizes: Sizes | None = None,
) -> Dict:
    """A shrunk deep copy of a config's ``to_dict()`` at ``level`` (see the module docstring).

    ``fixups(d, level)`` runs last, on the whole tree (the override table and
    the variant's edits use it). ``sizes`` replaces the default widths
    (:class:`Sizes`). Raises ``ValueError`` for an unknown level.
    """
    ctx = _Ctx(level, sizes)
    d = copy.deepcopy(dict(config_dict))
    _shrink_dict(d, ctx)
    if level == "tiny":
        couple_stages(dict(config_dict), d)  # per-stage lists were scaled one by one
    if fixups is not None:
        fixups(d, level)
    return d
