"""Config table: HyperCLOVA X vision V2, a multimodal model vLLM registers as a text model.

Registered among vLLM's text-generation models, it is served whole (not
language-model-only), so its processor runs while the engine starts: transformers'
``HyperCLOVAXVisionV2Processor``, with the checkpoint's placeholder words. vLLM's dummy
prompt spells them as the chat template does (``<|image_start|><|IMAGE_PAD|><|image_end|>``,
``hyperclovax_vision_v2.py:54-55``) and finds the placeholder by the config's
``image_token_id``/``video_token_id`` (``hyperclovax_vision_v2.py:261-264``): the zoo's
tokenizer gives the words their ids, and the config names the same ids.
"""

from __future__ import annotations

from graphcheck.zoo.vllm_engine.tables import Dict, Entry, text_of

#: The checkpoint's words, as the tokenizer attributes its processor reads them
#: (transformers' processing_hyperclovax_vision_v2.py:49-57).
_HCX_TOKENS = {
    "image_token": "<|IMAGE_PAD|>",
    "video_token": "<|VIDEO_PAD|>",
    "image_start_token": "<|image_start|>",
    "image_end_token": "<|image_end|>",
    "video_start_token": "<|video_start|>",
    "video_end_token": "<|video_end|>",
}


def _placeholder_ids(d: Dict) -> None:
    from graphcheck.zoo.vllm_engine.tokenizer import top_id

    vocab = int(text_of(d).get("vocab_size") or 512)
    d["image_token_id"] = top_id(_HCX_TOKENS["image_token"], vocab, _HCX_TOKENS)
    d["video_token_id"] = top_id(_HCX_TOKENS["video_token"], vocab, _HCX_TOKENS)


TABLE: dict[str, Entry] = {
    "HCXVisionV2ForCausalLM": Entry(
        "vllm/model_executor/models/hyperclovax_vision_v2.py",
        processor="hyperclovax_vision_v2",
        processor_class=True,
        tokens=_HCX_TOKENS,
        fix=_placeholder_ids,
    ),
}
