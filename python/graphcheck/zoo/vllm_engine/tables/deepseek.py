"""Config table: DeepSeek V4 and V4.1, whose config classes (vLLM's) carry no text fields.

vLLM's ``DeepseekV4Config`` (``transformers_utils/configs/deepseek_v4.py``) holds the rope
and vision fields only, and ``DeepseekV41Config`` flattens a checkpoint's ``text_config``
onto its top level: every field of the text model comes from the checkpoint. The entries
give them at the zoo's tiny sizes, with the layout V4's CPU implementation
(``vllm/models/deepseek_v4/cpu/``) asserts: MLA heads of 512 with a rotary part of 64 and
indexer heads of 128 (the CPU compressor takes 512 or 128, ``cpu_compressor.py:82``), one
compressed-sparse layer (ratio 4, with its indexer) and one heavily compressed layer
(ratio 128), hash routing in the first layer, hyper-connections of four streams.
"""

from __future__ import annotations

from typing import Any

from graphcheck.zoo.vllm_engine.tables import Entry

_V4 = "vllm/models/deepseek_v4/"

#: What V4's model code reads off the config (cpu/model.py:128-207, 255-270, 464-493;
#: attention.py:210-236, 946-950; common/rope.py:29), at the tiny sizes.
_TEXT: dict[str, Any] = {
    "vocab_size": 512,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "head_dim": 512,
    "qk_rope_head_dim": 64,
    "q_lora_rank": 64,
    "o_lora_rank": 64,
    "o_groups": 1,
    "sliding_window": 128,
    "compress_ratios": [4, 128],
    "compress_rope_theta": 160000.0,
    "index_n_heads": 2,
    "index_head_dim": 128,
    "index_topk": 64,
    "rms_norm_eps": 1e-6,
    "hidden_act": "silu",
    "hc_mult": 4,
    "hc_sinkhorn_iters": 20,
    "hc_eps": 1e-6,
    "n_routed_experts": 4,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 128,
    "norm_topk_prob": True,
    "swiglu_limit": 10.0,
    "scoring_func": "sqrtsoftplus",
    "topk_method": "noaux_tc",
    "routed_scaling_factor": 1.5,
    "num_hash_layers": 1,
    "max_position_embeddings": 128,
}

TABLE: dict[str, Entry] = {
    "DeepseekV4ForCausalLM": Entry(_V4 + "cpu/model.py", base="deepseek_v4", fields=_TEXT),
    # V4.1's class flattens the checkpoint's text_config (deepseek_v41.py:34-41), which its
    # model reads as V4's does (models/deepseek_v41/nvidia/model.py), with its own sparse
    # topology: ratios 0 (sliding window), 1 or 2 only, and the layers that own the
    # compressed KV and the indexer (deepseek_v41/attention.py:310-347).
    "DeepseekV41ForCausalLM": Entry(
        "vllm/models/deepseek_v41/attention.py",
        base="deepseek_v41",
        fields={
            "text_config": {
                **_TEXT,
                "compress_ratios": [0, 2],
                "kv_source_layer_ids": [1],
                "index_source_layer_ids": [1],
                # Restored as rope_parameters after PreTrainedConfig's init
                # (deepseek_v41.py:31,43-44), read by common/rope.py:17.
                "rope_scaling": {"rope_type": "default", "rope_theta": 10000.0},
                "rope_theta": 10000.0,
            }
        },
    ),
}
