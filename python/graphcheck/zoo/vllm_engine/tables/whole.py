"""Config table: multimodal architectures served whole, their encoders built.

These architectures' configs are transformers' own; their entries exist to serve them whole
(:attr:`~graphcheck.zoo.vllm_engine.tables.Entry.whole`): the vision or audio tower and the
projector are built, transformers' processor of the model type is written with the tiny
tower's image and patch size and the zoo's tokenizer, and vLLM's dummy multimodal inputs run
through the encoder in the profiling forward, so that the census, the capture and the reload
judge the encoder's tensors too. Each entry cites the vLLM file its model is built by.
"""

from __future__ import annotations

from graphcheck.zoo.vllm_engine.tables import GEMMA3_TOKENS, Entry

_M = "vllm/model_executor/models/"

#: Architecture name -> its entry.
TABLE: dict[str, Entry] = {
    "Qwen2VLForConditionalGeneration": Entry(_M + "qwen2_vl.py", whole=True),
    "Qwen2_5_VLForConditionalGeneration": Entry(_M + "qwen2_5_vl.py", whole=True),
    "Qwen3VLForConditionalGeneration": Entry(_M + "qwen3_vl.py", whole=True),
    "LlavaForConditionalGeneration": Entry(_M + "llava.py", whole=True),
    "LlavaNextForConditionalGeneration": Entry(_M + "llava_next.py", whole=True),
    "LlavaOnevisionForConditionalGeneration": Entry(_M + "llava_onevision.py", whole=True),
    "Gemma3ForConditionalGeneration": Entry(_M + "gemma3_mm.py", whole=True, tokens=GEMMA3_TOKENS),
}
