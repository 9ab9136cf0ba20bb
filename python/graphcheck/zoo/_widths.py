"""Widths: hidden sizes, heads, head dimensions and the fields tied to them."""

from __future__ import annotations

import math
import re

from graphcheck.zoo._sizes import (
    _FFN_RE,
    _HEADS_RE,
    _KV_RE,
    _STAGE_HEADS_KEYS,
    _WIDTH_EXCLUDE,
    _WIDTH_RE,
    Dict,
    _Ctx,
    _int_list,
    _rope_dicts,
)


def _shrink_widths(d: Dict, ctx: _Ctx) -> None:
    sz = ctx.sizes
    # Per-stage head counts: powers of two, so that they divide the per-stage widths.
    for key in _STAGE_HEADS_KEYS:
        if _int_list(d.get(key)) and len(d[key]) > 1:
            d[key] = [min(v, 2 ** min(i, 3)) for i, v in enumerate(d[key])]
    heads_before = next(
        (v for k, v in d.items() if _HEADS_RE.search(k) and isinstance(v, int)), None
    )
    for key, value in list(d.items()):
        # Per-layer key/value heads (Sapiens2's num_key_value_heads_per_layer): each layer's
        # count maps as the scalar would, full heads to heads and grouped ones to kv_heads.
        per_layer = key.endswith("_per_layer") and _KV_RE.search(key.removesuffix("_per_layer"))
        if per_layer and _int_list(value):
            d[key] = [
                sz.heads if heads_before is not None and v == heads_before else sz.kv_heads
                for v in value
            ]
    for key, value in list(d.items()):
        if not isinstance(value, int) or isinstance(value, bool):
            continue
        if _WIDTH_RE.search(key) and key not in _WIDTH_EXCLUDE and value > sz.width:
            d[key] = sz.width
        elif _FFN_RE.search(key) and value > sz.ffn:
            d[key] = sz.ffn
        elif _HEADS_RE.search(key) and value > sz.heads:
            d[key] = sz.heads
        elif _KV_RE.search(key) and value > 1:
            d[key] = sz.heads if heads_before is not None and value == heads_before else sz.kv_heads
    dims = {
        "head_dim": sz.head_dim,
        "d_kv": sz.head_dim,
        "attention_head_dim": sz.head_dim,
        "qk_nope_head_dim": sz.head_dim,
        "qk_rope_head_dim": 8,
        "v_head_dim": sz.head_dim,
        "qk_head_dim": sz.head_dim + 8,
        "swa_head_dim": sz.head_dim,
        "global_head_dim": sz.head_dim,
        "linear_key_head_dim": sz.head_dim,
        "linear_value_head_dim": sz.head_dim,
        "index_head_dim": sz.head_dim,
        "kv_lora_rank": 32,
        "q_lora_rank": 32,
        "linear_num_key_heads": sz.kv_heads,
        "linear_num_value_heads": sz.heads,
        "index_n_heads": sz.heads,
        "d_head": sz.head_dim,
        "rotary_dim": sz.head_dim // 2,
        "d_latents": sz.width,
        "num_latents": 16,
        "hidden_size_global": sz.width,
        "swa_num_attention_heads": sz.heads,
        "swa_num_key_value_heads": sz.kv_heads,
        "moe_intermediate_size": sz.ffn,
        "shared_expert_intermediate_size": sz.ffn,
        "state_size": 16,
        "d_state": 16,
        "mamba_d_state": 16,
        "mamba_d_head": sz.head_dim,
        "mamba_head_dim": sz.head_dim,
        "ssm_state_size": 16,
        "time_step_rank": 8,
        "conv_dim_out": sz.width,
        "codebook_size": 64,
        "num_embeddings": 64,
        # Learned queries that a prompt holds one placeholder each of (BLIP-2, Kosmos-2): a
        # handful, so that they fit in the warm-up's 16 tokens.
        "num_query_tokens": 4,
        "latent_query_num": 4,
        "hidden_size_per_layer_input": 8,
        "num_conv_pos_embeddings": 16,
        "num_conv_pos_embedding_groups": 4,
    }
    for key, new in dims.items():
        value = d.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > new:
            d[key] = new
    if (
        isinstance(d.get("qk_head_dim"), int)
        and isinstance(d.get("qk_nope_head_dim"), int)
        and isinstance(d.get("qk_rope_head_dim"), int)
    ):
        d["qk_head_dim"] = d["qk_nope_head_dim"] + d["qk_rope_head_dim"]


def _fix_head_dims(d: Dict) -> None:
    """Makes ``hidden = heads * head_dim`` hold where the config has both."""
    heads = d.get("num_attention_heads")
    hidden = d.get("hidden_size")
    if isinstance(heads, int) and isinstance(hidden, int) and heads > 0:
        if hidden % heads:
            d["num_attention_heads"] = math.gcd(hidden, heads) or 1
        heads = d["num_attention_heads"]
        kv = d.get("num_key_value_heads")
        if isinstance(kv, int) and kv > 0 and heads % kv:
            d["num_key_value_heads"] = math.gcd(heads, kv)


_TIED_SKIP = re.compile(
    r"position|vocab|token|image|patch|window|kernel|stride|chunk|bucket|length|label|"
    r"layers|depth|heads|experts|sampling|rate|frames|bins|seq|ctx|batch|num_"
)


def _tied_widths(d: Dict, before: Dict) -> None:
    """Keys that equalled the hidden size before shrinking follow it (``codebook_dim``)."""
    old = before.get("hidden_size")
    new = d.get("hidden_size")
    if not isinstance(old, int) or not isinstance(new, int) or old == new:
        return
    for k, v in before.items():
        if (
            k != "hidden_size"
            and isinstance(v, int)
            and not isinstance(v, bool)
            and v == old
            and d.get(k) == v
            and not _TIED_SKIP.search(k)
        ):
            d[k] = new


def _tied_head_dims(d: Dict, before: Dict) -> None:
    """A ``head_dim`` that was the rotary part of an MLA head (DeepSeek-V3) stays that."""
    if (
        isinstance(before.get("head_dim"), int)
        and before.get("head_dim") == before.get("qk_rope_head_dim")
        and isinstance(d.get("qk_rope_head_dim"), int)
    ):
        d["head_dim"] = d["qk_rope_head_dim"]


def _mamba(d: Dict, ctx: _Ctx) -> None:
    """Mamba-2 mixers: ``n_heads * d_head == inner`` (``expand * hidden`` or ``d_ssm``)."""
    head_dim = ctx.sizes.head_dim
    hidden = d.get("hidden_size")
    if (
        isinstance(hidden, int)
        and isinstance(d.get("expand"), int)
        and isinstance(d.get("num_heads"), int)
        and isinstance(d.get("head_dim"), int)
        and isinstance(d.get("n_groups"), int)
    ):
        # Mamba2Config's own names.
        d["num_heads"] = max(1, d["expand"] * hidden // d["head_dim"])
        d["n_groups"] = 1
    if not isinstance(hidden, int) or not isinstance(d.get("mamba_n_heads"), int):
        return
    expand = d.get("mamba_expand")
    if not isinstance(expand, int):
        expand = 2
    inner = expand * hidden
    if isinstance(d.get("mamba_d_ssm"), int):
        d["mamba_d_ssm"] = inner
    d_head = d.get("mamba_d_head")
    if not isinstance(d_head, int):
        d_head = head_dim
    d_head = min(d_head, head_dim)
    d["mamba_d_head"] = d_head
    d["mamba_n_heads"] = max(1, inner // d_head)
    if isinstance(d.get("mamba_n_groups"), int):
        d["mamba_n_groups"] = 1


def _mrope(d: Dict) -> None:
    """``mrope_section`` (time, height, width) sums to half the rotary head dimension."""
    head_dim = d.get("qk_rope_head_dim") or d.get("head_dim")
    if not isinstance(head_dim, int):
        hidden, heads = d.get("hidden_size"), d.get("num_attention_heads")
        if not (isinstance(hidden, int) and isinstance(heads, int) and heads > 0):
            return
        head_dim = hidden // heads
    for params in [d, *_rope_dicts(d.get("rope_parameters"))]:
        fit_mrope_section(params, head_dim)


def fit_mrope_section(params: Dict, head_dim: int) -> None:
    """Rescales ``params["mrope_section"]`` (if any) to sum to half the rotary dimension.

    The rotary dimension is ``head_dim``, or ``head_dim * partial_rotary_factor`` where the
    same dict names a factor (GLM-4.5V rotates half of each head: its sections split that).
    """
    section = params.get("mrope_section")
    factor = params.get("partial_rotary_factor")
    rotary = head_dim
    if isinstance(factor, float | int) and not isinstance(factor, bool) and 0 < factor < 1:
        rotary = int(head_dim * factor)
    total = rotary // 2
    if _int_list(section) and sum(section) != total and total >= len(section):
        parts = [total // len(section)] * len(section)
        for i in range(total - sum(parts)):
            parts[i] += 1
        params["mrope_section"] = parts


_GROUPS_RE = re.compile(r"(?:^|_)groups$")


def _groups(d: Dict) -> None:
    for key, value in list(d.items()):
        if _GROUPS_RE.search(key) and isinstance(value, int) and value > 4:
            d[key] = 4
