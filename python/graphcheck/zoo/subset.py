"""The fixed subset that the test suite runs (``--subset``): 50 architectures across families.

Each family holds architectures that build, run their warm-up forward, and
(for several) keep unregistered tensors that the baseline allowlist lists, so
that the subset fails on a new finding and on a stale baseline entry alike.
Thirteen are variants swept from the configs (:mod:`graphcheck.zoo.sweep`):
rope types, position embedding types and attention kinds; one is a preset.
It runs in about a minute on two cores (`make test`, tests/python/test_zoo.py).
"""

from __future__ import annotations

__all__ = ["FAMILIES", "SUBSET"]

FAMILIES: dict[str, tuple[str, ...]] = {
    "decoder LM": (
        "LlamaForCausalLM",
        "LlamaModel@rope_type=llama3",
        "LlamaModel@rope_type=dynamic",
        "GPT2LMHeadModel",
        "MistralForCausalLM",
        "Qwen2ForCausalLM",
        "Phi3Model@rope_type=longrope",
        "Gemma3TextModel@rope_type=linear",
        "FalconModel@alibi=True",
        "Qwen3Model@rope_type=yarn",
        "GPTNeoXForCausalLM",
        "OPTForCausalLM",
    ),
    "MoE": (
        "MixtralForCausalLM",
        "Qwen3MoeForCausalLM",
        "DeepseekV3ForCausalLM",
        "DeepseekV3Model@rope_type=yarn",
        "GptOssForCausalLM",
    ),
    "hybrid or state-space": (
        "MambaForCausalLM",
        "Mamba2ForCausalLM",
        "JambaForCausalLM",
        "RecurrentGemmaForCausalLM",
        "Qwen3NextForCausalLM",
        "FalconH1ForCausalLM",
        "GraniteMoeHybridModel@position_embedding_type=rope",
    ),
    "encoder": (
        "BertModel",
        "RobertaForMaskedLM",
        "DebertaV2Model@relative",
        "EsmModel@position_embedding_type=rotary",
        "ModernBertModel",
        "BigBirdModel@attention_type=original_full",
    ),
    "encoder-decoder": (
        "T5ForConditionalGeneration",
        "BartForConditionalGeneration",
        "LongT5Model@encoder_attention_type=transient-global",
        "MarianMTModel",
    ),
    "vision": (
        "ViTModel",
        "SwinModel",
        "ConvNextModel",
        "BeitModel@use_relative_position_bias=True",
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
        "Wav2Vec2ConformerModel@position_embeddings_type=rotary",
        "MimiModel",
        "HubertModel",
    ),
}

SUBSET: tuple[str, ...] = tuple(name for names in FAMILIES.values() for name in names)
