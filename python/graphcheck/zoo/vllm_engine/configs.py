"""Tiny configs for vLLM's architectures, written as a checkpoint folder's ``config.json``.

The config class of an architecture is found, in order, in transformers' auto
tables (the model type that lists a class of that name), and as the registry's
module name taken for a model type (vLLM's own config classes first, then
transformers'). Architectures that none of these
names (remote-code models whose config lives on the hub) get a Llama config
with their architecture name: vLLM's Llama-like implementations read the same
fields, and those that need more fail with the missing field as their reason.

The config's defaults are shrunk by the transformers zoo's
:func:`~graphcheck.zoo.tiny_config.shrink` with vLLM's sizes
(:data:`VLLM_SIZES`: head dimension 32, the smallest vLLM's CPU attention
accepts), then fitted to vLLM's CPU kernels (:func:`fit_for_vllm`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graphcheck.zoo.catalog import Arch, _auto_tables, _best_model_type
from graphcheck.zoo.overrides import drop_derived
from graphcheck.zoo.tiny_config import Sizes, shrink
from graphcheck.zoo.vllm_engine.catalog import Variant

__all__ = [
    "AWQ_INT4",
    "GPTQ_INT4",
    "QUANTIZATION_CONFIGS",
    "VLLM_SIZES",
    "W8A8_INT8",
    "fit_for_vllm",
    "save_as",
    "write_config",
    "write_files",
]

#: Two heads of 32 over a width of 64, one KV head (grouped-query attention).
VLLM_SIZES = Sizes(width=64, heads=2, kv_heads=1, ffn=128)

#: A compressed-tensors W8A8 int8 checkpoint: int8 weights with one scale per output
#: channel, activations quantized per token at run time (vLLM's CPU int8 path).
W8A8_INT8: dict[str, Any] = {
    "quant_method": "compressed-tensors",
    "format": "int-quantized",
    "config_groups": {
        "group_0": {
            "targets": ["Linear"],
            "weights": {
                "num_bits": 8,
                "type": "int",
                "symmetric": True,
                "strategy": "channel",
                "dynamic": False,
            },
            "input_activations": {
                "num_bits": 8,
                "type": "int",
                "symmetric": True,
                "strategy": "token",
                "dynamic": True,
            },
        }
    },
    "ignore": ["lm_head"],
}

#: AutoAWQ's GEMM checkpoint: 4-bit weights in groups of 32 along the input, with zero points
#: (vLLM's CPU path: AWQ converted to GPTQ's layout, then CPUWNA16LinearKernel, whose input and
#: output sizes must be multiples of 32: the tiny width of 64 is).
AWQ_INT4: dict[str, Any] = {
    "quant_method": "awq",
    "bits": 4,
    "group_size": 32,
    "zero_point": True,
    "version": "gemm",
}

#: AutoGPTQ's checkpoint: 4-bit symmetric weights in groups of 32, no activation order.
GPTQ_INT4: dict[str, Any] = {
    "quant_method": "gptq",
    "bits": 4,
    "group_size": 32,
    "desc_act": False,
    "sym": True,
}

#: Variant.quantization -> the ``quantization_config`` its config.json carries.
QUANTIZATION_CONFIGS: dict[str, dict[str, Any]] = {
    "w8a8_int8": W8A8_INT8,
    "awq": AWQ_INT4,
    "gptq": GPTQ_INT4,
}

_GDN_HEAD_DIM = 128
# Categories served without a processor: text, and multimodal as its language model only.
_PART_SERVED = {"text", "multimodal", "speculative"}
# Fields fit_for_vllm adds where a config lacks them.
_ADDED = ("head_dim", "rope_theta")

# MLA on vLLM's CPU backend: one head size only, kv_lora_rank + qk_rope_head_dim = 576.
_MLA = {"kv_lora_rank": 512, "qk_rope_head_dim": 64}


def _class_model_types() -> dict[str, list[str]]:
    types: dict[str, list[str]] = {}
    for table in _auto_tables().values():
        for model_type, value in table.items():
            for name in value if isinstance(value, (list, tuple)) else (value,):
                if isinstance(name, str) and model_type not in types.setdefault(name, []):
                    types[name].append(model_type)
    return types


def _config_classes() -> tuple[dict[str, Any], Any]:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from vllm.transformers_utils.config import _CONFIG_REGISTRY

    return _CONFIG_REGISTRY, CONFIG_MAPPING


def config_class(arch: Arch) -> tuple[Any, str]:
    """The config class for ``arch`` and where it was found (for the report)."""
    from graphcheck.zoo.vllm_engine.tables import TABLE

    vllm_configs, hf_configs = _config_classes()
    model_type, source = None, ""
    entry = TABLE.get(arch.class_name)
    if entry is not None and entry.base:
        model_type, source = entry.base, f"table: {entry.source}"
    candidates = _class_model_types().get(arch.class_name)
    if model_type is None and candidates:
        model_type, source = _best_model_type(arch.class_name, candidates), "transformers"
    if model_type is None and arch.model_type:
        model_type, source = arch.model_type, "registry module"
    if model_type in vllm_configs:
        return vllm_configs[model_type], f"vllm config {model_type} ({source})"
    if model_type in hf_configs:
        return hf_configs[model_type], f"transformers config {model_type} ({source})"
    if entry is not None:
        return hf_configs["llama"], f"llama config (table: {entry.source})"
    return hf_configs["llama"], "llama config (no config class names this architecture)"


def fit_for_vllm(d: dict[str, Any]) -> None:
    """Fits a shrunk config dict to vLLM's CPU kernels (every sub-config)."""
    for value in d.values():
        if isinstance(value, dict) and isinstance(value.get("model_type"), str):
            fit_for_vllm(value)
    # Fields vLLM's implementations read directly that transformers 5 configs no longer carry
    # (the head dimension where it follows from the width; rope_theta, now inside
    # rope_parameters).
    # Not for MLA, whose head sizes are its own fields (below) and whose config class may read
    # head_dim as one of them (Glm4MoeLiteConfig's attribute_map: qk_rope_head_dim).
    heads, hidden = d.get("num_attention_heads"), d.get("hidden_size")
    mla = isinstance(d.get("kv_lora_rank"), int)
    if (
        "head_dim" not in d
        and not mla
        and isinstance(heads, int)
        and isinstance(hidden, int)
        and heads > 0
    ):
        d["head_dim"] = hidden // heads
    rope = d.get("rope_parameters")
    if "rope_theta" not in d and isinstance(heads, int):
        theta = rope.get("rope_theta") if isinstance(rope, dict) else None
        d["rope_theta"] = theta if isinstance(theta, (int, float)) else 10000.0
    # Grouped top-k routing (DeepSeek-V2 and its kin) reads both; the defaults leave them unset.
    for key in ("n_group", "topk_group"):
        if key in d and d[key] is None and isinstance(d.get("n_routed_experts"), int):
            d[key] = 1
    # DeepSeek-V3 checkpoints route with a score-correction bias ("noaux_tc"); vLLM makes the
    # bias only when the config says so, transformers' model always has it.
    if d.get("model_type") == "deepseek_v3":
        d.setdefault("topk_method", "noaux_tc")
    # Gated delta-net (linear attention) heads: vLLM's CPU kernel takes 128.
    for key in ("linear_key_head_dim", "linear_value_head_dim"):
        if isinstance(d.get(key), int):
            d[key] = _GDN_HEAD_DIM
    if mla:
        if d.get("qk_rope_head_dim") == 0:
            # NoPE MLA (GLM-5 Next's DSA layers, which its config class insists on): the
            # latent is the whole head.
            d["kv_lora_rank"] = _MLA["kv_lora_rank"] + _MLA["qk_rope_head_dim"]
        else:
            d.update(_MLA)
        if isinstance(d.get("qk_nope_head_dim"), int) and isinstance(d.get("qk_head_dim"), int):
            d["qk_head_dim"] = d["qk_nope_head_dim"] + d["qk_rope_head_dim"]


def save_as(written: dict[str, Any], names: Mapping[str, str]) -> None:
    """Renames the keys of a written ``config.json`` dict to the checkpoint's ``names``.

    A key named "" is left out: a field the config class derives from the checkpoint's
    others, which it would take as given when read back (Moondream 3's ``text_config``).
    """
    for key, name in names.items():
        if key in written:
            value = written.pop(key)
            if name:
                written[name] = value


def tiny_config(
    arch: Arch, variant: Variant, extra: dict[str, Any] | None = None
) -> tuple[Any, str]:
    """The tiny config object of ``arch`` in ``variant`` and where its class came from.

    ``extra`` fields are set last, on the config and its text config (a target's
    ``num_nextn_predict_layers``).
    """
    from graphcheck.zoo.vllm_engine.tables import TABLE, apply, remote_class

    cls, source = config_class(arch)
    entry = TABLE.get(arch.class_name)
    defaults = cls().to_dict()
    if entry is not None and not entry.base:
        source += f"; table: {entry.source}"
    if entry is not None and entry.remote:
        cls = remote_class(entry)
        defaults["model_type"] = cls.model_type
        source = f"{entry.remote} (the hub's class, from {source})"

    def fixups(d: dict[str, Any], _level: str) -> None:
        drop_derived(str(d.get("model_type", "")), d)
        fit_for_vllm(d)
        if entry is not None:
            apply(entry, d)
            fit_for_vllm(d)

    d = shrink(defaults, "tiny", fixups=fixups, sizes=VLLM_SIZES)
    for key in _ADDED:
        if isinstance(getattr(cls, key, None), property):
            d.pop(key, None)  # the class derives it (FalconConfig.head_dim): no field to set
    d.update(extra or {})
    if isinstance(d.get("text_config"), dict):
        d["text_config"].update(extra or {})  # a multimodal target's MTP layers are its text's
    d["architectures"] = [arch.class_name]
    d["dtype"] = variant.dtype
    d.pop("torch_dtype", None)
    if variant.quantization:
        d["quantization_config"] = json.loads(
            json.dumps(QUANTIZATION_CONFIGS[variant.quantization])
        )
    return cls.from_dict(d), source


def write_files(folder: Path, files: Mapping[str, Any]) -> None:
    """Writes a table entry's other checkpoint files into ``folder`` (``Entry.files``).

    Each key is a path relative to ``folder`` (subfolders made as needed); a mapping value is
    written as JSON, a string as text.
    """
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        text = content if isinstance(content, str) else json.dumps(dict(content), indent=2)
        path.write_text(text, encoding="utf-8")


def _set_token_ids(folder: Path, config: Any, tokenizer: Any, fields: Mapping[str, str]) -> None:
    """Sets each config field of ``fields`` to its word's id, in ``config`` and its file."""
    path = folder / "config.json"
    written = json.loads(path.read_text(encoding="utf-8"))
    for key, word in fields.items():
        written[key] = int(tokenizer.convert_tokens_to_ids(word))
        setattr(config, key, written[key])
    path.write_text(json.dumps(written, indent=2), encoding="utf-8")


def write_config(
    folder: Path,
    arch: Arch,
    variant: Variant,
    extra: dict[str, Any] | None = None,
) -> tuple[Any, str]:
    """Writes ``folder/config.json`` and a tokenizer for ``arch``; returns config and source.

    A table entry's ``tekken`` sections are written as a Mistral tokenizer too.
    """
    from graphcheck.zoo.vllm_engine.processor import write_processor
    from graphcheck.zoo.vllm_engine.tables import TABLE
    from graphcheck.zoo.vllm_engine.tekken import write_tekken
    from graphcheck.zoo.vllm_engine.tokenizer import vocab_size, write_tokenizer

    config, source = tiny_config(arch, variant, extra)
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)
    entry = TABLE.get(arch.class_name)
    if entry is not None and entry.saved_as:
        path = folder / "config.json"
        written = json.loads(path.read_text(encoding="utf-8"))
        save_as(written, entry.saved_as)
        path.write_text(json.dumps(written, indent=2), encoding="utf-8")
    tokenizer = write_tokenizer(
        folder,
        config,
        entry.tokens if entry is not None else None,
        (*entry.words, *entry.token_ids.values()) if entry is not None else (),
    )
    if entry is not None and entry.token_ids:
        _set_token_ids(folder, config, tokenizer, entry.token_ids)
    if entry is not None and entry.tekken:
        write_tekken(folder, vocab_size(config), entry.tekken)
    if entry is not None and entry.files:
        write_files(folder, entry.files)
        source += "; " + ", ".join(entry.files)
    # A pooling or Transformers-backend model is served whole and reads its processor (so is a
    # table entry served whole); a text model and a multimodal one served as its language
    # model only do not.
    if entry is not None and entry.processor:
        whole = entry.processor_class
        processor = write_processor(
            folder, config, tokenizer, entry.processor, whole=whole, video=entry.video_processor
        )
        source += f"; processor {'' if whole else 'parts '}{processor}" if processor else ""
    elif (entry is not None and entry.whole) or not set(arch.tasks) & _PART_SERVED:
        video = entry.video_processor if entry is not None else None
        processor = write_processor(folder, config, tokenizer, video=video)
        source += f"; processor {processor}" if processor else ""
    return config, source
