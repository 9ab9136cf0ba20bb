"""Multimodal models served whole: their encoders built, a processor of the zoo's written.

Each architecture here is served with its vision and audio towers (not
language-model-only, vLLM's ``--language-model-only``), so that the census, the capture
and the reload judge the encoders' tensors too. :data:`WHOLE` names what an architecture's
entry gets beyond the entry it has elsewhere (``whole=True``; the placeholder words its
processor reads off the tokenizer; the model type whose processor the zoo writes, where
vLLM loads another model type's); :data:`TABLE` holds entries of architectures that had none.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from graphcheck.zoo.vllm_engine.tables import (
    GEMMA3_NEWLINES,
    GEMMA3_TOKENS,
    INTERNVL_TOKENS,
    QWEN_OMNI_TOKENS,
    Dict,
    Entry,
    text_of,
)
from graphcheck.zoo.vllm_engine.tables.whole import (
    GEMMA4_ENGINE,
    GEMMA4_TOKEN_IDS,
    GEMMA4_TOKENS,
)

__all__ = ["TABLE", "WHOLE"]

_M = "vllm/model_executor/models/"

#: PaddleOCR-VL's image word (its processor reads it off the tokenizer).
_PADDLE_TOKENS = {"image_token": "<|IMAGE_PLACEHOLDER|>"}


def _image_id(tokens: Mapping[str, str]) -> Callable[[Dict], None]:
    """A fix: the config's ``image_token_id``, the id the zoo's tokenizer gives the word."""

    def fix(d: Dict) -> None:
        from graphcheck.zoo.vllm_engine.tokenizer import top_id

        vocab = int(text_of(d).get("vocab_size") or 0)
        d["image_token_id"] = top_id(tokens["image_token"], vocab, tokens)

    return fix


#: MiniCPM-V 4.6's and 4.7's words, which transformers' processors read off the tokenizer
#: (processing_minicpmv4_6.py:53-63); the image and video ids are the config's too.
_MINICPMV_TOKENS = {
    "image_token": "<|image_pad|>",
    "video_token": "<|video_pad|>",
    "image_start_token": "<image>",
    "image_end_token": "</image>",
    "slice_start_token": "<slice>",
    "slice_end_token": "</slice>",
    "image_id_start_token": "<image_id>",
    "image_id_end_token": "</image_id>",
}


def _minicpmv_ids(d: Dict) -> None:
    from graphcheck.zoo.vllm_engine.tokenizer import top_id

    vocab = int(text_of(d).get("vocab_size") or 0)
    for key in ("image_token", "video_token"):
        d[key + "_id"] = top_id(_MINICPMV_TOKENS[key], vocab, _MINICPMV_TOKENS)


#: Gemma 3n's image and audio words, as its checkpoints' tokenizer names them: Gemma 3's
#: image words and their audio twins.
_GEMMA3N_TOKENS = {
    **GEMMA3_TOKENS,
    "audio_token": "<audio_soft_token>",
    "boa_token": "<start_of_audio>",
    "eoa_token": "<end_of_audio>",
}


#: ERNIE 4.5 VL's image and video words, as its checkpoints' tokenizer names them.
_ERNIE_VL_TOKENS = {
    f"{kind}{part}_token": f"<|{kind.upper()}_{name}|>"
    for kind in ("image", "video")
    for part, name in (("", "PLACEHOLDER"), ("_start", "START"), ("_end", "END"))
}


#: Multimodal architectures without an entry elsewhere, served whole.
TABLE: dict[str, Entry] = {
    # Qwen3.5 (dense and MoE) and Qwen2.5-Omni's conditional-generation class are served whole
    # by tables/whole.py. transformers' Qwen3-ASR processor reads the audio and vision words off
    # the tokenizer.
    "Qwen3ASRForConditionalGeneration": Entry(
        _M + "qwen3_asr.py", whole=True, tokens=QWEN_OMNI_TOKENS
    ),
    # GLM-OCR: GLM-4.6V's processor (glm_ocr.py subclasses vLLM's GLM-4.1V model), its
    # default words named on the tokenizer.
    "GlmOcrForConditionalGeneration": Entry(
        _M + "glm_ocr.py",
        whole=True,
        processor="glm46v",
        processor_class=True,
        tokens={"image_token": "<|image|>", "video_token": "<|video|>"},
    ),
    # PaddleOCR-VL: transformers' processor; paddleocr_vl.py:294 replaces the config's image
    # token id in the prompt, which must be the tokenizer's.
    "PaddleOCRVLForConditionalGeneration": Entry(
        _M + "paddleocr_vl.py", whole=True, tokens=_PADDLE_TOKENS, fix=_image_id(_PADDLE_TOKENS)
    ),
    # transformers' processors count their audio word in the tokenizer's vocabulary
    # (audioflamingo3.py:443; glmasr.py): the checkpoints' words.
    "AudioFlamingo3ForConditionalGeneration": Entry(
        _M + "audioflamingo3.py", whole=True, tokens={"audio_token": "<sound>"}
    ),
    "GlmAsrForConditionalGeneration": Entry(
        _M + "glmasr.py", whole=True, tokens={"audio_token": "<|pad|>"}
    ),
    # vLLM's own processors (transformers_utils/processors/cosmos3_edge.py, isaac.py,
    # bagel.py; qianfan_ocr.py's InternVL-style one) over the zoo's placeholders.
    "Cosmos3EdgeForConditionalGeneration": Entry(_M + "cosmos3_edge.py", whole=True),
    "IsaacForConditionalGeneration": Entry(_M + "isaac.py", whole=True),
    "QianfanOCRForConditionalGeneration": Entry(_M + "qianfan_ocr.py", whole=True),
    "BagelForConditionalGeneration": Entry(_M + "bagel.py", whole=True),
    # transformers' MiniCPM-V 4.6 and 4.7 processors: their eight words on the tokenizer.
    "MiniCPMV4_6ForConditionalGeneration": Entry(
        _M + "minicpmv4_6.py", whole=True, tokens=_MINICPMV_TOKENS, fix=_minicpmv_ids
    ),
    "MiniCPMV4_7ForConditionalGeneration": Entry(
        _M + "minicpmv4_7.py", whole=True, tokens=_MINICPMV_TOKENS, fix=_minicpmv_ids
    ),
    # OpenVLA: vLLM's config and processor (transformers_utils/configs/openvla.py,
    # processors/openvla.py); its DINOv2 and SigLIP towers are timm's at the checkpoint's
    # sizes, the only ones vLLM accepts (openvla.py:104-120), so the build holds their full
    # weights (730M parameters).
    "OpenVLAForActionPrediction": Entry(_M + "openvla.py", whole=True),
    # Gemma 3n: its forward needs the multimodal embeddings (gemma3n_mm.py:849), which a
    # language-model-only build never gets from vLLM's runner. transformers' Gemma3nProcessor
    # reads its six words off the tokenizer, vLLM's prompt update their ids off the processor
    # and the newline runs off the vocabulary (gemma3n_mm.py:341-395); the config's ids are
    # the tokenizer's, as a checkpoint's.
    "Gemma3nForConditionalGeneration": Entry(
        _M + "gemma3n_mm.py",
        whole=True,
        tokens=_GEMMA3N_TOKENS,
        words=GEMMA3_NEWLINES,
        token_ids={f"{key}_id": word for key, word in _GEMMA3N_TOKENS.items()},
    ),
}

#: Architecture -> what its entry in its family's module gets to be served whole
#: (``dataclasses.replace``: a field named here replaces the entry's).
WHOLE: dict[str, Mapping[str, Any]] = {
    "Qwen2_5OmniModel": {"whole": True, "tokens": QWEN_OMNI_TOKENS},
    "Qwen3OmniMoeForConditionalGeneration": {"whole": True, "tokens": QWEN_OMNI_TOKENS},
    # InternVL's chat layout with vLLM's own processors (transformers_utils/processors/
    # h2ovl.py, nvlm_d.py; skyworkr1v.py, eagle2_5_vl.py), which read the image words off the
    # zoo's placeholders. H2OVL's reads the multi-scale crop switch (h2ovl.py:52), which
    # the checkpoints set (the entry has no fields of its own to replace).
    "H2OVLChatModel": {"whole": True, "fields": {"use_msac": True}},
    "SkyworkR1VChatModel": {"whole": True},
    "NVLM_D": {"whole": True},
    "Eagle2_5_VLForConditionalGeneration": {"whole": True},
    # dots.ocr: transformers' Qwen2-VL processor over the tokenizer, its image word set by
    # vLLM (dots_ocr.py:65, 143-151).
    "DotsOCRForCausalLM": {
        "whole": True,
        "processor": "qwen2_vl",
        "processor_class": True,
        "tokens": {"image_token": "<|imgpad|>", "video_token": "<|video_pad|>"},
    },
    # vLLM's own processors (transformers_utils/processors/moondream3.py, step3_vl.py,
    # mimo_v2_omni.py, muse_glimmer.py) or transformers' of the entry's model type.
    "Moondream3ForCausalLM": {"whole": True},
    "HfMoondream": {"whole": True},
    "Phi4ForCausalLMV": {"whole": True},
    "StepVLForConditionalGeneration": {"whole": True},
    "Step3VLForConditionalGeneration": {"whole": True},
    "Exaone4_5_ForConditionalGeneration": {"whole": True},
    "MiMoV2OmniForCausalLM": {"whole": True},
    "MuseGlimmerForConditionalGeneration": {"whole": True},
    # DeepSeek-OCR's kind: vLLM's own processors (transformers_utils/processors/deepseek_ocr.py,
    # deepseek_ocr2.py; deepseek_ocr.py:201, deepseek_ocr2.py:73, unlimited_ocr.py:114). Their
    # encoders are vLLM's fixed SAM and CLIP (or Qwen2) towers at full size, whatever the config.
    "DeepseekOCRForCausalLM": {"whole": True},
    "DeepseekOCR2ForCausalLM": {"whole": True},
    "UnlimitedOCRForCausalLM": {"whole": True},
    # InternVL's module and transformers' InternVLProcessor (interns1.py:184), its image words.
    "InternS1ForConditionalGeneration": {
        "whole": True,
        "tokens": INTERNVL_TOKENS,
        "token_ids": {"image_token_id": "<IMG_CONTEXT>"},
    },
    # Cohere Compass (a Qwen3-VL tower, cohere_compass.py) and Step 3.7 (vLLM's Perception
    # Encoder, step3p7.py:53-66): transformers' processors of their model types.
    "CohereCompassForConditionalGeneration": {"whole": True},
    "Step3p7ForConditionalGeneration": {"whole": True},
    # Granite 4 Vision: transformers' processor; its SigLIP tower and QFormer projectors in
    # the census (the reload reads the QFormers at vLLM's fixed sizes: tables/vision.py).
    "Granite4VisionForConditionalGeneration": {"whole": True},
    # ERNIE 4.5 VL: transformers' processor of its model type over the checkpoint's six words
    # (their ids the config's, ernie45_vl.py:1430-1440), its video processor without the frame
    # numbers it draws with the checkpoint's font.
    "Ernie4_5_VLMoeForConditionalGeneration": {
        "whole": True,
        "processor": "ernie4_5_vl_moe",
        "processor_class": True,
        "video_processor": {"draw_on_frames": False},
        "tokens": _ERNIE_VL_TOKENS,
        "token_ids": {
            "im_patch_id": _ERNIE_VL_TOKENS["image_token"],
            **{
                f"{kind}_{end}_token_id": _ERNIE_VL_TOKENS[f"{kind}_{end}_token"]
                for kind in ("image", "video")
                for end in ("start", "end")
            },
        },
    },
    # Qwen3-ASR Realtime: Qwen3-ASR's processor (its feature extractor, qwen3_asr_realtime.py:
    # 189), which reads Qwen's audio and vision words off the tokenizer.
    "Qwen3ASRRealtimeGeneration": {"whole": True, "tokens": QWEN_OMNI_TOKENS},
    # Gemma 4 unified: transformers' Gemma4UnifiedProcessor with Gemma 4's words and soft
    # tokens an image.
    "Gemma4UnifiedForConditionalGeneration": {
        "whole": True,
        "engine": GEMMA4_ENGINE,
        "tokens": GEMMA4_TOKENS,
        "token_ids": GEMMA4_TOKEN_IDS,
    },
    # Nemotron Nano 2 VL: vLLM's own processor (processors/nano_nemotron_vl.py) over the
    # zoo's placeholders; its RADIO tower and projector in the census.
    "NemotronH_Nano_VL_V2": {"whole": True},
    # Qwen4Exp's tower is Qwen3-VL's (qwen4_exp/nvidia/model.py:1004), but the model reads
    # the vision config's deepstack levels unguarded (model.py:1014), which transformers'
    # Qwen4ExpVisionConfig does not define and its model does not use: none, as there.
    "Qwen4ExpForConditionalGeneration": {
        "whole": True,
        "fields": {"vision_config": {"deepstack_visual_indexes": []}},
    },
    # GLM-4V: vLLM's prompt replacement looks for the dummy text's three words by the config's
    # ids (glm4v.py:440, 480-495); the image word is the pad token, as in the checkpoints.
    "GLM4VForCausalLM": {
        "whole": True,
        "token_ids": {
            "boi_token_id": "<|begin_of_image|>",
            "pad_token_id": "<|endoftext|>",
            "eoi_token_id": "<|end_of_image|>",
        },
    },
}
