"""Config table: speech models whose hub configs vLLM reads beside its own audio towers.

Cohere ASR's NeMo config holds its encoder, decoder and head as dicts; FireRedASR2 and
Fun-ASR are a Qwen language model beside an audio encoder that vLLM builds from the keyword
arguments the checkpoint's config gives as a dict (``audio_encoder_conf``); MOSS-Audio's
config holds its tower and language model; Kimi-Audio's tokenizer is a tiktoken file and its
Whisper tower's config a subfolder's. All at the zoo's tiny sizes: one or two encoder layers
of width 64 (Fun-ASR's adaptor fixes the encoder's width at 512). Cohere ASR and MOSS-Audio
are served whole (``Entry.whole``), encoders built. Split from :mod:`.multimodal` to keep each
module small.
"""

from __future__ import annotations

import base64
from typing import Any

from graphcheck.zoo.vllm_engine.tables import WHISPER_FEATURES, Dict, Entry
from graphcheck.zoo.vllm_engine.tables.multimodal import tiny_text

_M = "vllm/model_executor/models/"

#: Cohere ASR's NeMo config (cohere_asr.py:343-350, 436-442, 1370-1470, 1870-1900, 2170-2235;
#: model_arch_config_convertor.py:481-500): a Conformer encoder dict (dw-striding
#: subsampling by 8, relative positions), the Transformer decoder's config_dict, the head and
#: the mel front end; encoder and decoder heads must match (the convertor asserts it).
_COHERE_ASR: dict[str, Any] = {
    "is_encoder_decoder": True,
    "vocab_size": 512,
    "encoder": {
        "feat_in": 64,
        "n_layers": 1,
        "d_model": 64,
        "feat_out": -1,
        "causal_downsampling": False,
        "subsampling": "dw_striding",
        "subsampling_factor": 8,
        "subsampling_conv_chunking_factor": 1,
        "subsampling_conv_channels": 64,
        "ff_expansion_factor": 2,
        "self_attention_model": "rel_pos",
        "n_heads": 2,
        "att_context_size": [-1, -1],
        "xscaling": True,
        "untie_biases": True,
        "pos_emb_max_len": 512,
        "conv_kernel_size": 9,
        "conv_norm_type": "batch_norm",
        "conv_context_size": None,
        "use_bias": True,
    },
    "transf_decoder": {
        "config_dict": {
            "hidden_size": 64,
            "inner_size": 128,
            "hidden_act": "relu",
            "num_attention_heads": 2,
            "num_layers": 2,
            "max_sequence_length": 128,
        }
    },
    "head": {"num_classes": 512, "hidden_size": 64, "log_softmax": False},
    "preprocessor": {
        "sample_rate": 16000,
        "window_size": 0.025,
        "window_stride": 0.01,
        "features": 64,
        "n_fft": 512,
        "window": "hann",
        "normalize": "per_feature",
        "dither": 1e-5,
        "pad_to": 0,
    },
    "sample_rate": 16000,
    # The longest clip is one multimodal item, of max_audio_clip_s * 100 / 8 encoder frames,
    # which must fit the zoo's 256-token batch (vLLM refuses it otherwise): 16 s, 200 frames.
    "max_audio_clip_s": 16,
    "overlap_chunk_second": 1,
}

#: MOSS-Audio's audio tower (MossAudioEncoderConfig, moss_audio.py:222-245, 330-560): two
#: layers of width 64 over its 128 mel bins, the first one's output injected into the
#: language model (deep stack, moss_audio.py:544-552, 795-853).
_MOSS_AUDIO_TOWER: dict[str, Any] = {
    "d_model": 64,
    "output_dim": 64,
    "num_mel_bins": 128,
    "encoder_layers": 2,
    "encoder_attention_heads": 2,
    "encoder_ffn_dim": 128,
    "downsample_rate": 8,
    "downsample_hidden_size": 32,
    "max_source_positions": 1500,
    "n_window": 50,
    "conv_chunksize": 64,
    "deepstack_encoder_layer_indexes": [0],
}


def _moss_audio(d: Dict) -> None:
    # MossAudioConfig (moss_audio.py:268-306) holds a Qwen3 language_config, whose sizes it
    # copies to the top level; the tiny Qwen3 at both levels.
    d["language_config"] = tiny_text("qwen3")
    d["audio_config"] = dict(_MOSS_AUDIO_TOWER)


def _byte_vocabulary(first: int) -> str:
    """A tiktoken BPE vocabulary of the 256 bytes and no merges, ranked from ``first``.

    What vLLM's Kimi-Audio tokenizer loads (``tiktoken.model``: a base64 token and its rank per
    line, tokenizers/kimi_audio.py:24-49); the ranks start above the zoo tokenizer's special
    ids, which it reads off ``tokenizer_config.json`` as special tokens (kimi_audio.py:130-141).
    """
    return "".join(f"{base64.b64encode(bytes([b])).decode()} {first + b}\n" for b in range(256))


#: Kimi-Audio's Whisper tower config, which vLLM reads from the checkpoint's subfolder
#: (kimi_audio.py:61, 94-111): one layer of width 64; the projector takes four frames of it
#: (kimia_adaptor_input_dim, kimi_audio.py:318-330, 418-421).
_KIMIA_WHISPER: dict[str, Any] = {
    "model_type": "whisper",
    "d_model": 64,
    "encoder_layers": 1,
    "encoder_attention_heads": 2,
    "encoder_ffn_dim": 128,
    "decoder_layers": 1,
    "decoder_attention_heads": 2,
    "decoder_ffn_dim": 128,
    "num_mel_bins": 128,
    "max_source_positions": 1500,
    "max_target_positions": 128,
    "vocab_size": 512,
}

TABLE: dict[str, Entry] = {
    # Kimi-Audio: a Qwen2 language model (kimi_audio.py:425-431) beside a Whisper tower whose
    # config and feature extractor are a subfolder's (the latter loaded when served whole,
    # kimi_audio.py:129-131); vLLM's tokenizer for it is tiktoken's (vllm/config/model.py:740).
    "MoonshotKimiaForCausalLM": Entry(
        _M + "kimi_audio.py, vllm/tokenizers/kimi_audio.py",
        base="qwen2",
        fields={"kimia_adaptor_input_dim": 256},
        files={
            "tiktoken.model": _byte_vocabulary(8),
            "whisper-large-v3/config.json": _KIMIA_WHISPER,
            "whisper-large-v3/preprocessor_config.json": WHISPER_FEATURES,
        },
        whole=True,
    ),
    # MOSS-Audio served whole: its language-model-only build reads a tensor of the encoder at
    # construction (moss_audio.py:509, .item() on the skipped stage's meta device). vLLM's
    # own processor (moss_audio.py:1226-1305) reads the audio words' ids from the checkpoint's
    # processor file: the ids the zoo's tokenizer gives the three words (its top ids below
    # the eleven placeholders).
    "MossAudioModel": Entry(
        _M + "moss_audio.py",
        base="qwen3",
        whole=True,
        fields={"adapter_hidden_size": 128, "deepstack_num_inject_layers": 1},
        tokens={
            "audio_token": "<|AUDIO|>",
            "audio_bos_token": "<|audio_bos|>",
            "audio_eos_token": "<|audio_eos|>",
        },
        files={
            "preprocessor_config.json": {
                "audio_token_id": 500,
                "audio_start_id": 499,
                "audio_end_id": 498,
            }
        },
        fix=_moss_audio,
    ),
    # The hub's class (transformers' CohereAsrConfig has another schema), under the model type
    # vLLM's convertor is chosen by (model_arch_config_convertor.py:824).
    "CohereAsrForConditionalGeneration": Entry(
        _M + "cohere_asr.py",
        base="llama",
        remote="CohereAsrConfig",
        model_type="cohere_asr",
        # An encoder-decoder model served language-model-only has no multimodal budget, which
        # the scheduler asserts for encoder-decoder models (v1/core/sched/scheduler.py:
        # 257-269): served whole, with vLLM's own processor (cohere_asr.py:1870-1900).
        whole=True,
        plain=("encoder",),
        fields=_COHERE_ASR,
    ),
    # FireRedASR2: ConformerEncoder(**audio_encoder_conf) (fireredasr2.py:121-145,
    # conformer_encoder.py:299-320) over 80 mel bins, its frames merged by
    # encoder_downsample_rate before the projector; the decoder is Qwen2.
    "FireRedASR2ForConditionalGeneration": Entry(
        _M + "fireredasr2.py, conformer_encoder.py",
        base="qwen2",
        fields={
            "audio_encoder_conf": {
                "idim": 80,
                "n_layers_enc": 1,
                "n_head": 2,
                "d_model": 64,
                "kernel_size": 33,
                "pe_maxlen": 512,
            },
            "encoder_downsample_rate": 2,
        },
    ),
    # Fun-ASR: SenseVoiceEncoderSmall(input_size=560, **audio_encoder_conf)
    # (funasr.py:299-370, 633-650); its adaptor takes a 512-wide encoder (funasr.py:640-648).
    # The decoder is Qwen3.
    "FunASRForConditionalGeneration": Entry(
        _M + "funasr.py",
        base="qwen3",
        fields={
            "audio_encoder_conf": {
                "output_size": 512,
                "attention_heads": 4,
                "linear_units": 128,
                "num_blocks": 1,
                "tp_blocks": 0,
                "kernel_size": 11,
                "sanm_shift": 0,
            },
        },
    ),
}
