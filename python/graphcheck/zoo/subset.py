"""The fixed subset that the test suite runs (``--subset``): 46 architectures across families.

Each family holds architectures that build, run their warm-up forward, and
(for several) keep unregistered tensors that the baseline allowlist lists, so
that the subset fails on a new finding and on a stale baseline entry alike.
It runs in about a minute on two cores (`make test`, tests/python/test_zoo.py).
"""

from __future__ import annotations

__all__ = ["FAMILIES", "SUBSET"]

FAMILIES: dict[str, tuple[str, ...]] = {
    "decoder LM": (
        "LlamaForCausalLM",
        "LlamaModel@rope_llama3",
        "LlamaModel@rope_dynamic",
        "GPT2LMHeadModel",
        "MistralForCausalLM",
        "Qwen2ForCausalLM",
        "Phi3Model@rope_longrope",
        "Gemma3TextModel@rope_linear",
        "FalconModel@alibi",
        "GPTNeoXForCausalLM",
        "OPTForCausalLM",
    ),
    "MoE": (
        "MixtralForCausalLM",
        "Qwen3MoeForCausalLM",
        "DeepseekV3ForCausalLM",
        "GptOssForCausalLM",
    ),
    "hybrid or state-space": (
        "MambaForCausalLM",
        "Mamba2ForCausalLM",
        "JambaForCausalLM",
        "RecurrentGemmaForCausalLM",
        "Qwen3NextForCausalLM",
        "FalconH1ForCausalLM",
    ),
    "encoder": (
        "BertModel",
        "RobertaForMaskedLM",
        "DebertaV2Model@relative",
        "EsmModel@rotary",
        "ModernBertModel",
    ),
    "encoder-decoder": (
        "T5ForConditionalGeneration",
        "BartForConditionalGeneration",
        "LongT5Model@tglobal",
        "MarianMTModel",
    ),
    "vision": (
        "ViTModel",
        "SwinModel",
        "ConvNextModel",
        "BeitModel@relative_bias",
        "LevitModel",
        "VideoMAEModel",
        "Dinov2Model",
    ),
    "vision-language": (
        "LlavaForConditionalGeneration",
        "Qwen2VLForConditionalGeneration",
        "PaliGemmaForConditionalGeneration",
        "CLIPModel",
    ),
    "audio": (
        "WhisperModel",
        "Wav2Vec2Model",
        "Wav2Vec2ConformerModel@rotary",
        "MimiModel",
        "HubertModel",
    ),
}

SUBSET: tuple[str, ...] = tuple(name for names in FAMILIES.values() for name in names)
