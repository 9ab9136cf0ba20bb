"""The vLLM zoo's reload checkpoints carry the hub's names for nested towers.

transformers 5 loads a LLaVA-style checkpoint's CLIP or SigLIP tower
(``vision_tower.vision_model.*``) into a tower without that level and, saving a
model it did not load, restores its renames but not that prefix: the names it writes
(``vision_tower.embeddings.*``) are none that vLLM's loaders map
(``vllm/model_executor/models/llava.py``'s ``hf_to_vllm_mapper``, then
``CLIPVisionModel.vision_model``). graphcheck.zoo.vllm_engine.checkpoint puts
the level back; these tests build the tiny models with transformers itself.
"""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")

from graphcheck.zoo.vllm_engine import checkpoint as ck  # noqa: E402

_TOWER = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "image_size": 28,
    "patch_size": 14,
}
_TEXT = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "vocab_size": 128,
}


def _llava(tower: str) -> object:
    vision = getattr(transformers, tower)(**_TOWER)
    text = transformers.LlamaConfig(**_TEXT)
    return transformers.LlavaConfig(vision_config=vision, text_config=text)


@pytest.mark.parametrize("tower", ["CLIPVisionConfig", "SiglipVisionConfig"])
def test_a_llava_towers_checkpoint_names_have_the_hubs_vision_model_level(tower: str) -> None:
    weights = ck.checkpoint_weights(_llava(tower), "LlavaForConditionalGeneration", seed=0)
    vision = sorted(n for n in weights if "vision_tower" in n)
    assert vision, sorted(weights)
    assert all(n.startswith("vision_tower.vision_model.") for n in vision), vision
    assert "vision_tower.vision_model.embeddings.patch_embedding.weight" in weights
    # The other parts keep the names transformers writes (the root's renames reversed).
    assert any(n.startswith("language_model.") or n.startswith("model.") for n in weights)
    assert "multi_modal_projector.linear_1.weight" in weights


def test_a_towers_own_checkpoint_is_not_given_the_level_twice() -> None:
    # SiglipModel's tower sits at vision_model already: the hub writes vision_model.* once.
    config = transformers.SiglipConfig(
        vision_config=_TOWER, text_config={**_TEXT, "max_position_embeddings": 16}
    )
    weights = ck.checkpoint_weights(config, "SiglipModel", seed=0)
    assert "vision_model.embeddings.patch_embedding.weight" in weights
    assert not any(n.startswith("vision_model.vision_model.") for n in weights)


def test_the_renamed_checkpoint_holds_the_same_tensors() -> None:
    torch.manual_seed(0)
    model = transformers.LlavaForConditionalGeneration._from_config(_llava("CLIPVisionConfig"))
    saved = ck._saved(model)
    own = model.state_dict()
    assert len(saved) == len(own)
    tower = own["model.vision_tower.embeddings.patch_embedding.weight"]
    assert torch.equal(saved["vision_tower.vision_model.embeddings.patch_embedding.weight"], tower)


def test_a_text_class_is_built_from_the_composites_text_config() -> None:
    # vLLM serves Qwen3.5's text-only class from the composite config; transformers' class
    # takes the text config inside it.
    if not hasattr(transformers, "Qwen3_5ForCausalLM"):
        pytest.skip(f"transformers {transformers.__version__} has no Qwen3.5")
    composite = transformers.Qwen3_5Config(text_config=_TEXT)
    taken, defaulted = ck._config_for(transformers.Qwen3_5ForCausalLM, composite)
    assert isinstance(taken, transformers.Qwen3_5TextConfig)
    assert defaulted == []
    assert taken.vocab_size == 128


class ServedLlama(transformers.PretrainedConfig):
    """A config class of the llama model type that is not transformers' (as vLLM ships some)."""

    model_type = "llama"


def test_another_class_of_the_model_type_is_made_transformers_own() -> None:
    # vLLM ships its own config classes of some model types; transformers' model reads its own
    # class, made from the same fields (its defaults for the fields the other leaves out).
    served = ServedLlama(**_TEXT)
    taken, defaulted = ck._config_for(transformers.LlamaForCausalLM, served)
    assert type(taken) is transformers.LlamaConfig
    assert (taken.hidden_size, taken.vocab_size) == (32, 128)
    assert taken.rms_norm_eps == transformers.LlamaConfig().rms_norm_eps
    # The fields it took transformers' defaults for are named, for the reload's record.
    assert "rms_norm_eps" in defaulted and "hidden_size" not in defaulted
    same = transformers.LlamaConfig(**_TEXT)
    assert ck._config_for(transformers.LlamaForCausalLM, same) == (same, [])


def test_a_checkpoint_made_with_defaults_says_which() -> None:
    notes: list[str] = []
    weights = ck.checkpoint_weights(ServedLlama(**_TEXT), "LlamaForCausalLM", 0, notes=notes)
    assert "model.embed_tokens.weight" in weights
    assert len(notes) == 1
    assert notes[0].startswith("the checkpoint's config is transformers' LlamaConfig made from")
    assert "rms_norm_eps" in notes[0]
