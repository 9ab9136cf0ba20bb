"""The vLLM zoo's multimodal models served whole: the tokenizer, processor and config parts the
zoo writes for them, checked without vLLM (the builds themselves run in the vllm tier)."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image
from transformers import AutoProcessor, AutoTokenizer, LlamaConfig, LlavaConfig

from graphcheck.zoo.catalog import Arch
from graphcheck.zoo.vllm_engine.configs import _set_token_ids
from graphcheck.zoo.vllm_engine.processor import write_processor
from graphcheck.zoo.vllm_engine.tables import TABLE
from graphcheck.zoo.vllm_engine.tokenizer import write_tokenizer
from graphcheck.zoo.vllm_engine.worker import engine_options


def test_a_processors_run_of_placeholders_is_one_id_each(tmp_path: Path) -> None:
    # A processor writes its image token once per image patch, with no space between them.
    write_tokenizer(tmp_path, LlamaConfig(vocab_size=64))
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    ids = tokenizer("<image><image><image> t5", add_special_tokens=False)["input_ids"]
    assert ids == [63, 63, 63, 5]


def test_words_the_model_looks_up_get_ids_of_their_own(tmp_path: Path) -> None:
    # Gemma 3's prompt update reads the newline runs' ids (gemma3_mm.py:349).
    words = ("\n", "\n\n")
    write_tokenizer(tmp_path, LlamaConfig(vocab_size=64), looked_up=words)
    vocab = AutoTokenizer.from_pretrained(tmp_path).get_vocab()
    assert vocab["\n"] != vocab["\n\n"]
    assert min(vocab["\n"], vocab["\n\n"]) > 8  # top ids, none of the special tokens


def test_a_config_field_holds_the_tokenizers_id_of_its_word(tmp_path: Path) -> None:
    config = LlavaConfig(image_token_index=10)
    config.save_pretrained(tmp_path)
    tokenizer = write_tokenizer(tmp_path, config, looked_up=("[IMG]",))
    _set_token_ids(tmp_path, config, tokenizer, {"image_token_index": "[IMG]"})
    expected = tokenizer.convert_tokens_to_ids("[IMG]")
    assert expected != 10 and config.image_token_index == expected
    written = json.loads((tmp_path / "config.json").read_text(encoding="utf-8"))
    assert written["image_token_index"] == expected


def test_llavas_processor_is_sized_for_the_tiny_tower(tmp_path: Path) -> None:
    # 56-pixel images of 14-pixel patches (a 224-pixel default would not fit the zoo's batch).
    vision = {"model_type": "clip_vision_model", "image_size": 56, "patch_size": 14}
    config = LlavaConfig(vision_config=vision, image_token_index=511)
    config.text_config.vocab_size = 512
    tokenizer = write_tokenizer(tmp_path, config)
    assert write_processor(tmp_path, config, tokenizer) == "LlavaProcessor"
    processor = AutoProcessor.from_pretrained(tmp_path)
    out = processor(text="<image>", images=[Image.new("RGB", (100, 80))], return_tensors="pt")
    assert list(out["pixel_values"].shape[-2:]) == [56, 56]
    # 16 patches less one by the default feature selection, each its own <image> id.
    assert out["input_ids"][0].tolist() == [511] * 15


def test_granite_speechs_processor_takes_its_feature_extractor(tmp_path: Path) -> None:
    from transformers import GraniteSpeechConfig

    config = GraniteSpeechConfig()
    tokenizer = write_tokenizer(tmp_path, LlamaConfig(vocab_size=64))
    assert write_processor(tmp_path, config, tokenizer) == "GraniteSpeechProcessor"


def test_the_families_served_whole_are_not_language_model_only() -> None:
    for name in (
        "Qwen2VLForConditionalGeneration",
        "LlavaForConditionalGeneration",
        "Gemma3ForConditionalGeneration",
        "Llama4ForConditionalGeneration",
        "VoxtralForConditionalGeneration",
    ):
        assert TABLE[name].whole, name
        options = engine_options(Arch(name, name, "", "", ("multimodal",)), None)
        assert "language_model_only" not in options, name
