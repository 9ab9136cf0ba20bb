"""The override table: the stubborn architectures that the generic shrinking cannot build.

Two hooks, keyed by config ``model_type`` (or by class name where one class
differs from its siblings):

- ``PREPARE`` (through :func:`prepare_base`): edits of the default config
  dict before shrinking (and, for all, a timm backbone replaced by the
  transformers ResNet when timm is missing);
- ``FIXUPS``: edits of the shrunk dict (``fixup(d, level)``), run before the
  variant; most set a field that the default leaves ``None`` for a
  checkpoint to fill.

Every entry says why it is needed. Keep the table small: a rule that more
than one architecture needs belongs in :mod:`graphcheck.zoo.tiny_config`.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

from graphcheck.zoo._overrides_vision import VISION_FIXUPS
from graphcheck.zoo.catalog import Arch

__all__ = ["FIXUPS", "PREPARE", "apply_fixups", "prepare_base"]

Dict = dict[str, Any]


def _layers(d: Dict) -> int:
    for key in ("num_hidden_layers", "num_layers", "n_layer"):
        if isinstance(d.get(key), int):
            return int(d[key])
    return 2


def _gpt_neo(d: Dict, level: str) -> None:
    # attention_types is a run-length list ([[["global", "local"], 12]]) that must cover the layers.
    n = _layers(d)
    d["attention_types"] = [[["global", "local"], max(1, n // 2)]]
    d["num_layers"] = 2 * max(1, n // 2)
    d.pop("attention_layers", None)


def _text(d: Dict) -> Dict:
    sub = d.get("text_config")
    return sub if isinstance(sub, dict) else d


def _per_layer(values: list[Any]) -> Callable[[Dict, str], None]:
    # A per-layer list that the default leaves None (a checkpoint always sets it).
    def fixup(d: Dict, level: str) -> None:
        cfg = _text(d)
        n = _layers(cfg)
        key = (
            "layer_types"
            if isinstance(values[0], str) and values[0] != "dense"
            else ("mlp_layer_types")
        )
        cfg[key] = (values * n)[:n]

    return fixup


def _set(**values: Any) -> Callable[[Dict, str], None]:
    def fixup(d: Dict, level: str) -> None:
        d.update(values)

    return fixup


def _set_text(**values: Any) -> Callable[[Dict, str], None]:
    def fixup(d: Dict, level: str) -> None:
        _text(d).update(values)

    return fixup


def _zamba(d: Dict, level: str) -> None:
    # The shared transformer is tied across hybrid layers: at least two of them are needed.
    d.update(num_hidden_layers=4, attn_layer_period=2, attn_layer_offset=1)
    d.pop("layers_block_type", None)


def _dory(d: Dict, level: str) -> None:
    # Input, recurrent and output blocks partition the layers; the dict form counts every
    # layer twice (an attention block and an mlp block), as Dory's to_dict writes it.
    d.update(
        num_hidden_layers=6,
        n_input_layers=2,
        n_recurrent_layers=2,
        n_output_layers=2,
        layer_types=[
            "sliding_attention",
            "mlp",
            "full_attention",
            "mlp",
            "sliding_attention",
            "mlp",
        ],
    )


def _dots3(d: Dict, level: str) -> None:
    # The sliding-window attention shares the MLA head width.
    for cfg in (d, _text(d)):
        if isinstance(cfg.get("qk_nope_head_dim"), int) and isinstance(cfg.get("head_dim"), int):
            cfg["head_dim"] = cfg["qk_nope_head_dim"] + cfg["qk_rope_head_dim"]


def _gemma3n(d: Dict, level: str) -> None:
    # KV-shared layers reuse the cache of an earlier layer of the same type: two of each.
    cfg = _text(d)
    cfg.update(
        num_hidden_layers=4,
        layer_types=["sliding_attention", "full_attention"] * 2,
        activation_sparsity_pattern=[0.95, 0.95, 0.0, 0.0],
        num_kv_shared_layers=2,
    )
    if isinstance(cfg.get("intermediate_size"), list):
        cfg["intermediate_size"] = [cfg["intermediate_size"][0]] * 4


def _beit_segmentation(d: Dict, level: str) -> None:
    # The UperNet head reads four feature maps.
    n = 4
    d.update(
        num_hidden_layers=n,
        out_indices=[1, 2, 3, 4],
        stage_names=["stem"] + [f"stage{i}" for i in range(1, n + 1)],
        out_features=[f"stage{i}" for i in range(1, n + 1)],
    )


def _both(*fixups: Callable[[Dict, str], None]) -> Callable[[Dict, str], None]:
    def fixup(d: Dict, level: str) -> None:
        for f in fixups:
            f(d, level)

    return fixup


def _dbrx_clip(d: Dict, level: str) -> None:
    # DBRX clamps q, k, v to clip_qkv (8 in the released checkpoints); the default is None.
    attn = d.get("attn_config")
    if isinstance(attn, dict) and attn.get("clip_qkv") is None:
        attn["clip_qkv"] = 8.0


#: Qwen4-exp's sparse attention indexer: fields its checkpoints set, the default leaves None.
_QSA = {
    "indexer_budget": 16,
    "indexer_compress_ratio": 4,
    "indexer_n_heads": 4,
    "indexer_kv_heads": 1,
    "indexer_head_dim": 16,
}

FIXUPS: dict[str, Callable[[Dict, str], None]] = {
    "gpt_neo": _gpt_neo,
    # ESM's vocabulary comes from its tokenizer; the embeddings and token dropout read
    # pad and mask ids (ESM-2: 33 tokens, <pad> 1, <mask> 32).
    "esm": _set(vocab_size=33, pad_token_id=1, mask_token_id=32),
    "lfm2_moe": _per_layer(["conv", "full_attention"]),
    "dots1": _set(n_routed_experts=4, num_experts_per_tok=2, n_shared_experts=1),
    "qwen4_exp": _set_text(**_QSA),
    "qwen4_exp_text": _set(**_QSA),
    "diffusion_gemma": _set_text(num_experts=4, top_k_experts=2, moe_intermediate_size=128),
    "deepseek_ocr2": _both(
        _per_layer(["dense", "sparse"]), _set_text(num_experts_per_tok=2, topk_group=1)
    ),
    "dbrx": _dbrx_clip,
    "reformer": _set(
        axial_pos_embds_dim=[32, 32],
        axial_pos_shape=[8, 16],
        max_position_embeddings=128,
        attn_layers=["local", "lsh"],
        local_attn_chunk_length=16,
        lsh_attn_chunk_length=16,
        num_buckets=4,
        num_hashes=1,
    ),
    "dory": _dory,
    "dots3_note": _dots3,
    "dots3_note_text": _dots3,
    "zamba": _zamba,
    "gemma3n": _gemma3n,
    "gemma3n_text": _gemma3n,
    "perceiver": _set(qk_channels=64, v_channels=64),
    "HieraForPreTraining": _set(decoder_hidden_size=64, decoder_depth=1, decoder_num_heads=2),
    "ReformerModelWithLMHead": _set(is_decoder=True),
    "T5GemmaEncoderModel": _set(is_encoder_decoder=False),
    "DetrForSegmentation": _set(encoder_attention_heads=8, decoder_attention_heads=8),
    "BeitForSemanticSegmentation": _beit_segmentation,
    **VISION_FIXUPS,
    # The visual prompter pads every frame to max_img_size (448) around a base of
    # max_img_size - 2 * visual_prompt_size: both shrink to the zoo's 64-pixel frames, and the
    # 48 frames of a clip to 2.
    "tvp": _set(max_img_size=64, visual_prompt_size=16, num_frames=2),
    # SegGPT merges the prompt and input streams after layer merge_index (2), which must come
    # before the first layer it reads features from: with two layers, merge at the first.
    # Its image_size is the prompt and the input stacked ([896, 448]): two 64-pixel images.
    "seggpt": _set(merge_index=0, image_size=[128, 64]),
    # A text-line recognizer: the backbone divides the height by 32 and the head pools 3 rows,
    # so the image is at least 96 pixels high (the processor makes 48 x 320 lines for the
    # checkpoint's own strides). The config names no image size; the zoo's input reads this.
    "pp_ocrv5_mobile_rec": _set(image_size=[96, 64]),
    # LW-DETR's default has no projector scale (num_feature_levels is derived from their
    # count, but the dict's own 0 wins), so the detector gets no feature map; the released
    # small model uses one scale, 1.0.
    "lw_detr": _set(projector_scale_factors=[1.0], num_feature_levels=1),
}


def _dbrx(base: Dict) -> None:
    # The attention sub-config reads rope_theta, which the default keeps on the parent.
    attn = base.get("attn_config")
    if isinstance(attn, dict):
        attn.setdefault("rope_theta", 10000.0)


def _moonshine_streaming(base: Dict) -> None:
    # The decoder attention reads num_key_value_heads, which the default does not define.
    base.setdefault("num_key_value_heads", base.get("num_attention_heads"))


PREPARE: dict[str, Callable[[Dict], None]] = {
    "dbrx": _dbrx,
    "moonshine_streaming": _moonshine_streaming,
}


def _resnet_backbone(sub: Dict) -> Dict:
    from transformers import ResNetConfig

    out_indices = sub.get("out_indices") or [1, 2, 3, 4]
    # ResNetConfig takes out_indices through its __post_init__'s **kwargs, which the fields of
    # its dataclass do not list; its to_dict (BackboneConfigMixin's) is unannotated.
    config = ResNetConfig(out_indices=list(out_indices))  # type: ignore[call-arg]
    as_dict: Dict = config.to_dict()  # type: ignore[no-untyped-call]
    return as_dict


def _replace_timm(d: Dict) -> None:
    for key, value in list(d.items()):
        if isinstance(value, dict) and isinstance(value.get("model_type"), str):
            if value["model_type"] == "timm_backbone":
                d[key] = _resnet_backbone(value)
            else:
                _replace_timm(value)


def _timm_architecture(d: Dict) -> None:
    # transformers 5.24.0's EdgeTAM vision config misspells the backbone's key ("archirecture":
    # "repvit_m1"), so TimmWrapperConfig keeps its own default, resnet50, whose widths the neck
    # does not expect; checkpoints name repvit_m1 under "architecture".
    for value in d.values():
        if isinstance(value, dict) and isinstance(value.get("model_type"), str):
            if value["model_type"] == "timm_wrapper" and isinstance(value.get("archirecture"), str):
                value["architecture"] = value.pop("archirecture")
            _timm_architecture(value)


def prepare_base(arch: Arch, base: Dict) -> None:
    """Edits the default config dict of ``arch`` before shrinking.

    Without timm installed, a ``timm_backbone`` sub-config (DETR and its
    relatives default to timm's ResNet-50) becomes the transformers ResNet
    with the same ``out_indices``: the same backbone family, built by
    transformers itself.
    """
    if importlib.util.find_spec("timm") is None:
        _replace_timm(base)
    _timm_architecture(base)
    prepare = PREPARE.get(arch.model_type)
    if prepare is not None:
        prepare(base)


def apply_fixups(arch: Arch, d: Dict, level: str) -> None:
    """Runs the fixups of ``arch`` (by class name, then model type) on the shrunk dict ``d``."""
    for key in (arch.class_name, arch.model_type):
        fixup = FIXUPS.get(key)
        if fixup is not None:
            fixup(d, level)
