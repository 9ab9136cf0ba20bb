"""Config table: multimodal composites whose towers vLLM reads in names of its own.

The config class transformers or the registry gives these architectures holds a tower
config in transformers' names (Step 3.7's ``step3p5_vision``), or none of the composite's
(Pixtral's is the vision tower alone), where vLLM's model reads the checkpoint's: each
entry gives the composite the way vLLM's own loader or the hub's checkpoint writes it, at
the zoo's tiny sizes (one tower layer of width 64, two heads, 32-pixel images of 16-pixel
patches). The encoder-decoder models among them (Nemotron-Parse) and Voxtral Realtime are
served whole (``Entry.whole``). Split from :mod:`.multimodal` and :mod:`.hub_vlm` to keep each
module small.
"""

from __future__ import annotations

from graphcheck.zoo.vllm_engine.tables import Dict, Entry
from graphcheck.zoo.vllm_engine.tables.moe import TABLE as MOE
from graphcheck.zoo.vllm_engine.tables.multimodal import tiny_text
from graphcheck.zoo.vllm_engine.tables.towers import PERCEPTION_ENCODER, TINY_VIT

_M = "vllm/model_executor/models/"


def _pixtral(d: Dict) -> None:
    # vLLM's Mistral-format loader makes Pixtral's config a plain composite of model type
    # "pixtral" (transformers_utils/configs/mistral.py:96-111): the Mistral text config
    # beside the vision encoder's args, which pixtral.py:383-388 reads into
    # VisionEncoderArgs (pixtral.py:656-669).
    d["text_config"] = {**tiny_text("mistral"), "architectures": ["MistralForCausalLM"]}
    d["vision_config"] = {
        "hidden_size": 64,
        "num_channels": 3,
        "image_size": 32,
        "patch_size": 16,
        "intermediate_size": 128,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "rope_theta": 10000.0,
        "image_token_id": 10,
        "adapter_bias": True,
        "spatial_merge_size": 1,
    }


def _step3p7(d: Dict) -> None:
    d["vision_config"] = dict(PERCEPTION_ENCODER)
    # The language model in vLLM's Step3p5Config's names (att_impl_type, moe_every_n_layer...),
    # which transformers' Step 3.7 text class keeps beside its own.
    text = tiny_text("step3p5", vllm=True, **MOE["Step3p5ForCausalLM"].fields)
    d["text_config"] = {**text, "architectures": ["Step3p5ForCausalLM"]}


def _nano_nemotron_vl(*blocks: str) -> Entry:
    """Nemotron-H VL and Omni: the hub's class, Nemotron-H over ``blocks`` beside RADIO.

    nano_nemotron_vl.py:962-1010 reads InternVL's image tiling at the top level (one
    32-pixel tile of 16-pixel patches shuffled by half: one image token), the projector's
    widths, and a RADIO tower named by its timm model (its sizes are RadioConfig's table,
    transformers_utils/configs/radio.py:12-17: the smallest, ViT-S, 384 wide). The language
    model is built off text_config (nano_nemotron_vl.py:985-989): Nemotron-H's layers as the
    checkpoints mix them (``blocks``, its layers_block_type).
    """

    def fix(d: Dict) -> None:
        # One Mamba group: the shrunk default's four groups over two heads leave the CPU
        # Mamba-2 kernels no head per group (a division by zero, SIGFPE, in the forward).
        text = tiny_text("nemotron_h", layers_block_type=list(blocks), n_groups=1)
        d["text_config"] = {
            **text,
            "num_hidden_layers": len(blocks),
            "architectures": ["NemotronHForCausalLM"],
        }
        # No model type: transformers' "radio" class is another layout (its temporal patch
        # is None or at least 2, which radio.py:170 compares with 1).
        d["vision_config"] = {
            "args": {"model": "vit_small_patch16_224"},
            "preferred_resolution": [32, 32],
            "patch_size": 16,
        }

    return Entry(
        _M + "nano_nemotron_vl.py, vllm/transformers_utils/configs/radio.py",
        base="llama",
        remote="NemotronH_Nano_VL_V2_Config",
        model_type="NemotronH_Nano_VL_V2",
        fields={
            "force_image_size": 32,
            "patch_size": 16,
            "downsample_ratio": 0.5,
            "template": "nemotron_nano_v2",
            "ps_version": "v2",
            # Served whole, vLLM's processor reads it (processors/nano_nemotron_vl.py:608);
            # the checkpoints set it.
            "use_thumbnail": True,
            "image_tag_type": "internvl",
            "vit_hidden_size": 384,
            "projector_hidden_size": 64,
            "norm_mean": [0.48145466, 0.4578275, 0.40821073],
            "norm_std": [0.26862954, 0.26130258, 0.27577711],
        },
        fix=fix,
    )


def _ovis(d: Dict) -> None:
    # Ovis 1.6 on vLLM's OvisConfig (transformers_utils/configs/ovis.py:82-125): the language
    # model as llm_config, Gemma 2's as in Ovis1.6-Gemma2 (ovis.py:441 takes its image pad
    # id, 7, from the text model type), and a SigLIP visual tokenizer (ovis.py:100-170): a
    # one-layer tower over a 2x2 patch grid, merged 2x2 (hidden_stride), whose head is the
    # visual vocabulary less the five indicator ids wide.
    d["llm_config"] = tiny_text("gemma2")
    d["hidden_size"] = 64
    d["visual_tokenizer_config"] = {
        "model_type": "siglip_visual_tokenizer",
        "vocab_size": 69,
        "tokenize_function": "softmax",
        "hidden_stride": 2,
        "depths": [1],
        "backbone_config": {"model_type": "siglip_vision_model", **TINY_VIT},
    }


#: Phi-4-multimodal's speech tower as the hub's config gives it (audio_processor "cascades",
#: phi4mm_audio.py:1168-1178, ConformerEncoder's arguments: phi4mm_audio.py:842-880): one
#: Conformer block of width 64 over 80 mel bins, its NeMo subsampling convolution as wide.
_PHI4MM_AUDIO = {
    "name": "cascades",
    "config": {
        "input_size": 80,
        "chunk_size": -1,
        "left_chunk": 18,
        "attention_dim": 64,
        "attention_heads": 2,
        "linear_units": 128,
        "num_blocks": 1,
        "activation": "swish",
        "conv_activation": "swish",
        "conv_glu_type": "swish",
        "bias_in_glu": True,
        "causal": True,
        "cnn_layer_norm": True,
        "depthwise_seperable_out_channel": 64,
        "ext_pw_out_channel": 64,
        "ext_pw_kernel_size": 1,
        "kernel_size": 3,
        "input_layer": "nemo_conv",
        "nemo_conv_settings": {"conv_channels": 64},
        "encoder_embedding_config": {"input_size": 80},
        "relative_attention_bias_args": {"type": "t5", "t5_bias_max_distance": 500},
        "time_reduction": 8,
        "dropout_rate": 0.0,
    },
}

#: Nemotron-Parse's decoder: transformers' MBart (nemotron_parse.py:80-265 reads BART's
#: names), as wide as the neck's fixed 1024-wide output it cross-attends (nemotron_parse.py:
#: 455): 16 heads of 64, one layer, its FFN width under encoder_ffn_dim (nemotron_parse.py:116).
_NEMOTRON_PARSE_DECODER = {
    "model_type": "mbart",
    "d_model": 1024,
    "decoder_attention_heads": 16,
    "encoder_attention_heads": 16,
    "decoder_layers": 1,
    "encoder_layers": 1,
    "decoder_ffn_dim": 128,
    "encoder_ffn_dim": 128,
    "vocab_size": 512,
    "max_position_embeddings": 128,
    "activation_function": "gelu",
    "scale_embedding": False,
    "tie_word_embeddings": False,
}

#: Voxtral Realtime's streaming audio config in its tekken.json (mistral_common's AudioConfig:
#: 12.5 audio tokens a second of 16 kHz audio, 128 mel bins, a 480 ms transcription delay),
#: whose delay tokens voxtral_realtime.py:263-264 reads while the model is built.
_VOXTRAL_REALTIME_AUDIO = {
    "sampling_rate": 16000,
    "frame_rate": 12.5,
    "audio_encoding_config": {"num_mel_bins": 128, "hop_length": 160, "window_size": 400},
    "transcription_format": "streaming",
    "transcription_delay_ms": 480,
    "streaming_look_ahead_ms": 2.5,
    "streaming_look_back_ms": 52.5,
    "streaming_n_left_pad_tokens": 32,
}


def _voxtral_realtime(d: Dict) -> None:
    # vLLM builds Voxtral Realtime from Mistral's format only: its loader makes a plain
    # "voxtral" composite of the Mistral text config (named by its architecture, with the
    # projection width) and a causal Whisper config of the encoder's args
    # (transformers_utils/configs/mistral.py:226-275), which voxtral.py:327-340 and
    # whisper.py:506-530 read: one causal layer of width 64, RoPE positions, pooled by 4.
    # Served whole: its forward takes the encoder's embeddings at every step
    # (voxtral_realtime.py:366 asserts inputs_embeds).
    d["text_config"] = {
        **tiny_text("mistral"),
        "architectures": ["MistralForCausalLM"],
        "projection_size": 256,
    }
    d["audio_config"] = {
        **tiny_text("whisper"),
        "num_mel_bins": 128,
        "window_size": 400,
        "sampling_rate": 16000,
        "hop_length": 160,
        "downsample_factor": 4,
        "d_model": 64,
        "encoder_layers": 1,
        "encoder_ffn_dim": 128,
        "encoder_attention_heads": 2,
        "encoder_head_dim": 32,
        "is_encoder_decoder": False,
        "is_causal": True,
        # RoPE positions only with a sliding window (whisper_causal.py:491 asserts it).
        "sliding_window": 64,
        "block_pool_size": 4,
        "pos_embed": "rope",
        "global_log_mel_max": 1.5,
        "max_position_embeddings": 512,
        "max_source_positions": 1500,
    }


#: Nemotron Nano 2 VL's language model: Mamba-2, attention and dense (relu2) MLP layers.
_NANO_V2 = ("linear_attention", "full_attention", "mlp")
#: Nemotron 3 Omni's: Mamba-2, attention and MoE (relu2 experts) layers.
_OMNI_V3 = ("linear_attention", "full_attention", "moe")

TABLE: dict[str, Entry] = {
    "NemotronH_Nano_VL_V2": _nano_nemotron_vl(*_NANO_V2),
    "NemotronH_Nano_Omni_Reasoning_V3": _nano_nemotron_vl(*_OMNI_V3),
    "NemotronH_Super_Omni_Reasoning_V3": _nano_nemotron_vl(*_OMNI_V3),
    "NemotronH_Omni_Reasoning_V3": _nano_nemotron_vl(*_OMNI_V3),
    # Whisper: transformers' class and processor, served whole (an encoder-decoder model).
    "WhisperForConditionalGeneration": Entry(_M + "whisper.py", whole=True),
    "Ovis": Entry(
        _M + "ovis.py, vllm/transformers_utils/configs/ovis.py",
        base="ovis",
        saved_as={"text_config": "llm_config"},
        fix=_ovis,
        # Served whole: vLLM's own OvisProcessor loads the checkpoint's image processor by the
        # auto classes (Ovis 1.6's is SigLIP's) and pads with the Gemma 2 word it maps
        # (ovis.py:73-77, 289-292).
        whole=True,
        processor="siglip",
        words=("<unused0>",),
    ),
    # Phi-4-multimodal: the hub's class over Phi-3's fields (phi4mm.py:1068-1113 builds
    # vLLM's LlamaModel off the top level), with the embedding layers' dicts the towers and
    # the processor read (phi4mm.py:811, 1086-1097) and the image tower's feature layer; the
    # SigLIP tower itself is vLLM's constant (phi4mm.py:95-118).
    "Phi4MMForCausalLM": Entry(
        _M + "phi4mm.py, phi4mm_audio.py",
        base="phi3",
        remote="Phi4MMConfig",
        model_type="phi4mm",
        fields={
            "img_processor": {"layer_idx": 0, "type_feature": "patch"},
            "audio_processor": _PHI4MM_AUDIO,
            "embd_layer": {
                "embedding_cls": "image_audio",
                "audio_embd_layer": {
                    "embedding_cls": "audio",
                    "compression_rate": 8,
                    "downsample_rate": 1,
                    "projection_cls": "mlp",
                    "use_conv_downsample": False,
                    "use_qformer": False,
                },
                "image_embd_layer": {
                    "embedding_cls": "tune_image",
                    "crop_size": 448,
                    "hd_transform_order": "sub_glb",
                    "image_token_compression_cls": "avg_pool_2d",
                    "projection_cls": "mlp",
                    "use_hd_transform": True,
                    "with_learnable_separator": True,
                },
            },
        },
    ),
    # Nemotron-Parse: the hub's encoder-decoder class, served whole (its decoder reads the
    # encoder). The encoder is RADIO by timm name with its neck (nemotron_parse.py:440-500):
    # ViT-H's width (the neck's conv1 takes 1280, nemotron_parse.py:455) cut to one layer
    # (RadioConfig keeps an args override of its table's sizes), three teachers' class tokens
    # (the neck's summary projection takes 3 x 1280); one 64 x 256 image of 16-pixel patches.
    "NemotronParseForConditionalGeneration": Entry(
        _M + "nemotron_parse.py, radio.py, vllm/transformers_utils/configs/radio.py",
        base="llama",
        remote="NemotronParseConfig",
        model_type="nemotron_parse",
        whole=True,
        fields={
            "is_encoder_decoder": True,
            "image_size": [64, 256],
            "vocab_size": 512,
            "decoder_start_token_id": 2,
            "tie_word_embeddings": False,
            "encoder": {
                "patch_size": 16,
                "args": {
                    "model": "vit_huge_patch16_224",
                    "num_hidden_layers": 1,
                    "cls_token_per_teacher": True,
                    "teachers": [{"name": "clip"}, {"name": "siglip"}, {"name": "sam"}],
                },
            },
            "decoder": _NEMOTRON_PARSE_DECODER,
        },
    ),
    "VoxtralRealtimeGeneration": Entry(
        _M + "voxtral_realtime.py, voxtral.py, vllm/transformers_utils/configs/mistral.py",
        base="mistral",
        remote="VoxtralConfig",
        model_type="voxtral",
        fix=_voxtral_realtime,
        engine={"tokenizer_mode": "mistral"},
        tekken={"audio": _VOXTRAL_REALTIME_AUDIO},
        whole=True,
    ),
    "PixtralForConditionalGeneration": Entry(
        _M + "pixtral.py, vllm/transformers_utils/configs/mistral.py",
        base="llama",
        remote="PixtralConfig",
        model_type="pixtral",
        fix=_pixtral,
        # Served whole through mistral_common's tokenizer, as vLLM requires (pixtral.py:186):
        # the checkpoint's tekken.json with its image section (one 16-pixel patch per token,
        # the tower's 32-pixel images; [IMG] is the vision config's image_token_id, 10).
        whole=True,
        engine={"tokenizer_mode": "mistral"},
        tekken={"image": {"image_patch_size": 16, "max_image_size": 32, "spatial_merge_size": 1}},
    ),
    # Step 3.7: the hub's class (transformers' Step3p7Config reads the tower's checkpoint
    # names width/layers/heads into its own and drops them, which vLLM then reads:
    # step_vl.py:361). Its tower is vLLM's Perception Encoder (step3p7.py:53-66), its language
    # model Step 3.5's, built off text_config (step3p7.py:68-73) by the architecture named
    # there, with the fields vLLM's Step3p5 model reads.
    "Step3p7ForConditionalGeneration": Entry(
        _M + "step3p7.py, step_vl.py, step3p5.py",
        base="step3p7",
        remote="Step3p7Config",
        model_type="step3p7",
        fields={"projector_bias": False, "image_token_id": 510},
        fix=_step3p7,
    ),
}
