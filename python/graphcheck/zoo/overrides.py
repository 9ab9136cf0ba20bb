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
from graphcheck.zoo._util import layer_count
from graphcheck.zoo.catalog import Arch

__all__ = ["DERIVED", "FIXUPS", "PREPARE", "apply_fixups", "drop_derived", "prepare_base"]

Dict = dict[str, Any]


def _gpt_neo(d: Dict, level: str) -> None:
    # attention_types is a run-length list ([[["global", "local"], 12]]) that must cover the layers.
    n = layer_count(d)
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
        n = layer_count(cfg)
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


#: Fields a config's ``__post_init__`` derives from others, by model type: the default's
#: ``to_dict`` keeps their full-size values and ``from_dict`` would set those back over the
#: derivation, so the shrunk dict drops them (:func:`drop_derived`; the vLLM zoo's configs too,
#: where a model sizes its kernels by them: Zamba2's Mamba heads corrupted the heap).
DERIVED: dict[str, tuple[str, ...]] = {
    # The shared attention's and the Mamba heads' widths are derived from the hidden size.
    "zamba2": (
        "attention_hidden_size",
        "attention_head_dim",
        "mamba_headdim",
        "kv_channels",
        "num_query_groups",
    ),
    # MobileBERT's true_hidden_size is the bottleneck's (see its FIXUPS entry).
    "mobilebert": ("true_hidden_size",),
    # The box embedding widths are derived from the hidden size and heads.
    "bros": ("dim_bbox_sinusoid_emb_2d", "dim_bbox_sinusoid_emb_1d", "dim_bbox_projection"),
}


def drop_derived(model_type: str, d: Dict) -> None:
    """Drops from the shrunk dict ``d`` the fields ``model_type``'s config derives (DERIVED)."""
    for key in DERIVED.get(model_type, ()):
        d.pop(key, None)


def _paddleocr_vl(d: Dict, level: str) -> None:
    from graphcheck.zoo.tiny_config import HEAD_DIM, fit_mrope_section

    rope = _text(d).get("rope_parameters")
    if isinstance(rope, dict) and "mrope_section" not in rope:
        rope["mrope_section"] = [16, 24, 24]
        fit_mrope_section(rope, int(_text(d).get("head_dim") or HEAD_DIM))


def _qformer_text(d: Dict, level: str) -> None:
    qformer = d.get("qformer_config")
    if isinstance(qformer, dict):
        qformer["use_qformer_text_input"] = True


def _vision_frames(d: Dict, level: str) -> None:
    vision = d.get("vision_config")
    if isinstance(vision, dict):
        vision["num_frames"] = 2


def _omdet_turbo(d: Dict, level: str) -> None:
    # The default backbone is timm's Swin-T, which timm builds at its own widths (the tiny
    # config does not reach it): the layer norms after it and the encoder's input
    # projections take its three feature maps' channels.
    backbone = d.get("backbone_config")
    if isinstance(backbone, dict) and backbone.get("model_type") == "timm_backbone":
        d["encoder_in_channels"] = [192, 384, 768]
    # The class embeddings (the text width) are wider than the decoder (512 and 256 by
    # default): the decoder builds its task projection only when they differ, and its
    # forward always reads it.
    text = d.get("text_config")
    if isinstance(text, dict):
        text["hidden_size"] = 128
    d["class_embed_dim"] = d["text_projection_in_dim"] = d["text_projection_out_dim"] = 128
    # The decoder takes its top num_queries anchors (900) of the feature maps: a 64-pixel
    # image has 84.
    d["num_queries"] = 16
    # The decoder projects the encoder's outputs, one per feature level, each of its width.
    width = d.get("d_model")  # the encoder_hidden_dim of the attribute map
    levels = d.get("vision_features_channels")
    if isinstance(width, int) and isinstance(levels, list):
        d["vision_features_channels"] = [width] * len(levels)


def _set_sub(key: str, **values: Any) -> Callable[[Dict, str], None]:
    def fixup(d: Dict, level: str) -> None:
        sub = d.get(key)
        if isinstance(sub, dict):
            sub.update(values)

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


def _clvp(d: Dict, level: str) -> None:
    # The speech encoder reads the speech decoder's argmax tokens: released checkpoints give
    # both one vocabulary (8194); the default speech_config keeps the text encoder's 256.
    speech, decoder = d.get("speech_config"), d.get("decoder_config")
    if isinstance(speech, dict) and isinstance(decoder, dict):
        speech["vocab_size"] = decoder.get("vocab_size", speech.get("vocab_size"))
    # The encoders' rotary part is at least 32 wide: heads of 16 cannot hold it.
    for key in ("text_config", "speech_config"):
        sub = d.get(key)
        if isinstance(sub, dict) and isinstance(sub.get("hidden_size"), int):
            sub["num_attention_heads"] = max(1, sub["hidden_size"] // 32)


def _clap(d: Dict, level: str) -> None:
    # The audio Swin's last stage (patch_embeds_hidden_size * 2**(stages - 1)) is the audio
    # width the projection reads: 96 * 8 = 768 = hidden_size in the released checkpoints.
    audio = d.get("audio_config")
    if isinstance(audio, dict) and isinstance(audio.get("depths"), list):
        stages = 2 ** (len(audio["depths"]) - 1)
        audio["patch_embeds_hidden_size"] = max(1, int(audio.get("hidden_size", 64)) // stages)


def _semantic_codec(d: Dict, level: str) -> None:
    # The quantizer reads the concatenated semantic and acoustic features: quantization_dim is
    # their sum (1024 + 1024 = 2048 by default), which shrinking the widths must keep.
    semantic = d.get("semantic_model_config")
    if isinstance(semantic, dict) and isinstance(d.get("hidden_size"), int):
        d["quantization_dim"] = d["hidden_size"] + int(semantic.get("hidden_size", 0))


def _higgs_tokenizer(d: Dict, level: str) -> None:
    # The released tokenizer's DAC hops 960 samples at 24 kHz (25 frames/s), the rate of its
    # HuBERT path (16 kHz / 320, every 2nd frame); the default's [8, 5, 4, 2] (320) gives the
    # acoustic path 1.5x the semantic frames, which do not concatenate.
    acoustic = d.get("acoustic_model_config")
    if isinstance(acoustic, dict):
        acoustic["downsampling_ratios"] = [8, 5, 4, 2, 3]
        acoustic["upsampling_ratios"] = [8, 5, 4, 2, 3]


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
    "clvp": _clvp,
    "clap": _clap,
    "neucodec": _semantic_codec,
    "xcodec2": _semantic_codec,
    # codebook_dim is the acoustic plus the semantic width, derived when None; the default's
    # to_dict carries the full-size sum (256 + 768), which no width rule shrinks.
    "xcodec": _set(codebook_dim=None),
    "higgs_audio_v2_tokenizer": _higgs_tokenizer,
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
    # The rotary embedding falls back to [16, 24, 24] when the rope parameters name no
    # sections (checkpoints do): an explicit one, which the shrinking fits to the head.
    "paddleocr_vl": _paddleocr_vl,
    # A checkpoint's field that the default leaves None; the attention mask reads it.
    "step3p7": _set_text(sliding_window=8),
    # T5 checkpoints set it (the pad id, 0); the classification head shifts input_ids with it.
    "t5": _set(decoder_start_token_id=0),
    # Retrieval checkpoints (blip2-itm-vit-g) feed text through the Q-Former: its layers get
    # the text feed-forward only with this set.
    "Blip2ForImageTextRetrieval": _qformer_text,
    # Its processor samples frames: the image tensor is (batch, frames, channels, h, w), and
    # the inputs make such a video where the vision config counts frames (two here).
    "instructblipvideo": _vision_frames,
    "omdet-turbo": _omdet_turbo,
    # The image embedding is the last EfficientNet block's channels, 320 * width_coefficient
    # (640 by default, the default projection_dim), compared with the projected text: 0.2 makes
    # it the tiny projection width, 64.
    # Its default depth (3.1x) and weights drawn at std 0.02 shrink the activations 20-fold a
    # block: the image embedding underflows to 0 and its normalization gives inf, then NaN
    # logits, which no replay equals. One block per stage, drawn at std 0.1.
    "align": _set_sub(
        "vision_config", width_coefficient=0.2, depth_coefficient=1.0, initializer_range=0.1
    ),
    "perceiver": _set(qk_channels=64, v_channels=64),
    # The four coordinate and two shape embeddings are concatenated to the hidden size
    # (4 * 128 + 2 * 128 = 768 by default): 4 * 10 + 2 * 12 = 64.
    "layoutlmv3": _set(coordinate_size=10, shape_size=12),
    # Six layout embeddings of hidden // 6 each are concatenated into a hidden-wide linear:
    # the hidden size must be a multiple of 6 (and of heads * channel_shrink_ratio, 16).
    "lilt": _set(hidden_size=96),
    # The bottleneck and the embeddings are narrower than the hidden size (128 of 512): the
    # MLM head's extra dense is hidden - embedding wide; true_hidden_size is the bottleneck's.
    "mobilebert": _set(embedding_size=32, intra_bottleneck_size=32),
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


def _vision_start(base: Dict) -> None:
    # The thinker's rope index reads vision_start_token_id, which its config class does not
    # define: the checkpoints' thinker_config sets it (151652). Set before shrinking, so that
    # it is remapped into the tiny vocabulary and the input ids avoid it.
    base.setdefault("vision_start_token_id", 151652)


def _shieldgemma2(base: Dict) -> None:
    # The head reads the logits of "Yes" and "No" at ids its config class does not define
    # (Gemma's 10784 and 3771 by default): set them before shrinking, so that they are
    # remapped into the tiny vocabulary as every special id is.
    base.setdefault("yes_token_index", 10784)
    base.setdefault("no_token_index", 3771)


def _image_token(name: str, value: int) -> Callable[[Dict], None]:
    # The Q-Former models scatter their queries at image (video) tokens whose id the default
    # leaves None and every checkpoint sets: set before shrinking, so that it is remapped
    # into the tiny vocabulary and the prompt's placeholders (_inputs_prompts) can use it.
    def prepare(base: Dict) -> None:
        if base.get(name) is None:
            base[name] = value

    return prepare


PREPARE: dict[str, Callable[[Dict], None]] = {
    "blip-2": _image_token("image_token_index", 50265),  # Salesforce/blip2-opt-2.7b
    "instructblip": _image_token("image_token_index", 32001),  # instructblip-vicuna-7b
    "instructblipvideo": _image_token("video_token_index", 32001),
    "shieldgemma2": _shieldgemma2,
    "dbrx": _dbrx,
    "qwen2_5_omni_thinker": _vision_start,
    "qwen3_omni_moe_thinker": _vision_start,
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
    """Runs the fixups of ``arch`` (by class name, then model type) on the shrunk dict ``d``.

    Then drops the fields its model type's config derives (:data:`DERIVED`).
    """
    for key in (arch.class_name, arch.model_type):
        fixup = FIXUPS.get(key)
        if fixup is not None:
            fixup(d, level)
    drop_derived(arch.model_type, d)
