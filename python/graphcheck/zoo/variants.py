"""``Arch@variant``: the swept variants, and the checkpoint presets that a sweep cannot find.

Most variants are swept from the configs (:mod:`graphcheck.zoo.sweep`):
``Arch@option=value`` for every option whose values switch a code path of the
base model class. What stays here by hand are presets a sweep of one option at
a time does not produce, each with the published checkpoints that use it:

- a value that is not a literal of the code (``sliding_window`` ``None``:
  Mistral 7B v0.2 disables the window that the default config sets);
- several options that only make sense together (DeBERTa's relative attention
  with its position types, buckets and key sharing; Falcon's new decoder with
  its grouped key/value heads).

The checkpoints were not downloaded (the zoo never touches the hub): the
settings are those of their published ``config.json`` files.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

__all__ = ["VARIANTS", "Variant", "apply_variant", "variants_for"]

Dict = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Variant:
    """One preset: its name, the checkpoints that use it, and the edit of the tiny config dict."""

    name: str
    checkpoints: str
    edit: Callable[[Dict], None]


def _set(**values: Any) -> Callable[[Dict], None]:
    def edit(d: Dict) -> None:
        d.update(values)

    return edit


VARIANTS: dict[str, tuple[Variant, ...]] = {
    "mistral": (
        Variant(
            "no_sliding_window",
            "Mistral 7B v0.2 and later (sliding_window null)",
            _set(sliding_window=None),
        ),
    ),
    "falcon": (
        Variant(
            "new_decoder",
            "Falcon 40B/180B (new_decoder_architecture with grouped key/value heads)",
            _set(new_decoder_architecture=True, num_kv_heads=2),
        ),
    ),
    "deberta": (
        Variant(
            "relative",
            "DeBERTa (microsoft/deberta-base)",
            _set(
                relative_attention=True,
                pos_att_type=["c2p", "p2c"],
                position_biased_input=False,
                max_relative_positions=-1,
            ),
        ),
    ),
    "deberta-v2": (
        Variant(
            "relative",
            "DeBERTa-v3 (microsoft/deberta-v3-base)",
            _set(
                relative_attention=True,
                pos_att_type=["p2c", "c2p"],
                position_buckets=16,
                norm_rel_ebd="layer_norm",
                share_att_key=True,
                position_biased_input=False,
                max_relative_positions=-1,
            ),
        ),
    ),
}


def variants_for(model_type: str, class_name: str = "") -> tuple[str, ...]:
    """The variant names of ``model_type``'s base class: the presets, then the sweep's.

    Without ``class_name`` only the presets (the sweep needs the class).
    """
    names = tuple(v.name for v in VARIANTS.get(model_type, ()))
    if class_name:
        from graphcheck.zoo.sweep import swept_variants

        names += tuple(s.name for s in swept_variants(class_name, model_type))
    return names


def apply_variant(model_type: str, name: str, d: Dict, class_name: str = "") -> None:
    """Applies variant ``name`` (a preset, or a swept ``option=value``) to the tiny config ``d``.

    Raises ``KeyError`` naming the known presets when there is no such one.
    """
    if "=" in name:
        from graphcheck.zoo.sweep import apply_swept

        apply_swept(class_name, model_type, name, d)
        return
    for variant in VARIANTS.get(model_type, ()):
        if variant.name == name:
            variant.edit(d)
            return
    known = ", ".join(variants_for(model_type)) or "none"
    raise KeyError(f"no variant {name!r} for model type {model_type!r} (known: {known})")
