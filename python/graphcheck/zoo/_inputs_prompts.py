"""Prompt inputs: what a forward needs beside its token ids and image to tie the two together.

Multimodal models read a prompt whose token ids hold placeholders where the image
goes (BLIP-2 and InstructBLIP: one image token per query token of the Q-Former),
or a mask that says where (Kosmos-2's ``image_embeds_position_mask``); question
answering heads find the question by its tokens (Longformer's separators,
Splinter's question token). Random ids hold none of these, so the forward either
raises or takes a path no prompt takes.

:func:`place_prompt` edits a finished input set in place (placeholders in the ids,
the mask that says where the image goes); :func:`prompt_input` makes the required
arguments of this kind by name (``query_embeds``, ``classes_structure``, JEV's
``marks``); :func:`prompt_arguments` makes the optional ones that the ``prompt``
attempt (:func:`graphcheck.zoo.inputs.input_attempts`) adds where the plain set
fails: a model that runs without them keeps the plain set. Rules are by parameter
name and config field, as in :mod:`graphcheck.zoo._inputs_named`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from graphcheck.zoo._inputs_named import Builder

__all__ = ["PROMPT_ARGUMENTS", "place_prompt", "prompt_arguments", "prompt_input"]

#: Optional arguments the ``prompt`` attempt makes where the signature names them.
PROMPT_ARGUMENTS = (
    "global_attention_mask",
    "question_positions",
    "image_attention_mask",
    "decoder_input_ids",
    "encoder_hidden_states",
)
#: Token ids before the first placeholder: a prompt starts with its BOS.
_PREFIX = 1


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _placeholder(config: Any) -> int | None:
    """The image (or video) token id of a Q-Former prompt, where the config names one."""
    for name in ("image_token_id", "video_token_id"):
        token = _int(getattr(config, name, None))
        if token is not None:
            return token
    return None


def place_prompt(b: Builder, params: dict[str, Any]) -> None:
    """Ties ``input_ids`` to the image in ``b.inputs`` (both present), in place.

    - A Q-Former model (the config counts ``num_query_tokens`` and names an image or
      video token): that many placeholders per frame after the first token, where its
      projected queries are scattered (BLIP-2, InstructBLIP, InstructBLIP-Video).
    - ``image_embeds_position_mask`` in the signature: ones at ``latent_query_num``
      positions after the first token, where Kosmos-2 puts its image embeddings.
    """
    ids = b.inputs.get("input_ids")
    pixels = b.inputs.get("pixel_values")
    if not isinstance(ids, torch.Tensor) or not isinstance(pixels, torch.Tensor):
        return
    frames = int(pixels.shape[1]) if pixels.dim() == 5 else 1
    queries = _int(getattr(b.config, "num_query_tokens", None))
    token = _placeholder(b.config)
    if queries is not None and token is not None and _PREFIX + queries * frames < ids.shape[-1]:
        ids[..., _PREFIX : _PREFIX + queries * frames] = token
    latents = _int(b.field("latent_query_num"))
    fits = latents is not None and _PREFIX + latents < ids.shape[-1]
    if "image_embeds_position_mask" in params and latents is not None and fits:
        mask = torch.zeros_like(ids)
        mask[..., _PREFIX : _PREFIX + latents] = 1
        b.inputs["image_embeds_position_mask"] = mask


def prompt_arguments(
    b: Builder, params: dict[str, Any], decoder_ids: Callable[[], torch.Tensor]
) -> None:
    """The optional arguments of :data:`PROMPT_ARGUMENTS` the signature names, in place.

    - ``global_attention_mask``: global attention on the first token (Longformer's QA and
      multiple-choice heads derive it from question/answer separators random ids lack;
      its classification head's default is the first token);
    - ``question_positions``: one question at the second token (Splinter's pre-training
      head finds its question tokens otherwise);
    - ``image_attention_mask`` (with ``pixel_values``): the image as a sequence of one
      image per prompt, ``(batch, images, channels, h, w)``, that every token attends to
      (IDEFICS);
    - ``decoder_input_ids`` (``decoder_ids()``) for a model that is not an encoder-decoder
      but decodes an answer (BLIP's question answering);
    - ``encoder_hidden_states`` where the config names their width (``encoder_hidden_size``):
      the image features a Q-Former's cross-attention layers read (BLIP-2's, alone).
    """
    ids = b.inputs.get("input_ids")
    if "global_attention_mask" in params and isinstance(ids, torch.Tensor):
        mask = torch.zeros_like(ids)
        mask[..., 0] = 1
        b.inputs["global_attention_mask"] = mask
    if "question_positions" in params and isinstance(ids, torch.Tensor):
        b.inputs["question_positions"] = torch.full((ids.shape[0], 1), 1, dtype=torch.long)
    pixels = b.inputs.get("pixel_values")
    if "image_attention_mask" in params and isinstance(pixels, torch.Tensor):
        if pixels.dim() == 4:
            b.inputs["pixel_values"] = pixels.unsqueeze(1)
        text = ids.shape[-1] if isinstance(ids, torch.Tensor) else b.seq_len()
        b.inputs["image_attention_mask"] = torch.ones((1, text, 1), dtype=torch.long)
    if "decoder_input_ids" in params and "decoder_input_ids" not in b.inputs:
        b.inputs["decoder_input_ids"] = decoder_ids()
    encoder = _int(getattr(b.config, "encoder_hidden_size", None))
    if "encoder_hidden_states" in params and encoder is not None:
        b.inputs["encoder_hidden_states"] = b.randn(1, b.seq_len(), encoder)


def prompt_input(b: Builder, name: str) -> Any:
    """A required argument of this kind by name, or ``None`` without a rule for it."""
    if name == "query_embeds":
        # A Q-Former's learned queries, as its parent model passes them.
        queries = _int(b.field("num_query_tokens")) or 4
        return b.randn(1, queries, int(b.field("hidden_size", default=64)))
    if name == "classes_structure":
        # OmDet-Turbo: how many of the classes_input_ids rows belong to each task prompt.
        classes = b.inputs.get("classes_input_ids")
        rows = int(classes.shape[0]) if isinstance(classes, torch.Tensor) else 1
        return torch.tensor([rows], dtype=torch.long)
    if name == "marks":
        # JEV: the 1-based position of each question's mark token; one question, at the end.
        return torch.tensor([[b.seq_len()]], dtype=torch.long)
    if name == "num_options":
        return torch.tensor([[2]], dtype=torch.long)  # JEV: a yes/no question
    if name == "question_type_ids":
        return torch.zeros((1, 1), dtype=torch.long)  # JEV: the first question type
    return None
