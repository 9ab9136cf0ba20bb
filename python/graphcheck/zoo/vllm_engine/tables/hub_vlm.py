"""Config table: multimodal architectures whose hub class vLLM reads beside its towers' dicts.

Each entry is the hub's (or vLLM's own) config at the zoo's tiny sizes: the language model's
fields (at the top level or as ``text_config``) and the vision or audio tower's dict in the
names vLLM's tower reads, one layer of width 64 over 32-pixel images of 16-pixel patches where
the tower takes its sizes from the config (Molmo's is vLLM's constant). Split from
:mod:`.multimodal` to keep each module small.
"""

from __future__ import annotations

from graphcheck.zoo.vllm_engine.tables import Dict, Entry
from graphcheck.zoo.vllm_engine.tables.moe import TABLE as MOE
from graphcheck.zoo.vllm_engine.tables.multimodal import tiny_text
from graphcheck.zoo.vllm_engine.tables.text import TABLE as TEXT
from graphcheck.zoo.vllm_engine.tables.towers import PERCEPTION_ENCODER, TINY_VIT

_M = "vllm/model_executor/models/"


def _moondream3(d: Dict) -> None:
    # Moondream 3's checkpoints hold one "config" dict in the model's own names, which vLLM's
    # Moondream3Config parses into its text and vision configs
    # (vllm/transformers_utils/configs/moondream3.py:110-138): four experts after a dense
    # first layer, full multi-head attention as the checkpoints' (the tau scaling is sized
    # for it: moondream3.py:660); a one-layer tower over 32-pixel crops of 16-pixel patches.
    for key in ("text_config", "vision_config"):
        d.pop(key, None)
    moe = {"start_layer": 1, "n_experts": 4, "n_experts_per_tok": 2, "expert_inner_dim": 128}
    text = {"dim": 64, "ff_dim": 128, "n_layers": 2, "vocab_size": 512, "max_context": 128,
            "n_heads": 2, "n_kv_heads": 2, "prefix_attn": 8, "moe": moe}  # fmt: skip
    vision = {"enc_dim": 64, "enc_patch_size": 16, "enc_n_layers": 1, "enc_ff_dim": 128,
              "enc_n_heads": 2, "proj_inner_dim": 128, "crop_size": 32, "max_crops": 1}  # fmt: skip
    d["config"] = {"text": text, "vision": vision}


_MOONDREAM3 = Entry(
    "vllm/transformers_utils/configs/moondream3.py, " + _M + "moondream3.py",
    fix=_moondream3,
    saved_as={"text_config": "", "vision_config": ""},
)

#: Keye's SigLIP tower (keye.py:760-800, 943-945): the tiny ViT, its patches merged 2x2.
_KEYE_VISION = {"model_type": "siglip_vision_model", **TINY_VIT, "spatial_merge_size": 2}


def _keye(source: str) -> Entry:
    """Keye: the hub's class, a Qwen3 language model at the top level.

    keye.py:1231-1235 builds Qwen3ForCausalLM off it, beside a SigLIP vision config read by
    attribute.
    """
    return Entry(
        _M + source,
        base="qwen3",
        remote="KeyeConfig",
        model_type="keye",
        fields={"vision_config": _KEYE_VISION},
    )


def _step_vl(d: Dict) -> None:
    # StepVL: the hub's class, a Qwen3 language model named in text_config (step_vl.py:525
    # builds it off text_config) beside a Perception Encoder.
    d["text_config"] = {**tiny_text("qwen3"), "architectures": ["Qwen3ForCausalLM"]}
    d["vision_config"] = dict(PERCEPTION_ENCODER)


def _openpangu_vl(d: Dict) -> None:
    # openPangu-VL: the hub's class, openPangu's embedded language model at the top level
    # (openpangu_vl.py:860-864) beside a Qwen2.5-VL vision tower read by attribute
    # (openpangu_vl.py:850-856, 871-): transformers' tiny one.
    d["vision_config"] = tiny_text("qwen2_5_vl_vision")


TABLE: dict[str, Entry] = {
    "OpenPanguVLForConditionalGeneration": Entry(
        _M + "openpangu_vl.py",
        base="llama",
        remote="OpenPanguVLConfig",
        model_type="openpangu_vl",
        fix=_openpangu_vl,
    ),
    "StepVLForConditionalGeneration": Entry(
        _M + "step_vl.py",
        base="llama",
        remote="StepVLConfig",
        model_type="step_vl",
        fields={"projector_bias": False, "image_token_id": 510},
        fix=_step_vl,
        whole=True,
    ),
    "KeyeForConditionalGeneration": _keye("keye.py"),
    "KeyeVL1_5ForConditionalGeneration": _keye("keye_vl1_5.py, keye.py"),
    # Step 3's VL model builds its language model off text_config by the architecture the
    # checkpoint names there (step3_vl.py, init_vllm_registered_model): Step 3's text model.
    "Step3VLForConditionalGeneration": Entry(
        _M + "step3_vl.py, vllm/transformers_utils/configs/step3_vl.py",
        text={**MOE["Step3TextForCausalLM"].fields, "architectures": ["Step3TextForCausalLM"]},
        whole=True,
    ),
    # MiMo-V2-Omni: MiMo-V2-Flash's language model at the top level (mimo_v2_omni.py:1286)
    # beside the vision tower's dict, which vLLM parses (Mimo_VLVisionConfig,
    # transformers_utils/configs/mimo_v2_omni.py): one full-attention layer of two 32-wide
    # heads over 16-pixel patches merged 2x2; no audio encoder (it is optional: :1275). Its
    # MTP drafter reads the image id (v1/spec_decode/llm_base_proposer.py:1372).
    "MiMoV2OmniForCausalLM": Entry(
        _M + "mimo_v2_omni.py, vllm/transformers_utils/configs/mimo_v2_omni.py",
        fields={
            **TEXT["MiMoV2FlashForCausalLM"].fields,
            "image_token_id": 510,
            "vision_config": {
                "depth": 1,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_heads": 2,
                "num_key_value_heads": 2,
                "kv_channels": 32,
                "qk_channels": 32,
                "out_hidden_size": 64,
                "fullatt_block_indexes": [0],
                "use_sink": False,
            },
        },
        whole=True,
    ),
    # dots.ocr: dots_ocr.py:124 checks the config class by name (the hub's DotsOCRConfig,
    # vLLM's copy in transformers_utils/configs/dotsocr.py is registered under no model
    # type); Qwen2's fields with a one-layer DotsViT of 16-pixel patches merged 2x2.
    "DotsOCRForCausalLM": Entry(
        _M + "dots_ocr.py, vllm/transformers_utils/configs/dotsocr.py",
        base="qwen2",
        remote="DotsOCRConfig",
        model_type="dots_ocr",
        fields={
            "image_token_id": 508,
            "video_token_id": 509,
            "vision_config": {
                "model_type": "dots_vit",
                "embed_dim": 64,
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "num_channels": 3,
                "patch_size": 16,
                "spatial_merge_size": 2,
                "temporal_patch_size": 1,
                "rms_norm_eps": 1e-5,
                "use_bias": False,
                "post_norm": True,
            },
        },
    ),
    "Moondream3ForCausalLM": _MOONDREAM3,
    "HfMoondream": _MOONDREAM3,
    # Molmo: the hub's MolmoConfig, a flat language model (molmo.py:440-842, 1347-1356); the
    # vision tower is vLLM's constant (VisionBackboneConfig, molmo.py:115-126).
    "MolmoForCausalLM": Entry(
        _M + "molmo.py",
        base="llama",
        remote="MolmoConfig",
        model_type="molmo",
        fields={
            "embedding_size": 512,
            "layer_norm_type": "rms",
            "layer_norm_eps": 1e-6,
            "norm_after": False,
            "attention_layer_norm": False,
            "qkv_bias": True,
            "clip_qkv": None,
            "weight_tying": False,
        },
    ),
    # MiniCPM-V 2.5 (minicpmv.py:471 reads the version; 2.5 is Llama with an Idefics2 tower
    # and a resampler of query_num queries): the hub's class.
    "MiniCPMV": Entry(
        _M + "minicpmv.py",
        base="llama",
        remote="MiniCPMVConfig",
        model_type="minicpmv",
        fields={
            "version": 2.5,
            # The resampler has hidden_size // 128 heads (minicpmv.py:2086): one.
            "hidden_size": 128,
            "query_num": 4,
            "drop_vision_last_layer": False,
            "vision_config": {"model_type": "idefics2_vision", **TINY_VIT},
        },
    ),
    # MiniCPM-o 2.6 (minicpmo.py:1011-1041 picks the class by version): MiniCPM-V 2.6 over
    # Qwen2 with the same tower and resampler, and a one-layer Whisper encoder whose output
    # is pooled by audio_pool_step (minicpmo.py:735-800).
    "MiniCPMO": Entry(
        _M + "minicpmo.py, minicpmv.py",
        base="qwen2",
        remote="MiniCPMOConfig",
        model_type="minicpmo",
        fields={
            "version": "2.6",
            "hidden_size": 128,
            "query_num": 4,
            "drop_vision_last_layer": False,
            "vision_config": {"model_type": "idefics2_vision", **TINY_VIT},
            "audio_config": {
                "model_type": "whisper",
                "d_model": 64,
                "encoder_layers": 1,
                "encoder_attention_heads": 2,
                "encoder_ffn_dim": 128,
                "num_mel_bins": 80,
                "max_source_positions": 1500,
            },
            "audio_pool_step": 2,
            "audio_chunk_length": 1.0,
        },
    ),
}
