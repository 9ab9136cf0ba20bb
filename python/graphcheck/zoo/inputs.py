"""Inputs for the warm-up forward, from the model's main input, signature and config.

The zoo runs a forward for models whose main input (``main_input_name``) is one
of :data:`MAIN_INPUTS`; :func:`make_inputs` builds it from the tiny config,
deterministically (a generator seeded by the caller), then every argument the
forward's signature requires (and the companions a main input needs: a time
series' features and masks, a trajectory's actions and rewards) by name
(:mod:`graphcheck.zoo._inputs_named`). A model may need more than one try:
:func:`input_attempts` says how many input sets there are, in order (the plain
one; every modality the signature names, for dual encoders and multimodal
models; raw audio with a channel dimension; the optional prompt arguments of
:mod:`graphcheck.zoo._inputs_prompts`), and the worker keeps the first that runs.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from graphcheck.zoo._inputs_audio import (
    DECODER_LEN,
    FEATURE_ATTEMPTS,
    audio_mel,
    config_tree,
    decoder_ids_shape,
    first_linear_width,
    input_features,
    input_values,
)
from graphcheck.zoo._inputs_named import (
    Builder,
    grid_patches,
    naflex_patches,
    named_input,
    tiled_inputs,
)
from graphcheck.zoo._inputs_prompts import PROMPT_ARGUMENTS, place_prompt, prompt_arguments
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
    "inputs_embeds",
    "noise_embeds",
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
    # A DFlash draft block attends to the target's context too: its mask spans both.
    "noise_embeds": ("context_hidden_states", "attention_mask"),
    # Audio encoders that read the mask's lengths without a None default (AudioFlamingo 3).
    "input_features": ("input_features_mask",),
}
SEQ_LEN = 16


def special_token_ids(config: Any) -> set[int]:
    """Every special token id a config tree names (``*_token_id``, ``*_token_index``, ...)."""
    ids: set[int] = set()
    for cfg in config_tree(config):
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
    for cfg in config_tree(config):
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

    ``plain``; ``modalities`` where the signature names another modality; ``patch_images`` (a
    vision tower's patches as small images) and ``token_patches`` (one block of merged patches
    per token) where it takes a patch grid; ``image_pair`` (two images) for keypoint matchers;
    ``audio_channel`` (raw audio as (batch, 1, samples)) for audio models, and ``audio_video``
    (with video frames) for audio-video encoders; the other layouts of ``input_features``
    (:data:`~graphcheck.zoo._inputs_audio.FEATURE_ATTEMPTS`); ``latents`` for a codec decoder
    whose forward names its input ``hidden_states``; ``hidden_values`` (embeddings for encoder
    and decoder) for speech seq2seq models without pre-nets; last, ``prompt`` (the modalities
    and the optional prompt arguments of :mod:`graphcheck.zoo._inputs_prompts`) where the
    signature names one.
    """
    params = _parameters(model)
    attempts = ["plain"]
    if any(m in params and m != main_input for m in MODALITIES):
        attempts.append("modalities")
    if "grid_thw" in params or "image_grid_thw" in params:
        attempts.extend(("patch_images", "token_patches"))
    if main_input == "input_values" or "input_values" in params:
        attempts.append("audio_channel")
        if "pixel_values_videos" in params:
            attempts.append("audio_video")  # audio-video encoders (PE audio-video) need both
    if "input_features" in params:
        attempts.extend(FEATURE_ATTEMPTS)
    if main_input not in params and "hidden_states" in params:
        attempts.append("latents")
    if "decoder_input_values" in params:
        attempts.append("hidden_values")  # SpeechT5Model: no pre-nets, embeddings in and out
    if main_input == "pixel_values" and getattr(model.config, "keypoint_detector_config", None):
        attempts.append("image_pair")  # keypoint matchers (SuperGlue, LightGlue) take two images
    if any(p in params for p in PROMPT_ARGUMENTS):
        attempts.append("prompt")
    return attempts


def _ids(model: torch.nn.Module, config: Any, g: torch.Generator) -> dict[str, Any]:
    name = type(model).__name__
    shape: tuple[int, ...] = (1, SEQ_LEN)
    codebooks = getattr(config, "num_codebooks", None)
    if name.endswith("ForMultipleChoice"):
        shape = (1, 2, SEQ_LEN)
    elif isinstance(codebooks, int) and codebooks > 1 and name.startswith("Musicgen"):
        shape = (codebooks, SEQ_LEN)  # one row per codebook (MusicGen's decoder)
    elif isinstance(codebooks, int) and getattr(config, "codebook_vocab_size", None):
        # Kyutai STT: each step is a text token and one token per audio codebook, embedded
        # with per-codebook offsets and summed: (batch, seq, 1 + num_codebooks).
        shape = (1, SEQ_LEN, 1 + codebooks)
    ids = _token_ids(model, config, shape, g)
    eos = getattr(config, "eos_token_id", None)
    if name.endswith("ForSequenceClassification") and isinstance(eos, int):
        ids[..., -1] = eos  # BART-style heads pool the hidden state at </s>
    inputs: dict[str, Any] = {"input_ids": ids}
    if _accepts(model, "attention_mask"):
        # One mask entry per step, not per codebook token (Kyutai).
        steps = ids[..., 0] if ids.dim() == 3 and shape[1] == SEQ_LEN else ids
        inputs["attention_mask"] = torch.ones_like(steps)
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
        with_audio = "input_values" in b.inputs
        if attempt == "features_first_layer" and (width := first_linear_width(model)):
            return {"input_features": b.randn(1, 4 * SEQ_LEN, width)}
        return {"input_features": input_features(config, g, attempt, with_audio=with_audio)}
    if name == "input_values":
        if attempt == "hidden_values":
            return {"input_values": b.randn(1, SEQ_LEN, int(b.field("hidden_size", default=64)))}
        values = input_values(config, g)
        if attempt in ("audio_channel", "audio_video") and values.dim() == 2:
            values = values.unsqueeze(1)  # codecs and CTC heads that take (batch, 1, samples)
        return {"input_values": values}
    if name == "pixel_values_videos":
        return {"pixel_values_videos": _video(config, g)}
    if name == "flattened_patches":
        return {"flattened_patches": _flattened_patches(config, g)}
    if name == "audio_mel":
        return {"audio_mel": audio_mel(config, g)}
    if name == "inputs" and (encoder := _wrapped_encoder(model)) is not None:
        # Speech encoder-decoder wrappers pass ``inputs`` to their encoder as its main input.
        inner = str(encoder.main_input_name)
        value = _main(encoder, inner, g, b, attempt).get(inner)
        return {} if value is None else {name: value}
    value = named_input(b, name)
    return {} if value is None else {name: value}


def _wrapped_encoder(model: torch.nn.Module) -> torch.nn.Module | None:
    """The encoder of an encoder-decoder wrapper whose own main input is ``inputs``."""
    encoder = getattr(model, "encoder", None)
    inner = getattr(encoder, "main_input_name", None)
    if isinstance(encoder, torch.nn.Module) and inner in MAIN_INPUTS and inner != "inputs":
        return encoder
    return None


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
    elif main_input not in params and "hidden_states" in required:
        # Halves of an audio tokenizer whose forward names its input hidden_states (VibeVoice):
        # the encoder takes the main input (raw audio), the decoder latents.
        if attempt == "latents":
            inputs["hidden_states"] = named_input(b, "latents")
        elif (value := _main(model, main_input, g, b, attempt).get(main_input)) is not None:
            inputs["hidden_states"] = value
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
    # A later layout of one modality comes with the others where the main input is another
    # (CLAP and CLVP take token ids and features, PE audio token ids and audio).
    with_modalities = attempt in ("modalities", "prompt") or (
        (attempt in FEATURE_ATTEMPTS and main_input != "input_features")
        or (attempt == "audio_channel" and main_input != "input_values")
    )
    extra = [m for m in MODALITIES if m in params] if with_modalities else []
    if attempt == "audio_video":
        extra = ["input_values", "pixel_values_videos"]
    for arg in [*required, *extra]:
        if arg not in inputs:
            inputs.update(_main(model, arg, g, b, attempt) if arg in MAIN_INPUTS else {})
        if arg not in inputs and (value := named_input(b, arg)) is not None:
            inputs[arg] = value
    for tiled in ("target_sizes", "aspect_ratio_ids"):
        # Optional in some signatures, but the NaViT-style towers index positions by
        # target_sizes; Mllama's tiles come with their aspect ratio.
        if tiled in params and "pixel_values" in inputs:
            inputs.update(tiled_inputs(b, tiled))
    naflex = [n for n in ("spatial_shapes", "pixel_position_ids") if n in params]
    if naflex and "pixel_values" in inputs:
        naflex_inputs = naflex_patches(b)  # patch sequences, not an image tensor
        for key in ("pixel_values", "pixel_attention_mask", *naflex):
            if key in params:
                inputs[key] = naflex_inputs[key]
    place_prompt(b, params)
    if attempt == "prompt":
        prompt_arguments(b, params, lambda: _token_ids(model, config, (1, DECODER_LEN), g))
    if "decoder_input_values" in params and "decoder_input_ids" not in params:
        # Speech decoders (SpeechT5): mel frames for the decoder pre-net, or its embeddings.
        key = "hidden_size" if attempt == "hidden_values" else "num_mel_bins"
        width = int(b.field(key, "hidden_size", default=64))
        inputs["decoder_input_values"] = b.randn(1, DECODER_LEN, width)
        return inputs
    derives_decoder = name.endswith("ForSequenceClassification")
    if (
        getattr(config, "is_encoder_decoder", False)
        and _accepts(model, "decoder_input_ids")
        and not derives_decoder  # these shift input_ids into the decoder themselves
    ):
        shape = decoder_ids_shape(config)
        inputs["decoder_input_ids"] = _token_ids(model, config, shape, g)
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
