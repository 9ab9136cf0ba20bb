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


def _pp_doclayout_v2(d: Dict, level: str) -> None:
    # The detector's forward ends in post-processing that reads per-label thresholds and the
    # reading-order class of each label (a checkpoint sets both; the default leaves None), and
    # the reading-order model embeds the boxes' 0..1000 page coordinates.
    n = len(d.get("id2label") or {}) or 2
    d.setdefault("class_thresholds", None)
    if d["class_thresholds"] is None:
        d["class_thresholds"] = [0.5] * n
    if d.get("class_order") is None:
        d["class_order"] = list(range(n))
    order = d.get("reading_order_config")
    if isinstance(order, dict):
        order["max_2d_position_embeddings"] = 1024


def _pp_doclayout_x4(d: Dict, level: str) -> None:
    # The mask head's lateral convolution takes the backbone's first stage output (x4_feat_dim
    # is that stage's width, 128 by default): it follows the shrunk backbone.
    backbone = d.get("backbone_config")
    if isinstance(backbone, dict) and isinstance(backbone.get("stage_out_channels"), list):
        d["x4_feat_dim"] = backbone["stage_out_channels"][0]


def _eomt(d: Dict, level: str) -> None:
    # The queries join the last num_blocks layers (4 by default): with fewer layers than that
    # they never join, and the mask head gets no patch tokens. Keep it within the layers.
    if isinstance(d.get("num_blocks"), int):
        d["num_blocks"] = min(d["num_blocks"], _layers(d))


def _efficientnet(d: Dict, level: str) -> None:
    # hidden_dim is the width of the top convolution, which the model builds as
    # round_filters(1280) (1280 * width_coefficient, to the depth divisor): it is not a free
    # width, and the generic shrinking of "*_dim" widths breaks the batch norm that reads it.
    divisor = int(d.get("depth_divisor") or 8)
    channels = 1280 * float(d.get("width_coefficient") or 1.0)
    dim = max(divisor, int(channels + divisor / 2) // divisor * divisor)
    d["hidden_dim"] = dim + divisor if dim < 0.9 * channels else dim


def _edgetam(d: Dict, level: str) -> None:
    # The timm RepViT backbone keeps timm's widths (the shrinking does not reach into timm):
    # the neck's backbone_channel_list (its stages, top-down) stays RepViT-M1's.
    for cfg in (d, d.get("vision_config")):
        if isinstance(cfg, dict) and isinstance(cfg.get("backbone_channel_list"), list):
            cfg["backbone_channel_list"] = [384, 192, 96, 48]


def _sam(d: Dict, level: str) -> None:
    # The vision neck's output_channels (256) is the mask decoder's width (256 by default),
    # and the shared positional embedding's num_pos_feats half of it: both follow the decoder.
    # Not a generic rule: the OCR models built on SAM's encoder (GOT-OCR2, DeepSeek-OCR-2, ...)
    # feed output_channels to their own fixed-width projector.
    vision, decoder = d.get("vision_config"), d.get("mask_decoder_config")
    if (
        isinstance(vision, dict)
        and isinstance(decoder, dict)
        and isinstance(decoder.get("hidden_size"), int)
    ):
        vision["output_channels"] = decoder["hidden_size"]
        vision["num_pos_feats"] = decoder["hidden_size"] // 2


def _zoedepth(d: Dict, level: str) -> None:
    # The metric head's bottleneck is the fusion stage's output (both 256 by default).
    if isinstance(d.get("fusion_hidden_size"), int):
        d["bottleneck_features"] = d["fusion_hidden_size"]


def _llama4(d: Dict, level: str) -> None:
    # The vision projector's MLP takes the pixel-shuffled patches (hidden_size / ratio**2
    # values: 1408 * 4 = 5632 in the checkpoints); the default vision width (768) does not
    # match its own intermediate_size (5632), so tie it to the tiny width.
    vision = d.get("vision_config") if d.get("model_type") == "llama4" else d
    if not isinstance(vision, dict):
        return
    ratio, hidden = vision.get("pixel_shuffle_ratio"), vision.get("hidden_size")
    if isinstance(ratio, float) and ratio > 0 and isinstance(hidden, int):
        vision["intermediate_size"] = int(hidden / ratio**2)


def _pe_video(d: Dict, level: str) -> None:
    # The frame encoder is timm's PE-Core ViT-L/14 at 336 pixels (300M parameters, and the
    # shrinking does not reach into timm): timm's own keyword arguments shrink it to the
    # zoo's sizes, at 64 pixels in 16-pixel patches; the zoo's frames read image_size.
    for key, value in d.items():
        if not isinstance(value, dict):
            continue
        if key == "vision_config" and value.get("model_type") == "timm_wrapper":
            value["model_args"] = {
                "img_size": 64,
                "patch_size": 16,
                "depth": 2,
                "embed_dim": 64,
                "num_heads": 4,
            }
            value["image_size"] = 64
        else:
            _pe_video(value, level)  # PeVideoModel holds the encoder's config as video_config


def _depth_pro(d: Dict, level: str) -> None:
    # DepthPro cuts the image, scaled by 0.25, 0.5 and 1, into patch_size tiles (384: the
    # patch encoder's image size) and taps two of the patch encoder's layers
    # (intermediate_hook_ids [11, 5]). Tiles become the tiny encoder's image size, the taps
    # its two layers, and the image (DepthPro's config names none; the zoo's input reads it)
    # four tiles a side, so that the 0.25 scale still holds one.
    patch = d.get("patch_model_config")
    if not isinstance(patch, dict) or not isinstance(patch.get("image_size"), int):
        return
    d["patch_size"] = patch["image_size"]
    layers = _layers(patch)
    d["intermediate_hook_ids"] = [layers - 1, 0]
    d["image_size"] = 4 * patch["image_size"]


def _uvdoc(d: Dict, level: str) -> None:
    # The head concatenates one feature map per bridge stage (bridge_connector[0] *
    # len(stage_configs) channels), but the default backbone outputs only the last stage
    # (out_indices [6]); the checkpoints output every stage.
    backbone = d.get("backbone_config")
    if isinstance(backbone, dict) and isinstance(backbone.get("stage_configs"), list):
        n = len(backbone["stage_configs"])
        backbone["out_indices"] = list(range(1, n + 1))
        backbone["out_features"] = [f"stage{i}" for i in range(1, n + 1)]


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
    "eomt": _eomt,
    "zoedepth": _zoedepth,
    "uvdoc": _uvdoc,
    "depth_pro": _depth_pro,
    # The visual prompter pads every frame to max_img_size (448) around a base of
    # max_img_size - 2 * visual_prompt_size: both shrink to the zoo's 64-pixel frames, and the
    # 48 frames of a clip to 2.
    "tvp": _set(max_img_size=64, visual_prompt_size=16, num_frames=2),
    # SegGPT merges the prompt and input streams after layer merge_index (2), which must come
    # before the first layer it reads features from: with two layers, merge at the first.
    # Its image_size is the prompt and the input stacked ([896, 448]): two 64-pixel images.
    "seggpt": _set(merge_index=0, image_size=[128, 64]),
    "pe_video": _pe_video,
    "pe_video_encoder": _pe_video,
    "llama4": _llama4,
    "llama4_vision_model": _llama4,
    # A text-line recognizer: the backbone divides the height by 32 and the head pools 3 rows,
    # so the image is at least 96 pixels high (the processor makes 48 x 320 lines for the
    # checkpoint's own strides). The config names no image size; the zoo's input reads this.
    "pp_ocrv5_mobile_rec": _set(image_size=[96, 64]),
    "sam": _sam,
    "sam_hq": _sam,
    "edgetam": _edgetam,
    "edgetam_vision_model": _edgetam,
    "efficientnet": _efficientnet,
    # LW-DETR's default has no projector scale (num_feature_levels is derived from their
    # count, but the dict's own 0 wins), so the detector gets no feature map; the released
    # small model uses one scale, 1.0.
    "lw_detr": _set(projector_scale_factors=[1.0], num_feature_levels=1),
    "eomt_dinov3": _eomt,
    "pp_doclayout_v2": _pp_doclayout_v2,
    "pp_doclayout_v3": _pp_doclayout_x4,
    "pp_doclayout_v4": _pp_doclayout_x4,
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
