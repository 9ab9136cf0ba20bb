"""Config table: mixture-of-experts decoders whose configs live on the hub.

Each entry starts from a Llama config (or the family's own class) and adds the
routing fields vLLM's implementation reads: expert counts and sizes at the zoo's
tiny sizes (four experts of width 128, two per token, one shared expert, the
first layer dense), the score function and the group routing vLLM's
``FusedMoE`` asserts. A hub class whose fields are plain attributes
(``rope_theta`` read directly) is stood in for by ``remote``.
"""

from __future__ import annotations

from typing import Any

from graphcheck.zoo.vllm_engine.tables import NO_PREFIX_CACHING, Dict, Entry
from graphcheck.zoo.vllm_engine.tables.towers import TINY_VIT

_M = "vllm/model_executor/models/"

#: Four experts of width 128, two per token, one shared expert after a dense first layer.
_EXPERTS: dict[str, Any] = {
    "num_experts": 4,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 128,
    "num_shared_experts": 1,
    "first_k_dense_replace": 1,
    "norm_topk_prob": True,
}

#: StepFun's MoE fields, as Step 3 and Step 3.5 both name them: one KV group, four experts of
#: width 128, two per token, a shared expert of width 128.
_STEP_MOE: dict[str, Any] = {
    "num_attention_groups": 1,
    "moe_num_experts": 4,
    "moe_top_k": 2,
    "moe_intermediate_size": 128,
    "share_expert_dim": 128,
}

# Ling / Bailing MoE (inclusionAI), and Sarvam's MoE, which is written the same way.
_BAILING: dict[str, Any] = {
    **_EXPERTS,
    "embedding_dropout": 0.0,
    "use_bias": False,
    "use_qkv_bias": False,
}


def _dbrx(d: Dict) -> None:
    # DbrxConfig's attention and FFN sub-configs refuse the keys their own to_dict() writes
    # (transformers 5.19); dbrx.py reads the attention's rope_theta.
    for key in ("attn_config", "ffn_config"):
        sub = d.get(key)
        if isinstance(sub, dict):
            for written in ("_name_or_path", "output_attentions"):
                sub.pop(written, None)
    if isinstance(d.get("attn_config"), dict):
        d["attn_config"].setdefault("rope_theta", 10000.0)


#: MiniMax-M3's text fields (models/minimax_m3/nvidia/model.py): clamped SwiGLU experts,
#: dense layers of their own width, one MTP module.
_MINIMAX_M3: dict[str, Any] = {
    "rope_theta": 10000.0,
    "partial_rotary_factor": 1.0,
    "num_local_experts": 4,
    "num_experts_per_tok": 2,
    "scoring_func": "softmax",
    "swiglu_limit": 7.0,
    "swiglu_alpha": 1.702,
    "swiglu_beta": 1.0,
    "dense_intermediate_size": 128,
    "use_gemma_norm": False,
    "num_mtp_modules": 1,
}

#: Intern-S2-Mobius's text model (vllm/model_executor/models/interns2_mobius.py): its layers
#: share num_blocks MoE blocks (188, 312), one; its MTP layer's experts, which vLLM makes the
#: draft's (config/speculative.py:938-957).
MOBIUS_TEXT: dict[str, Any] = {
    "num_blocks": 1,
    "mtp_num_experts": 4,
    "mtp_num_experts_per_tok": 2,
    "mtp_num_hidden_layers": 1,
}

_PANGU: dict[str, Any] = {
    "n_routed_experts": 4,
    "num_experts_per_tok": 2,
    "n_shared_experts": 1,
    "moe_intermediate_size": 128,
    "first_k_dense_replace": 1,
    "routed_scaling_factor": 1.0,
    "norm_topk_prob": True,
}

# GLM-5 Next: fields vLLM's model reads that transformers' class does not carry (the
# checkpoints' hyper-connections, NoPE MLA, the indexer's rotary layout:
# glm5next/common/model.py:369,400, attention.py:514).
_GLM5_NEXT = {"mhc": True, "mla_use_nope": True, "indexer_rope_interleave": False}

# The Transformers backend's MoE classes wrap a transformers MoE model; a Llama config has
# no experts (transformers/moe.py:185 asserts num_experts_per_tok). Qwen3-MoE's class, whose
# packed experts the backend fuses into FusedMoE.
_TRANSFORMERS_MOE = Entry(_M + "transformers/moe.py", base="qwen3_moe")

TABLE: dict[str, Entry] = {
    "TransformersMoEForCausalLM": _TRANSFORMERS_MOE,
    "TransformersMoEEmbeddingModel": _TRANSFORMERS_MOE,
    "TransformersMoEForSequenceClassification": _TRANSFORMERS_MOE,
    "AfmoeForCausalLM": Entry(
        _M + "afmoe.py",
        fields={"score_func": "softmax", "route_norm": True, "n_group": 1, "topk_group": 1},
    ),
    "BailingMoeV2ForCausalLM": Entry(_M + "bailing_moe.py", fields=_BAILING),
    "SarvamMoEForCausalLM": Entry(_M + "sarvam.py", fields=_BAILING),
    "Param2MoEForCausalLM": Entry(
        _M + "param2moe.py",
        remote="Param2MoEConfig",
        model_type="param2moe",
        fields={
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 128,
            "rope_theta": 10000.0,
            # Grouped sigmoid top-k (param2moe.py:257-258, 283-284); vLLM's CPU router takes
            # sigmoid scores through its grouped path only (cpu_router.py:211-239).
            "n_group": 1,
            "topk_group": 1,
        },  # fmt: skip
    ),
    # MiniMax-M2: a partial rotary dimension no larger than the head (32), softmax routing.
    "MiniMaxM2ForCausalLM": Entry(
        _M + "minimax_m2.py", fields={"rotary_dim": 32, "scoring_func": "softmax"}
    ),
    # Mistral Large 3 is DeepSeek-V3's layout under Mistral's names (MLA, grouped routing).
    "MistralLarge3ForCausalLM": Entry(
        _M + "mistral_large_3.py",
        fields={
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 128,
            "first_k_dense_replace": 1,
            "norm_topk_prob": True,
        },
    ),
    # DeepSeek V3.2 (DSA): vLLM's registry gives DeepSeek-V3's class (model type deepseek_v32),
    # whose default lacks the lightning indexer's fields; models/config.py:34 asserts
    # index_topk and deepseek_v2.py:697-699 sizes the indexer from these.
    "DeepseekV32ForCausalLM": Entry(
        _M + "config.py, deepseek_v2.py",
        fields={"index_topk": 64, "index_n_heads": 2, "index_head_dim": 64},
    ),
    # GLM-5 Next: MLA and Mamba layers, served without prefix caching (NO_PREFIX_CACHING).
    "Glm5NextForCausalLM": Entry(
        "vllm/models/glm5next/common/model.py",
        base="glm5_next_text",
        fields=_GLM5_NEXT,
        engine=NO_PREFIX_CACHING,
    ),
    "Glm5NextForConditionalGeneration": Entry(
        "vllm/models/glm5next/common/model.py", text=_GLM5_NEXT, engine=NO_PREFIX_CACHING
    ),
    "Glm4MoeLiteForCausalLM": Entry(_M + "glm4_moe_lite.py", fields={"first_k_dense_replace": 1}),
    # K2-Horizon: a routed MoE beside a "MoVA" expert mixture, per-group norms, a gated
    # attention output.
    "K2HorizonForCausalLM": Entry(
        _M + "k2_horizon.py",
        fields={
            **_EXPERTS,
            "decoder_sparse_step": 1,
            "mova_num_experts": 4,
            "mova_num_experts_per_tok": 2,
            "mlp_only_layers": [],
            "router_score_func": "softmax",
            "router_scaling_factor": 1.0,
            "layernorm_num_groups": 1,
            "query_key_norm": False,
            "rope_head_dim": 32,
            "attention_gate_func": "sigmoid",
            "moe_gate_bias": False,
        },
    ),
    # LFM2-MoE: one dense layer, then experts; an attention layer and a short-conv layer.
    "Lfm2MoeForCausalLM": Entry(
        _M + "lfm2_moe.py",
        fields={
            "num_dense_layers": 1,
            "num_experts": 4,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 128,
            "use_expert_bias": False,
            "norm_topk_prob": True,
            "routed_scaling_factor": 1.0,
            "layer_types": ["full_attention", "conv"],
            "conv_L_cache": 3,
        },
    ),
    # openPangu MoE: DeepSeek-style names; no n_routed_experts means no MoE layer at all.
    "PanguProMoEV2ForCausalLM": Entry(_M + "openpangu.py", fields=_PANGU),
    # Its own model type, which vLLM's MTP mapping keys on (config/speculative.py:707).
    "PanguUltraMoEForCausalLM": Entry(
        _M + "openpangu.py",
        remote="PanguUltraMoEConfig",
        model_type="pangu_ultra_moe",
        fields={**_PANGU, "rope_theta": 10000.0},
    ),  # fmt: skip
    # HunYuan 3 (hy_v3.py:391 refuses a config without first_k_dense_replace). Its attention
    # normalizes q and k (transformers' HYV3Attention always does); vLLM builds those norms
    # only with qk_norm (hy_v3.py:260), else the reload finds no k_norm to load.
    "HYV3ForCausalLM": Entry(
        _M + "hy_v3.py",
        fields={
            "first_k_dense_replace": 1,
            "expert_hidden_dim": 128,
            "route_norm": True,
            "qk_norm": True,
        },
    ),
    "SarvamMLAForCausalLM": Entry(
        _M + "sarvam.py",
        fields={
            **_EXPERTS,
            "kv_lora_rank": 512,
            "q_lora_rank": 64,
            "qk_nope_head_dim": 32,
            "qk_rope_head_dim": 64,
            "v_head_dim": 32,
        },  # fmt: skip
    ),
    "LongcatFlashForCausalLM": Entry(
        _M + "longcat_flash.py",
        fields={"mla_scale_q_lora": 1.0, "mla_scale_kv_lora": 1.0, "zero_expert_type": "identity"},
    ),
    # Ling 2.5 (linear attention beside MLA): layer_group_size layers per group.
    "BailingMoeV2_5ForCausalLM": Entry(
        _M + "bailing_moe_linear.py",
        fields={**_EXPERTS, "use_bias": False, "use_qkv_bias": False, "layer_group_size": 2},
    ),
    "BailingMoeV3ForCausalLM": Entry(
        _M + "bailing_moe_v3.py",
        fields={
            **_EXPERTS,
            "use_bias": False,
            "layer_group_size": 2,
            "moe_shared_expert_intermediate_size": 128,
            "n_group": 1,
            "topk_group": 1,
            "short_conv_kernel_size": 4,
            "no_kda_lora": True,
        },
    ),
    "BailingMoeForCausalLM": Entry(_M + "bailing_moe.py", fields=_BAILING),
    "DbrxForCausalLM": Entry(_M + "dbrx.py", fix=_dbrx),
    # MiniMax-M3 (vllm/models/minimax_m3/): clamped SwiGLU experts, dense layers of their own
    # width, one MTP module; a hub class (rope_theta read as an attribute).
    "MiniMaxM3SparseForCausalLM": Entry(
        "vllm/models/minimax_m3/nvidia/model.py",
        remote="MiniMaxM3SparseConfig",
        model_type="minimax_m3",
        fields=_MINIMAX_M3,
    ),
    # MiniMax-M3's VL checkpoint: vLLM's MiniMaxM3Config over its text class, whose defaults
    # are the 60-layer checkpoint's (transformers_utils/configs/minimax_m3.py): the tiny text
    # model with the checkpoint's layout (a dense first layer, sparse attention after it), and
    # the vision tower's dict (models/minimax_m3/common/vision_tower.py:45-372, 621-653),
    # read as a plain config (nvidia/model.py:1164) even when the tower is skipped.
    "MiniMaxM3SparseForConditionalGeneration": Entry(
        "vllm/models/minimax_m3/nvidia/model.py, common/vision_tower.py",
        base="minimax_m3_vl",
        fields={
            "text_config": {
                **_MINIMAX_M3,
                "vocab_size": 512,
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "head_dim": 32,
                "rotary_dim": 32,
                "intermediate_size": 128,
                "shared_intermediate_size": 128,
                "max_position_embeddings": 128,
                "moe_layer_freq": [0, 1],
                "sparse_attention_config": {
                    "use_sparse_attention": True,
                    "sparse_index_dim": 32,
                    "sparse_num_index_heads": 1,
                    "sparse_topk_blocks": 2,
                    "sparse_block_size": 128,
                    "sparse_disable_index_value": [0, 1],
                    "sparse_score_type": "max",
                    "sparse_init_block": 0,
                    "sparse_local_block": 1,
                    "sparse_attention_freq": [0, 1],
                },
            },
            "vision_config": {
                **TINY_VIT,
                "num_channels": 3,
                "layer_norm_eps": 1e-6,
                "img_token_compression_config": {"spatial_merge_size": 2, "temporal_patch_size": 2},
            },
        },
    ),
    # Step 3 (vLLM's own Step3TextConfig): step3_text.py:251 parses moe_layers_enum as the
    # checkpoints write it, a comma-separated string (the class's default is a tuple).
    "Step3TextForCausalLM": Entry(
        _M + "step3_text.py, vllm/transformers_utils/configs/step3_vl.py",
        fields={
            **_STEP_MOE,
            "share_q_dim": 64,
            "moe_layers_enum": "1",
            "max_position_embedding": 128,
        },
    ),
    # Step 3.5 (vLLM's own Step3p5Config): one KV group for two heads, four experts. The base
    # is named for its MTP draft, whose target comes without the catalog's model type.
    "Step3p5ForCausalLM": Entry(
        _M + "step3p5.py, vllm/transformers_utils/configs/step3p5.py",
        base="step3p5",
        fields={
            **_STEP_MOE,
            "max_position_embeddings": 128,
        },
    ),
}
