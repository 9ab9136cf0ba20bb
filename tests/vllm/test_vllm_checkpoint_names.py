"""Reload checkpoints in the names vLLM's loaders read, with the vLLM environment's transformers.

transformers 5.19 (vLLM's bound) saves Qwen2-Audio's kind with its language model's
level twice (``language_model.model.model.*``; 5.24, the python tier's, does not), and
any release drops a nested CLIP or SigLIP tower's ``vision_model.`` level when saving a
model it did not load. graphcheck.zoo.vllm_engine.checkpoint writes the hub's names;
these tests build the tiny models with transformers and read what it wrote.
"""

from __future__ import annotations

import transformers

from graphcheck.zoo.vllm_engine import checkpoint as ck

_TEXT = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 128,
}


def test_an_audio_models_language_model_is_saved_under_one_model_level() -> None:
    audio = transformers.Qwen2AudioEncoderConfig(
        d_model=32, encoder_layers=1, encoder_attention_heads=2, encoder_ffn_dim=64,
        num_mel_bins=16, max_source_positions=32,
    )  # fmt: skip
    config = transformers.Qwen2AudioConfig(
        audio_config=audio, text_config=transformers.Qwen2Config(**_TEXT)
    )
    weights = ck.checkpoint_weights(config, "Qwen2AudioForConditionalGeneration", seed=0)
    language = sorted(n for n in weights if n.startswith("language_model."))
    assert "language_model.model.embed_tokens.weight" in weights, language
    assert "language_model.lm_head.weight" in weights
    assert not any(n.startswith("language_model.model.model.") for n in weights), language
    assert any(n.startswith("audio_tower.layers.0.") for n in weights)


def test_a_llava_clip_tower_keeps_its_vision_model_level() -> None:
    vision = transformers.CLIPVisionConfig(
        hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        image_size=28, patch_size=14,
    )  # fmt: skip
    config = transformers.LlavaConfig(
        vision_config=vision, text_config=transformers.LlamaConfig(**_TEXT)
    )
    weights = ck.checkpoint_weights(config, "LlavaForConditionalGeneration", seed=0)
    tower = [n for n in weights if n.startswith("vision_tower.")]
    assert tower and all(n.startswith("vision_tower.vision_model.") for n in tower), tower
