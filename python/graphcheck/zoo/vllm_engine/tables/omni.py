"""Multimodal models served whole: their encoders built, a processor of the zoo's written.

Each architecture here is served with its vision and audio towers (not
language-model-only, vLLM's ``--language-model-only``), so that the census, the capture
and the reload judge the encoders' tensors too. :data:`WHOLE` names what an architecture's
entry gets beyond the entry it has elsewhere (``whole=True``, the placeholder words its
processor reads off the tokenizer, a processor's sizes); :data:`TABLE` holds the entries of
architectures that had none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from graphcheck.zoo.vllm_engine.tables import QWEN_OMNI_TOKENS, Entry

__all__ = ["TABLE", "WHOLE"]

_M = "vllm/model_executor/models/"

TABLE: dict[str, Entry] = {}

#: Architecture -> the fields its entry gets to be served whole (``dataclasses.replace``).
WHOLE: dict[str, Mapping[str, Any]] = {
    "Qwen3_5ForConditionalGeneration": {"whole": True},
    "Qwen3_5MoeForConditionalGeneration": {"whole": True},
    "Qwen2_5OmniModel": {"whole": True, "tokens": QWEN_OMNI_TOKENS},
    "Qwen2_5OmniForConditionalGeneration": {"whole": True, "tokens": QWEN_OMNI_TOKENS},
    "Qwen3OmniMoeForConditionalGeneration": {"whole": True, "tokens": QWEN_OMNI_TOKENS},
    "Qwen3ASRForConditionalGeneration": {"whole": True, "tokens": QWEN_OMNI_TOKENS},
    "InternS1ForConditionalGeneration": {"whole": True},
    "H2OVLChatModel": {"whole": True},
    "SkyworkR1VChatModel": {"whole": True},
    "NVLM_D": {"whole": True},
    "Eagle2_5_VLForConditionalGeneration": {"whole": True},
    "OpenCUAForConditionalGeneration": {"whole": True},
    "BeeForConditionalGeneration": {"whole": True},
}
