"""Forward arguments built by parameter name: what a signature asks for beside its main input.

:func:`named_input` makes one argument of ``model.forward`` from its name and the
model's config: boxes for document models, patch grids for the vision towers of
multimodal models (Qwen-VL style, which take flattened patches and their
``grid_thw``), the past of time-series models, masks, visual features, Perceiver's
``inputs``. It returns ``None`` for a name it has no rule for; the caller then
leaves the argument out (the forward's own error names it). The rules are by
name and config fields, not by class, so that a new model with the same
parameter gets the same input.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from graphcheck.zoo._inputs_prompts import prompt_input

__all__ = [
    "Builder",
    "grid_patches",
    "naflex_patches",
    "named_input",
    "tiled_inputs",
    "time_series_length",
]

#: Tokens of the boxes, features and patches made here (the warm-up's sequence length).
SEQ_LEN = 16


class Builder:
    """What one named rule needs: the model, its config, the generator, the inputs so far."""

    def __init__(
        self,
        model: torch.nn.Module,
        g: torch.Generator,
        inputs: dict[str, Any],
        token_ids: Callable[[tuple[int, ...]], torch.Tensor],
    ) -> None:
        self.model = model
        self.config: Any = model.config
        self.g = g
        self.inputs = inputs
        self.token_ids = token_ids  # ids that avoid every special token (inputs.py)

    def field(self, *names: str, default: Any = None) -> Any:
        """The first of ``names`` that the config (or its vision/text sub-config) sets."""
        for cfg in (self.config, *_subs(self.config)):
            for name in names:
                value = getattr(cfg, name, None)
                if value is not None:
                    return value
        return default

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(shape, generator=self.g)

    def seq_len(self) -> int:
        ids = self.inputs.get("input_ids")
        return int(ids.shape[-1]) if isinstance(ids, torch.Tensor) else SEQ_LEN


def _subs(config: Any) -> list[Any]:
    return [
        sub
        for key in ("vision_config", "text_config", "audio_config", "encoder_config")
        if (sub := getattr(config, key, None)) is not None
    ]


def _boxes(b: Builder) -> torch.Tensor:
    """Valid boxes (x0 <= x1, y0 <= y1) in LayoutLM's 0..1000 page coordinates."""
    n = b.seq_len()
    corner = torch.randint(0, 500, (1, n, 2), generator=b.g)
    size = torch.randint(1, 400, (1, n, 2), generator=b.g)
    return torch.cat([corner, corner + size], dim=-1)


def grid_patches(
    b: Builder, *, images: bool = False, tokens: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Flattened patches and their ``grid_thw`` for a Qwen-VL-style vision tower.

    One image of ``2m x 2m`` patches (``m``: the spatial merge size, so that the
    merger's windows tile it), each patch ``channels * temporal * patch * patch``
    values, as the processors of these models flatten them; with ``images``, each
    patch as a small image (Kimi-K2.5's patch embedding is a 2-D convolution); with
    ``tokens``, one ``(m * patch, m * patch, channels)`` block per merged token and the
    grid counted in those tokens, ``[[1, 2, 2]]`` (Inkling 2's tower).
    """
    patch = int(b.field("patch_size", default=14))
    temporal = int(b.field("temporal_patch_size", "patch_temporal", default=1))
    channels = int(b.field("in_channels", "num_channels", "in_chans", default=3))
    merge = int(b.field("spatial_merge_size", "merge_size", default=2))
    side = 2 * merge
    if tokens:
        grid = torch.tensor([[1, 2, 2]], dtype=torch.long)
        return b.randn(4, merge * patch, merge * patch, channels), grid
    grid = torch.tensor([[1, side, side]], dtype=torch.long)
    if images:
        return b.randn(side * side, channels, patch, patch), grid
    return b.randn(side * side, channels * temporal * patch * patch), grid


def naflex_patches(b: Builder) -> dict[str, torch.Tensor]:
    """A native-resolution vision tower's inputs (SigLIP 2's NaFlex, Gemma 4's vision).

    A 4x4 grid of patches flattened to ``channels * patch * patch`` values, their
    mask, the grid's shape and each patch's (x, y) position: what these
    processors make instead of an image tensor.
    """
    patch = int(b.field("patch_size", default=16))
    channels = int(b.field("num_channels", default=3))
    side = 4
    positions = torch.stack(
        torch.meshgrid(torch.arange(side), torch.arange(side), indexing="xy"), -1
    ).reshape(1, side * side, 2)
    return {
        "pixel_values": b.randn(1, side * side, channels * patch * patch),
        "pixel_attention_mask": torch.ones((1, side * side), dtype=torch.long),
        "spatial_shapes": torch.tensor([[side, side]], dtype=torch.long),
        "pixel_position_ids": positions,
    }


def _target_sizes(b: Builder) -> Any:
    """MiniCPM-V's NaViT-style towers: the patch grid ``(h, w)`` of each image in the batch."""
    pixels = b.inputs.get("pixel_values")
    if not isinstance(pixels, torch.Tensor) or pixels.dim() != 4:
        return None
    patch = int(b.field("patch_size", default=14))
    h, w = pixels.shape[-2] // patch, pixels.shape[-1] // patch
    return torch.tensor([[h, w]] * pixels.shape[0], dtype=torch.int32)


def tiled_inputs(b: Builder, name: str) -> dict[str, torch.Tensor]:
    """What an image tensor brings along when the signature names ``name``.

    ``target_sizes``: the patch grid of each image (MiniCPM-V). ``aspect_ratio_ids``:
    Mllama's tiled images, ``(batch, images, max_num_tiles, channels, h, w)``, one image of
    aspect ratio id 1 (the first supported ratio, 1x1: one tile; 0 is padding) with its
    tile mask.
    """
    pixels = b.inputs.get("pixel_values")
    if not isinstance(pixels, torch.Tensor) or name in b.inputs:
        return {}
    if name == "target_sizes":
        sizes = _target_sizes(b)
        return {} if sizes is None else {"target_sizes": sizes}
    tiles = int(b.field("max_num_tiles", default=4))
    if pixels.dim() == 4:
        pixels = pixels.unsqueeze(1).unsqueeze(1).expand(-1, 1, tiles, -1, -1, -1).contiguous()
    mask = torch.zeros((1, 1, tiles), dtype=torch.long)
    mask[..., 0] = 1
    return {
        "pixel_values": pixels,
        "aspect_ratio_ids": torch.ones((1, 1), dtype=torch.long),
        "aspect_ratio_mask": mask,
    }


def time_series_length(config: Any) -> int:
    """The past a time-series model reads: its context plus its largest lag."""
    context = int(getattr(config, "context_length", None) or SEQ_LEN)
    lags = getattr(config, "lags_sequence", None)
    return context + (max(lags) if isinstance(lags, (list, tuple)) and lags else 0)


def _series(b: Builder, length: int) -> torch.Tensor:
    channels = b.field("num_input_channels")
    if isinstance(channels, int):
        return b.randn(1, length, channels)  # PatchTST, PatchTSMixer: (batch, time, channels)
    size = b.field("input_size", default=1)
    return b.randn(1, length, size) if size > 1 else b.randn(1, length)


def _past(b: Builder, name: str) -> Any:
    length = time_series_length(b.config)
    features = int(b.field("num_time_features", default=0))
    if name == "past_values":
        return _series(b, length)
    if name in ("past_observed_mask", "observed_mask"):
        return torch.ones_like(b.inputs.get("past_values", _series(b, length)))
    if name == "past_values_padding":
        return torch.zeros_like(b.inputs.get("past_values", _series(b, length)))
    if name == "past_time_features":
        return b.randn(1, length, features)
    prediction = int(b.field("prediction_length", default=SEQ_LEN // 2))
    if name == "future_values":
        return _series(b, prediction)
    if name == "future_time_features":
        return b.randn(1, prediction, features)
    if name == "static_categorical_features":
        n = int(b.field("num_static_categorical_features", default=0))
        cardinality = b.field("cardinality", default=[1] * n) or [1] * n
        return torch.tensor([[min(1, c - 1) for c in cardinality[:n]]], dtype=torch.long)
    if name == "static_real_features":
        return b.randn(1, int(b.field("num_static_real_features", default=0)))
    return None


def _perceiver_inputs(b: Builder) -> Any:
    """Perceiver's ``inputs``: what its input preprocessor takes (ids, an image, or embeddings)."""
    # The heads wrap PerceiverModel (``model.perceiver``): the first preprocessor found is its own.
    found = (getattr(m, "input_preprocessor", None) for m in b.model.modules())
    preprocessor = type(next((p for p in found if p is not None), None)).__name__
    if "Text" in preprocessor:
        return b.token_ids((1, SEQ_LEN))
    if "Image" in preprocessor:
        size = int(b.field("image_size", default=56))
        return b.randn(1, int(b.field("num_channels", default=3)), size, size)
    return b.randn(1, SEQ_LEN, int(b.field("d_model", default=64)))


def _num_patches(model: torch.nn.Module) -> int | None:
    for module in model.modules():
        n = getattr(module, "num_patches", None)
        if isinstance(n, int) and n > 0:
            return n
    return None


def _mask_like(b: Builder, name: str) -> Any:
    """``<x>_attention_mask``: ones shaped like ``<x>_input_ids`` (or the main ids)."""
    prefix = name.removesuffix("attention_mask")
    ids = b.inputs.get(f"{prefix}input_ids", b.inputs.get("input_ids"))
    if isinstance(ids, torch.Tensor):
        return torch.ones_like(ids)
    noise, context = b.inputs.get("noise_embeds"), b.inputs.get("context_hidden_states")
    if isinstance(noise, torch.Tensor) and isinstance(context, torch.Tensor):
        # DFlash: the keys are the target's context then the draft block.
        return torch.ones((1, context.shape[1] + noise.shape[1]), dtype=torch.long)
    states = b.inputs.get("states")
    if isinstance(states, torch.Tensor):
        return torch.ones(states.shape[:2], dtype=torch.long)  # one per trajectory step
    return torch.ones((1, SEQ_LEN), dtype=torch.long)


def _features_mask(b: Builder) -> Any:
    """Ones over the frames of ``input_features`` (the last dim when mel bins come first)."""
    features = b.inputs.get("input_features")
    if not isinstance(features, torch.Tensor):
        return None
    mel = b.field("num_mel_bins", "feature_size", "input_dim")
    time_dim = -1 if features.dim() == 3 and features.shape[1] == mel else 1
    return torch.ones((1, features.shape[time_dim]), dtype=torch.long)


def named_input(b: Builder, name: str) -> Any:
    """The argument ``name`` of ``b.model.forward``, or ``None`` without a rule for it."""
    if name.endswith("input_ids"):
        return b.token_ids((1, SEQ_LEN))
    if name.endswith("attention_mask") and name != "pixel_attention_mask":
        return _mask_like(b, name)
    if name == "bbox":
        return _boxes(b)
    if name in ("grid_thw", "image_grid_thw"):
        return grid_patches(b)[1]
    if name == "target_sizes":
        return _target_sizes(b)
    if name in ("prompt_pixel_values", "prompt_masks"):
        # SegGPT's in-context prompt: an image and its mask, shaped like the input image.
        pixels = b.inputs.get("pixel_values")
        return b.randn(*pixels.shape) if isinstance(pixels, torch.Tensor) else None
    if name == "merge_sizes":
        return torch.tensor([int(b.field("spatial_merge_size", "merge_size", default=2))])
    if name.startswith(("past_", "future_", "static_")) or name == "observed_mask":
        return _past(b, name)
    if name == "task_inputs":
        # OneFormer's task prompt ("the task is semantic"): token ids of its task length.
        return b.token_ids((1, int(b.field("task_seq_len", default=SEQ_LEN))))
    if name == "freq":
        return torch.zeros((1, 1), dtype=torch.long)  # TimesFM: the high-frequency bucket
    if name == "inputs":
        return _perceiver_inputs(b)
    if name in ("input_features_mask", "feature_attention_mask"):
        return _features_mask(b)
    if name == "audio_mel_mask":
        mel = b.inputs.get("audio_mel")
        return torch.zeros(mel.shape[:2], dtype=torch.bool) if mel is not None else None
    if name == "bool_masked_pos":
        n = _num_patches(b.model)
        if n is None:
            return None
        mask = torch.zeros((1, n), dtype=torch.bool)
        mask[:, : n // 2] = True  # VideoMAE: the same count masked in every sample
        return mask
    if name == "visual_feats":
        return b.randn(1, SEQ_LEN // 2, int(b.field("visual_feat_dim", default=64)))
    if name == "visual_pos":
        return torch.rand(
            (1, SEQ_LEN // 2, int(b.field("visual_pos_dim", default=4))), generator=b.g
        )
    if name == "latents":
        # Codec decoders: (batch, latent channels, frames).
        dim = b.field("hidden_size", "latent_dim", "codebook_dim", default=64)
        return b.randn(1, int(dim), SEQ_LEN)
    if name == "inputs_embeds":
        # Heads that read another model's states (Nemotron 3.5's word timestamps).
        return b.randn(1, SEQ_LEN, _hidden(b))
    if name == "noise_embeds":
        # DFlash draft models (MuSE Glimmer's assistant): one block of noised embeddings.
        return b.randn(1, int(b.field("block_size", default=SEQ_LEN)), _hidden(b))
    if name == "context_hidden_states":
        # ... beside the target model's states of its target_layer_ids, concatenated.
        layers = b.field("target_layer_ids", default=[0])
        return b.randn(1, SEQ_LEN, _hidden(b) * max(1, len(layers)))
    value = _trajectory(b, name)
    return value if value is not None else prompt_input(b, name)


def _hidden(b: Builder) -> int:
    return int(b.field("hidden_size", default=64))


def _trajectory(b: Builder, name: str) -> Any:
    """Decision Transformer's trajectory: states, actions, rewards, returns-to-go, timesteps."""
    n = SEQ_LEN // 2
    if name == "states":
        return b.randn(1, n, int(b.field("state_dim", default=8)))
    if name == "actions":
        return b.randn(1, n, int(b.field("act_dim", default=4)))
    if name in ("rewards", "returns_to_go"):
        return b.randn(1, n, 1)
    if name == "timesteps":
        return torch.arange(n, dtype=torch.long).unsqueeze(0)
    return None
