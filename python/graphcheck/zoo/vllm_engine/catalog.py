"""The corpus: every architecture vLLM's ``ModelRegistry`` lists, plus the variants.

:func:`enumerate_architectures` reads ``ModelRegistry.get_supported_archs()``
at run time (a new release brings its new architectures) and labels each with
its category, from the registry's own tables (text generation, multimodal,
embedding, speculative decoding, Transformers backend, classification,
reward, late interaction). Variants (:data:`VARIANTS`) switch the code paths
real checkpoints use: bf16 weights, a compressed-tensors W8A8 int8 checkpoint,
AWQ and GPTQ int4 checkpoints, an fp8 KV cache; they follow the architecture they
vary. Nothing here imports a model module.
"""

from __future__ import annotations

import dataclasses

from graphcheck.zoo.catalog import Arch

__all__ = [
    "BF16_ONLY",
    "CATEGORIES",
    "DTYPE_PASSES",
    "VARIANTS",
    "VARIANT_ARCHS",
    "Variant",
    "category",
    "enumerate_architectures",
    "pass_globs",
    "variant_of",
]

#: Registry table (a private name of vllm.model_executor.models.registry) -> category.
CATEGORIES = {
    "_TEXT_GENERATION_MODELS": "text",
    "_MULTIMODAL_MODELS": "multimodal",
    "_EMBEDDING_MODELS": "embedding",
    "_SPECULATIVE_DECODING_MODELS": "speculative",
    "_TRANSFORMERS_SUPPORTED_MODELS": "transformers",
    "_TRANSFORMERS_BACKEND_MODELS": "transformers",
    "_SEQUENCE_CLASSIFICATION_MODELS": "classification",
    "_TOKEN_CLASSIFICATION_MODELS": "classification",
    "_REWARD_MODELS": "reward",
    "_LATE_INTERACTION_MODELS": "late_interaction",
}


@dataclasses.dataclass(frozen=True)
class Variant:
    """A code path a checkpoint switches on: engine arguments and config.json edits."""

    name: str
    why: str
    dtype: str = "float32"
    kv_cache_dtype: str = "auto"
    #: ``quantization_config`` written into config.json (a compressed-tensors checkpoint).
    quantization: str = ""


_W8A8 = "compressed-tensors W8A8 int8 (per-channel weights, dynamic per-token activations)"
_AWQ = "AWQ int4 (AutoAWQ's GEMM layout: groups of 32, zero points), bfloat16 activations"
_GPTQ = "GPTQ int4 (AutoGPTQ's layout: groups of 32, symmetric, no act-order), bfloat16"

#: Variant name -> what it switches. The plain architecture runs in float32.
VARIANTS = {
    "bf16": Variant("bf16", "bfloat16 weights, as published checkpoints", dtype="bfloat16"),
    "w8a8": Variant("w8a8", _W8A8, dtype="bfloat16", quantization="w8a8_int8"),
    "fp8_kv": Variant(
        "fp8_kv", "fp8 KV cache (kv_cache_dtype fp8) with its scales", kv_cache_dtype="fp8"
    ),
    "awq": Variant("awq", _AWQ, dtype="bfloat16", quantization="awq"),
    "gptq": Variant("gptq", _GPTQ, dtype="bfloat16", quantization="gptq"),
}

#: Architectures the variants run on: dense and MoE decoders whose published checkpoints
#: come in these forms.
VARIANT_ARCHS = {
    "LlamaForCausalLM": ("bf16", "w8a8", "fp8_kv", "awq", "gptq"),
    "Qwen2ForCausalLM": ("bf16", "w8a8", "fp8_kv", "awq", "gptq"),
    "Qwen3ForCausalLM": ("bf16", "w8a8", "fp8_kv", "awq", "gptq"),
    "MistralForCausalLM": ("bf16", "w8a8", "awq", "gptq"),
    "Gemma2ForCausalLM": ("bf16",),
    "Gemma3ForCausalLM": ("bf16",),
    "Phi3ForCausalLM": ("bf16", "w8a8"),
    "Qwen3MoeForCausalLM": ("bf16",),
    "MixtralForCausalLM": ("bf16",),
    "DeepseekV2ForCausalLM": ("bf16",),
    "GraniteForCausalLM": ("bf16",),
    "OlmoForCausalLM": ("bf16",),
    # Mamba, hybrid and short-convolution mixers: vLLM's CPU code paths for their state and
    # convolutions differ by dtype (issue 31 §4; the gated delta-net ones are BF16_ONLY).
    "MambaForCausalLM": ("bf16",),
    "Mamba2ForCausalLM": ("bf16",),
    "JambaForCausalLM": ("bf16",),
    "FalconH1ForCausalLM": ("bf16",),
    "GraniteMoeHybridForCausalLM": ("bf16",),
    "Zamba2ForCausalLM": ("bf16",),
    "Lfm2ForCausalLM": ("bf16",),
    "Lfm2MoeForCausalLM": ("bf16",),
}


#: Architectures whose CPU kernels run in bfloat16 only (vLLM's CPU gated delta-net
#: attention asserts it; Inkling's short-conv sliding-window cache too,
#: vllm/models/inkling/nvidia/sconv_swa_attn.py:170): their plain run is bfloat16.
BF16_ONLY = frozenset(
    {
        "Qwen3NextForCausalLM",
        "Qwen3_5ForCausalLM",
        "Qwen3_5MoeForCausalLM",
        "Qwen3NextMTP",
        "Qwen3_5MTP",
        "Qwen3_5MoeMTP",
        "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration",
        "ColQwen3_5",
        "InternS2PreviewForConditionalGeneration",
        "InternS2MobiusForConditionalGeneration",
        "InternS2MobiusMTP",
        "MiniCPMV4_6ForConditionalGeneration",
        "MiniCPMV4_7ForConditionalGeneration",
        "KimiLinearForCausalLM",
        "OlmoHybridForCausalLM",
        "Qwen4ExpForCausalLM",
        "Qwen4ExpForConditionalGeneration",
        "Qwen4ExpMTP",
        "InklingForCausalLM",
        "InklingForConditionalGeneration",
        "InklingMTPModel",
    }
)


#: ``--dtype`` -> the variant every class runs as in that pass of the corpus ("": the class
#: itself). The bfloat16 pass runs ``Arch@bf16`` for each class (a :data:`BF16_ONLY` class as
#: itself: its plain run is bfloat16 already) and no other variant; its rows keep their names, so
#: the baseline's ``Arch:`` entries cover them and ``Arch@bf16:`` entries hold what bfloat16
#: adds (:mod:`graphcheck.zoo.evaluation`).
DTYPE_PASSES = {"float32": "", "bfloat16": "bf16"}


def pass_globs(globs: list[str], dtype: str) -> list[str]:
    """``--only`` globs for the ``dtype`` pass: a class glob also selects the class's row there.

    In the bfloat16 pass ``--only LlamaForCausalLM`` means ``LlamaForCausalLM@bf16`` (the class
    runs under that name); a glob that names a variant is left as it is.
    """
    variant = DTYPE_PASSES[dtype]
    if not variant:
        return list(globs)
    return [*globs, *(f"{g}@{variant}" for g in globs if "@" not in g)]


def variant_of(arch: Arch) -> Variant:
    """The variant of ``arch``: float32 for a plain architecture, unless it is :data:`BF16_ONLY`."""
    if arch.variant in VARIANTS:
        return VARIANTS[arch.variant]
    if arch.class_name in BF16_ONLY:
        return Variant("", "bfloat16: the CPU kernels of this architecture", dtype="bfloat16")
    return Variant("", "float32")


def _categories() -> dict[str, str]:
    import vllm.model_executor.models.registry as registry

    found: dict[str, str] = {}
    for table, category in CATEGORIES.items():
        for name in getattr(registry, table, {}) or {}:
            found.setdefault(name, category)
    return found


def category(name: str) -> str:
    """The category of the registry's architecture ``name`` ("other" when no table lists it)."""
    return _categories().get(name, "other")


def registry_module(name: str) -> str:
    """The last part of the module vLLM's registry builds ``name`` from (``llama``, ``kimi_k3``).

    Where no config class names the architecture, its config's model type is looked up by it
    (:mod:`~graphcheck.zoo.vllm_engine.configs`); "" for a name the registry does not list.
    """
    from vllm.model_executor.models.registry import ModelRegistry

    model = ModelRegistry.models.get(name)
    return str(getattr(model, "module_name", "") or "").rsplit(".", 1)[-1]


def enumerate_architectures(*, with_variants: bool = True, dtype: str = "float32") -> list[Arch]:
    """Every architecture of vLLM's registry, in registry order, variants after their class.

    ``dtype`` is the pass (:data:`DTYPE_PASSES`): ``"bfloat16"`` lists each class once, as its
    bfloat16 row, and no other variant; ``ValueError`` names the choices for another value.

    ``model_type`` holds the registry's module name (``llama``, ``deepseek_v2``), the
    config's model type is found per architecture by
    :mod:`~graphcheck.zoo.vllm_engine.configs`; ``tasks`` holds the category. Raises
    ``ImportError`` without vLLM.
    """
    if dtype not in DTYPE_PASSES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {sorted(DTYPE_PASSES)}")
    from vllm.model_executor.models.registry import ModelRegistry

    pass_variant = DTYPE_PASSES[dtype]
    categories = _categories()
    archs: list[Arch] = []
    for name in ModelRegistry.get_supported_archs():
        module = registry_module(name)
        task = (categories.get(name, "other"),)
        if pass_variant:
            own = "" if name in BF16_ONLY else pass_variant
            archs.append(Arch(f"{name}@{own}" if own else name, name, module, own, task))
            continue
        archs.append(Arch(name, name, module, "", task))
        if with_variants:
            for variant in VARIANT_ARCHS.get(name, ()):
                archs.append(Arch(f"{name}@{variant}", name, module, variant, task))
    return archs
