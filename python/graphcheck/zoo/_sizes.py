"""Sizes, key tables and small helpers shared by the tiny-config modules."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, TypeGuard

LEVELS = ("tiny", "narrow", "shallow")
WIDTH = 64
HEADS = 4
HEAD_DIM = WIDTH // HEADS
KV_HEADS = 2
FFN = 128
LAYERS = 2
VOCAB = 512
RESERVED_IDS = 64
LOW_IDS = 4
POSITIONS = 128
#: Object queries of detection and segmentation heads (fewer than a tiny image's tokens).
QUERIES = 16
EXPERTS = 4
TOP_K = 2
#: Largest image side at the narrow level (SAM's 1024 would take a minute per forward).
MAX_IMAGE = 256
#: Most layers a tiny config keeps to cover every layer type (see _per_layer).
MAX_LAYERS = 6

Dict = dict[str, Any]


# ---------------------------------------------------------------- key classes
_LAYER_KEYS = (
    "num_hidden_layers",
    "num_layers",
    "n_layer",
    "n_layers",
    "encoder_layers",
    "decoder_layers",
    "num_encoder_layers",
    "num_decoder_layers",
    "depth",
    "decoder_num_hidden_layers",
    "decoder_num_layers",
    "conf_num_hidden_layers",
    "num_text_layers",
    "num_vision_layers",
    "vision_layers",
    "text_layers",
    "resampler_depth",
    "num_adapter_layers",
    "speech_decoder_postnet_layers",
    "memory_attention_num_layers",
    "num_mel_attn_blocks",
    "aligner_num_add_layers",
    "num_timestamp_prediction_layers",
    "num_lstm_layers",
    "num_single_layers",
    "num_cross_layers",
    "text_encoder_layers",
    "num_decoder_layers_expert",
)
_WIDTH_RE = re.compile(
    r"(?:^|_)(hidden_size|d_model|n_embd|embed_dim|hidden_dim|emb_dim|embedding_size|"
    r"embedding_dim|projection_dim|word_embed_proj_dim|model_dim|d_embed|dim)$"
)
_WIDTH_EXCLUDE = {
    "head_dim",
    "codebook_dim",
    "latent_dim",
    "mel_dim",
    "input_dim",
    "model_in_dim",  # a vocoder's mel bins (HiFi-GAN), tied to its TTS model's num_mel_bins
    "output_dim",
    "feature_dim",
    "time_dim",
    "cond_dim",
    "num_hidden_dim",
    "image_token_embed_dim",
    "spk_emb_dim",
    # SuperPoint: one score per pixel of an 8x8 cell plus the "no keypoint" bin (65).
    "keypoint_decoder_dim",
}
_FFN_RE = re.compile(r"(?:^|_)(intermediate_size|ffn_dim|d_ff|mlp_dim|ffn_hidden_size|d_inner)$")
_HEADS_RE = re.compile(r"(?:^|_)(num_attention_heads|attention_heads|n_head|n_heads|num_heads)$")
_KV_RE = re.compile(
    r"(?:^|_)(num_key_value_heads|num_kv_heads|n_kv_heads|n_head_kv|multi_query_group_num|"
    r"key_value_heads)$"
)
_EXPERTS_KEYS = (
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
    "moe_num_experts",
    "num_routed_experts",
    "n_experts",
    "experts",
    "expert_count",
)
_TOPK_KEYS = (
    "num_experts_per_tok",
    "num_experts_per_token",
    "moe_topk",
    "moe_k",
    "top_k",
    "experts_per_token",
    "num_selected_experts",
    "router_top_k",
    "moe_top_k",
)
_POSITION_KEYS = (
    "max_position_embeddings",
    "n_positions",
    "max_target_positions",
    "n_ctx",
    "max_seq_len",
    "max_sequence_length",
    "seq_length",
    "max_text_positions",
    "max_2d_position_embeddings",
)
_TOKEN_RE = re.compile(r"(?:^|_)token_(?:id|ids|index)$")
_VOCAB_RE = re.compile(r"(?:^|_)vocab_size(?:_per_layer_input)?$")
_INDEX_LIST_RE = re.compile(
    r"(indexes|indices|_idx|_ids|_layers|_blocks)$|^(out_indices|moe_layers|global_attn_indexes)$"
)
#: Per-stage lists of widths (shrunk at the tiny level only).
_STAGE_WIDTH_KEYS = (
    "hidden_sizes",
    "embed_dims",
    "embed_dim_per_stage",
    "neck_hidden_sizes",
    "dims",
    "channels",
    "stage_out_channels",
    "stage_in_channels",
    "stage_mid_channels",
    "conv_dim",
    "tdnn_dim",
    "encoder_in_channels",
    "decoder_in_channels",
    "backbone_channel_list",
    "hidden_dims",
)
_STAGE_HEADS_KEYS = ("num_attention_heads", "num_heads", "num_attention_heads_per_stage", "heads")
_STAGE_DEPTH_KEYS = (
    "depths",
    "blocks_per_stage",
    "stage_num_blocks",
    "num_block_repeats",
    "stage_numb_of_layers",
    "num_layers_per_stage",
)


def _scale_list(values: list[int], base: int) -> list[int]:
    return [min(v, base * 2 ** min(i, 3)) for i, v in enumerate(values)]


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The widths a tiny config shrinks to (defaults: the transformers zoo's).

    An engine whose kernels accept only some head sizes picks others: vLLM's
    CPU attention needs a head dimension of at least 32 (``heads=2``).
    """

    width: int = WIDTH
    heads: int = HEADS
    kv_heads: int = KV_HEADS
    ffn: int = FFN

    @property
    def head_dim(self) -> int:
        """``width // heads``: one head dimension everywhere."""
        return self.width // self.heads


class _Ctx:
    """Shared state of one shrink: the level, the sizes and the special-token remapping."""

    def __init__(self, level: str, sizes: Sizes | None = None) -> None:
        if level not in LEVELS:
            raise ValueError(f"tiny config level must be one of {LEVELS}, got {level!r}")
        self.level = level
        self.sizes = sizes or Sizes()
        self.token_map: dict[int, int] = {}

    def token(self, value: int) -> int:
        if value < VOCAB - RESERVED_IDS:
            return value
        if value not in self.token_map:
            if len(self.token_map) >= RESERVED_IDS:
                return VOCAB - 1
            self.token_map[value] = VOCAB - 1 - len(self.token_map)
        return self.token_map[value]


def _is_subconfig(value: object) -> bool:
    return isinstance(value, dict) and isinstance(value.get("model_type"), str)


def _int_list(value: object) -> TypeGuard[list[int]]:
    # A TypeGuard: a true result narrows a config dict's value (Any | None) to list[int].
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(x, int) and not isinstance(x, bool) for x in value)
    )


def _rope_dicts(rope: object) -> list[Dict]:
    if not isinstance(rope, dict):
        return []
    if "rope_type" in rope or "rope_theta" in rope or "type" in rope:
        return [rope]
    return [v for v in rope.values() if isinstance(v, dict)]
