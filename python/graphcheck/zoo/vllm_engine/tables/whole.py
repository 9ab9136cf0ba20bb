"""Config table: multimodal architectures served whole, their encoders built.

These architectures' configs are transformers' own; their entries exist to serve them whole
(:attr:`~graphcheck.zoo.vllm_engine.tables.Entry.whole`): the vision or audio tower and the
projector are built, transformers' processor of the model type is written with the tiny
tower's image and patch size and the zoo's tokenizer, and vLLM's dummy multimodal inputs run
through the encoder in the profiling forward, so that the census, the capture and the reload
judge the encoder's tensors too. Each entry cites the vLLM file its model is built by.
"""

from __future__ import annotations

from graphcheck.zoo.vllm_engine.tables import (
    GEMMA3_NEWLINES,
    GEMMA3_TOKENS,
    GEMMA4_SOFT_TOKENS,
    INTERNVL_TOKENS,
    QWEN_OMNI_TOKENS,
    Dict,
    Entry,
)
from graphcheck.zoo.vllm_engine.tables.multimodal import _towers

_M = "vllm/model_executor/models/"

#: GLM-4.1V's image and video words (Glm4vProcessor's defaults, the checkpoint's special
#: tokens) by the config fields that hold their ids (glm4_1v.py matches the processor's by them).
GLM4V_TOKEN_IDS = {
    "image_token_id": "<|image|>",
    "video_token_id": "<|video|>",
    "image_start_token_id": "<|begin_of_image|>",
    "image_end_token_id": "<|end_of_image|>",
    "video_start_token_id": "<|begin_of_video|>",
    "video_end_token_id": "<|end_of_video|>",
}

#: Gemma 4's image and audio words, which Gemma4Processor reads off the tokenizer
#: (processing_gemma4.py: ``tokenizer.image_token``, ``boi_token``, ``audio_token``...).
GEMMA4_TOKENS = {
    "image_token": "<|image|>",
    "boi_token": "<|image>",
    "eoi_token": "<image|>",
    "audio_token": "<|audio|>",
    "boa_token": "<|audio>",
    "eoa_token": "<audio|>",
}

#: The config fields that hold Gemma 4's words' ids (the checkpoints' configs and tokenizer
#: agree on them; the video word is the one Gemma4Processor adds itself).
GEMMA4_TOKEN_IDS = {
    "image_token_id": GEMMA4_TOKENS["image_token"],
    "boi_token_id": GEMMA4_TOKENS["boi_token"],
    "eoi_token_id": GEMMA4_TOKENS["eoi_token"],
    "audio_token_id": GEMMA4_TOKENS["audio_token"],
    "boa_token_id": GEMMA4_TOKENS["boa_token"],
    "eoa_token_index": GEMMA4_TOKENS["eoa_token"],
    "video_token_id": "<|video|>",
}

#: Granite Speech's audio word by the config field that holds its id.
_GRANITE_AUDIO = {"audio_token_index": "<|audio|>"}

#: Gemma 4 served whole: its processor's soft tokens an image, as the tower's config says.
GEMMA4_ENGINE = {"mm_processor_kwargs": {"max_soft_tokens": GEMMA4_SOFT_TOKENS}}


def _gemma4(d: Dict) -> None:
    # Served whole: 70 soft tokens an image, the least its processor supports (gemma4_mm.py:
    # 102-257 reads the tower's default_output_length, which the checkpoints' configs carry
    # and transformers' class leaves out).
    _towers(vision_config="gemma4_vision", audio_config="gemma4_audio")(d)
    d["vision_config"]["default_output_length"] = GEMMA4_SOFT_TOKENS


#: Architecture name -> its entry.
TABLE: dict[str, Entry] = {
    "Qwen2VLForConditionalGeneration": Entry(_M + "qwen2_vl.py", whole=True),
    "Qwen2_5_VLForConditionalGeneration": Entry(_M + "qwen2_5_vl.py", whole=True),
    "Qwen3VLForConditionalGeneration": Entry(_M + "qwen3_vl.py", whole=True),
    "LlavaForConditionalGeneration": Entry(_M + "llava.py", whole=True),
    "LlavaNextForConditionalGeneration": Entry(_M + "llava_next.py", whole=True),
    "LlavaOnevisionForConditionalGeneration": Entry(_M + "llava_onevision.py", whole=True),
    # Pixtral's processor writes [IMG], [IMG_BREAK] and [IMG_END] (mistral3.py:324 reads the
    # break's id off the vocabulary, the image's off the config).
    "Mistral3ForConditionalGeneration": Entry(
        _M + "mistral3.py, pixtral.py",
        whole=True,
        words=("[IMG_BREAK]", "[IMG_END]"),
        token_ids={"image_token_index": "[IMG]"},
    ),
    "Idefics3ForConditionalGeneration": Entry(_M + "idefics3.py", whole=True),
    # Its processor appends "\n" after the prompt, a word of the checkpoint's vocabulary.
    "PaliGemmaForConditionalGeneration": Entry(_M + "paligemma.py", whole=True, words=("\n",)),
    # Its processor reads the image words off the tokenizer (as InternVL3-1B-hf's has them).
    "InternVLForConditionalGeneration": Entry(
        _M + "interns1.py",
        whole=True,
        tokens=INTERNVL_TOKENS,
        token_ids={"image_token_id": "<IMG_CONTEXT>"},
    ),
    # Llama4Processor's image words (its defaults, the checkpoint's special tokens); the
    # config's image token is the patch word (mllama4.py:690 matches the processor's).
    "Llama4ForConditionalGeneration": Entry(
        _M + "mllama4.py",
        whole=True,
        words=(
            "<|image|>",
            "<|image_start|>",
            "<|image_end|>",
            "<|tile_x_separator|>",
            "<|tile_y_separator|>",
        ),
        token_ids={"image_token_index": "<|patch|>"},
    ),
    "Glm4vForConditionalGeneration": Entry(
        _M + "glm4_1v.py",
        whole=True,
        token_ids=GLM4V_TOKEN_IDS,
    ),
    "Qwen2AudioForConditionalGeneration": Entry(_M + "qwen2_audio.py", whole=True),
    "LlavaNextVideoForConditionalGeneration": Entry(_M + "llava_next_video.py", whole=True),
    # The processors below read their image or audio words off the tokenizer (or default
    # them), and vLLM matches their output by the config's id of the word.
    "AriaForConditionalGeneration": Entry(
        _M + "aria.py",
        whole=True,
        tokens={"image_token": "<|img|>"},
        token_ids={"image_token_index": "<|img|>"},
    ),
    "Blip2ForConditionalGeneration": Entry(_M + "blip2.py", whole=True),
    "Cohere2VisionForConditionalGeneration": Entry(
        _M + "cohere2_vision.py",
        whole=True,
        tokens={
            "boi_token": "<|START_OF_IMG|>",
            "eoi_token": "<|END_OF_IMG|>",
            "image_token": "<|IMG_PATCH|>",
            "img_line_break_token": "<|IMG_LINE_BREAK|>",
        },
        token_ids={"image_token_id": "<|IMG_PATCH|>"},
    ),
    "GraniteSpeechForConditionalGeneration": Entry(
        _M + "granite_speech.py", whole=True, token_ids=_GRANITE_AUDIO
    ),
    # Granite Speech Plus: Granite Speech's processing (granite_speech.py:161 looks its audio
    # word up in the vocabulary).
    "GraniteSpeechPlusForConditionalGeneration": Entry(
        _M + "granite_speech_plus.py", whole=True, token_ids=_GRANITE_AUDIO
    ),
    # Gemma 4's default config has no vision or audio config; the checkpoints have both.
    "Gemma4ForConditionalGeneration": Entry(
        _M + "gemma4_mm.py",
        fix=_gemma4,
        engine=GEMMA4_ENGINE,
        whole=True,
        tokens=GEMMA4_TOKENS,
        token_ids=GEMMA4_TOKEN_IDS,
    ),
    # The language-model-only build's fields that transformers' defaults leave out, and the
    # processor of the dense model (transformers names none for the MoE model types).
    "Glm4vMoeForConditionalGeneration": Entry(
        _M + "glm4_1v.py, glm4_moe.py",
        text={"use_qk_norm": False},
        whole=True,
        processor="glm4v",  # transformers names none for glm4v_moe
        processor_class=True,
        token_ids=GLM4V_TOKEN_IDS,
    ),
    "Qwen3VLMoeForConditionalGeneration": Entry(
        _M + "qwen3_vl_moe.py",
        text={"norm_topk_prob": True},
        whole=True,
        processor="qwen3_vl",  # transformers names none for qwen3_vl_moe
        processor_class=True,
    ),
    # The mel filter bank's FFT window and rate (voxtral.py:738), as Whisper's.
    "VoxtralForConditionalGeneration": Entry(
        _M + "voxtral.py",
        fields={
            "audio_config": {"downsample_factor": 4, "window_size": 400, "sampling_rate": 16000}
        },
        whole=True,
        # Served whole, vLLM's processor is mistral_common's (voxtral.py): its tekken file's
        # audio config, the encoder's 16 kHz and 128 mel bins (Whisper's).
        engine={"tokenizer_mode": "mistral"},
        tekken={
            "audio": {
                "sampling_rate": 16000,
                "frame_rate": 12.5,
                "audio_encoding_config": {
                    "num_mel_bins": 128,
                    "hop_length": 160,
                    "window_size": 400,
                },
            }
        },
    ),
    # LFM2-VL's SigLIP2 tower has no pooling head (its checkpoints' vision_use_head is false;
    # vLLM's tower builds none, lfm2_vl.py), where transformers' class defaults to one.
    "Lfm2VlForConditionalGeneration": Entry(
        _M + "lfm2_vl.py",
        fields={"vision_config": {"vision_use_head": False}},
        text={"block_dim": 64},
        whole=True,
    ),
    "Qwen3_5ForConditionalGeneration": Entry(_M + "qwen3_5.py", whole=True),
    "Qwen3_5MoeForConditionalGeneration": Entry(_M + "qwen3_5.py", whole=True),
    "Qwen2_5OmniForConditionalGeneration": Entry(
        _M + "qwen2_5_omni_thinker.py",
        whole=True,
        processor="qwen2_5_omni",
        processor_class=True,
        tokens=QWEN_OMNI_TOKENS,
    ),
    # Its prompt update merges newline runs by their ids (gemma3_mm.py:349).
    "Gemma3ForConditionalGeneration": Entry(
        _M + "gemma3_mm.py",
        whole=True,
        tokens=GEMMA3_TOKENS,
        words=GEMMA3_NEWLINES,
    ),
}
