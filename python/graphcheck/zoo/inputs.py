"""Inputs for the warm-up forward: token ids, pixel values or input features.

The zoo runs a forward only for models whose main input (``main_input_name``)
is one of :data:`MAIN_INPUTS`; :func:`make_inputs` builds it from the tiny
config, deterministically (a generator seeded by the caller).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from graphcheck.zoo.tiny_config import LOW_IDS, RESERVED_IDS, VOCAB

__all__ = [
    "MAIN_INPUTS",
    "SEQ_LEN",
    "accepts_pixels",
    "make_inputs",
    "prepare_model",
    "special_token_ids",
]

#: Main inputs the zoo makes (``input_values`` is raw audio: input features in the wide sense).
MAIN_INPUTS = ("input_ids", "pixel_values", "input_features", "input_values")
SEQ_LEN = 16
DECODER_LEN = 8
#: One second at 16 kHz: long enough for the x-vector heads' dilated convolutions.
AUDIO_SAMPLES = 16000


def _configs(config: Any) -> list[Any]:
    """``config`` and its sub-configs, depth first."""
    out = [config]
    for key in getattr(config, "sub_configs", {}) or {}:
        sub = getattr(config, key, None)
        if sub is not None and hasattr(sub, "to_dict"):
            out.extend(_configs(sub))
    return out


def special_token_ids(config: Any) -> set[int]:
    """Every special token id a config tree names (``*_token_id``, ``*_token_index``, ...)."""
    ids: set[int] = set()
    for cfg in _configs(config):
        for key, value in vars(cfg).items():
            if not (key.endswith(("token_id", "token_ids", "token_index"))):
                continue
            values = value if isinstance(value, (list, tuple)) else [value]
            ids.update(v for v in values if isinstance(v, int) and not isinstance(v, bool))
    return ids


def _vocab(model: torch.nn.Module, config: Any) -> int:
    try:
        # A transformers method: torch types a module's unknown attributes as tensor or module.
        emb = model.get_input_embeddings()  # type: ignore[operator]
    except (AttributeError, NotImplementedError, TypeError):
        emb = None
    n = getattr(emb, "num_embeddings", None)
    if isinstance(n, int) and n > 0:
        return n
    for cfg in _configs(config):
        v = getattr(cfg, "vocab_size", None)
        if isinstance(v, int) and v > 0:
            return v
    return VOCAB


def _token_ids(
    model: torch.nn.Module, config: Any, shape: tuple[int, ...], g: torch.Generator
) -> torch.Tensor:
    vocab = _vocab(model, config)
    hi = min(vocab, VOCAB - RESERVED_IDS)
    lo = min(LOW_IDS, max(hi - 1, 0))
    banned = special_token_ids(config)
    allowed = [i for i in range(lo, hi) if i not in banned] or list(range(lo, max(hi, lo + 1)))
    table = torch.tensor(allowed, dtype=torch.long)
    return table[torch.randint(0, len(table), shape, generator=g)]


def _vision_config(config: Any) -> Any:
    for key in ("vision_config", "backbone_config", "encoder"):
        sub = getattr(config, key, None)
        if sub is not None and getattr(sub, "image_size", None) is not None:
            return sub
    return config


def _image_hw(cfg: Any) -> tuple[int, int]:
    size = getattr(cfg, "image_size", None)
    if isinstance(size, int) and size > 0:
        return size, size
    if isinstance(size, (list, tuple)) and len(size) == 2 and all(isinstance(s, int) for s in size):
        return int(size[0]), int(size[1])
    if isinstance(size, dict):
        h, w = size.get("height"), size.get("width")
        if isinstance(h, int) and isinstance(w, int):
            return h, w
    return 64, 64


def _pixel_values(config: Any, g: torch.Generator) -> torch.Tensor:
    cfg = _vision_config(config)
    h, w = _image_hw(cfg)
    channels = getattr(cfg, "num_channels", None) or getattr(config, "num_channels", None) or 3
    frames = getattr(cfg, "num_frames", None) or getattr(config, "num_frames", None)
    if isinstance(frames, int) and frames > 0:
        return torch.randn((1, frames, channels, h, w), generator=g)
    return torch.randn((1, channels, h, w), generator=g)


def _input_features(config: Any, g: torch.Generator) -> torch.Tensor:
    cfg = getattr(config, "audio_config", None) or getattr(config, "encoder_config", None) or config
    mel = getattr(cfg, "num_mel_bins", None)
    source = getattr(cfg, "max_source_positions", None)
    if isinstance(mel, int) and isinstance(source, int):
        # Whisper-like encoders: (batch, mel bins, 2 * max_source_positions).
        return torch.randn((1, mel, 2 * source), generator=g)
    projection = getattr(cfg, "feature_projection_input_dim", None)
    if isinstance(projection, int):
        return torch.randn((1, 4 * SEQ_LEN, projection), generator=g)
    per_channel = getattr(cfg, "input_feat_per_channel", None)
    if isinstance(per_channel, int):
        channels = getattr(cfg, "input_channels", 1) or 1
        return torch.randn((1, 4 * SEQ_LEN, per_channel * channels), generator=g)
    features = mel or getattr(cfg, "feature_size", None) or getattr(cfg, "input_dim", None) or 80
    return torch.randn((1, 4 * SEQ_LEN, int(features)), generator=g)


def _input_values(config: Any, g: torch.Generator) -> torch.Tensor:
    cfg = getattr(config, "audio_config", None) or config
    mel, frames = getattr(cfg, "num_mel_bins", None), getattr(cfg, "max_length", None)
    if isinstance(mel, int) and isinstance(frames, int):
        # Spectrogram transformers (AST): (batch, frames, mel bins).
        return torch.randn((1, frames, mel), generator=g)
    channels = getattr(cfg, "audio_channels", None)
    if isinstance(channels, int) and channels > 0:
        # Codecs (EnCodec, Mimi, DAC): (batch, channels, samples).
        return torch.randn((1, channels, AUDIO_SAMPLES), generator=g)
    return torch.randn((1, AUDIO_SAMPLES), generator=g)


def _accepts(model: torch.nn.Module, name: str) -> bool:
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def make_inputs(
    model: torch.nn.Module, main_input: str, g: torch.Generator, *, with_pixels: bool = False
) -> dict[str, Any]:
    """The keyword arguments of one forward of ``model`` whose main input is ``main_input``.

    ``with_pixels`` adds ``pixel_values`` to token ids (dual encoders such as
    CLIP need both). Raises ``ValueError`` for a main input outside
    :data:`MAIN_INPUTS`.
    """
    config = model.config
    name = type(model).__name__
    if main_input == "input_ids":
        shape: tuple[int, ...] = (1, SEQ_LEN)
        codebooks = getattr(config, "num_codebooks", None)
        if name.endswith("ForMultipleChoice"):
            shape = (1, 2, SEQ_LEN)
        elif isinstance(codebooks, int) and codebooks > 1 and name.startswith("Musicgen"):
            shape = (codebooks, SEQ_LEN)  # one row per codebook (MusicGen's decoder)
        ids = _token_ids(model, config, shape, g)
        eos = getattr(config, "eos_token_id", None)
        if name.endswith("ForSequenceClassification") and isinstance(eos, int):
            ids[..., -1] = eos  # BART-style heads pool the hidden state at </s>
        inputs: dict[str, Any] = {"input_ids": ids}
        if _accepts(model, "attention_mask"):
            inputs["attention_mask"] = torch.ones_like(ids)
        if with_pixels:
            inputs["pixel_values"] = _pixel_values(config, g)
    elif main_input == "pixel_values":
        inputs = {"pixel_values": _pixel_values(config, g)}
    elif main_input == "input_features":
        inputs = {"input_features": _input_features(config, g)}
    elif main_input == "input_values":
        inputs = {"input_values": _input_values(config, g)}
    else:
        raise ValueError(f"no inputs for main input {main_input!r}; expected one of {MAIN_INPUTS}")
    derives_decoder = name.endswith("ForSequenceClassification")
    if (
        getattr(config, "is_encoder_decoder", False)
        and _accepts(model, "decoder_input_ids")
        and not derives_decoder  # these shift input_ids into the decoder themselves
    ):
        inputs["decoder_input_ids"] = _token_ids(model, config, (1, DECODER_LEN), g)
    return inputs


def accepts_pixels(model: torch.nn.Module) -> bool:
    """True when the forward takes ``pixel_values`` by name (a second try adds them)."""
    try:
        return "pixel_values" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


def prepare_model(model: torch.nn.Module) -> None:
    """What a model needs before its first forward: X-MOD's default language adapter."""
    languages = getattr(model.config, "languages", None)
    if isinstance(languages, (list, tuple)) and languages:
        for module in model.modules():
            if hasattr(type(module), "set_default_language"):
                # X-MOD's method: torch types a module's unknown attributes as tensor or module.
                module.set_default_language(languages[0])  # type: ignore[operator]
                break
