"""Config tables: what vLLM's model code reads that no config class of ours gives.

An architecture whose config lives as remote code on the hub (no config class
in transformers or vLLM names it), or whose default config leaves a field for
a checkpoint to set, gets an :class:`Entry` here: the config class to start
from (``base``, a model type of vLLM's or transformers' config registry) and
the fields vLLM's implementation reads, at the tiny sizes of
:data:`~graphcheck.zoo.vllm_engine.configs.VLLM_SIZES`, each entry citing the
vLLM file the fields were read from (``config.<field>`` accesses in
``vllm/model_executor/models/<file>.py``, vLLM's config classes in
``vllm/transformers_utils/configs/``). A field that no default gives gets the
smallest value vLLM's shape checks accept.

One module per family group (:mod:`.text`, :mod:`.moe`, :mod:`.deepseek`, :mod:`.multimodal`,
:mod:`.hcx`, :mod:`.hub_vlm`, :mod:`.vision`, :mod:`.speech`, :mod:`.composite`,
:mod:`.pooling`, :mod:`.drafts`, :mod:`.whole`, :mod:`.omni`); :data:`TABLE` is their union,
keyed by architecture name, with :data:`.omni.WHOLE`'s multimodal entries served whole.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "GEMMA3_NEWLINES",
    "GEMMA3_TOKENS",
    "GEMMA4_SOFT_TOKENS",
    "INTERNVL_TOKENS",
    "QWEN_OMNI_TOKENS",
    "TABLE",
    "WHISPER_FEATURES",
    "Entry",
    "Fields",
    "apply",
    "as_fields",
    "layers",
    "merge",
    "per_layer",
    "remote_class",
    "text_of",
]

Dict = dict[str, Any]


#: Gemma 3's image words (its processor reads them off the tokenizer).
GEMMA3_TOKENS = {
    "image_token": "<image_soft_token>",
    "boi_token": "<start_of_image>",
    "eoi_token": "<end_of_image>",
}

#: InternVL's image words (transformers' InternVLProcessor reads them off the tokenizer, as
#: InternVL3-1B-hf's has them).
INTERNVL_TOKENS = {
    "start_image_token": "<img>",
    "end_image_token": "</img>",
    "context_image_token": "<IMG_CONTEXT>",
    "video_token": "<video>",
}

#: The newline runs Gemma 3's and Gemma 3n's prompt updates look up by id in the vocabulary
#: (gemma3_mm.py:349, gemma3n_mm.py:392-395): a checkpoint's tokenizer has each as one word.
GEMMA3_NEWLINES = ("\n", "\n\n", "\n\n\n", "\n\n\n\n")

#: Soft tokens an image of Gemma 4 served whole: the least its processor supports
#: (gemma4_mm.py:102-257), as the tower's config says it (the checkpoints' configs carry it).
GEMMA4_SOFT_TOKENS = 70

#: Whisper large-v3's feature extractor as its checkpoints' ``preprocessor_config.json`` has
#: it (128 mel bins), which vLLM loads beside the Whisper-style towers of Kimi-Audio and
#: Fun-Audio-Chat.
WHISPER_FEATURES: Mapping[str, Any] = {
    "feature_extractor_type": "WhisperFeatureExtractor",
    "feature_size": 128,
    "sampling_rate": 16000,
    "hop_length": 160,
    "n_fft": 400,
    "chunk_length": 30,
    "n_samples": 480000,
    "nb_max_frames": 3000,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": False,
}

#: Qwen's audio and vision words (Qwen3-Omni's and Qwen3-ASR's processors read them).
QWEN_OMNI_TOKENS = {
    "image_token": "<|image_pad|>",
    "video_token": "<|video_pad|>",
    "audio_token": "<|audio_pad|>",
    "vision_bos_token": "<|vision_start|>",
    "vision_eos_token": "<|vision_end|>",
    "audio_bos_token": "<|audio_start|>",
    "audio_eos_token": "<|audio_end|>",
}

#: Engine arguments of a hybrid MLA model on a CPU without AMX MLA: vLLM's CPU platform turns
#: prefix caching off for MLA there (platforms/cpu.py:516-526), after the hybrid config hook
#: sized the Mamba block for it (models/config.py:685-701), and its validator then refuses the
#: engine (config/vllm.py:3304-3316); a CPU user passes --no-enable-prefix-caching.
NO_PREFIX_CACHING: Mapping[str, Any] = {"enable_prefix_caching": False}


@dataclasses.dataclass(frozen=True)
class Entry:
    """The config of one architecture: where to start, and what vLLM reads beyond it.

    ``fields`` are merged into the shrunk config dict (a dict value merges into the
    sub-config of that name); ``text`` into its ``text_config`` (or the top level when it
    has none); ``fix(d)`` runs last, for values derived from others (per-layer lists).
    ``source`` is the vLLM file the fields were read from, relative to the package root.
    ``remote`` names the hub's config class (``"NewConfig"``) where vLLM checks the class
    by name; :func:`remote_class` makes a stand-in of that name and ``model_type``.
    """

    source: str
    base: str = ""
    remote: str = ""
    model_type: str = ""
    #: Keys of the written config.json renamed to the checkpoint's names, where the config
    #: class reads one name and writes another (DeepSeek-VL2: reads ``language_config``); a
    #: key renamed to "" is left out, where the class derives it from the checkpoint's others
    #: and would take a written one as given (Moondream 3's ``text_config``).
    saved_as: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: A model type whose image processor or feature extractor the zoo writes beside the
    #: config, where vLLM's or the hub's processor class loads it by the auto classes
    #: (Ovis 2.5's processor, vLLM's own, loads Qwen2-VL's image processor).
    processor: str = ""
    #: Write transformers' processor class of ``processor`` too, not its parts only: a
    #: multimodal model served language-model-only still loads it while the engine starts.
    processor_class: bool = False
    #: Arguments of the video processor written with that class, where its defaults name a
    #: file of the checkpoint's (Ernie 4.5 VL's draws frame numbers with a font it ships).
    video_processor: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: Served whole, its encoders built and judged (not language-model-only), with its
    #: processor written as a model served whole gets it: an encoder-decoder model, whose V1
    #: scheduler asserts a multimodal budget (v1/core/sched/scheduler.py:266), which
    #: language-model-only has not; a model whose every forward takes the encoder's embeddings
    #: (Voxtral Realtime); one whose encoder reads a tensor at construction, which the skipped
    #: stage's meta device refuses (MOSS-Audio).
    whole: bool = False
    #: Engine arguments beyond the zoo's, as a user of this model on the CPU passes them
    #: (Unlimited-OCR's config hook picks FLASH_ATTN for its vision encoder unless told).
    engine: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: Sections of a Mistral tokenizer file the zoo writes too (``tekken.json``, its ``audio``
    #: or ``image`` config), for a model that reads mistral_common's tokenizer (with
    #: ``engine``'s ``tokenizer_mode="mistral"``).
    tekken: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: Other files of the checkpoint that vLLM reads, by path relative to the model folder: a
    #: mapping is written as JSON, a string as text (the ``preprocessor_config.json`` vLLM's
    #: own processor classes load, Kimi-K2.5's ``media_proc_cfg``; Kimi-Audio's tiktoken
    #: vocabulary and its Whisper tower's config in a subfolder).
    files: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    #: The tokenizer attributes its processor reads (``image_token``: the checkpoint's word),
    #: written as the zoo tokenizer's extra special tokens.
    tokens: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: Words its model code looks up in the vocabulary (Gemma 3's newline runs,
    #: gemma3_mm.py:349), given top ids in the zoo tokenizer as a checkpoint's has them.
    words: tuple[str, ...] = ()
    #: Config fields that hold a word's id (Mistral 3's ``image_token_index``: the id of
    #: ``[IMG]``, the word its processor writes), set to the zoo tokenizer's id of the word.
    token_ids: Mapping[str, str] = dataclasses.field(default_factory=dict)
    #: Fields of the hub's config whose dicts its class turns into objects that vLLM reads by
    #: attribute (DeciLM's ``block_configs[i].attention.no_op``): the stand-in class of
    #: ``remote`` gives them as :class:`Fields`.
    objects: tuple[str, ...] = ()
    #: Sub-config fields (:data:`SUBCONFIGS`) the hub's class keeps as plain dicts, which vLLM
    #: reads by key (Cohere ASR's ``encoder["n_heads"]``,
    #: transformers_utils/model_arch_config_convertor.py:493).
    plain: tuple[str, ...] = ()
    fields: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    text: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    fix: Callable[[Dict], None] | None = None


class Fields(dict[str, Any]):
    """A dict read by attribute too (the hub's dataclasses), saved as the dict it is.

    A missing key is an ``AttributeError``, so that ``hasattr`` answers as on the hub's
    objects (nemotron_nas.py:167 asks ``hasattr(block_config.ffn, "ffn_mult")``).
    """

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def as_fields(value: Any) -> Any:
    """``value`` with every dict in it (in lists too) a :class:`Fields`."""
    if isinstance(value, Mapping):
        return Fields({k: as_fields(v) for k, v in value.items()})
    if isinstance(value, list):
        return [as_fields(v) for v in value]
    return value


def merge(d: Dict, fields: Mapping[str, Any]) -> None:
    """Merges ``fields`` into ``d``: a dict into a dict of the same name, anything else set."""
    for key, value in fields.items():
        if isinstance(value, Mapping) and isinstance(d.get(key), dict):
            merge(d[key], value)
        else:
            d[key] = _copy(value)


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def text_of(d: Dict) -> Dict:
    """The text model's dict of ``d``: its ``text_config``, else ``d`` itself."""
    sub = d.get("text_config")
    return sub if isinstance(sub, dict) else d


def layers(d: Dict) -> int:
    """The layer count of ``d`` (``num_hidden_layers``, ``num_layers``, ``n_layer``), else 2."""
    for key in ("num_hidden_layers", "num_layers", "n_layer"):
        if isinstance(d.get(key), int):
            return int(d[key])
    return 2


def per_layer(key: str, *values: Any) -> Callable[[Dict], None]:
    """A fix that sets ``key`` of the text config to ``values`` repeated over its layers."""

    def fix(d: Dict) -> None:
        text = text_of(d)
        n = layers(text)
        text[key] = [values[i % len(values)] for i in range(n)]

    return fix


#: Sub-configs a hub config class builds from its dicts (InternVL's ``llm_config``...,
#: an encoder-decoder model's ``encoder`` and ``decoder``).
SUBCONFIGS = (
    "vision_config",
    "text_config",
    "llm_config",
    "audio_config",
    "vit_config",
    "encoder",
    "decoder",
)


def _vllm_configs() -> Mapping[str, Any]:
    """The config classes vLLM ships, by model type (none where vLLM is not installed)."""
    try:
        from vllm.transformers_utils.config import _CONFIG_REGISTRY
    except ImportError:  # the tables read without vLLM (their unit tests)
        return {}
    # Its values resolve to classes on item access (a lazy dict): the registry itself.
    registry: Mapping[str, Any] = _CONFIG_REGISTRY
    return registry


def _subconfig(d: Dict) -> Any:
    """A sub-config dict as the config object of its model type (a plain one otherwise).

    vLLM's own class of that model type first: it is vLLM's copy of the hub's, where
    transformers' class of the same type reads the checkpoint's legacy names into its own
    and drops them (Step 3.7's language model, a ``step3p5``: ``attention_other_setting``).
    """
    from transformers import CONFIG_MAPPING, PretrainedConfig

    model_type = d.get("model_type")
    vllm_configs = _vllm_configs()
    if isinstance(model_type, str) and model_type in vllm_configs:
        return vllm_configs[model_type].from_dict(d)
    if isinstance(model_type, str) and model_type in CONFIG_MAPPING:
        return CONFIG_MAPPING[model_type].from_dict(d)
    if isinstance(model_type, str) and model_type:
        # A tower only the hub's code defines: vLLM dispatches on its model type (Ovis's
        # "siglip2_navit"), which the plain class's empty class attribute would hide (and
        # to_dict writes the class's).
        cls: Any = type("PretrainedConfig", (PretrainedConfig,), {"model_type": model_type})
        return cls.from_dict(d)
    return PretrainedConfig.from_dict(d)


def remote_class(entry: Entry) -> Any:
    """A config class named as the hub's remote code names it, registered with AutoConfig.

    Like the hub's classes, a plain ``PretrainedConfig`` whose fields are attributes as
    ``config.json`` gives them (transformers' own classes move some, ``rope_theta`` into
    ``rope_parameters``) and whose sub-config dicts (:data:`SUBCONFIGS`) become config
    objects (the entry's ``objects``, dicts read by attribute); its defaults come from the
    entry's ``base``. Registered in this process only
    (the zoo's worker), so that vLLM's ``AutoConfig`` finds it offline: what
    ``trust_remote_code`` would load, minus the hub.
    """
    from transformers import AutoConfig, PretrainedConfig

    def subconfig(key: str, value: Any) -> Any:
        if key in entry.objects:
            return as_fields(value)
        if key in entry.plain or key not in SUBCONFIGS or not isinstance(value, dict):
            return value
        return _subconfig(value)

    def subconfigs(kwargs: Dict) -> Dict:
        return {k: subconfig(k, v) for k, v in kwargs.items()}

    def __init__(self: Any, **kwargs: Any) -> None:
        PretrainedConfig.__init__(self, **subconfigs(kwargs))

    # Where transformers builds a config without calling __init__ with its dict (5.2x's
    # dataclass configs), from_dict is the door config.json comes through.
    base_from_dict: Any = PretrainedConfig.__dict__["from_dict"].__func__

    def from_dict(cls: Any, /, config_dict: Dict, **kwargs: Any) -> Any:
        return base_from_dict(cls, subconfigs(config_dict), **kwargs)

    model_type = entry.model_type or entry.remote.lower()
    namespace = {
        "model_type": model_type,
        "__module__": __name__,
        "__init__": __init__,
        "from_dict": classmethod(from_dict),
    }
    cls = type(entry.remote, (PretrainedConfig,), namespace)
    AutoConfig.register(model_type, cls, exist_ok=True)
    return cls


def apply(entry: Entry, d: Dict) -> None:
    """Applies ``entry`` to the shrunk config dict ``d``."""
    merge(d, entry.fields)
    merge(text_of(d), entry.text)
    if entry.fix is not None:
        entry.fix(d)


def _table() -> dict[str, Entry]:
    from graphcheck.zoo.vllm_engine.tables import (
        composite,
        deepseek,
        drafts,
        hcx,
        hub_vlm,
        moe,
        multimodal,
        omni,
        pooling,
        speech,
        text,
        vision,
        whole,
    )

    table: dict[str, Entry] = {}
    for module in (
        text,
        moe,
        deepseek,
        multimodal,
        hcx,
        hub_vlm,
        vision,
        speech,
        composite,
        pooling,
        drafts,
        whole,
        omni,
    ):
        overlap = table.keys() & module.TABLE.keys()
        if overlap:  # a programming error: one architecture, one entry
            raise RuntimeError(f"{module.__name__} repeats {sorted(overlap)}")
        table.update(module.TABLE)
    for name, changes in omni.WHOLE.items():
        # Served whole: the entry of its family's module (its config's fields), with what
        # its encoders and processor need besides.
        table[name] = dataclasses.replace(table[name], **changes)
    return table


#: Architecture name -> its entry, over every family module.
TABLE: dict[str, Entry] = {}
TABLE.update(_table())
