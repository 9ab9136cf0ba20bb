"""Config table: multimodal architectures whose configs live on the hub.

The InternVL family (InternVL chat, H2OVL, Skywork-R1V, NVLM-D, Llama-Nemotron VL):
the hub's ``InternVLChatConfig`` holds an InternViT vision config (``intern_vit.py``
reads the fields of :data:`~graphcheck.zoo.vllm_engine.tables.towers.INTERN_VIT`) and the
language model's config as ``llm_config`` (vLLM reads it as ``text_config``), with the image
tiling the processor and the projector read (``force_image_size``, ``downsample_ratio``,
``ps_version``). The vision tower is tiny: 32-pixel images of 16-pixel patches, one
layer. Run language-model-only, vLLM still builds the config and the projector's
shapes from it.
"""

from __future__ import annotations

from typing import Any

from graphcheck.zoo.vllm_engine.tables import (
    GEMMA3_TOKENS,
    GEMMA4_SOFT_TOKENS,
    QWEN_OMNI_TOKENS,
    WHISPER_FEATURES,
    Dict,
    Entry,
    merge,
    text_of,
)
from graphcheck.zoo.vllm_engine.tables.moe import MOBIUS_TEXT
from graphcheck.zoo.vllm_engine.tables.text import INKLING_TOKENS
from graphcheck.zoo.vllm_engine.tables.towers import (
    EVA2CLIP,
    INTERN_VIT,
    SIGLIP2_NAVIT,
    SIGLIP_VISION,
)

_M = "vllm/model_executor/models/"

#: The chat config around it (internvl.py): one 32-pixel tile, pixel shuffle by half.
_INTERN_CHAT: dict[str, Any] = {
    "force_image_size": 32,
    "downsample_ratio": 0.5,
    "ps_version": "v2",
    "select_layer": -1,
    "template": "internvl2_5",
    "dynamic_image_size": False,
    "use_thumbnail": False,
    "min_dynamic_patch": 1,
    "max_dynamic_patch": 1,
}


def tiny_text(model_type: str, vllm: bool = False, **fields: Any) -> Dict:
    """The tiny config dict of ``model_type``'s class (a language model inside a composite).

    The class is transformers', or with ``vllm`` vLLM's own (where the two name fields apart).
    """
    from transformers import CONFIG_MAPPING

    from graphcheck.zoo.tiny_config import shrink
    from graphcheck.zoo.vllm_engine.configs import VLLM_SIZES, fit_for_vllm

    if vllm:
        from vllm.transformers_utils.config import _CONFIG_REGISTRY

        cls = _CONFIG_REGISTRY[model_type]
    else:
        cls = CONFIG_MAPPING[model_type]
    text = shrink(cls().to_dict(), "tiny", sizes=VLLM_SIZES)
    text.update(fields)
    fit_for_vllm(text)
    return text


def _intern_vl(text_type: str, vision: Dict | None = None) -> Any:
    """A fix: the vision config (InternViT unless given), and ``text_type``'s text config."""

    def fix(d: Dict) -> None:
        d["vision_config"] = dict(INTERN_VIT if vision is None else vision)
        d["text_config"] = tiny_text(text_type)
        merge(d, _INTERN_CHAT)

    return fix


def _language_config(d: Dict) -> None:
    # DeepSeek-VL2's language model is a DeepSeek-V2 config under "language_config"; the
    # default leaves it empty. The Tiny checkpoints use plain multi-head attention (no MLA).
    d["language_config"] = tiny_text("deepseek_v2", use_mla=False)


def _chat(
    source: str,
    remote: str,
    model_type: str,
    text_type: str = "qwen2",
    vision: Dict | None = None,
    whole: bool = False,
) -> Entry:
    return Entry(
        _M + source,
        base="llama",
        remote=remote,
        model_type=model_type,
        fix=_intern_vl(text_type, vision),
        whole=whole,
    )


def _deepseek_vl2(source: str, base: str = "deepseek_vl_v2", **engine: Any) -> Entry:
    """A model on vLLM's DeepSeek-VL2 config class (its language model under language_config).

    ``base``: the model type of the class, or of vLLM's subclass of it (Unlimited-OCR's);
    ``engine``: the entry's engine arguments.
    """
    return Entry(
        _M + source + ", vllm/transformers_utils/configs/deepseek_vl2.py",
        base=base,
        fix=_language_config,
        saved_as={"text_config": "language_config"},
        # The class's default tile_tag is the string "tile_tag"; checkpoints say "2D".
        fields={"tile_tag": "2D"},
        engine=engine,
    )


# Muse Glimmer's vision tower checks its output width against the pixel shuffle
# (muse_glimmer.py:760): width 64 times the 2x2 merge kernel.
_MUSE_GLIMMER = Entry(_M + "muse_glimmer.py", fields={"vision_config": {"output_dim": 256}})


def _emu3_vocabulary(d: Dict) -> None:
    # Emu3's model maps its VQ codes to text ids through the checkpoint's vocabulary_map
    # (transformers' Emu3ImageVocabularyMapping, which the Transformers backend builds): one
    # "<|visual token N|>" per code, the end-of-line word and "<image>" (the zoo tokenizer's
    # top id).
    vocab = int(text_of(d).get("vocab_size") or 512)
    codes = int((d.get("vq_config") or {}).get("codebook_size") or 64)
    mapping = {f"<|visual token {i:06d}|>": vocab - 128 + i for i in range(codes)}
    d["vocabulary_map"] = {**mapping, "<|extra_200|>": vocab - 129, "<image>": vocab - 1}


def _omni(processor: str) -> dict[str, Any]:
    """An Entry's arguments: served whole, with transformers' ``processor`` and Qwen's words.

    transformers names no processor for the thinker's own model type.
    """
    return {"whole": True, "processor": processor, "processor_class": True,
            "tokens": QWEN_OMNI_TOKENS}  # fmt: skip


def _towers_always(**types: str) -> Any:
    """A fix: tiny sub-configs of the given model types in place of the default's."""

    def fix(d: Dict) -> None:
        for key, model_type in types.items():
            d[key] = tiny_text(model_type)

    return fix


def _towers(**types: str) -> Any:
    """A fix: tiny sub-configs of the given model types where the default leaves them None."""

    def fix(d: Dict) -> None:
        for key, model_type in types.items():
            if not isinstance(d.get(key), dict):
                d[key] = tiny_text(model_type)

    return fix


def _gemma4_unified(d: Dict) -> None:
    _towers(vision_config="gemma4_unified_vision", audio_config="gemma4_unified_audio")(d)
    # vLLM reads the tower's num_soft_tokens where Gemma 4 reads default_output_length
    # (gemma4_unified.py:146-167); the checkpoints' configs carry it.
    d["vision_config"]["num_soft_tokens"] = GEMMA4_SOFT_TOKENS


#: Fun-Audio-Chat's speech tokenizer (the checkpoint's ``speech_tokenizer/``): vLLM pads each
#: audio's frames with its pad word and embeds the ids as codes of the discrete tower
#: (funaudiochat.py:645-670), so the pad's id is one of the tower's codes (0).
_AUDIO_PAD = "<|audio_pad|>"
_SPEECH_TOKENIZER: dict[str, Any] = {
    "version": "1.0",
    "truncation": None,
    "padding": None,
    "added_tokens": [
        {
            "id": 0,
            "content": _AUDIO_PAD,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
    ],
    "normalizer": None,
    "pre_tokenizer": None,
    "post_processor": None,
    "decoder": None,
    "model": {"type": "WordLevel", "vocab": {_AUDIO_PAD: 0, "<unk>": 1}, "unk_token": "<unk>"},
}


# The Transformers backend's multimodal classes wrap a transformers vision-language model
# and read its processor (transformers_utils/processor.py:274 refuses a bare tokenizer):
# LLaVA's class, whose processor transformers makes from its CLIP image processor.
_TRANSFORMERS_MM = Entry(_M + "transformers/multimodal.py", base="llava")


def _ovis(text_type: str) -> Entry:
    """Ovis 2.5 / 2.6: the hub's config over ``text_type``.

    vLLM's processor reads Qwen2-VL's image processor
    (transformers_utils/processors/ovis2_5.py) while the engine starts.
    """

    def fix(d: Dict) -> None:
        d["text_config"] = tiny_text(text_type)
        d["vit_config"] = dict(SIGLIP2_NAVIT)

    return Entry(
        _M + "ovis2_5.py, siglip2navit.py",
        base="llama",
        remote="Ovis2_5_Config",
        model_type="ovis2_5",
        processor="qwen2_vl",
        # VisualTokenizer's head is visual_vocab_size less the four indicator ids wide.
        fields={"visual_vocab_size": 68, "hidden_size": 64},
        fix=fix,
    )


TABLE: dict[str, Entry] = {
    # Phi-4 with a SigLIP2 tower (phi4siglip.py:242-251): the tower's dict, the projector's
    # input width; two tower layers (it drops the last, layer_idx -2).
    "Phi4ForCausalLMV": Entry(
        _M + "phi4siglip.py",
        base="phi3",
        fields={
            "mm_hidden_size": 64,
            "vision_config": {
                "hidden_size": 64,
                "intermediate_size": 128,
                "num_attention_heads": 2,
                "num_hidden_layers": 2,
                "patch_size": 16,
                "num_patches": 16,
            },
        },
    ),
    # Phi-3-vision: Phi-3's config with the hub's image-embedding dicts (phi3v.py:103-208);
    # the CLIP ViT-L tower is vLLM's constant, cut to its first layer by layer_idx 0.
    "Phi3VForCausalLM": Entry(
        _M + "phi3v.py",
        base="phi3",
        fields={
            "img_processor": {
                "layer_idx": 0,
                "image_dim_out": 1024,
                "num_img_tokens": 144,
                "type_feature": "patch",
            },
            "embd_layer": {
                "embedding_cls": "image",
                "use_hd_transform": True,
                "with_learnable_separator": True,
                "hd_transform_order": "sub_glb",
            },
        },
    ),
    # GLM-4V is ChatGLM's config (glm4v.py:401 asks for ChatGLMConfig) with its tower.
    "GLM4VForCausalLM": Entry(
        _M + "glm4v.py, chatglm.py",
        base="chatglm",
        fields={
            "original_rope": True,
            "tie_word_embeddings": False,
            "vision_config": EVA2CLIP,
            "boi_token_id": 509,
            "eoi_token_id": 510,
        },
    ),
    "InklingForConditionalGeneration": Entry(
        "vllm/renderers/inkling_encoding.py", tokens=INKLING_TOKENS
    ),
    # transformers' processors of their own model types, which vLLM loads while the engine
    # starts even for the language model alone (transformers_utils/processor.py:239).
    # Served by the Transformers backend (registry.py:731-738), with the tokenizer words
    # their processors read.
    "Emu3ForConditionalGeneration": Entry(
        _M + "transformers/multimodal.py",
        processor="emu3",
        processor_class=True,
        tokens={
            "image_token": "<image>",
            "boi_token": "<|image start|>",
            "eoi_token": "<|image end|>",
            "image_wrapper_token": "<|image token|>",
            "eof_token": "<|extra_201|>",
        },
        fix=_emu3_vocabulary,
    ),
    "HunYuanVLForConditionalGeneration": Entry(
        _M + "transformers/multimodal.py",
        processor="hunyuan_vl",
        processor_class=True,
        tokens={
            "image_token": "<image>",
            "image_start_token": "<img>",
            "image_end_token": "</img>",
        },
        # The checkpoints' multimodal RoPE: four axes over half the head (32), which the
        # text model's rotary embedding reads (transformers' modeling_hunyuan_vl.py:134).
        text={"rope_parameters": {"mrope_section": [4, 4, 4, 4]}},
    ),
    "Ovis2_5": _ovis("qwen3"),
    "Ovis2_6ForCausalLM": _ovis("qwen3"),
    "Ovis2_6_MoeForCausalLM": _ovis("qwen3_moe"),
    "TransformersMultiModalForCausalLM": _TRANSFORMERS_MM,
    "TransformersMultiModalEmbeddingModel": _TRANSFORMERS_MM,
    # The MoE class asserts experts in the text model (transformers/moe.py:185): LLaVA over
    # a tiny Qwen3-MoE language model.
    "TransformersMultiModalMoEForCausalLM": Entry(
        _M + "transformers/multimodal.py, transformers/moe.py",
        base="llava",
        fix=_towers_always(text_config="qwen3_moe"),
    ),
    # The classifier is read off AutoModelForSequenceClassification's class of the config
    # (transformers/pooling.py:79), which LLaVA has none of; Gemma 3's composite has one.
    "TransformersMultiModalForSequenceClassification": Entry(
        _M + "transformers/multimodal.py, transformers/pooling.py",
        base="gemma3",
        tokens=GEMMA3_TOKENS,
    ),
    # Gemma 4's default config has no vision or audio config; the checkpoints have both.
    "Gemma4UnifiedForConditionalGeneration": Entry(_M + "gemma4_unified.py", fix=_gemma4_unified),
    "Qwen3OmniMoeForConditionalGeneration": Entry(
        _M + "qwen3_omni_moe_thinker.py",
        fields={
            "thinker_config": {
                "vision_config": {"image_size": 64, "apply_vit_abs_pos_embed": True},
                "text_config": {"tie_word_embeddings": False},
            }
        },
        **_omni("qwen3_omni_moe"),
    ),
    # EXAONE 4.5's MTP layers read the vocabulary off the composite's top level
    # (exaone4_5_mtp.py:55), where transformers' class keeps none: the text model's.
    "Exaone4_5_ForConditionalGeneration": Entry(
        _M + "exaone4_5_mtp.py",
        fix=lambda d: d.update(vocab_size=text_of(d)["vocab_size"]),
        whole=True,
    ),
    # Fun-Audio-Chat's discrete audio tower embeds codebook_size codes of the language model's
    # width, padded with pad_token_id (funaudiochat.py:248-461); the class leaves both unset.
    # Served whole, vLLM's processing (funaudiochat.py:517-690) loads the checkpoint's Whisper
    # feature extractor and its speech tokenizer (a subfolder), and finds the dummy text's
    # audio words in the tokenizer, the placeholder by the config's audio_token_index.
    "FunAudioChatForConditionalGeneration": Entry(
        _M + "funaudiochat.py, vllm/transformers_utils/configs/funaudiochat.py",
        fields={"audio_config": {"codebook_size": 64, "pad_token_id": 0, "output_dim": 64}},
        whole=True,
        words=("<|audio_bos|>", "<|audio_eos|>"),
        token_ids={"audio_token_index": "<|AUDIO|>"},
        files={
            "preprocessor_config.json": WHISPER_FEATURES,
            "speech_tokenizer/tokenizer.json": _SPEECH_TOKENIZER,
            "speech_tokenizer/tokenizer_config.json": {
                "pad_token": _AUDIO_PAD,
                "unk_token": "<unk>",
            },
        },
    ),
    # vLLM's UltravoxConfig keeps its language model as wrapped_model_config and reads the
    # checkpoints' text_config (transformers_utils/configs/ultravox.py): saved under that name.
    "UltravoxModel": Entry(
        _M + "ultravox.py, vllm/transformers_utils/configs/ultravox.py",
        fields={"vocab_size": 512},
        saved_as={"wrapped_model_config": "text_config"},
    ),
    "Qwen2_5OmniModel": Entry(
        _M + "qwen2_5_omni_thinker.py", base="qwen2_5_omni", **_omni("qwen2_5_omni")
    ),
    "MuseGlimmerForCausalLM": _MUSE_GLIMMER,
    "MuseGlimmerForConditionalGeneration": _MUSE_GLIMMER,
    # Served whole: vLLM's own processor (internvl.py), the tokenizer's <img> words.
    "InternVLChatModel": _chat("internvl.py", "InternVLChatConfig", "internvl_chat", whole=True),
    "H2OVLChatModel": _chat("h2ovl.py", "H2OVLChatConfig", "h2ovl_chat", "llama"),
    "SkyworkR1VChatModel": _chat("skyworkr1v.py", "SkyworkChatConfig", "skywork_chat", whole=True),
    "NVLM_D": _chat("nvlm_d.py", "NVLM_D_Config", "NVLM_D", "qwen2", whole=True),
    # vLLM's own config classes, under a model type the registry's module name does not give.
    "DeepseekVLV2ForCausalLM": _deepseek_vl2("deepseek_vl2.py"),
    "DeepseekOCRForCausalLM": _deepseek_vl2("deepseek_ocr.py"),
    # Its config hook sets the vision encoder's attention to FLASH_ATTN unless the user names
    # one (models/config.py:205-207); the CPU platform's is TORCH_SDPA.
    "UnlimitedOCRForCausalLM": _deepseek_vl2(
        "unlimited_ocr.py, config.py",
        "unlimited_ocr",
        mm_encoder_attn_backend="TORCH_SDPA",
    ),
    "DeepseekOCR2ForCausalLM": _deepseek_vl2("deepseek_ocr2.py"),
    # Cosmos3 is Qwen3-VL over transformers' Cosmos3OmniConfig (cosmos3.py:5,17-19), not the
    # Edge model's NemotronH-based config.
    "Cosmos3ForConditionalGeneration": Entry(_M + "cosmos3.py", base="cosmos3_omni", whole=True),
    "Qwen3ASRRealtimeGeneration": Entry(
        "vllm/transformers_utils/configs/qwen3_asr.py", base="qwen3_asr"
    ),
    # OpenCUA is Qwen2.5-VL's layout (opencua.py builds Qwen2.5-VL's vision tower).
    # Language-model-only: served whole, vLLM's own processor fails under transformers 5.19
    # (OpenCUAProcessor's __init__ takes no image_processor parameter, from which transformers
    # 5's ProcessorMixin infers the attributes it sets: "'OpenCUAProcessor' object has no
    # attribute 'image_processor'", opencua.py:82-104), a reason of vLLM's.
    "OpenCUAForConditionalGeneration": Entry(_M + "opencua.py", base="qwen2_5_vl"),
    # transformers' classes of the same families, under model types the registry does not name.
    # The hub's checkpoint (LightOnOCR-1B-1025's config.json) is a Mistral 3 config over a
    # Qwen3 text config, model type mistral3, which vLLM's processor requires
    # (Mistral3ProcessingInfo reads a Mistral3Config, lightonocr.py:38); transformers'
    # lighton_ocr type came later. Its prompt replacement searches the config's image id.
    "LightOnOCRForConditionalGeneration": Entry(
        _M + "lightonocr.py",
        base="mistral3",
        whole=True,
        fields={
            "text_config": {"model_type": "qwen3"},
            "vision_feature_layer": -1,
            "projector_hidden_act": "gelu",
            "multimodal_projector_bias": False,
        },
        words=("[IMG_BREAK]", "[IMG_END]"),
        token_ids={"image_token_index": "[IMG]"},
    ),
    "LlavaOnevision2ForConditionalGeneration": Entry(
        _M + "llava_onevision2.py",
        base="llava_onevision",
        fields={"vision_config": {"spatial_merge_size": 2}},
    ),
    "InternS1ForConditionalGeneration": Entry(_M + "interns1.py", base="internvl"),
    # Eagle 2.5: InternVL's chat layout over a SigLIP tower (eagle2_5_vl.py:158-226).
    "Eagle2_5_VLForConditionalGeneration": _chat(
        "eagle2_5_vl.py", "Eagle2_5_VLConfig", "eagle_2_5_vl", "qwen2", SIGLIP_VISION, whole=True
    ),
    # LLaVA-OneVision's layout (bee.py, rvl.py subclass vLLM's LLaVA-OneVision model).
    "BeeForConditionalGeneration": Entry(_M + "bee.py", base="llava_onevision", whole=True),
    "RForConditionalGeneration": Entry(_M + "rvl.py", base="llava_onevision", whole=True),
    # Qwen3-VL-MoE's and Qwen3.5-MoE's layouts (interns1_pro.py builds Qwen3-VL's tower
    # over Qwen3-MoE; interns2_preview.py subclasses Qwen3.5-MoE's model).
    "InternS1ProForConditionalGeneration": Entry(_M + "interns1_pro.py", base="qwen3_vl_moe"),
    "InternS2PreviewForConditionalGeneration": Entry(
        _M + "interns2_preview.py", base="qwen3_5_moe", whole=True
    ),
    # Intern-S2-Mobius subclasses the preview's model (interns2_mobius.py:467); the hub's class
    # (model type interns2_mobius) is what vLLM makes its MTP's config of (speculative.py:938).
    "InternS2MobiusForConditionalGeneration": Entry(
        _M + "interns2_mobius.py",
        base="qwen3_5_moe",
        remote="InternS2MobiusConfig",
        model_type="interns2_mobius",
        text=MOBIUS_TEXT,
    ),
    "Llama_Nemotron_Nano_VL": _chat(
        "nemotron_vl.py", "Llama_Nemotron_Nano_VL_Config", "Llama_Nemotron_Nano_VL", "llama"
    ),
}
