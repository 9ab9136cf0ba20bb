"""Override entries of the vision models whose defaults a generic rule cannot reach.

Part of the override table (:mod:`graphcheck.zoo.overrides`, which merges
:data:`VISION_FIXUPS` into its ``FIXUPS``): each entry edits the shrunk config
dict of one model type and says why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphcheck.zoo._util import layer_count

__all__ = ["VISION_FIXUPS"]

Dict = dict[str, Any]


def _pp_doclayout_v2(d: Dict, level: str) -> None:
    # The detector's forward ends in post-processing that reads per-label thresholds and the
    # reading-order class of each label (a checkpoint sets both; the default leaves None), and
    # the reading-order model embeds the boxes' 0..1000 page coordinates.
    n = len(d.get("id2label") or {}) or 2
    d.setdefault("class_thresholds", None)
    if d["class_thresholds"] is None:
        d["class_thresholds"] = [0.5] * n
    if d.get("class_order") is None:
        d["class_order"] = list(range(n))
    order = d.get("reading_order_config")
    if isinstance(order, dict):
        order["max_2d_position_embeddings"] = 1024


def _pp_doclayout_x4(d: Dict, level: str) -> None:
    # The mask head's lateral convolution takes the backbone's first stage output (x4_feat_dim
    # is that stage's width, 128 by default): it follows the shrunk backbone.
    backbone = d.get("backbone_config")
    if isinstance(backbone, dict) and isinstance(backbone.get("stage_out_channels"), list):
        d["x4_feat_dim"] = backbone["stage_out_channels"][0]


def _eomt(d: Dict, level: str) -> None:
    # The queries join the last num_blocks layers (4 by default): with fewer layers than that
    # they never join, and the mask head gets no patch tokens. Keep it within the layers.
    if isinstance(d.get("num_blocks"), int):
        d["num_blocks"] = min(d["num_blocks"], layer_count(d))


def _efficientnet(d: Dict, level: str) -> None:
    # hidden_dim is the width of the top convolution, which the model builds as
    # round_filters(1280) (1280 * width_coefficient, to the depth divisor): it is not a free
    # width, and the generic shrinking of "*_dim" widths breaks the batch norm that reads it.
    divisor = int(d.get("depth_divisor") or 8)
    channels = 1280 * float(d.get("width_coefficient") or 1.0)
    dim = max(divisor, int(channels + divisor / 2) // divisor * divisor)
    d["hidden_dim"] = dim + divisor if dim < 0.9 * channels else dim


def _edgetam(d: Dict, level: str) -> None:
    # The timm RepViT backbone keeps timm's widths (the shrinking does not reach into timm):
    # the neck's backbone_channel_list (its stages, top-down) stays RepViT-M1's.
    for cfg in (d, d.get("vision_config")):
        if isinstance(cfg, dict) and isinstance(cfg.get("backbone_channel_list"), list):
            cfg["backbone_channel_list"] = [384, 192, 96, 48]


def _sam(d: Dict, level: str) -> None:
    # The vision neck's output_channels (256) is the mask decoder's width (256 by default),
    # and the shared positional embedding's num_pos_feats half of it: both follow the decoder.
    # Not a generic rule: the OCR models built on SAM's encoder (GOT-OCR2, DeepSeek-OCR-2, ...)
    # feed output_channels to their own fixed-width projector.
    vision, decoder = d.get("vision_config"), d.get("mask_decoder_config")
    if (
        isinstance(vision, dict)
        and isinstance(decoder, dict)
        and isinstance(decoder.get("hidden_size"), int)
    ):
        vision["output_channels"] = decoder["hidden_size"]
        vision["num_pos_feats"] = decoder["hidden_size"] // 2


def _zoedepth(d: Dict, level: str) -> None:
    # The metric head's bottleneck is the fusion stage's output (both 256 by default).
    if isinstance(d.get("fusion_hidden_size"), int):
        d["bottleneck_features"] = d["fusion_hidden_size"]


def _llama4(d: Dict, level: str) -> None:
    # The vision projector's MLP takes the pixel-shuffled patches (hidden_size / ratio**2
    # values: 1408 * 4 = 5632 in the checkpoints); the default vision width (768) does not
    # match its own intermediate_size (5632), so tie it to the tiny width.
    vision = d.get("vision_config") if d.get("model_type") == "llama4" else d
    if not isinstance(vision, dict):
        return
    ratio, hidden = vision.get("pixel_shuffle_ratio"), vision.get("hidden_size")
    if isinstance(ratio, float) and ratio > 0 and isinstance(hidden, int):
        vision["intermediate_size"] = int(hidden / ratio**2)


def _pe_video(d: Dict, level: str) -> None:
    # The frame encoder is timm's PE-Core ViT-L/14 at 336 pixels (300M parameters, and the
    # shrinking does not reach into timm): timm's own keyword arguments shrink it to the
    # zoo's sizes, at 64 pixels in 16-pixel patches; the zoo's frames read image_size.
    for key, value in d.items():
        if not isinstance(value, dict):
            continue
        if key == "vision_config" and value.get("model_type") == "timm_wrapper":
            value["model_args"] = {
                "img_size": 64,
                "patch_size": 16,
                "depth": 2,
                "embed_dim": 64,
                "num_heads": 4,
            }
            value["image_size"] = 64
        else:
            _pe_video(value, level)  # PeVideoModel holds the encoder's config as video_config


def _depth_pro(d: Dict, level: str) -> None:
    # DepthPro cuts the image, scaled by 0.25, 0.5 and 1, into patch_size tiles (384: the
    # patch encoder's image size) and taps two of the patch encoder's layers
    # (intermediate_hook_ids [11, 5]). Tiles become the tiny encoder's image size, the taps
    # its two layers, and the image (DepthPro's config names none; the zoo's input reads it)
    # four tiles a side, so that the 0.25 scale still holds one.
    patch = d.get("patch_model_config")
    if not isinstance(patch, dict) or not isinstance(patch.get("image_size"), int):
        return
    d["patch_size"] = patch["image_size"]
    layers = layer_count(patch)
    d["intermediate_hook_ids"] = [layers - 1, 0]
    d["image_size"] = 4 * patch["image_size"]


def _uvdoc(d: Dict, level: str) -> None:
    # The head concatenates one feature map per bridge stage (bridge_connector[0] *
    # len(stage_configs) channels), but the default backbone outputs only the last stage
    # (out_indices [6]); the checkpoints output every stage.
    backbone = d.get("backbone_config")
    if isinstance(backbone, dict) and isinstance(backbone.get("stage_configs"), list):
        n = len(backbone["stage_configs"])
        backbone["out_indices"] = list(range(1, n + 1))
        backbone["out_features"] = [f"stage{i}" for i in range(1, n + 1)]


VISION_FIXUPS: dict[str, Callable[[Dict, str], None]] = {
    "pp_doclayout_v2": _pp_doclayout_v2,
    "pp_doclayout_v3": _pp_doclayout_x4,
    "pp_doclayout_v4": _pp_doclayout_x4,
    "eomt": _eomt,
    "eomt_dinov3": _eomt,
    "efficientnet": _efficientnet,
    "edgetam": _edgetam,
    "edgetam_vision_model": _edgetam,
    "sam": _sam,
    "sam_hq": _sam,
    "zoedepth": _zoedepth,
    "uvdoc": _uvdoc,
    "llama4": _llama4,
    "llama4_vision_model": _llama4,
    "pe_video": _pe_video,
    "pe_video_encoder": _pe_video,
    "depth_pro": _depth_pro,
}
