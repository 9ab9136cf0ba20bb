"""Audio inputs of the warm-up forward: raw audio, features, and audio-token decoder ids.

The rules of :mod:`graphcheck.zoo.inputs` for ``input_values`` and
``input_features``, by config field: how wide a frame is and which (sub-)config
says so, how many frames (whole chunks, whole tokens of samples, one per text
token, one per 20 ms beside raw audio), and the other layouts a later try gives
(mel bins first, 128 mel bins, as wide as the first linear layer reads).
"""

from __future__ import annotations

from typing import Any

import torch

from graphcheck.zoo._inputs_named import SEQ_LEN

__all__ = [
    "AUDIO_SAMPLES",
    "FEATURE_ATTEMPTS",
    "audio_mel",
    "config_tree",
    "decoder_ids_shape",
    "first_linear_width",
    "input_features",
    "input_values",
]

DECODER_LEN = 8
#: One second at 16 kHz: long enough for the x-vector heads' dilated convolutions.
AUDIO_SAMPLES = 16000
#: Samples per frame of the 50 Hz encoders (Wav2Vec2, HuBERT, the codecs' semantic paths).
AUDIO_HOP = 320


def config_tree(config: Any) -> list[Any]:
    """``config`` and its sub-configs, depth first."""
    out = [config]
    for key in getattr(config, "sub_configs", {}) or {}:
        sub = getattr(config, key, None)
        if sub is not None and hasattr(sub, "to_dict"):
            out.extend(config_tree(sub))
    return out


#: Other layouts of ``input_features`` (with every modality, for the models that take features
#: beside token ids): mel bins first, for encoders whose first layer convolves over time
#: (GLM-ASR, CLVP, Voxtral Realtime), 128 mel bins, and as wide as the model's first linear
#: layer reads (Granite Speech 5 stacks delta-expanded frames: 4 x num_mel_bins, hard-coded).
FEATURE_ATTEMPTS = ("features_mel_first", "features_128", "features_first_layer")


#: Config fields that give the width of one feature frame (see :func:`input_features`).
FEATURE_FIELDS = (
    "num_mel_bins",
    "feature_projection_input_dim",
    "input_feat_per_channel",
    "feature_size",
    "input_dim",
)
#: The other common mel count (Whisper v3, Gemma 4, Qwen audio): models that hard-code it
#: (Gemma 4's audio tower derives its projection from 128 mel bins) get it on a later try.
MEL_128 = 128


def features_config(config: Any) -> Any:
    """The (sub-)config that describes the features.

    The audio or encoder config, else the first config of the tree that names a
    feature width (Nemotron 3.5's ``asr_config``, the codecs' semantic Wav2Vec2-BERT).
    """
    cfg = getattr(config, "audio_config", None) or getattr(config, "encoder_config", None) or config
    found = (
        c
        for c in (cfg, *config_tree(config))
        if any(isinstance(getattr(c, f, None), int) for f in FEATURE_FIELDS)
    )
    return next(found, cfg)


def input_features(
    config: Any, g: torch.Generator, attempt: str = "plain", *, with_audio: bool = False
) -> torch.Tensor:
    """``input_features`` shaped as the config says, for the input set ``attempt``.

    ``with_audio``: beside :data:`AUDIO_SAMPLES` of raw audio, one frame per 20 ms
    of it (the codecs' semantic path adds its frames to the acoustic path's, 320
    samples each).
    """
    cfg = features_config(config)
    mel = getattr(cfg, "num_mel_bins", None)
    source = getattr(cfg, "max_source_positions", None)
    if isinstance(mel, int) and isinstance(source, int):
        # Whisper-like encoders: (batch, mel bins, 2 * max_source_positions).
        return torch.randn((1, mel, 2 * source), generator=g)
    frames = AUDIO_SAMPLES // AUDIO_HOP if with_audio else 4 * SEQ_LEN
    per_token = getattr(config, "audio_length_per_tok", None)
    if isinstance(per_token, int) and per_token > 0:
        # Voxtral Realtime adds one audio frame (after downsampling) to each token embedding.
        frames = SEQ_LEN * per_token
    window = getattr(cfg, "n_window", None)
    if isinstance(window, int) and window > 0 and isinstance(mel, int):
        # Qwen3-ASR's encoder attends in chunks of 2 * n_window frames: whole chunks only.
        frames = -(-frames // (2 * window)) * 2 * window
    projection = getattr(cfg, "feature_projection_input_dim", None)
    if isinstance(projection, int):
        return torch.randn((1, frames, projection), generator=g)
    per_channel = getattr(cfg, "input_feat_per_channel", None)
    if isinstance(per_channel, int):
        channels = getattr(cfg, "input_channels", 1) or 1
        return torch.randn((1, frames, per_channel * channels), generator=g)
    features = mel or getattr(cfg, "feature_size", None) or getattr(cfg, "input_dim", None) or 80
    stacked = getattr(cfg, "num_stacked_frames", None)
    if isinstance(stacked, int) and stacked > 1:
        features *= stacked  # FunASR's low-frame-rate features: frames stacked by the extractor
    if attempt == "features_128":
        features = MEL_128
    spec = getattr(cfg, "spec_size", None)
    if isinstance(spec, int) and isinstance(mel, int) and attempt not in FEATURE_ATTEMPTS:
        # CLAP's audio Swin: (batch, 1 crop, frames, mel), frames within its spectrogram image.
        frames = min(frames, spec * max(1, spec // mel))
        return torch.randn((1, 1, frames, mel), generator=g)
    values = torch.randn((1, frames, int(features)), generator=g)
    if attempt == "features_mel_first":
        values = values.transpose(1, 2)  # encoders that convolve over time: (batch, mel, frames)
    return values


def input_values(config: Any, g: torch.Generator) -> torch.Tensor:
    cfg = getattr(config, "audio_config", None) or config
    mel, frames = getattr(cfg, "num_mel_bins", None), getattr(cfg, "max_length", None)
    if isinstance(mel, int) and isinstance(frames, int):
        # Spectrogram transformers (AST): (batch, frames, mel bins).
        return torch.randn((1, frames, mel), generator=g)
    samples = AUDIO_SAMPLES
    per_token = getattr(cfg, "samples_per_token", None)
    if isinstance(per_token, int) and per_token > 0:
        # Encoders that take whole tokens of audio (MuSE Spark: 1920 samples, 80 ms at 24 kHz).
        samples = -(-samples // per_token) * per_token
    channels = getattr(cfg, "audio_channels", None)
    if isinstance(channels, int) and channels > 0:
        # Codecs (EnCodec, Mimi, DAC): (batch, channels, samples).
        return torch.randn((1, channels, samples), generator=g)
    return torch.randn((1, samples), generator=g)


def audio_mel(config: Any, g: torch.Generator) -> torch.Tensor:
    """Gemma 3n's audio encoder input: (batch, frames, mel features)."""
    features = getattr(config, "input_feat_size", None) or getattr(config, "num_mel_bins", None)
    return torch.randn((1, 4 * SEQ_LEN, int(features or 128)), generator=g)


def first_linear_width(model: torch.nn.Module) -> int | None:
    """What the first linear layer the model registers reads (its input projection)."""
    first = next((m for m in model.modules() if isinstance(m, torch.nn.Linear)), None)
    return first.in_features if first is not None else None


def decoder_ids_shape(config: Any) -> tuple[int, ...]:
    """The shape of ``decoder_input_ids``: one row per codebook for audio-token decoders.

    MusicGen's decoder reshapes its ids to ``(batch, num_codebooks, seq)``: it takes
    ``(batch * num_codebooks, seq)``; Dia's takes ``(batch, seq, num_channels)`` (a 2-D
    tensor it reshapes and transposes, which its embedding cannot view).
    """
    for key in ("decoder", "decoder_config"):
        sub = getattr(config, key, None)
        codebooks = getattr(sub, "num_codebooks", None)
        if isinstance(codebooks, int) and not isinstance(codebooks, bool) and codebooks > 1:
            return (codebooks, DECODER_LEN)
        channels = getattr(sub, "num_channels", None)
        if isinstance(channels, int) and not isinstance(channels, bool) and channels > 1:
            return (1, DECODER_LEN, channels)
    return (1, DECODER_LEN)
