"""Config table: vision-language models whose checkpoints' configs vLLM reads field by field.

Each entry is the checkpoint's config at the zoo's tiny sizes where transformers' class (or
vLLM's) lacks what vLLM's model code reads, or holds it under other names: the hub's flat
ERNIE 4.5 VL and Molmo 2 schemas, Granite 4 Vision's deep-stack layer maps, Ling 2.5 VL's
layer schedule, Kimi-K2.5's image processor file. Split from :mod:`.multimodal` to keep each
module small.
"""

from __future__ import annotations

from typing import Any

from graphcheck.zoo.vllm_engine.tables import NO_PREFIX_CACHING, Dict, Entry, text_of
from graphcheck.zoo.vllm_engine.tables.moe import TABLE as MOE
from graphcheck.zoo.vllm_engine.tables.multimodal import tiny_text

_M = "vllm/model_executor/models/"


def _bailing_v3_vl(d: Dict) -> None:
    # vLLM's BailingMoeV3VLConfig derives layer_types from layer_group_size and refuses a
    # written list that differs (transformers_utils/configs/bailing_moe_v3_vl.py:35-50, 216):
    # one linear-attention layer, then full attention, over the two tiny layers.
    text = text_of(d)
    group = int(text["layer_group_size"])
    n = int(text["num_hidden_layers"])
    text["layer_types"] = [
        "full_attention" if (i + 1) % group == 0 else "linear_attention" for i in range(n)
    ]
    text.pop("layers_block_type", None)
    # The composite refuses a text mrope_section other than its own, and one not summing to
    # half the rotary width (bailing_moe_v3_vl.py:17-31, 305-315): the shrink scaled the
    # text's down, while the tiny model keeps the checkpoints' 64-wide rotary part, which the
    # composite's own sections ([12, 10, 10]) fit. The text config takes them from it.
    text.pop("mrope_section", None)
    (text.get("rope_parameters") or {}).pop("mrope_section", None)


#: ERNIE 4.5 VL's hub config is flat (ernie45_vl_moe.py:204-300, 396-446): per-modality
#: lists [text, vision] of experts, their widths and their layer ranges, a 3-D RoPE whose
#: temporal share (freq_allocation) fits the 32-wide heads (ernie45_vl_moe.py:151-153); the
#: resampler merges 2x2 patches and two frames (ernie45_vl.py:697-720, 1411-1415) of a
#: one-layer DFN ViT (ernie45_vl.py:372-379).
_ERNIE_VL: dict[str, Any] = {
    "moe_num_experts": [4, 4],
    "moe_k": 2,
    "moe_intermediate_size": [128, 128],
    "moe_num_shared_experts": 1,
    "moe_layer_start_index": [1, 1],
    "moe_layer_end_index": [1, 1],
    "moe_layer_interval": 1,
    "use_bias": False,
    "freq_allocation": 8,
    "rope_3d": True,
    "rope_theta": 500000.0,
    "pixel_hidden_size": 64,
    "spatial_conv_size": 2,
    "temporal_conv_size": 2,
    "use_temporal_conv": True,
    "im_patch_id": 500,
    "image_start_token_id": 501,
    "image_end_token_id": 502,
    "video_start_token_id": 503,
    "video_end_token_id": 504,
    "vision_config": {
        "depth": 1,
        "embed_dim": 64,
        "hidden_size": 64,
        "num_heads": 2,
        "mlp_ratio": 2.0,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "in_channels": 3,
    },
}


def _granite4_vision(d: Dict) -> None:
    # Granite 4 Vision's projectors (granite4_vision.py:70-160, 487-566): one QFormer per
    # (vision layer, LLM layer) pair of deepstack_layer_map and per spatial target layer,
    # over a 4x4 patch grid cut into one 4x4 window of 2x2 queries (downsample_rate "q/w");
    # the spatial projectors sample 2x2 blocks. The LLM layers are the tiny model's two, of
    # Granite (granite4_vision.py:5, 300: GraniteForCausalLM reads residual_multiplier).
    d["text_config"] = tiny_text("granite")
    vision = d["vision_config"]
    vision.update(image_size=64, patch_size=16)
    d["downsample_rate"] = "2/4"
    d["deepstack_layer_map"] = [[-1, 0]]
    d["spatial_vision_layer"] = -1
    d["spatial_target_layers"] = [1]
    d["image_grid_pinpoints"] = [[64, 128], [128, 64], [128, 128]]
    # vLLM builds each QFormer with the checkpoints' fixed sizes, not the config's
    # (granite4_vision.py:139-148); transformers builds it from qformer_config, which the
    # reload checkpoint is written by: the same sizes there.
    width = int(vision.get("hidden_size", 64))
    d["qformer_config"] = {
        **d.get("qformer_config", {}),
        "hidden_size": width,
        "encoder_hidden_size": width,
        "num_attention_heads": max(width // 64, 1),
        "intermediate_size": 3072,
        "num_hidden_layers": 1,
        "cross_attention_frequency": 1,
        "max_position_embeddings": 2048,
        "use_qformer_text_input": False,
    }


def _kanana_v(d: Dict) -> None:
    # Kanana-V (kanana_v.py:170-290, 596-611, 709): a Qwen2-VL vision encoder without its merger,
    # a dynamic C-Abstractor (timm RegNet stages around a 2x2 patch merge, a learned position
    # embedding of pos_emb_size patches, an MLP readout to the language model's width) read
    # by attribute from projector_config, and a Llama language model as text_config.
    vision = tiny_text("qwen2_vl_vision")
    text = tiny_text("llama")
    d["vision_config"] = vision
    d["text_config"] = text
    d["projector_config"] = {
        "depth": 1,
        "encoder_hidden_size": vision["embed_dim"],
        "hidden_size": 64,
        "output_hidden_size": text["hidden_size"],
        "mlp_depth": 2,
        "merge_size": 2,
        "pos_emb": True,
        "pos_emb_size": 16,
        "feature_layer_index": -1,
    }


#: Kimi-K2.5's image processor (vLLM's KimiK25FusedVisionProcessor reads media_proc_cfg,
#: transformers_utils/processors/kimi_k25_vision_fused.py:177-231): the checkpoint's values,
#: its patch limits cut to the zoo's token budget.
_KIMI_PREPROCESSOR: dict[str, Any] = {
    "media_proc_cfg": {
        "patch_size": 14,
        "merge_kernel_size": 2,
        "temporal_merge_kernel_size": 4,
        "in_patch_limit": 64,
        "in_patch_limit_each_frame": 64,
        "in_patch_limit_video": None,
        "patch_limit_on_one_side": 16,
        "fixed_output_tokens": None,
        "image_mean": [0.5, 0.5, 0.5],
        "image_std": [0.5, 0.5, 0.5],
    }
}

#: Molmo 2's hub config (molmo2.py:165-260, 1144-1160, 2351-2390): the language model as
#: text_config in vLLM's TextConfig names, the ViT and its pooling adapter as dicts read by
#: attribute, and the image words it looks up by id (molmo2.py:1313-1400, 2179-2186).
_MOLMO2_TEXT: dict[str, Any] = {
    "model_type": "molmo2_text",
    "hidden_size": 64,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "head_dim": 32,
    "vocab_size": 512,
    "additional_vocab_size": 128,
    "qkv_bias": True,
    "num_hidden_layers": 2,
    "intermediate_size": 128,
    "hidden_act": "silu",
    "max_position_embeddings": 128,
    "rope_theta": 1000000.0,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
    "use_qk_norm": False,
    "qk_norm_type": "olmo",
    "layer_norm_eps": 1e-6,
    "norm_after": False,
    "rope_scaling_layers": None,
    "tie_word_embeddings": False,
}

_MOLMO2: dict[str, Any] = {
    "text_config": _MOLMO2_TEXT,
    "vit_config": {
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "hidden_act": "gelu_pytorch_tanh",
        "layer_norm_eps": 1e-6,
        "image_default_input_size": [32, 32],
        "image_patch_size": 16,
        "image_num_pos": 4,
    },
    "adapter_config": {
        "vit_layers": [-1, -2],
        "pooling_attention_mask": False,
        "hidden_size": 64,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "head_dim": 32,
        "hidden_act": "silu",
        "intermediate_size": 128,
        "text_hidden_size": 64,
    },
    "image_patch_id": 500,
    "image_col_id": 501,
    "image_start_token_id": 502,
    "image_end_token_id": 503,
    "low_res_image_start_token_id": 504,
    "image_low_res_id": 505,
    "frame_start_token_id": 506,
    "frame_end_token_id": 507,
    "tie_word_embeddings": False,
}

TABLE: dict[str, Entry] = {
    # Ling 2.5 VL: Ling 2.5's MoE language model (bailing_moe_v3.py, the text entry's fields)
    # under vLLM's composite config, beside a Qwen3-VL tower (bailing_moe_v3_vl.py:215-240).
    "BailingMoeV3VLForConditionalGeneration": Entry(
        _M + "bailing_moe_v3_vl.py, vllm/transformers_utils/configs/bailing_moe_v3_vl.py",
        text=MOE["BailingMoeV3ForCausalLM"].fields,
        fix=_bailing_v3_vl,
        engine=NO_PREFIX_CACHING,  # a hybrid of MLA and linear attention
    ),
    # Cohere Compass ties its LM head to the embeddings and asserts it (cohere_compass.py:2326).
    "CohereCompassForConditionalGeneration": Entry(
        _M + "cohere_compass.py", fields={"tie_word_embeddings": True}
    ),
    "Ernie4_5_VLMoeForConditionalGeneration": Entry(
        _M + "ernie45_vl.py, ernie45_vl_moe.py",
        base="ernie4_5_moe",
        remote="Ernie4_5_VLMoeConfig",
        model_type="ernie4_5_moe_vl",
        fields=_ERNIE_VL,
    ),
    "Granite4VisionForConditionalGeneration": Entry(
        _M + "granite4_vision.py", fix=_granite4_vision
    ),
    # Kimi-K2.5 and K3 load vLLM's image processor from the checkpoint's file, and resolve
    # the image word on the tokenizer (kimi_k25.py:117-160; models/kimi_k3/common/
    # mm_preprocess.py:98-130).
    "KimiK25ForConditionalGeneration": Entry(
        _M + "kimi_k25.py",
        files={"preprocessor_config.json": _KIMI_PREPROCESSOR},
        tokens={"media_token": "<|media_pad|>"},
    ),
    "KimiK3ForConditionalGeneration": Entry(
        "vllm/models/kimi_k3/common/mm_preprocess.py",
        files={"preprocessor_config.json": _KIMI_PREPROCESSOR},
        tokens={"media_token": "<|media_pad|>"},
    ),
    "KananaVForConditionalGeneration": Entry(
        _M + "kanana_v.py",
        base="llama",
        remote="KananaVConfig",
        model_type="kanana_v",
        objects=("projector_config",),
        fix=_kanana_v,
    ),
    "Molmo2ForConditionalGeneration": Entry(
        _M + "molmo2.py",
        base="llama",
        remote="Molmo2Config",
        model_type="molmo2",
        objects=("vit_config", "adapter_config"),
        fields=_MOLMO2,
    ),
}
