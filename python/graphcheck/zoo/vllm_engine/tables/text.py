"""Config table: dense decoders whose configs live on the hub or leave a field unset.

Most start from a Llama config (vLLM's implementations of these families are
Llama-like) and add what their module reads beyond it: a norm's epsilon under
another name, a width the embedding is scaled by, per-layer attention kinds for
the two tiny layers.
"""

from __future__ import annotations

from typing import Any

from graphcheck.zoo.vllm_engine.tables import Entry

_M = "vllm/model_executor/models/"

_CHATGLM = {"original_rope": True, "tie_word_embeddings": False}
_MIMO_V2 = {
    "hybrid_layer_pattern": [0, 1],
    "layernorm_epsilon": 1e-6,
    "swa_num_attention_heads": 2,
    "swa_num_key_value_heads": 1,
    "swa_head_dim": 32,
    "sliding_window_size": 64,
}

# Qwen4-Exp's gated delta-net reads its output gate's activation, which the default
# leaves unset (model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py:565).
_QWEN4_EXP = Entry(
    "vllm/model_executor/layers/mamba/gdn/qwen_gdn_linear_attn.py",
    text={"output_gate_type": "silu"},
)

#: The words Inkling's chat renderer resolves in the tokenizer's vocabulary and refuses to
#: start without (vllm/renderers/inkling_encoding.py:60, checked at renderers/inkling.py:81).
INKLING_TOKENS = {
    f"{word[2:-2]}_token": word
    for word in (
        "<|message_user|>",
        "<|message_model|>",
        "<|message_system|>",
        "<|message_tool|>",
        "<|content_text|>",
        "<|content_image|>",
        "<|content_model_end_sampling|>",
        "<|content_thinking|>",
        "<|content_audio_input|>",
        "<|content_xml|>",
        "<|content_invoke_tool_json|>",
        "<|end_message|>",
        "<|audio_end|>",
    )
}

#: DeciLM / Nemotron-NAS: one block per layer, each an attention (its KV heads as the group
#: size n_heads_in_group) and an FFN (its width as ffn_mult: nemotron_nas.py:60-176).
_DECI_BLOCK = {
    "attention": {"no_op": False, "replace_with_linear": False, "n_heads_in_group": 2},
    "ffn": {"no_op": False, "replace_with_linear": False, "ffn_mult": 1.0},
}


def _zamba2(d: dict[str, Any]) -> None:
    # head_dim is Zamba2's alias of attention_head_dim, which the width fit would set to
    # hidden / heads; the config's derived widths are dropped before (overrides.DERIVED): the
    # shared attention runs over the hidden state and the embeddings, twice as wide
    # (zamba2.py:155 refuses any other).
    d["head_dim"] = 2 * d["hidden_size"] // d["num_attention_heads"]


TABLE: dict[str, Entry] = {
    "Zamba2ForCausalLM": Entry(_M + "zamba2.py", fix=_zamba2),
    # The hub's DeciLMConfig makes block_configs objects (model type nemotron-nas, whose
    # convertor reads them: transformers_utils/model_arch_config_convertor.py:563).
    "DeciLMForCausalLM": Entry(
        _M + "nemotron_nas.py",
        remote="DeciLMConfig",
        model_type="nemotron-nas",
        objects=("block_configs",),
        fields={"block_configs": [_DECI_BLOCK, _DECI_BLOCK]},
    ),
    # vLLM's Inkling model reads its own config class (padded_vocab_size, use_embed_norm:
    # vllm/models/inkling/configs.py), registered as inkling_model; transformers' differs.
    "InklingForCausalLM": Entry(
        "vllm/renderers/inkling_encoding.py, vllm/models/inkling/configs.py",
        base="inkling_model",
        tokens=INKLING_TOKENS,
        # The MoE asserts the served checkpoint's routing (vllm/models/inkling/nvidia/moe.py:419).
        fields={
            "n_routed_experts": 4,
            "n_shared_experts": 1,
            "num_experts_per_tok": 2,
            "moe_intermediate_size": 128,
            "gate_activation": "sigmoid",
            "norm_after_topk": True,
            "shared_expert_sink": True,
            "inference_moe_w13_interleaved": True,
        },
    ),
    "Qwen4ExpForCausalLM": _QWEN4_EXP,
    "Qwen4ExpForConditionalGeneration": _QWEN4_EXP,
    "ExaoneForCausalLM": Entry(
        _M + "exaone.py", fields={"activation_function": "silu", "layer_norm_epsilon": 1e-6}
    ),
    "TeleChat2ForCausalLM": Entry(
        _M + "telechat2.py",
        fields={"n_layer": 2, "n_head": 2, "ffn_hidden_size": 128, "layer_norm_epsilon": 1e-6},
    ),
    "TeleFLMForCausalLM": Entry(_M + "teleflm.py", fields={"use_mup": False}),
    # vLLM's Falcon MLP is 4 x hidden wide whatever ffn_hidden_size says (falcon.py:235-248), as
    # the checkpoints' are (transformers' default); the tiny config's narrower one would build
    # from dummy weights and fail the reload of transformers' checkpoint.
    "FalconForCausalLM": Entry(_M + "falcon.py", fields={"ffn_hidden_size": 256}),
    "Lfm2ForCausalLM": Entry(_M + "lfm2.py", fields={"block_dim": 64}),
    # MiniCPM scales the residual and the logits by the width over dim_model_base, the
    # embeddings by scale_emb (minicpm.py:444) and the residual by scale_depth (minicpm.py:386);
    # the values are MiniCPM-2B's.
    "MiniCPMForCausalLM": Entry(
        _M + "minicpm.py", fields={"dim_model_base": 64, "scale_emb": 12, "scale_depth": 1.4}
    ),
    # Solar's skip connections (solar.py:312-330): the layers that save the hidden states
    # (bskcn_1, bskcn_2) and those that mix them back in (bskcn_3, bskcn_4) with the weight
    # bskcn_tv[1] at inference. The first layer cannot save (its residual is not made yet),
    # so four layers: save at 1, mix at 2 and 3.
    "SolarForCausalLM": Entry(
        _M + "solar.py",
        fields={
            "num_hidden_layers": 4,
            "bskcn_1": [1],
            "bskcn_2": [1],
            "bskcn_3": [2],
            "bskcn_4": [3],
            "bskcn_tv": [0.9, 0.8],
        },
    ),
    # Llama 4's text model (the composite Llama4Config has no text fields at its top level);
    # no_rope_layers marks the layers with RoPE (1) per layer.
    "Llama4ForCausalLM": Entry(
        _M + "llama4.py", base="llama4_text", fields={"no_rope_layers": [1, 1]}
    ),
    # ChatGLM's own config (vllm/transformers_utils/configs/chatglm.py) leaves both unset.
    "ChatGLMModel": Entry(_M + "chatglm.py", fields=_CHATGLM),
    "ChatGLMForConditionalGeneration": Entry(_M + "chatglm.py", fields=_CHATGLM),
    # MiMo-V2: hybrid_layer_pattern marks sliding-window layers (1), which have heads of their
    # own (swa_*).
    "MiMoV2FlashForCausalLM": Entry(_M + "mimo_v2.py", fields=_MIMO_V2),
    "MiMoV2ForCausalLM": Entry(_M + "mimo_v2.py", fields=_MIMO_V2),
    "Rnj1ForCausalLM": Entry(
        _M + "rnj1.py",
        fields={"query_pre_attn_scalar": 32, "layer_types": ["full_attention", "full_attention"]},
    ),
    "Plamo3ForCausalLM": Entry(
        _M + "plamo3.py",
        fields={
            "layer_types": ["full_attention", "full_attention"],
            "interleaved_sliding_window": [None, None],
        },
    ),
}
