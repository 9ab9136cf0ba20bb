"""Layer counts: which layers a tiny config keeps, and the lists that name layers."""

from __future__ import annotations

from graphcheck.zoo._sizes import (
    _INDEX_LIST_RE,
    _LAYER_KEYS,
    _STAGE_DEPTH_KEYS,
    LAYERS,
    MAX_LAYERS,
    Dict,
    _Ctx,
    _int_list,
)


def _layer_key(d: Dict) -> str | None:
    for key in _LAYER_KEYS:
        if isinstance(d.get(key), int) and not isinstance(d.get(key), bool):
            return key
    return None


def _increasing(values: list[object]) -> bool:
    """Whether ``values`` increase strictly, as the layer numbers of an index list do.

    A flag per layer (Llama 4's ``no_rope_layers``, ``[1, 1, 1, 0, ...]``) repeats
    values, whatever its name says.
    """
    return all(
        isinstance(a, int) and isinstance(b, int) and a < b
        for a, b in zip(values, values[1:], strict=False)
    )


def _per_layer(d: Dict, key: str, old: int, level: str) -> None:
    """Shrinks the layer count ``d[key]`` and the lists that describe each layer.

    Keeps a subset of layers that covers every distinct value of every
    per-layer list (``layer_types``, ``mlp_layer_types``, ...) and the first
    layer each layer-index list names, so that every layer kind of the default
    config is still built; index lists are renumbered to the kept layers.
    """
    per_layer = [
        k
        for k, v in d.items()
        if isinstance(v, list)
        and len(v) == old
        and old > 1
        and k not in _STAGE_DEPTH_KEYS
        and all(isinstance(x, (str, bool, int, float, type(None))) for x in v)
        and (not _INDEX_LIST_RE.search(k) or not _increasing(v))
        and not (k == "stage_names" or k == "out_features")
    ]
    per_layer_config = d.get("per_layer_config")
    overrides = per_layer_config if isinstance(per_layer_config, dict) else {}
    index_lists = [
        k
        for k, v in d.items()
        if isinstance(v, list)
        and v
        and k not in per_layer
        and _INDEX_LIST_RE.search(k)
        and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < old for x in v)
    ]
    if level == "narrow" and index_lists:
        # Keep every named layer instead of renumbering: indices stay valid as they are.
        need = max(max(d[k]) for k in index_lists) + 1
        d[key] = max(min(old, LAYERS), need)
        for k in per_layer:
            d[k] = d[k][: d[key]]
        if overrides:
            d["per_layer_config"] = {k: v for k, v in overrides.items() if int(k) < d[key]}
        return
    keep: set[int] = set()
    for k in per_layer:
        seen: set[object] = set()
        for i, v in enumerate(d[k]):
            marker = repr(v)
            if marker not in seen:
                seen.add(marker)
                keep.add(i)
    for k in index_lists:
        keep.add(min(d[k]))
    seen_overrides: set[str] = set()
    for layer, value in sorted(overrides.items(), key=lambda kv: int(kv[0])):
        if int(layer) < old and repr(value) not in seen_overrides:
            seen_overrides.add(repr(value))
            keep.add(int(layer))
    target = min(old, max(LAYERS, len(keep)))
    i = 0
    while len(keep) < target:
        keep.add(i)
        i += 1
    kept = sorted(keep)[:MAX_LAYERS] if len(keep) > MAX_LAYERS else sorted(keep)
    position = {layer: n for n, layer in enumerate(kept)}
    d[key] = len(kept)
    for k in per_layer:
        d[k] = [d[k][i] for i in kept]
    for k in index_lists:
        renumbered = sorted({position[i] for i in d[k] if i in position})
        d[k] = renumbered or [len(kept) - 1]
    if overrides:
        d["per_layer_config"] = {
            position[int(layer)]: value
            for layer, value in overrides.items()
            if int(layer) in position
        }


def _shrink_layers(d: Dict, ctx: _Ctx) -> None:
    primary = _layer_key(d)
    for key in _LAYER_KEYS:
        value = d.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value <= LAYERS:
            continue
        if key == primary:
            _per_layer(d, key, value, ctx.level)
        else:
            d[key] = LAYERS
    if isinstance(d.get("layer_types"), list) and primary and len(d["layer_types"]) != d[primary]:
        d["layer_types"] = None
    # Layer-schedule knobs: keep at least one layer of each kind within the kept layers.
    n = d.get(primary) if primary else None
    if isinstance(n, int):
        for key in ("first_k_dense_replace", "num_dense_layers", "moe_layer_start_index"):
            if isinstance(d.get(key), int) and d[key] >= n:
                d[key] = max(0, n - 1)
        for key in ("num_kv_shared_layers",):
            if isinstance(d.get(key), int) and d[key] >= n:
                d[key] = max(0, n - 1) if n > 1 else 0
        for key in (
            "full_attention_interval",
            "attn_layer_period",
            "expert_layer_period",
            "decoder_sparse_step",
            "interleave_moe_layer_step",
            "no_rope_layer_interval",
            "sliding_window_pattern",
            "moe_layer_freq",
            "cross_attention_frequency",
            "global_attn_every_n_layers",
        ):
            if isinstance(d.get(key), int) and not isinstance(d.get(key), bool) and d[key] > n:
                d[key] = n
        for key in ("attn_layer_offset", "expert_layer_offset"):
            period = d.get(key.replace("offset", "period"))
            if isinstance(d.get(key), int) and isinstance(period, int) and d[key] >= period:
                d[key] = period - 1
        for key in ("max_window_layers",):
            if isinstance(d.get(key), int) and d[key] > n:
                d[key] = n
        if isinstance(d.get("mlp_only_layers"), list):
            d["mlp_only_layers"] = [i for i in d["mlp_only_layers"] if i < n]


def _backbone_stages(d: Dict, old_layers: int | None, key: str | None) -> None:
    """Renumbers ``out_indices``/``out_features``/``stage_names`` of a ViT-style backbone.

    Their stages are the layers (``stage_names`` is ``stem`` plus one stage per
    layer): the same number of outputs is kept, on the last layers, and the
    layer count grows to hold them.
    """
    names = d.get("stage_names")
    if key is None or old_layers is None or not isinstance(names, list):
        return
    if len(names) != old_layers + 1:
        return
    indices = d.get("out_indices")
    count = len(indices) if isinstance(indices, list) and indices else 1
    n = max(d[key], min(count, MAX_LAYERS))
    d[key] = n
    if isinstance(d.get("layer_types"), list) and len(d["layer_types"]) < n:
        d["layer_types"] = (d["layer_types"] * n)[:n]
    new_names = ["stem"] + [f"stage{i}" for i in range(1, n + 1)]
    new_indices = list(range(max(1, n - count + 1), n + 1))
    d["stage_names"] = new_names
    d["out_indices"] = new_indices
    d["out_features"] = [new_names[i] for i in new_indices]


_FEATURE_LAYER_KEYS = (
    "vision_feature_layer",
    "vision_feature_layers",
    "feature_layer",
    "select_layer",
    "vision_feature_select_layer",
)


def _feature_layers(d: Dict) -> None:
    """Layer indices into another sub-config's layers: within the tiny depth."""

    def clamp(v: int) -> int:
        return min(v, LAYERS - 1) if v >= 0 else max(v, -LAYERS)

    for key in _FEATURE_LAYER_KEYS:
        value = d.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            d[key] = clamp(value)
        elif _int_list(value):
            d[key] = [clamp(v) for v in value]
