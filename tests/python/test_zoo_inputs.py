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
