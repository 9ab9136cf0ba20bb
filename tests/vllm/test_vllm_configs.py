"""Tiny configs as vLLM's models read them, with the vLLM environment's transformers and vLLM.

A field a config class derives in ``__post_init__`` comes back at its full-size default when
the shrunk dict still carries it (``from_dict`` sets it over the derivation); a model that
sizes its kernels by it then runs them over memory its tensors do not have.
"""

from __future__ import annotations

from graphcheck.zoo.catalog import Arch
from graphcheck.zoo.vllm_engine.catalog import variant_of
from graphcheck.zoo.vllm_engine.configs import tiny_config


def test_zamba2s_derived_widths_follow_the_tiny_hidden_size() -> None:
    arch = Arch("Zamba2ForCausalLM", "Zamba2ForCausalLM", "zamba2")
    config, _ = tiny_config(arch, variant_of(arch))
    width = config.mamba_expand * config.hidden_size
    # vLLM's Mamba mixer takes head_dim=mamba_headdim (zamba2.py:896): 640 at full size.
    assert config.mamba_headdim * config.n_mamba_heads == width
    assert config.kv_channels == config.hidden_size // config.num_attention_heads
    # The shared attention refuses any other split (zamba2.py:155).
    heads = config.num_attention_heads
    assert config.attention_head_dim * heads == config.attention_hidden_size
    assert config.attention_hidden_size == 2 * config.hidden_size
