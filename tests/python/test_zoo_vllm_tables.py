"""The vLLM zoo's config tables, failure reasons and engine options: the parts that run without
vLLM (the builds themselves run in the vllm tier, tests/vllm)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from transformers import AutoConfig, LlamaConfig

from graphcheck.zoo import report as rep
from graphcheck.zoo._util import error_line
from graphcheck.zoo.catalog import Arch
from graphcheck.zoo.vllm_engine.reasons import REASONS, WHOSE, explain, vllm_frame
from graphcheck.zoo.vllm_engine.speculative import DRAFTS
from graphcheck.zoo.vllm_engine.tables import TABLE, Entry, apply, per_layer, remote_class
from graphcheck.zoo.vllm_engine.worker import engine_options


def test_every_entry_cites_the_vllm_file_it_was_read_from() -> None:
    assert len(TABLE) > 50
    for name, entry in TABLE.items():
        assert re.match(r"vllm/[\w/]+\.py", entry.source), (name, entry.source)
        assert (
            entry.fields
            or entry.text
            or entry.fix
            or entry.base
            or entry.processor
            or entry.tokens
            or entry.whole
            or entry.engine
            or entry.files
        ), name


def test_apply_merges_fields_into_sub_configs_and_the_text_config() -> None:
    d: dict[str, Any] = {
        "hidden_size": 64,
        "vision_config": {"model_type": "x", "image_size": 224, "patch_size": 14},
        "text_config": {"model_type": "llama", "num_hidden_layers": 3},
    }
    entry = Entry(
        "vllm/model_executor/models/x.py",
        fields={"vision_config": {"image_size": 32}, "pooling": "avg"},
        text={"norm_topk_prob": True},
        fix=per_layer("layer_types", "full_attention", "sliding_attention"),
    )
    apply(entry, d)
    assert d["vision_config"] == {"model_type": "x", "image_size": 32, "patch_size": 14}
    assert d["pooling"] == "avg" and d["text_config"]["norm_topk_prob"] is True
    assert d["text_config"]["layer_types"] == [
        "full_attention", "sliding_attention", "full_attention"
    ]  # fmt: skip
    # The entry's own values are copied, never shared with the config it was applied to.
    d["vision_config"]["image_size"] = 1
    assert entry.fields["vision_config"]["image_size"] == 32


def test_a_remote_class_keeps_the_hubs_name_fields_and_sub_configs(tmp_path: Path) -> None:
    cls = remote_class(Entry("vllm/x.py", remote="ZooProbeChatConfig", model_type="zoo_probe"))
    assert cls.__name__ == "ZooProbeChatConfig" and cls.model_type == "zoo_probe"
    d = LlamaConfig(hidden_size=64).to_dict()
    d.update(
        model_type="zoo_probe",
        rope_theta=5000.0,
        llm_config=LlamaConfig(hidden_size=32).to_dict(),
        vision_config={"model_type": "not_a_transformers_type", "image_size": 32},
    )
    config = cls.from_dict(d)
    # A field transformers' Llama class would move into rope_parameters stays an attribute.
    assert config.rope_theta == 5000.0
    assert type(config.llm_config).__name__ == "LlamaConfig" and config.llm_config.hidden_size == 32
    assert config.vision_config.image_size == 32
    config.save_pretrained(tmp_path)
    again = AutoConfig.from_pretrained(tmp_path)  # offline: the registered stand-in
    assert type(again).__name__ == "ZooProbeChatConfig" and again.rope_theta == 5000.0
    assert again.vision_config.image_size == 32
    # A tower only the hub defines keeps its model type through config.json (vLLM dispatches
    # on it: Ovis's "siglip2_navit").
    assert again.vision_config.model_type == "not_a_transformers_type"


def test_a_remote_class_gives_its_objects_fields_by_attribute(tmp_path: Path) -> None:
    # DeciLM's hub class makes block_configs objects; vLLM reads them by attribute and asks
    # hasattr for the optional ones (nemotron_nas.py:134-176).
    entry = Entry(
        "vllm/x.py", remote="ZooProbeBlocksConfig", model_type="zoo_probe_blocks",
        objects=("block_configs",),
    )  # fmt: skip
    cls = remote_class(entry)
    block = {"attention": {"no_op": False, "n_heads_in_group": 2}, "ffn": {"ffn_mult": 1.0}}
    config = cls.from_dict({"model_type": "zoo_probe_blocks", "block_configs": [block]})
    assert config.block_configs[0].attention.n_heads_in_group == 2
    assert hasattr(config.block_configs[0].ffn, "ffn_mult")
    assert not hasattr(config.block_configs[0].ffn, "intermediate_size")
    config.save_pretrained(tmp_path)  # still the checkpoint's dicts in config.json
    again = AutoConfig.from_pretrained(tmp_path)
    assert again.block_configs[0].attention.no_op is False and again.block_configs == [block]


def test_drafts_name_their_target_and_method() -> None:
    for name, draft in DRAFTS.items():
        assert draft.target and draft.target != name, name
        assert draft.method in {"eagle", "eagle3", "medusa", "mtp", "dflash", "dspark",
                                "extract_hidden_states"}, name  # fmt: skip


def test_known_reasons_say_whose_and_where() -> None:
    amx = "RuntimeError: expect weight to be bfloat16, float16, int8, fp8_e4m3 or uint8(mxfp4)."
    found = explain(amx, "vllm/_custom_ops.py:12")
    assert found["whose"] == "cpu backend"
    assert found["source"] == "vllm/v1/attention/backends/mla/amx_mla.py:303"
    unknown = explain("KeyError: 'x'", "vllm/model_executor/models/foo.py:7")
    assert unknown == {
        "whose": "unclassified",
        "why": "",
        "source": "vllm/model_executor/models/foo.py:7",
    }
    assert all(r.whose in WHOSE and r.why for r in REASONS)


def test_a_reason_with_common_words_needs_its_vllm_frame_too() -> None:
    error = "failed: TypeError: 'function' object is not subscriptable"
    triton = explain(error, "vllm/models/inkling/nvidia/ops/sconv.py:281")
    assert triton["whose"] == "cpu backend"
    assert triton["source"] == "vllm/models/inkling/nvidia/ops/sconv.py:281"
    assert explain(error, "vllm/model_executor/models/foo.py:7")["whose"] == "unclassified"


def test_openpangus_mtp_fails_in_vllms_mtp_layer() -> None:
    error = (
        "failed: AttributeError: 'OpenPanguDecoderLayer' object has no attribute "
        "'use_sequence_parallel_moe'"
    )
    found = explain(error, "vllm/model_executor/models/deepseek_mtp.py:137")
    assert found["whose"] == "vllm" and "openpangu_mtp.py:69" in found["why"]
    assert explain(error, "vllm/model_executor/models/foo.py:7")["whose"] == "unclassified"


def test_longcats_zero_expert_router_is_the_cpu_backends() -> None:
    error = "failed: AttributeError: '_OpNamespace' '_moe_C' object has no attribute 'topk_softmax'"
    found = explain(error, "vllm/_custom_ops.py:2309")
    assert found["whose"] == "cpu backend" and "router_factory.py:135" in found["source"]


def test_a_reason_with_generic_words_may_name_its_architecture() -> None:
    error = "ValidationError: Value error, This model does not support `--runner generate`."
    where = "vllm/engine/arg_utils.py:1955"
    stub = explain(error, where, "DeepseekV4ForConditionalGeneration")
    assert stub["whose"] == "cpu backend"
    assert stub["source"] == "vllm/models/deepseek_v4/vl_stub.py:11"
    assert explain(error, where, "SomeOtherForCausalLM")["whose"] == "unclassified"
    assert explain(error, where)["whose"] == "unclassified"


def test_the_vllm_frame_is_the_innermost_one_inside_vllm() -> None:
    def raise_in(path: str, line: int) -> None:
        code = compile("\n" * (line - 1) + "raise ValueError('boom')", path, "exec")
        exec(code, {})

    with pytest.raises(ValueError) as info:
        raise_in("/x/lib/python3.11/site-packages/vllm/model_executor/models/foo.py", 42)
    assert vllm_frame(info.value) == "vllm/model_executor/models/foo.py:42"
    with pytest.raises(ValueError) as outside:
        raise_in("/x/lib/python3.11/site-packages/pydantic/main.py", 3)
    assert vllm_frame(outside.value) == ""


def test_a_pydantic_error_line_carries_its_message() -> None:
    class ValidationError(Exception):
        pass

    exc = ValidationError(
        "1 validation error for ModelConfig\n"
        "  Value error, User-specified max_model_len (128) is greater than the derived one "
        "[type=value_error, input_value=ArgsKwargs((), {'model': ...}), input_type=ArgsKwargs]\n"
        "    For further information visit https://errors.pydantic.dev/2.14/v/value_error"
    )
    assert error_line(exc) == (
        "ValidationError: 1 validation error for ModelConfig: Value error, User-specified "
        "max_model_len (128) is greater than the derived one"
    )


def test_engine_options_keep_within_the_models_positions() -> None:
    text = Arch("LlamaForCausalLM", "LlamaForCausalLM", "llama", "", ("text",))
    assert engine_options(text, LlamaConfig(max_position_embeddings=77)) == {"max_model_len": 77}
    assert engine_options(text, LlamaConfig(max_position_embeddings=4096)) == {}
    mm = Arch("X", "X", "x", "", ("multimodal",))
    assert engine_options(mm, None) == {"language_model_only": True}


def test_an_embedding_architecture_is_served_with_the_pooling_runner() -> None:
    # vLLM's default runner would serve LlamaModel as LlamaForCausalLM, which cannot read a
    # LlamaModel checkpoint (its names have no "model." prefix).
    base = Arch("LlamaModel", "LlamaModel", "llama", "", ("embedding",))
    assert engine_options(base, None) == {"runner": "pooling"}
    text = Arch("LlamaForCausalLM", "LlamaForCausalLM", "llama", "", ("text",))
    assert "runner" not in engine_options(text, None)


def test_an_entry_served_whole_keeps_its_encoders_and_adds_its_engine_arguments() -> None:
    # Whisper (encoder-decoder) is served whole: no language_model_only.
    whisper = Arch("WhisperForConditionalGeneration", "WhisperForConditionalGeneration",
                   "whisper", "", ("multimodal",))  # fmt: skip
    assert TABLE[whisper.class_name].whole
    assert "language_model_only" not in engine_options(whisper, None)
    # Unlimited-OCR, served whole, names the CPU's vision attention backend.
    ocr = Arch("UnlimitedOCRForCausalLM", "UnlimitedOCRForCausalLM", "", "", ("multimodal",))
    assert engine_options(ocr, None) == {"mm_encoder_attn_backend": "TORCH_SDPA"}
    # OpenCUA stays language-model-only (vLLM's processor; its entry says why).
    cua = Arch("OpenCUAForConditionalGeneration", "OpenCUAForConditionalGeneration", "", "",
               ("multimodal",))  # fmt: skip
    assert engine_options(cua, None) == {"language_model_only": True}


def test_a_table_entry_may_serve_a_multimodal_model_whole() -> None:
    # MOSS-Audio's language-model-only build reads its skipped tower's meta tensor.
    assert TABLE["MossAudioModel"].whole
    moss = Arch("MossAudioModel", "MossAudioModel", "moss_audio", "", ("multimodal",))
    assert engine_options(moss, None) == {}


def test_a_table_entry_writes_the_checkpoints_other_files(tmp_path: Path) -> None:
    import base64

    from transformers import WhisperConfig, WhisperFeatureExtractor

    from graphcheck.zoo.vllm_engine.configs import write_files

    write_files(tmp_path, TABLE["MoonshotKimiaForCausalLM"].files)
    # tiktoken's format: a base64 token and its rank per line; the 256 bytes, ranked above the
    # zoo tokenizer's special ids 1-4.
    lines = (tmp_path / "tiktoken.model").read_text(encoding="utf-8").splitlines()
    ranks = {base64.b64decode(token): int(rank) for token, rank in map(str.split, lines)}
    assert ranks == {bytes([b]): 8 + b for b in range(256)}
    whisper = WhisperConfig.from_pretrained(tmp_path, subfolder="whisper-large-v3")
    assert (whisper.d_model, whisper.encoder_layers) == (64, 1)
    # Served whole, vLLM loads the tower's feature extractor from the same subfolder: as many
    # mel bins as the tower takes.
    features = WhisperFeatureExtractor.from_pretrained(tmp_path, subfolder="whisper-large-v3")
    assert features.feature_size == whisper.num_mel_bins == 128


def test_moss_audios_processor_file_names_the_ids_of_the_tokenizers_audio_words(
    tmp_path: Path,
) -> None:
    from graphcheck.zoo.vllm_engine.tokenizer import write_tokenizer

    entry = TABLE["MossAudioModel"]
    tokenizer = write_tokenizer(tmp_path, LlamaConfig(vocab_size=512), entry.tokens)
    ids = entry.files["preprocessor_config.json"]
    words = entry.tokens
    assert tokenizer.convert_tokens_to_ids(words["audio_token"]) == ids["audio_token_id"]
    assert tokenizer.convert_tokens_to_ids(words["audio_bos_token"]) == ids["audio_start_id"]
    assert tokenizer.convert_tokens_to_ids(words["audio_eos_token"]) == ids["audio_end_id"]


def test_round_four_reasons_name_vllms_source_line() -> None:
    ernie = explain(
        "failed: TypeError: Ernie4_5_VLRotaryEmbedding.forward_native() takes from 3 to 4 "
        "positional arguments but 5 were given",
        "vllm/model_executor/layers/rotary_embedding/mrope.py:529",
    )
    assert ernie["whose"] == "cpu backend"
    assert ernie["source"] == "vllm/model_executor/layers/rotary_embedding/mrope.py:529"
    kimi = explain(
        "AttributeError: '_lib_fn_wrapper' object has no attribute 'get'",
        "vllm/triton_utils/dispatcher.py:139",
    )
    assert kimi["whose"] == "cpu backend" and "llvmlite" in kimi["why"]
    meta = "RuntimeError: Tensor.item() cannot be called on meta tensors"
    dasheng = explain(meta, "vllm/model_executor/models/midashenglm.py:311")
    assert dasheng["whose"] == "vllm"
    assert explain(meta, "vllm/model_executor/models/foo.py:9")["whose"] == "zoo"


def test_failure_groups_name_whose_reason_and_where() -> None:
    failed = {"status": "failed", "error": "RuntimeError: expect weight to be bfloat16 (x)",
              "failure": {"whose": "cpu backend", "why": "w", "source": "vllm/a.py:3"}}  # fmt: skip
    plain = {"status": "failed", "error": "KeyError: 'x'"}
    assert rep._failure_group(failed).startswith("[cpu backend] RuntimeError")
    assert rep._failure_group(failed).endswith(" at vllm/a.py:3")
    assert rep._failure_group(plain) == "KeyError: '…'"


def test_reload_reasons_that_name_the_architectures_class_are_one_group() -> None:
    a = rep._reason("not run: transformers 5.19.0 has no class ChatGLMModel")
    b = rep._reason("not run: transformers 5.19.0 has no class Ovis2_5")
    assert a == b == "not run: transformers N.N.N has no class of the architecture"
    c = rep._reason("not run: transformers' ColPaliForRetrieval cannot be built from the tiny")
    assert c == "not run: transformers' class cannot be built from the tiny"


def test_the_tokenizer_names_placeholders_and_keeps_id_0_ordinary(tmp_path: Path) -> None:
    from graphcheck.zoo.vllm_engine.tokenizer import PLACEHOLDERS, write_tokenizer

    tokenizer = write_tokenizer(tmp_path, LlamaConfig(vocab_size=64))
    assert len(tokenizer) == 64
    assert tokenizer.convert_tokens_to_ids("<image>") == 63
    assert tokenizer.convert_tokens_to_ids(PLACEHOLDERS[-1]) == 64 - len(PLACEHOLDERS)
    # CLIP's processor takes id 0 as its image placeholder and asserts it is not special.
    assert 0 not in tokenizer.all_special_ids
    assert sorted(tokenizer.all_special_ids) == [1, 2, 3, 4]


def test_the_tokenizer_carries_the_words_a_processor_reads(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    from graphcheck.zoo.vllm_engine.tables import GEMMA3_TOKENS
    from graphcheck.zoo.vllm_engine.tokenizer import PLACEHOLDERS, write_tokenizer

    write_tokenizer(tmp_path, LlamaConfig(vocab_size=64), GEMMA3_TOKENS)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert again.image_token == "<image_soft_token>" and again.boi_token == "<start_of_image>"
    # Below the placeholders, each its own top id.
    ids = {again.convert_tokens_to_ids(w) for w in GEMMA3_TOKENS.values()}
    assert ids == set(range(64 - len(PLACEHOLDERS) - 3, 64 - len(PLACEHOLDERS)))
    assert again.convert_tokens_to_ids("<image>") == 63


def test_a_tables_processor_writes_the_parts_sized_for_the_tiny_tower(tmp_path: Path) -> None:
    import json

    from transformers import Qwen2VLConfig

    from graphcheck.zoo.vllm_engine.processor import write_processor
    from graphcheck.zoo.vllm_engine.tokenizer import write_tokenizer

    config = Qwen2VLConfig(vision_config={"patch_size": 16, "spatial_merge_size": 2})
    tokenizer = write_tokenizer(tmp_path, config)
    assert write_processor(tmp_path, config, tokenizer, "qwen3_vl", whole=False)
    assert not (tmp_path / "processor_config.json").exists()  # the parts only
    saved = json.loads((tmp_path / "preprocessor_config.json").read_text(encoding="utf-8"))
    # One to four merged 32-pixel patches: the dummy image fits the zoo's token budget.
    assert saved["patch_size"] == 16
    assert saved["size"] == {"shortest_edge": 32 * 32, "longest_edge": 4 * 32 * 32}


def test_a_processor_counts_its_tokens_with_the_tiny_towers_patch(tmp_path: Path) -> None:
    from transformers import AutoProcessor, LlavaConfig

    from graphcheck.zoo.vllm_engine.processor import write_processor
    from graphcheck.zoo.vllm_engine.tokenizer import write_tokenizer

    config = LlavaConfig(vision_config={"model_type": "clip_vision_model", "patch_size": 16})
    tokenizer = write_tokenizer(tmp_path, config)
    assert write_processor(tmp_path, config, tokenizer) == "LlavaProcessor"
    processor = AutoProcessor.from_pretrained(tmp_path)
    assert processor.patch_size == 16
    assert processor.vision_feature_select_strategy == config.vision_feature_select_strategy


def test_a_plain_subconfig_stays_the_dict_vllm_reads_by_key() -> None:
    # Cohere ASR's convertor reads encoder["n_heads"] (model_arch_config_convertor.py:493).
    entry = TABLE["CohereAsrForConditionalGeneration"]
    assert entry.plain == ("encoder",)
    config = remote_class(entry)(encoder={"n_heads": 2}, decoder={"model_type": "llama"})
    assert config.encoder == {"n_heads": 2}
    assert not isinstance(config.decoder, dict)  # a sub-config not kept plain: an object


def test_a_multimodal_model_served_whole_keeps_its_familys_entry() -> None:
    from graphcheck.zoo.vllm_engine.tables import multimodal, omni

    for name in omni.WHOLE:
        assert TABLE[name].whole, name
    # H2OVL keeps the InternVL chat layout of its family's entry, with the crop switch added.
    family = multimodal.TABLE["H2OVLChatModel"]
    h2ovl = TABLE["H2OVLChatModel"]
    assert (h2ovl.remote, h2ovl.fix) == (family.remote, family.fix) and not family.whole
    assert h2ovl.fields == {"use_msac": True}
    name = "Qwen3_5ForConditionalGeneration"
    qwen = Arch(name, name, "qwen3_5", "", ("multimodal",))
    assert "language_model_only" not in engine_options(qwen, None)


@pytest.mark.parametrize(
    "name", ["PaddleOCRVLForConditionalGeneration", "MiniCPMV4_6ForConditionalGeneration"]
)
def test_a_whole_models_image_id_is_the_tokenizers(name: str, tmp_path: Path) -> None:
    # vLLM's prompt replacement searches the config's image id: the tokenizer's must match.
    from transformers import AutoTokenizer

    from graphcheck.zoo.vllm_engine.tokenizer import write_tokenizer

    entry = TABLE[name]
    d: dict[str, Any] = {"vocab_size": 96}
    apply(entry, d)
    write_tokenizer(tmp_path, LlamaConfig(vocab_size=96), entry.tokens)
    again = AutoTokenizer.from_pretrained(tmp_path)
    assert d["image_token_id"] == again.convert_tokens_to_ids(entry.tokens["image_token"])
    assert d["image_token_id"] != again.unk_token_id


def test_hybrid_mla_models_are_served_without_prefix_caching_and_name_the_cpu_mla_refusal() -> None:
    # Without it, vLLM's CPU platform turns prefix caching off for MLA (platforms/cpu.py:516-526)
    # after the Mamba block was sized for it, and its own validator refuses the engine.
    glm = Arch("Glm5NextForCausalLM", "Glm5NextForCausalLM", "", "", ("text",))
    assert engine_options(glm, None) == {"enable_prefix_caching": False}
    ling = Arch("BailingMoeV3VLForConditionalGeneration", "BailingMoeV3VLForConditionalGeneration",
                "", "", ("multimodal",))  # fmt: skip
    assert engine_options(ling, None)["enable_prefix_caching"] is False
    aligned = explain(
        "ValueError: Aligned KV cache block size 128 is not supported by attention backend(s): "
        "CPU_MLA.",
        "vllm/platforms/interface.py:820",
    )
    assert aligned["whose"] == "cpu backend"
    assert aligned["source"] == "vllm/platforms/interface.py:820"
    assert "multiple of 128" in aligned["why"]


def test_a_processor_whose_save_fails_half_way_leaves_no_file(tmp_path: Path) -> None:
    from transformers import Ernie4_5_VLMoeConfig

    from graphcheck.zoo.vllm_engine.processor import write_processor
    from graphcheck.zoo.vllm_engine.tables import TABLE
    from graphcheck.zoo.vllm_engine.tokenizer import write_tokenizer

    # Ernie 4.5 VL's processor is made, but its video processor refuses to save its config
    # without the checkpoint's font file: vLLM must find no processor file, not an empty one.
    entry = TABLE["Ernie4_5_VLMoeForConditionalGeneration"]
    config = Ernie4_5_VLMoeConfig()
    tokenizer = write_tokenizer(tmp_path, config, entry.tokens)
    before = sorted(p.name for p in tmp_path.iterdir())
    assert write_processor(tmp_path, config, tokenizer, "ernie4_5_vl_moe") == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    # With the entry's video arguments (no frame numbers drawn) the processor is written.
    video = entry.video_processor
    assert write_processor(tmp_path, config, tokenizer, "ernie4_5_vl_moe", video=video)
    assert (tmp_path / "processor_config.json").stat().st_size > 0


def test_fun_audio_chats_speech_tokenizer_pads_with_a_code_of_its_discrete_tower(
    tmp_path: Path,
) -> None:
    from transformers import AutoTokenizer

    from graphcheck.zoo.vllm_engine.configs import write_files

    entry = TABLE["FunAudioChatForConditionalGeneration"]
    write_files(tmp_path, entry.files)
    speech = AutoTokenizer.from_pretrained(tmp_path / "speech_tokenizer")
    # vLLM pads each audio's frames with the pad word to a multiple of the group size and
    # embeds the ids as the discrete tower's codes (funaudiochat.py:645-670).
    ids = speech(["<|audio_pad|>" * 3], padding=True, pad_to_multiple_of=5)["input_ids"][0]
    assert ids == [speech.pad_token_id] * 5
    assert 0 <= speech.pad_token_id < entry.fields["audio_config"]["codebook_size"]
