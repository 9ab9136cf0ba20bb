"""The corpus: every model class the installed ``transformers`` auto mappings list.

:func:`enumerate_architectures` reads every ``MODEL_*_MAPPING_NAMES`` table of
``transformers.models.auto.modeling_auto`` at run time (nothing is hard-coded:
a new release brings its new classes), deduplicates the class names, and adds
the ``Arch@variant`` entries of :mod:`graphcheck.zoo.variants` to each base
model class: the hand-written presets and the variants swept from the configs
(:mod:`graphcheck.zoo.sweep`). No model module is imported here: the sweep
reads the modeling sources with ``ast`` and instantiates only config classes
(tens of seconds for the corpus, cached per transformers version).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from graphcheck._utils import name_glob_regex

__all__ = ["Arch", "enumerate_architectures", "filter_architectures", "split_name"]


@dataclasses.dataclass(frozen=True)
class Arch:
    """One entry of the corpus.

    ``name`` is the class name, or ``Class@variant`` for a variant.
    ``model_type`` is the config ``model_type`` of the first auto table row
    that lists the class; ``tasks`` the auto tables (``MODEL_FOR_CAUSAL_LM``
    becomes ``causal_lm``, ``MODEL`` becomes ``base``) that list it.
    """

    name: str
    class_name: str
    model_type: str
    variant: str = ""
    tasks: tuple[str, ...] = ()


def split_name(name: str) -> tuple[str, str]:
    """``"LlamaModel@rope_yarn"`` -> ``("LlamaModel", "rope_yarn")``; no ``@``: empty variant."""
    cls, _, variant = name.partition("@")
    return cls, variant


def _task(table: str) -> str:
    core = table.removesuffix("_MAPPING_NAMES").removeprefix("MODEL")
    core = core.removeprefix("_FOR_").removeprefix("_")
    return core.lower() or "base"


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a.lower(), b.lower(), strict=False):
        if x != y:
            break
        n += 1
    return n


def _best_model_type(cls_name: str, candidates: list[str]) -> str:
    """The model type whose config class name shares the longest prefix with ``cls_name``.

    Several model types may list one class (``exaone`` and ``llama`` both list
    ``LlamaModel``); the class's own config is the one named like it. Ties keep
    the first candidate. (The worker reads the authoritative ``config_class``.)
    """
    # configuration_auto rebinds the table it imports from auto_mappings (adding gpt-sw3): the
    # rebound one is read, which mypy takes for an import that is not re-exported.
    from transformers.models.auto.configuration_auto import (  # type: ignore[attr-defined]
        CONFIG_MAPPING_NAMES,
    )

    best, best_len = candidates[0], -1
    for model_type in candidates:
        config_name = str(CONFIG_MAPPING_NAMES.get(model_type, ""))
        length = _common_prefix(cls_name, config_name.removesuffix("Config"))
        if length > best_len:
            best, best_len = model_type, length
    return best


def _auto_tables() -> dict[str, dict[str, object]]:
    from transformers.models.auto import modeling_auto

    tables: dict[str, dict[str, object]] = {}
    for attr in sorted(vars(modeling_auto)):
        if attr.startswith("MODEL") and attr.endswith("_MAPPING_NAMES"):
            value = getattr(modeling_auto, attr)
            if isinstance(value, dict):
                tables[attr] = value
    return tables


def enumerate_architectures(*, with_variants: bool = True) -> list[Arch]:
    """Every model class of the installed ``transformers`` auto tables, plus variants.

    Classes come in the order of ``MODEL_MAPPING_NAMES`` (the base models)
    first, then the other tables in name order, each class once; variants
    follow the class they vary. Raises ``ImportError`` when transformers is not
    installed (it is an optional extra: ``pip install 'graphcheck[zoo]'``).
    """
    tables = _auto_tables()
    order = ["MODEL_MAPPING_NAMES"] + [t for t in tables if t != "MODEL_MAPPING_NAMES"]
    model_types_of: dict[str, list[str]] = {}
    tasks_of: dict[str, list[str]] = {}
    for table in order:
        for model_type, value in tables.get(table, {}).items():
            names: Iterable[object] = value if isinstance(value, (list, tuple)) else (value,)
            for cls_name in names:
                if not isinstance(cls_name, str):
                    continue
                types = model_types_of.setdefault(cls_name, [])
                if model_type not in types:
                    types.append(model_type)
                task = _task(table)
                if task not in tasks_of.setdefault(cls_name, []):
                    tasks_of[cls_name].append(task)
    classes = [
        (cls_name, _best_model_type(cls_name, candidates), tuple(tasks_of[cls_name]))
        for cls_name, candidates in model_types_of.items()
    ]
    if with_variants:
        from graphcheck.zoo.sweep import prime
        from graphcheck.zoo.variants import variants_for

        # One pass over the corpus (or its cache) rather than one per class.
        prime((cls_name, model_type) for cls_name, model_type, tasks in classes if "base" in tasks)
    archs: list[Arch] = []
    for cls_name, model_type, tasks in classes:
        archs.append(Arch(cls_name, cls_name, model_type, "", tasks))
        if with_variants and "base" in tasks:
            for variant in variants_for(model_type, cls_name):
                archs.append(Arch(f"{cls_name}@{variant}", cls_name, model_type, variant, tasks))
    return archs


def filter_architectures(archs: Sequence[Arch], only: Sequence[str]) -> list[Arch]:
    """The entries whose name matches any of the ``only`` globs (all when empty).

    A glob without ``@`` matches class names and, through them, their
    variants only when it ends in ``*`` or names the variant: ``--only
    LlamaModel`` selects the plain class, ``--only 'LlamaModel*'`` the class
    and its variants, ``--only '*@rope_*'`` every rope variant.
    """
    if not only:
        return list(archs)
    patterns = [name_glob_regex(p) for p in only]
    return [a for a in archs if any(p.fullmatch(a.name) for p in patterns)]
