"""Tests of the zoo's warm-up inputs (graphcheck/zoo/inputs.py, _inputs_named.py) and seeding.

Each input rule is checked on real tiny models built by the zoo's own builder
(the worker's functions, level ``tiny``): the arguments made, their shapes, and
that the forward runs with them. The seeding test runs ``check_graph_replay``
on a forward that draws random numbers. Skipped without transformers (the
``zoo`` extra).
"""

from __future__ import annotations

import importlib.util
import zlib
from typing import Any

import pytest
import torch

from graphcheck.zoo import worker
from graphcheck.zoo.catalog import enumerate_architectures, filter_architectures
from graphcheck.zoo.inputs import input_attempts, make_inputs

HAVE_TRANSFORMERS = importlib.util.find_spec("transformers") is not None
needs_transformers = pytest.mark.skipif(
    not HAVE_TRANSFORMERS, reason="transformers (the zoo extra) is not installed"
)


def build(name: str) -> Any:
    """``name`` built tiny, as the zoo builds it (its catalog entry, seeded by its name)."""
    (arch,) = filter_architectures(enumerate_architectures(with_variants=False), [name])
    cls = worker._model_class(arch.class_name, arch.model_type)
    base = worker._config_dict(cls, arch)
    torch.manual_seed(zlib.crc32(name.encode()))
    return worker._build(cls, worker._make_config(cls, arch, base, "tiny"), "tiny")


def run(name: str) -> tuple[Any, str, dict[str, Any]]:
    """Builds ``name``, runs the worker's forward; returns the model, attempt and inputs."""
    model = build(name)
    seed = zlib.crc32(name.encode())
    attempt, _names = worker._forward(model, model.main_input_name, seed)
    inputs = make_inputs(
        model, model.main_input_name, torch.Generator().manual_seed(seed), attempt=attempt
    )
    return model, attempt, inputs


def shapes(inputs: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    return {k: tuple(v.shape) for k, v in inputs.items()}


@needs_transformers
def test_time_series_past_and_future() -> None:
    model, attempt, inputs = run("InformerModel")
    cfg = model.config
    past = cfg.context_length + max(cfg.lags_sequence)
    assert attempt == "plain"
    assert shapes(inputs) == {
        "past_values": (1, past),
        "past_time_features": (1, past, cfg.num_time_features),
        "past_observed_mask": (1, past),
        "future_values": (1, cfg.prediction_length),
        "future_time_features": (1, cfg.prediction_length, cfg.num_time_features),
        "decoder_input_ids": (1, 8),
    }
    model, attempt, inputs = run("PatchTSTModel")
    assert shapes(inputs) == {
        "past_values": (1, model.config.context_length, model.config.num_input_channels),
        "past_observed_mask": (1, model.config.context_length, model.config.num_input_channels),
    }


@needs_transformers
def test_vision_tower_takes_flattened_patches_and_grid() -> None:
    model, attempt, inputs = run("Qwen2_5_VisionTransformerPretrainedModel")
    cfg = model.config
    side = 2 * cfg.spatial_merge_size
    width = cfg.in_channels * cfg.temporal_patch_size * cfg.patch_size**2
    assert attempt == "plain"
    assert shapes(inputs) == {"hidden_states": (side * side, width), "grid_thw": (1, 3)}
    assert inputs["grid_thw"].tolist() == [[1, side, side]]
    # Kimi-K2.5 embeds each patch with a 2-D convolution: the second try gives small images.
    model, attempt, inputs = run("Kimi_K25VisionModel")
    assert attempt == "patch_images"
    assert inputs["pixel_values"].dim() == 4


@needs_transformers
def test_native_resolution_patches() -> None:
    model, attempt, inputs = run("Siglip2VisionModel")
    width = model.config.num_channels * model.config.patch_size**2
    assert shapes(inputs) == {
        "pixel_values": (1, 16, width),
        "pixel_attention_mask": (1, 16),
        "spatial_shapes": (1, 2),
    }
    assert inputs["spatial_shapes"].tolist() == [[4, 4]]


@needs_transformers
def test_video_perceiver_trajectory_and_latents() -> None:
    model, _, inputs = run("VideoPrismVisionModel")
    cfg = model.config
    assert shapes(inputs) == {
        "pixel_values_videos": (1, cfg.num_frames, cfg.num_channels, cfg.image_size, cfg.image_size)
    }
    model, _, inputs = run("PerceiverModel")
    assert shapes(inputs) == {"inputs": (1, 16, model.config.d_model)}
    model, _, inputs = run("DecisionTransformerModel")
    assert sorted(inputs) == [
        "actions",
        "attention_mask",
        "returns_to_go",
        "rewards",
        "states",
        "timesteps",
    ]
    assert inputs["attention_mask"].shape == inputs["timesteps"].shape == (1, 8)
    model, _, inputs = run("MimiDecoderModel")
    assert shapes(inputs) == {"latents": (1, model.config.hidden_size, 16)}


@needs_transformers
def test_second_modality_and_boxes() -> None:
    # LXMERT needs its region features beside the text: the "modalities" try adds them.
    model, attempt, inputs = run("LxmertModel")
    assert attempt == "modalities"
    assert shapes(inputs)["visual_feats"] == (1, 8, model.config.visual_feat_dim)
    assert shapes(inputs)["visual_pos"] == (1, 8, model.config.visual_pos_dim)
    _, attempt, inputs = run("UdopModel")
    boxes = inputs["bbox"]
    assert attempt == "modalities" and boxes.shape == (1, 16, 4)
    assert bool((boxes[..., 2:] > boxes[..., :2]).all()) and int(boxes.max()) <= 1000


@needs_transformers
def test_raw_audio_with_a_channel_dimension() -> None:
    model = build("DacModel")
    assert input_attempts(model, "input_values") == ["plain", "audio_channel"]
    _, attempt, inputs = run("DacModel")
    assert attempt == "audio_channel" and shapes(inputs) == {"input_values": (1, 1, 16000)}


@needs_transformers
def test_query_placeholders_and_image_position_mask() -> None:
    # BLIP-2 scatters its projected queries at image tokens: one per query after the first id.
    model, attempt, inputs = run("Blip2Model")
    queries, token = model.config.num_query_tokens, model.config.image_token_id
    assert attempt == "plain"
    assert inputs["input_ids"][0, 1 : 1 + queries].tolist() == [token] * queries
    assert int((inputs["input_ids"] == token).sum()) == queries
    # InstructBLIP-Video: one set of queries per frame of the (batch, frames, c, h, w) video.
    model, _, inputs = run("InstructBlipVideoModel")
    frames = inputs["pixel_values"].shape[1]
    assert inputs["pixel_values"].dim() == 5
    count = int((inputs["input_ids"] == model.config.video_token_id).sum())
    assert count == model.config.num_query_tokens * frames
    # Kosmos-2 says where its image embeddings go with a mask beside the ids.
    model, attempt, inputs = run("Kosmos2Model")
    mask = inputs["image_embeds_position_mask"]
    assert attempt == "modalities" and mask.shape == inputs["input_ids"].shape
    assert mask[0].tolist() == [0] + [1] * model.config.latent_query_num + [0] * (
        mask.shape[-1] - 1 - model.config.latent_query_num
    )


@needs_transformers
def test_prompt_attempt_adds_optional_prompt_arguments() -> None:
    model = build("SplinterForPreTraining")
    assert input_attempts(model, "input_ids") == ["plain", "prompt"]
    _, attempt, inputs = run("SplinterForPreTraining")
    assert attempt == "prompt" and inputs["question_positions"].tolist() == [[1]]
    _, attempt, inputs = run("LongformerForQuestionAnswering")
    assert attempt == "prompt" and inputs["global_attention_mask"][0].tolist() == [1] + [0] * 15
    _, attempt, inputs = run("IdeficsModel")
    assert attempt == "prompt" and inputs["pixel_values"].dim() == 5
    assert shapes(inputs)["image_attention_mask"] == (1, 16, 1)
    _, attempt, inputs = run("BlipForQuestionAnswering")
    assert attempt == "prompt" and shapes(inputs)["decoder_input_ids"] == (1, 8)
    model, attempt, inputs = run("Blip2QFormerModel")
    assert attempt == "prompt"
    assert shapes(inputs) == {
        "query_embeds": (1, 4, model.config.hidden_size),
        "encoder_hidden_states": (1, 16, model.config.encoder_hidden_size),
    }
    # A model whose plain set runs keeps it (its head puts global attention on <s> itself).
    _, attempt, inputs = run("LongformerForSequenceClassification")
    assert attempt == "plain" and "global_attention_mask" not in inputs


@needs_transformers
def test_required_prompt_arguments_by_name() -> None:
    _, attempt, inputs = run("OmDetTurboForObjectDetection")
    assert attempt == "plain"
    assert inputs["classes_structure"].tolist() == [inputs["classes_input_ids"].shape[0]]
    _, attempt, inputs = run("JevForDecision")
    assert attempt == "plain"
    assert shapes(inputs)["marks"] == (1, 1) and int(inputs["marks"]) == 16
    assert inputs["num_options"].tolist() == [[2]]
    assert inputs["question_type_ids"].tolist() == [[0]]


@needs_transformers
def test_merged_token_patches_and_target_sizes() -> None:
    # Inkling 2 takes one block of merge x merge patches per token, its grid in tokens.
    model, attempt, inputs = run("Inkling2VisionModel")
    cfg = model.config
    block = cfg.spatial_merge_size * cfg.patch_size
    assert attempt == "token_patches"
    assert shapes(inputs) == {
        "pixel_values": (4, block, block, cfg.num_channels),
        "image_grid_thw": (1, 3),
    }
    assert inputs["image_grid_thw"].tolist() == [[1, 2, 2]]
    # MiniCPM-V's tower: target_sizes (optional in the signature) is the image's patch grid.
    model, _, inputs = run("MiniCPMOcrVisionModel")
    side = inputs["pixel_values"].shape[-1] // model.config.patch_size
    assert inputs["target_sizes"].tolist() == [[side, side]]


@needs_transformers
def test_tiles_pairs_and_prompts() -> None:
    # Mllama: one image of max_num_tiles tiles, aspect ratio id 1 (1x1), its first tile valid.
    model, _, inputs = run("MllamaVisionModel")
    tiles = model.config.max_num_tiles
    assert inputs["pixel_values"].dim() == 6 and inputs["pixel_values"].shape[:3] == (1, 1, tiles)
    assert inputs["aspect_ratio_ids"].tolist() == [[1]]
    assert inputs["aspect_ratio_mask"].tolist() == [[[1] + [0] * (tiles - 1)]]
    # Keypoint matchers take a pair of images.
    model = build("SuperGlueForKeypointMatching")
    assert input_attempts(model, "pixel_values") == ["plain", "image_pair"]
    _, attempt, inputs = run("SuperGlueForKeypointMatching")
    assert attempt == "image_pair" and inputs["pixel_values"].shape[:2] == (1, 2)
    # SegGPT: the prompt image and mask are shaped like the input, half of image_size high.
    model, _, inputs = run("SegGptModel")
    height, width = model.config.image_size
    assert shapes(inputs) == {
        "pixel_values": (1, 3, height // 2, width),
        "prompt_pixel_values": (1, 3, height // 2, width),
        "prompt_masks": (1, 3, height // 2, width),
    }


class _Noisy(torch.nn.Module):
    """A forward that draws random numbers (as MAE's masking or VITS's noise do)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x + torch.randn(x.shape))


def test_seeded_replay_of_a_random_forward_is_equal() -> None:
    testing = pytest.importorskip("graphcheck.testing")
    x = torch.ones(2, 8)
    unseeded = testing.check_graph_replay(_Noisy, lambda _m: (x,))
    seeded = testing.check_graph_replay(_Noisy, lambda _m: (x,), seed=7)
    assert [s.outputs_equal for s in unseeded] == [False, False, False]
    assert [s.outputs_equal for s in seeded] == [True, True, True]


@needs_transformers
def test_audio_token_ids_one_per_codebook() -> None:
    # MusicGen's decoder takes (batch * codebooks, seq); Dia's (batch, seq, channels).
    model, _, inputs = run("MusicgenForConditionalGeneration")
    assert shapes(inputs)["decoder_input_ids"] == (model.config.decoder.num_codebooks, 8)
    model, _, inputs = run("DiaModel")
    assert shapes(inputs)["decoder_input_ids"] == (1, 8, model.config.decoder_config.num_channels)
    # Kyutai STT: a text token and one token per codebook at each step; one mask entry per step.
    model, _, inputs = run("KyutaiSpeechToTextModel")
    assert shapes(inputs) == {
        "input_ids": (1, 16, 1 + model.config.num_codebooks),
        "attention_mask": (1, 16),
    }


@needs_transformers
def test_feature_layouts() -> None:
    # GLM-ASR convolves over time: mel bins first, on the second try.
    model, attempt, inputs = run("GlmAsrEncoder")
    assert attempt == "features_mel_first"
    assert shapes(inputs) == {"input_features": (1, model.config.num_mel_bins, 64)}
    # Gemma 4's audio projection is sized for 128 mel bins; its config names none.
    _, attempt, inputs = run("Gemma4AudioModel")
    assert attempt == "features_128" and shapes(inputs)["input_features"] == (1, 64, 128)
    # Granite Speech 5 reads 4 x num_mel_bins per frame (delta-expanded, stacked in pairs).
    model, attempt, inputs = run("GraniteSpeech5Encoder")
    assert attempt == "features_first_layer"
    assert shapes(inputs) == {"input_features": (1, 64, 4 * model.config.num_mel_bins)}
    # AudioFlamingo 3 reads its mask's lengths: ones over the frames come with the features.
    model, attempt, inputs = run("AudioFlamingo3Encoder")
    mel = model.config.num_mel_bins
    assert attempt == "plain"
    assert shapes(inputs)["input_features_mask"] == (1, inputs["input_features"].shape[-1])
    assert inputs["input_features"].shape[1] == mel
    # Qwen3-ASR: whole chunks of 2 * n_window frames.
    model, _, inputs = run("Qwen3ASREncoder")
    assert inputs["input_features"].shape[-1] % (2 * model.config.n_window) == 0
    # CLAP's audio Swin: (batch, 1, frames, mel), beside the text.
    model, attempt, inputs = run("ClapModel")
    assert attempt == "modalities"
    assert shapes(inputs)["input_features"] == (1, 1, 64, model.config.audio_config.num_mel_bins)


@needs_transformers
def test_speech_seq2seq_inputs() -> None:
    # The speech encoder-decoder wrapper's `inputs` is its encoder's main input (raw audio).
    _, _, inputs = run("SpeechEncoderDecoderModel")
    assert shapes(inputs) == {"inputs": (1, 16000), "decoder_input_ids": (1, 8)}
    # SpeechT5's speech decoder reads mel frames; the bare model (no pre-nets) embeddings.
    model, _, inputs = run("SpeechT5ForTextToSpeech")
    assert shapes(inputs)["decoder_input_values"] == (1, 8, model.config.num_mel_bins)
    model, attempt, inputs = run("SpeechT5Model")
    hidden = model.config.hidden_size
    assert attempt == "hidden_values"
    assert shapes(inputs) == {
        "input_values": (1, 16, hidden),
        "decoder_input_values": (1, 8, hidden),
    }


@needs_transformers
def test_codec_inputs() -> None:
    # A semantic path beside the raw audio: one feature frame per 320 samples.
    _, attempt, inputs = run("Xcodec2Model")
    assert attempt == "audio_channel"
    assert inputs["input_values"].shape == (1, 1, 16000)
    assert inputs["input_features"].shape[1] == 50
    # VibeVoice's tokenizer halves name their input hidden_states: audio, then latents.
    _, attempt, inputs = run("VibeVoiceAcousticTokenizerEncoderModel")
    assert attempt == "audio_channel" and shapes(inputs) == {"hidden_states": (1, 1, 16000)}
    model, attempt, inputs = run("VibeVoiceAcousticTokenizerDecoderModel")
    assert attempt == "latents"
    assert shapes(inputs) == {"hidden_states": (1, model.config.hidden_size, 16)}
    # MuSE Spark takes whole tokens of samples.
    model, _, inputs = run("MuseSparkAudioModel")
    assert inputs["input_values"].shape[-1] % model.config.samples_per_token == 0
    # PE audio: token ids and raw audio with a channel dimension.
    _, attempt, inputs = run("PeAudioModel")
    assert attempt == "audio_channel" and shapes(inputs)["input_values"] == (1, 1, 16000)


@needs_transformers
def test_embeddings_as_main_input() -> None:
    model, _, inputs = run("Nemotron3_5TranscribeWordTimestampModel")
    assert shapes(inputs) == {"inputs_embeds": (1, 16, model.config.hidden_size)}
    # A DFlash draft block beside the target's context; the mask spans both.
    model, _, inputs = run("MuseGlimmerAssistantModel")
    cfg = model.config
    assert shapes(inputs) == {
        "noise_embeds": (1, cfg.block_size, cfg.hidden_size),
        "context_hidden_states": (1, 16, cfg.hidden_size * len(cfg.target_layer_ids)),
        "attention_mask": (1, 16 + cfg.block_size),
    }


@needs_transformers
def test_seq2seq_classification_heads_derive_their_decoder_inputs() -> None:
    # Bart's and T5's classification heads shift input_ids into the decoder and pool at the
    # last </s>: decoder ids of another length break the pooling, so none are made.
    _, attempt, inputs = run("BartForSequenceClassification")
    assert attempt == "plain" and shapes(inputs) == {
        "input_ids": (1, 16),
        "attention_mask": (1, 16),
    }
    _, _, seq2seq = run("BartModel")
    assert shapes(seq2seq)["decoder_input_ids"] == (1, 8)
