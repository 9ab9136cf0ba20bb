"""Variants swept from the configs: ``Arch@option=value`` for every code-path switch of a model.

A config's defaults are one path through the modeling code; checkpoints set
options that take others (position embedding types, relative attention,
rope scaling, attention kinds), and those paths may keep other tensors. For
the base model class of each model type (its ``MODEL_MAPPING_NAMES`` row),
:func:`derive` reads the modeling module that defines the class, and the
``modeling_*`` modules it imports from ``transformers.models``, with
:mod:`ast` (:mod:`graphcheck.zoo._sweep_scan`), and keeps the options that

- are keys of the config's ``to_dict()`` (``sub_config.X`` for an explicit
  ``config.sub_config.X``), and not on the denylist (:func:`denied`);
- are compared with string literals (one variant per literal other than the
  default, where the default is a string or ``None``), or tested for truth
  with a boolean default (one variant: the other boolean).

Every config with ``rope_parameters`` (or legacy ``rope_scaling``) whose
modeling code dispatches through the shared rope code (``ROPE_INIT_FUNCTIONS``)
gets one ``rope_type=T`` variant per rope type that code handles, with the
parameters of :mod:`graphcheck.zoo._sweep_rope`.

Scanning every model costs tens of seconds (a config instance and a parse of
the modeling source per model type), so the corpus' sweep is cached per
transformers version and sweep source in ``$XDG_CACHE_HOME/graphcheck/``
(``~/.cache`` by default); a worker process inherits the parent's table.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from graphcheck.zoo._sweep_rope import DEEPSEEK_KEYS, apply_rope
from graphcheck.zoo._sweep_scan import BOOL, scan_tree

__all__ = [
    "DENY_NAMES",
    "DENY_PATTERN",
    "Swept",
    "apply_swept",
    "denied",
    "derive",
    "parse_variant",
    "prime",
    "sweep_counts",
    "swept_variants",
]

Dict = dict[str, Any]

#: Options that select no model code path worth a variant, each kind with its reason.
DENY_PATTERN = re.compile(
    r"(^|_)act(_fn|_func|_function)?$|activation"  # activations: a function, not tensors
    r"|dropout|drop_path|layerdrop|_prob$"  # dropout: training only (eval mode runs none)
    r"|^init|initializer"  # weight initialization: values, not paths
    r"|^output_|^return_|^use_return_dict$"  # what forward returns
    r"|^use_cache$"  # the zoo runs without a cache (tiny_config)
    r"|loss|^ctc_|label_smoothing|^mask_(time|feature)_|spec_augment"  # training-only knobs
    r"|gradient_checkpointing|^freeze_|stop_gradient|backprop|^is_training$|masking$"
    r"|^summary_"  # the sequence-summary head of double-heads models, not the base model
    r"|_token(_id|_ids|_index)?$"  # token ids
)
#: Exact names: generic roles an encoder-decoder wrapper or the loader sets, not a checkpoint
#: option of the base model (plus every key of ``PreTrainedConfig().to_dict()``, at run time).
DENY_NAMES = frozenset(
    {
        "is_decoder",
        "add_cross_attention",
        "tie_word_embeddings",
        "tie_encoder_decoder",
        "torchscript",
        "afn",  # GPT-1's activation
        "rope_type",  # swept through rope_parameters (below)
    }
)
#: Value characters a variant name may hold (a ``:`` would split an allowlist entry).
_VALUE_RE = re.compile(r"[A-Za-z0-9_.+/-]+")


@dataclasses.dataclass(frozen=True)
class Swept:
    """One swept variant: ``option`` (``sub_config.X`` for a sub-config's) set to ``value``.

    ``option`` ``rope_type`` sets ``rope_parameters``; ``deepseek`` gives YaRN
    DeepSeek's parameters (the modeling code reads ``mscale_all_dim``).
    """

    option: str
    value: str | bool
    deepseek: bool = False

    @property
    def name(self) -> str:
        """The variant name, ``option=value``."""
        return f"{self.option}={self.value}"


def parse_variant(name: str) -> tuple[str, str | bool]:
    """``"rope_type=yarn"`` -> ``("rope_type", "yarn")``, ``"alibi=True"`` -> ``("alibi", True)``.

    Raises ``ValueError`` for a name without ``=`` (a hand-written preset).
    """
    option, sep, value = name.partition("=")
    if not sep or not option:
        raise ValueError(f"not a swept variant name (option=value): {name!r}")
    return option, {"True": True, "False": False}.get(value, value)


def denied(option: str) -> bool:
    """Whether ``option`` (its last component) is on the denylist."""
    leaf = option.rsplit(".", 1)[-1]
    return leaf.startswith("_") or leaf in DENY_NAMES or bool(DENY_PATTERN.search(leaf))


@functools.lru_cache(maxsize=1)
def _generic_keys() -> frozenset[str]:
    from transformers import PreTrainedConfig

    return frozenset(PreTrainedConfig().to_dict())


def _models_root() -> Path:
    import transformers

    return Path(transformers.__file__).parent / "models"


def _module_file(class_name: str, model_type: str) -> Path | None:
    """The ``modeling_*.py`` that defines ``class_name``.

    transformers' lazy import table names the module of every exported class;
    a class it does not export is searched in the model type's package.
    """
    import transformers
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    root = _models_root()
    table = getattr(transformers, "_class_to_module", {})
    module = table.get(class_name) if isinstance(table, dict) else None
    if isinstance(module, str) and module.startswith("models."):
        path = root.parent.joinpath(*module.split(".")).with_suffix(".py")
        if path.is_file():
            return path
    defines = re.compile(rf"^class {re.escape(class_name)}\b", re.MULTILINE)
    for path in sorted((root / model_type_to_module_name(model_type)).glob("modeling_*.py")):
        if defines.search(path.read_text(encoding="utf-8")):
            return path
    return None


def _imported_modeling(path: Path, tree: ast.Module) -> list[Path]:
    """The ``modeling_*`` modules of ``transformers.models`` that ``tree`` imports (relative)."""
    root = _models_root()
    found: list[Path] = []
    for node in tree.body:
        if not isinstance(node, ast.ImportFrom) or not node.module or node.level not in (1, 2):
            continue
        parts = node.module.split(".")
        if not parts[-1].startswith("modeling_"):
            continue
        base = path.parent if node.level == 1 else root
        target = base.joinpath(*parts).with_suffix(".py")
        if target.is_file() and target != path and target not in found:
            found.append(target)
    return found


@dataclasses.dataclass(frozen=True)
class _Facts:
    """What one modeling source holds: its switches, and every name and string it mentions."""

    switches: dict[str, set[str]]
    names: frozenset[str]


@functools.cache
def _facts(path: Path) -> tuple[_Facts, tuple[Path, ...]]:
    """The facts of ``path`` and the modeling modules it imports (parsed once per process)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = list(ast.walk(tree))
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name)
    facts = _Facts(scan_tree(tree, nodes), frozenset(names))
    return facts, tuple(_imported_modeling(path, tree))


def _lookup(defaults: Mapping[str, Any], option: str) -> tuple[bool, Any]:
    head, _, leaf = option.rpartition(".")
    where: Any = defaults
    for part in head.split(".") if head else ():
        where = where.get(part) if isinstance(where, Mapping) else None
    if isinstance(where, Mapping) and leaf in where:
        return True, where[leaf]
    return False, None


def _values(default: Any, found: set[str]) -> list[str | bool]:
    if isinstance(default, bool):
        return [not default] if BOOL in found else []
    if default is None or isinstance(default, str):
        return [v for v in sorted(found - {BOOL}) if v != default and _VALUE_RE.fullmatch(v)]
    return []


def derive(class_name: str, model_type: str) -> tuple[Swept, ...]:
    """The swept variants of ``class_name`` (the base class of ``model_type``); uncached.

    Empty when the config's defaults do not instantiate or no modeling source
    defines the class (those models fail to build as they are anyway).
    """
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    try:
        defaults: Dict = CONFIG_MAPPING[model_type]().to_dict()
    except Exception:
        return ()
    path = _module_file(class_name, model_type)
    if path is None:
        return ()
    switches: dict[str, set[str]] = {}
    names: set[str] = set()
    first, imports = _facts(path)
    for facts in (first, *(_facts(p)[0] for p in imports)):
        for option, values in facts.switches.items():
            switches.setdefault(option, set()).update(values)
        names |= facts.names
    generic = _generic_keys()
    out: list[Swept] = []
    for option in sorted(switches):
        if denied(option) or option.rsplit(".", 1)[-1] in generic:
            continue
        present, default = _lookup(defaults, option)
        if present:
            out += [Swept(option, v) for v in _values(default, switches[option])]
    has_rope = "rope_parameters" in defaults or "rope_scaling" in defaults
    if has_rope and "ROPE_INIT_FUNCTIONS" in names:
        deepseek = bool(DEEPSEEK_KEYS & names)
        types = sorted(t for t in ROPE_INIT_FUNCTIONS if t != "default")
        out += [Swept("rope_type", t, deepseek and t == "yarn") for t in types]
    return tuple(out)


# (class name, model type) -> its sweep: filled by prime() in the parent, inherited by workers.
_TABLE: dict[tuple[str, str], tuple[Swept, ...]] = {}


def _cache_path() -> Path:
    import transformers

    digest = hashlib.sha256()
    here = Path(__file__).parent
    for name in ("sweep.py", "_sweep_scan.py", "_sweep_rope.py"):
        digest.update((here / name).read_bytes())
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    name = f"zoo-sweep-{transformers.__version__}-{digest.hexdigest()[:12]}.json"
    return base / "graphcheck" / name


def _read_cache(path: Path) -> dict[str, list[list[Any]]]:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def prime(pairs: Iterable[tuple[str, str]]) -> None:
    """Derives (or reads from the cache) the sweep of every ``(class name, model type)``."""
    wanted = [p for p in dict.fromkeys(pairs) if p not in _TABLE]
    if not wanted:
        return
    path = _cache_path()
    cached = _read_cache(path)
    added = False
    for cls, model_type in wanted:
        key = f"{cls}|{model_type}"
        if key in cached:
            _TABLE[(cls, model_type)] = tuple(Swept(o, v, bool(s)) for o, v, s in cached[key])
            continue
        swept = derive(cls, model_type)
        _TABLE[(cls, model_type)] = swept
        cached[key] = [[s.option, s.value, s.deepseek] for s in swept]
        added = True
    if added:
        try:  # best effort: a read-only home derives again next time
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(cached, sort_keys=True), encoding="utf-8")
            os.replace(tmp, path)
        except OSError:
            pass


def swept_variants(class_name: str, model_type: str) -> tuple[Swept, ...]:
    """The sweep of ``class_name`` (memoized in the process; see :func:`prime`)."""
    prime([(class_name, model_type)])
    return _TABLE[(class_name, model_type)]


def apply_swept(class_name: str, model_type: str, name: str, d: Dict) -> None:
    """Applies the swept variant ``name`` (``option=value``) to the tiny config dict ``d``.

    Raises ``KeyError`` when the sweep of the class has no such variant or the
    option is missing from ``d`` (the worker records it as a build failure).
    """
    found = [s for s in swept_variants(class_name, model_type) if s.name == name]
    if not found:
        raise KeyError(f"no swept variant {name!r} for {class_name} ({model_type})")
    swept = found[0]
    if swept.option == "rope_type":
        apply_rope(d, str(swept.value), swept.deepseek)
        return
    *head, leaf = swept.option.split(".")
    target = d
    for part in head:
        target = target[part]
    if leaf not in target:
        raise KeyError(f"{swept.option} is not in the tiny config of {class_name}")
    target[leaf] = swept.value


def sweep_counts(results: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """What the sweep contributed to a run: options, values, variants enumerated and built.

    ``options`` counts (model type, option) pairs, ``option_names`` distinct
    option names, ``values`` (model type, option, value) triples; ``presets``
    the hand-written variants (names without ``=``).
    """
    variants = [r for r in results.values() if r.get("variant")]
    swept = [r for r in variants if "=" in str(r["variant"])]
    pairs = {(r.get("model_type"), parse_variant(str(r["variant"]))[0]) for r in swept}
    triples = {(r.get("model_type"), str(r["variant"])) for r in swept}
    return {
        "options": len(pairs),
        "option_names": len({option for _, option in pairs}),
        "model_types": len({r.get("model_type") for r in swept}),
        "values": len(triples),
        "variants": len(swept),
        "built": sum(1 for r in swept if r.get("status") == "built"),
        "presets": len(variants) - len(swept),
    }
