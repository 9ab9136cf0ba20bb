"""Inputs for the warm-up forward, from the model's main input, signature and config.

The zoo runs a forward for models whose main input (``main_input_name``) is one
of :data:`MAIN_INPUTS`; :func:`make_inputs` builds it from the tiny config,
deterministically (a generator seeded by the caller), then every argument the
forward's signature requires (and the companions a main input needs: a time
series' features and masks, a trajectory's actions and rewards) by name
(:mod:`graphcheck.zoo._inputs_named`). A model may need more than one try:
:func:`input_attempts` says how many input sets there are, in order (the plain
one; every modality the signature names, for dual encoders and multimodal
models; raw audio with a channel dimension), and the worker keeps the first
that runs.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from graphcheck.zoo._inputs_named import (
    Builder,
    grid_patches,
    naflex_patches,
    named_input,
    tiled_inputs,
)
from graphcheck.zoo.tiny_config import LOW_IDS, RESERVED_IDS, VOCAB

__all__ = [
    "MAIN_INPUTS",
    "SEQ_LEN",
    "input_attempts",
    "make_inputs",
    "prepare_model",
    "special_token_ids",
]

#: Main inputs the zoo makes (``input_values`` is raw audio: input features in the wide sense;
#: the others by name, :mod:`graphcheck.zoo._inputs_named`).
MAIN_INPUTS = (
    "input_ids",
    "pixel_values",
    "input_features",
    "input_values",
    "pixel_values_videos",
    "past_values",
    "inputs",
    "latents",
    "audio_mel",
    "flattened_patches",
    "states",
)
#: What a main input brings along when the signature names it: a series' past and future
#: features and masks (the seq2seq forecasters need the future as decoder input), a
#: trajectory's other streams. Static features only where the config counts some.
COMPANIONS = {
    "past_values": (
        "past_time_features",
        "past_observed_mask",
        "future_values",
        "future_time_features",
        "static_categorical_features",
        "static_real_features",
    ),
    "states": ("actions", "rewards", "returns_to_go", "timesteps", "attention_mask"),
}
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


def _video(config: Any, g: torch.Generator) -> torch.Tensor:
    """``pixel_values_videos``: (batch, frames, channels, height, width)."""
    cfg = _vision_config(config)
    h, w = _image_hw(cfg)
    crop = getattr(cfg, "crop_size", None)
    if isinstance(crop, int) and crop > 0:
        h = w = crop  # V-JEPA 2 names its frame size crop_size
    channels = getattr(cfg, "num_channels", None) or getattr(cfg, "in_chans", None) or 3
    tubelet = getattr(cfg, "tubelet_size", None) or 1
    if isinstance(tubelet, (list, tuple)):
        tubelet = tubelet[0]  # VideoPrism: (time, height, width)
    # num_frames sizes learned position tables (VideoPrism); V-JEPA 2's frames_per_clip (64) is
    # a training clip length its rotary positions do not need: two tubelets are enough.
    frames = getattr(cfg, "num_frames", None) or 2 * int(tubelet)
    return torch.randn((1, max(int(frames), int(tubelet)), channels, h, w), generator=g)


def _flattened_patches(config: Any, g: torch.Generator) -> torch.Tensor:
    """Pix2Struct's patches: row and column (1-based) then the patch's pixels."""
    cfg = getattr(config, "vision_config", None) or config
    width = int(getattr(cfg, "patch_embed_hidden_size", 0) or 3 * 16 * 16)
    index = torch.arange(SEQ_LEN, dtype=torch.float32)
    rows, cols = (index // 4 + 1).unsqueeze(-1), (index % 4 + 1).unsqueeze(-1)
    return torch.cat([rows, cols, torch.randn((SEQ_LEN, width), generator=g)], -1).unsqueeze(0)


def _audio_mel(config: Any, g: torch.Generator) -> torch.Tensor:
    """Gemma 3n's audio encoder input: (batch, frames, mel features)."""
    features = getattr(config, "input_feat_size", None) or getattr(config, "num_mel_bins", None)
    return torch.randn((1, 4 * SEQ_LEN, int(features or 128)), generator=g)


def _parameters(model: torch.nn.Module) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(model.forward).parameters)
    except (TypeError, ValueError):
        return {}


def _required(params: dict[str, inspect.Parameter]) -> list[str]:
    return [
        name
        for name, p in params.items()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _accepts(model: torch.nn.Module, name: str) -> bool:
    params = _parameters(model)
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


#: The modalities a second try adds when the signature names them (dual encoders, VLMs,
#: audio-text models whose forward needs both sides, LXMERT's region features, the
#: document models' word boxes).
MODALITIES = (
    "input_ids",
    "pixel_values",
    "input_values",
    "input_features",
    "visual_feats",
    "visual_pos",
    "bbox",
)


def input_attempts(model: torch.nn.Module, main_input: str) -> list[str]:
    """The input sets to try, in order, for :func:`make_inputs`'s ``attempt``.

    ``plain``; ``modalities`` where the signature names another modality;
    ``patch_images`` (a vision tower's patches as small images) and
    ``token_patches`` (one block of merged patches per token) where it takes a
    patch grid; ``audio_channel`` (raw audio as (batch, 1, samples)) for
    audio models.
    """
    params = _parameters(model)
    attempts = ["plain"]
    if any(m in params and m != main_input for m in MODALITIES):
        attempts.append("modalities")
    if "grid_thw" in params or "image_grid_thw" in params:
        attempts.extend(("patch_images", "token_patches"))
    if main_input == "input_values":
        attempts.append("audio_channel")
    if main_input == "pixel_values" and getattr(model.config, "keypoint_detector_config", None):
        attempts.append("image_pair")  # keypoint matchers (SuperGlue, LightGlue) take two images
    return attempts


def _ids(model: torch.nn.Module, config: Any, g: torch.Generator) -> dict[str, Any]:
    name = type(model).__name__
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
    return inputs


def _main(
    model: torch.nn.Module, name: str, g: torch.Generator, b: Builder, attempt: str
) -> dict[str, Any]:
    """The main input ``name`` (and the attention mask of token ids); empty without a rule."""
    config = model.config
    if name == "input_ids":
        return _ids(model, config, g)
    if name == "pixel_values":
        pixels = _pixel_values(config, g)
        if attempt == "image_pair" and pixels.dim() == 4:
            pixels = torch.stack([pixels, torch.randn(pixels.shape, generator=g)], dim=1)
        return {"pixel_values": pixels}
    if name == "input_features":
        return {"input_features": _input_features(config, g)}
    if name == "input_values":
        values = _input_values(config, g)
        if attempt == "audio_channel" and values.dim() == 2:
            values = values.unsqueeze(1)  # codecs and CTC heads that take (batch, 1, samples)
        return {"input_values": values}
    if name == "pixel_values_videos":
        return {"pixel_values_videos": _video(config, g)}
    if name == "flattened_patches":
        return {"flattened_patches": _flattened_patches(config, g)}
    if name == "audio_mel":
        return {"audio_mel": _audio_mel(config, g)}
    value = named_input(b, name)
    return {} if value is None else {name: value}


def make_inputs(
    model: torch.nn.Module, main_input: str, g: torch.Generator, *, attempt: str = "plain"
) -> dict[str, Any]:
    """The keyword arguments of one forward of ``model`` whose main input is ``main_input``.

    ``attempt`` is one of :func:`input_attempts`. Arguments the signature
    requires are added by name; a Qwen-VL-style vision tower (which requires
    ``grid_thw``) gets flattened patches instead of its main input. Raises
    ``ValueError`` for a main input outside :data:`MAIN_INPUTS`.
    """
    if main_input not in MAIN_INPUTS:
        raise ValueError(f"no inputs for main input {main_input!r}; expected one of {MAIN_INPUTS}")
    config = model.config
    name = type(model).__name__
    params = _parameters(model)
    required = _required(params)
    inputs: dict[str, Any] = {}
    b = Builder(model, g, inputs, lambda shape: _token_ids(model, config, shape, g))
    grid = next((n for n in ("grid_thw", "image_grid_thw") if n in required), None)
    if grid is not None:
        patches, thw = grid_patches(
            b, images=attempt == "patch_images", tokens=attempt == "token_patches"
        )
        inputs["hidden_states" if "hidden_states" in required else "pixel_values"] = patches
        inputs[grid] = thw
    elif main_input in params or not required:
        inputs.update(_main(model, main_input, g, b, attempt))
    pixels = inputs.get("pixel_values")
    if "prompt_pixel_values" in params and isinstance(pixels, torch.Tensor):
        # SegGPT's image_size is the prompt above the input: each is half of it in height.
        inputs["pixel_values"] = pixels[..., : pixels.shape[-2] // 2, :].contiguous()
    for companion in COMPANIONS.get(main_input, ()):
        if companion not in params or companion in inputs:
            continue
        if companion.startswith("future_") and "past_time_features" not in params:
            continue  # only the seq2seq forecasters take the future as decoder input
        value = named_input(b, companion)
        if isinstance(value, torch.Tensor) and (value.numel() > 0 or "static" not in companion):
            inputs[companion] = value  # static features only where the config counts some
    extra = [m for m in MODALITIES if m in params] if attempt == "modalities" else []
    for arg in [*required, *extra]:
        if arg not in inputs:
            inputs.update(_main(model, arg, g, b, attempt) if arg in MAIN_INPUTS else {})
        if arg not in inputs and (value := named_input(b, arg)) is not None:
            inputs[arg] = value
    for name in ("target_sizes", "aspect_ratio_ids"):
        # Optional in some signatures, but the NaViT-style towers index positions by
        # target_sizes; Mllama's tiles come with their aspect ratio.
        if name in params and "pixel_values" in inputs:
            inputs.update(tiled_inputs(b, name))
    naflex = [n for n in ("spatial_shapes", "pixel_position_ids") if n in params]
    if naflex and "pixel_values" in inputs:
        naflex_inputs = naflex_patches(b)  # patch sequences, not an image tensor
        for key in ("pixel_values", "pixel_attention_mask", *naflex):
            if key in params:
                inputs[key] = naflex_inputs[key]
    derives_decoder = name.endswith("ForSequenceClassification")
    if (
        getattr(config, "is_encoder_decoder", False)
        and _accepts(model, "decoder_input_ids")
        and not derives_decoder  # these shift input_ids into the decoder themselves
    ):
        inputs["decoder_input_ids"] = _token_ids(model, config, (1, DECODER_LEN), g)
    return inputs


def prepare_model(model: torch.nn.Module) -> None:
    """What a model needs before its first forward: X-MOD's default language adapter."""
    languages = getattr(model.config, "languages", None)
    if isinstance(languages, (list, tuple)) and languages:
        for module in model.modules():
            if hasattr(type(module), "set_default_language"):
                # X-MOD's method: torch types a module's unknown attributes as tensor or module.
                module.set_default_language(languages[0])  # type: ignore[operator]
                break
