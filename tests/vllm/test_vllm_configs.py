"""Tiny configs as vLLM's models read them, with the vLLM environment's transformers and vLLM.

A field a config class derives in ``__post_init__`` comes back at its full-size default when
the shrunk dict still carries it (``from_dict`` sets it over the derivation); a model that
sizes its kernels by it then runs them over memory its tensors do not have.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphcheck.zoo.catalog import Arch
from graphcheck.zoo.vllm_engine.catalog import variant_of
from graphcheck.zoo.vllm_engine.configs import tiny_config
from graphcheck.zoo.vllm_engine.tekken import write_tekken


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


# mistral_common, which names the tekken file's special tokens, comes with vLLM: these run here,
# not in the python tier (where they were skipped, every run).
def test_a_tekken_file_has_the_vocabulary_and_the_entrys_sections(tmp_path: Path) -> None:
    path = write_tekken(tmp_path, 512, {"audio": {"sampling_rate": 16000}})
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["config"]["default_vocab_size"] == 512
    assert data["config"]["default_num_special_tokens"] == 256
    assert [t["rank"] for t in data["vocab"]] == list(range(256))
    assert data["special_tokens"][0]["token_str"] == "<unk>"
    assert "[AUDIO]" in {t["token_str"] for t in data["special_tokens"]}
    assert data["audio"] == {"sampling_rate": 16000}
    with pytest.raises(ValueError, match="vocabulary of 260 leaves 4 special ids"):
        write_tekken(tmp_path, 260, {})


def test_mistral_common_reads_the_tekken_file(tmp_path: Path) -> None:
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    from graphcheck.zoo.vllm_engine.tables.composite import _VOXTRAL_REALTIME_AUDIO

    path = write_tekken(tmp_path, 512, {"audio": _VOXTRAL_REALTIME_AUDIO})
    instruct = MistralTokenizer.from_file(str(path)).instruct_tokenizer
    assert instruct.tokenizer.n_words == 512
    assert instruct.audio_encoder.audio_config.get_num_delay_tokens() == 6
