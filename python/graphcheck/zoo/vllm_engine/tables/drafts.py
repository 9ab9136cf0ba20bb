"""Config table: speculative drafts' own configs (served with a target: ``speculative.py``).

An EAGLE draft's config is the family's decoder config with one or a few layers
(vLLM wraps it in its ``EAGLEConfig``, which copies the fields); DFlash drafts
add the ``dflash_config`` vLLM reads (the target layers whose hidden states
feed the draft, the mask token of parallel drafting); the hidden-states
extractor names the target layers it records.
"""

from __future__ import annotations

from graphcheck.zoo.vllm_engine.tables import Dict, Entry
from graphcheck.zoo.vllm_engine.tables.moe import TABLE as MOE
from graphcheck.zoo.vllm_engine.tables.multimodal import tiny_text
from graphcheck.zoo.vllm_engine.tables.text import TABLE as TEXT

_M = "vllm/model_executor/models/"

# Both tiny target layers feed the draft; id 3 (the tokenizer's pad token) is the mask.
_DFLASH = {"dflash_config": {"target_layer_ids": [0, 1], "mask_token_id": 3}}


def _gemma4_assistant(d: Dict) -> None:
    if not isinstance(d.get("text_config"), dict):
        # What its class's validate_architecture demands of the assistant's text model: no
        # per-layer inputs, no MoE block, every layer's KV shared with the target.
        text = tiny_text(
            "gemma4_text",
            hidden_size_per_layer_input=0,
            vocab_size_per_layer_input=0,
            enable_moe_block=False,
            use_double_wide_mlp=False,
        )
        text["num_kv_shared_layers"] = text["num_hidden_layers"]
        d["text_config"] = text


_MLA_DRAFT = {
    "num_hidden_layers": 1,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 64,
    "v_head_dim": 32,
    "kv_lora_rank": 512,
    "q_lora_rank": 32,
}

TABLE: dict[str, Entry] = {
    # A Cohere 2 draft: its layer_types follow the target's (cohere_eagle.py:66-77); one
    # layer, as the drafter keeps its layers in one KV-cache group
    # (v1/spec_decode/llm_base_proposer.py:1698).
    "EagleCohereForCausalLM": Entry(
        _M + "cohere_eagle.py",
        base="cohere2",
        fields={"num_hidden_layers": 1, "layer_types": ["full_attention"]},
    ),
    # llama4_eagle.py:154 asserts no YOCO global KV layer.
    "EagleLlama4ForCausalLM": Entry(
        _M + "llama4_eagle.py",
        base="llama4_text",
        fields={
            **TEXT["Llama4ForCausalLM"].fields,
            "yoco_global_kv_layer": None,
            "yoco_local_kv_layer": None,
            "moe_layers": [],  # llama4_eagle.py:156: a dense draft
            "draft_vocab_size": 512,
        },
    ),
    "EagleMiniCPMForCausalLM": Entry(
        _M + "minicpm_eagle.py", fields=TEXT["MiniCPMForCausalLM"].fields
    ),
    "EagleMistralLarge3ForCausalLM": Entry(
        _M + "mistral_large_3_eagle.py", fields=MOE["MistralLarge3ForCausalLM"].fields
    ),
    "Eagle3MiniMaxM2ForCausalLM": Entry(
        _M + "llama_eagle3.py", fields=MOE["MiniMaxM2ForCausalLM"].fields
    ),
    # The class's default has no text config (gemma4_mtp.py:343 reads it); the backbone is
    # the tiny target's width, its centroids few beside the tiny vocabulary.
    "Gemma4MTPModel": Entry(
        _M + "gemma4_mtp.py, vllm/config/speculative.py",
        base="gemma4_assistant",
        fields={"backbone_hidden_size": 64, "num_centroids": 16, "centroid_intermediate_top_k": 4},
        fix=_gemma4_assistant,
    ),
    "DFlashDraftModel": Entry(_M + "qwen3_dflash.py", base="qwen3", fields=_DFLASH),
    "DFlash2DraftModel": Entry(_M + "qwen3_dflash2.py", base="qwen3", fields=_DFLASH),
    "LiLiCorrDraftModel": Entry(_M + "lilicorr.py", base="qwen3", fields=_DFLASH),
    # Qwen3-Omni's DSpark checkpoint contract (vllm/config/speculative.py:147-357): a trained
    # block as long as the speculated tokens (the zoo speculates one), the thinker's width.
    "Qwen3OmniDSparkModel": Entry(
        _M + "qwen3_dspark.py, vllm/config/speculative.py",
        base="qwen3",
        fields={
            "dspark_target_layer_ids": [0, 1],
            "block_size": 1,
            "target_hidden_size": 64,
            "num_key_value_heads": 1,
            "use_aux_hidden_state": True,
            "markov_rank": 1,
            "markov_head_type": "vanilla",
            "mask_token_id": 3,
        },
    ),
    # Muse Glimmer's DFlash head under vLLM's class of it (muse_glimmer.py:347), with the
    # mask token parallel drafting requires (v1/spec_decode/llm_base_proposer.py:375).
    "DFlashMuseGlimmerAssistantModel": Entry(
        _M + "qwen3_dflash.py, vllm/transformers_utils/configs/muse_glimmer.py",
        base="muse_glimmer_assistant",
        fields=_DFLASH,
    ),
    "Qwen3DSparkModel": Entry(
        _M + "qwen3_dspark.py", base="qwen3", fields={"dspark_target_layer_ids": [0, 1]}
    ),
    # EAGLE-3 over DeepSeek: a one-layer Llama-config draft with MLA attention, whose head sizes
    # it reads with getattr defaults of 0 (deepseek_eagle3.py:64-76): the tiny DeepSeek target's
    # (a deepseek_v3 model type would make vLLM's EAGLEConfig name it an MTP draft instead,
    # transformers_utils/configs/eagle.py:59).
    "Eagle3DeepseekV2ForCausalLM": Entry(_M + "deepseek_eagle3.py", fields=_MLA_DRAFT),
    "Eagle3DeepseekV3ForCausalLM": Entry(_M + "deepseek_eagle3.py", fields=_MLA_DRAFT),
    # EAGLE over DeepSeek-V3: a DeepSeek-V3 decoder layer with its routed experts
    # (deepseek_eagle.py:116 reads n_routed_experts).
    "EagleDeepSeekMTPModel": Entry(
        _M + "deepseek_eagle.py", base="deepseek_v3", fields={"num_hidden_layers": 1}
    ),
    # The draft's layers are dense: vLLM offsets a DFlash layer's attention prefix past the
    # target's layers but not its MLP's (laguna_dflash.py:105-114), so a sparse draft layer's
    # experts would take the name of the target's MoE layer of the same index
    # (fused_moe/runner/moe_runner.py:67 refuses the duplicate).
    "DFlashLagunaForCausalLM": Entry(
        _M + "laguna_dflash.py",
        base="laguna",
        fields={**_DFLASH, "draft_vocab_size": 512, "mlp_layer_types": ["dense", "dense"]},
    ),
}
