"""Declarations a capture or a watch takes (runtime state, static inputs), checked.

Private: :class:`graphcheck.Capture` and the watch's declarations call these, so that a bad
argument gets the same message whichever takes it.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

from graphcheck._errors import GraphcheckTypeError, GraphcheckValueError, require_text
from graphcheck._utils import storage_leaves

__all__ = [
    "checked_input",
    "checked_runtime",
    "declared_leaves",
    "require_nonempty_text",
    "require_tensor",
    "storage_range",
]


def storage_range(tensor: torch.Tensor) -> tuple[int, int]:
    """``[begin, end)`` of ``tensor``'s whole storage."""
    storage = tensor.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def require_tensor(tensor: object, what: str) -> torch.Tensor:
    """``tensor`` if graphcheck can see its memory; else raises, naming ``what``."""
    if not isinstance(tensor, torch.Tensor):
        raise GraphcheckTypeError(
            f"{what}: expected a torch.Tensor, got {type(tensor).__qualname__}"
        )
    leaves = list(storage_leaves("", tensor))
    if not leaves or any(leaf.untyped_storage().nbytes() == 0 for _, leaf in leaves):
        raise GraphcheckValueError(
            f"{what}: the tensor has no memory graphcheck can see (meta, empty, sparse or "
            f"storage-less: layout {tensor.layout}, device {tensor.device})"
        )
    return tensor


def require_nonempty_text(value: object, what: str) -> str:
    """``value``, if a non-empty str (type and value errors told apart); ``what`` names it."""
    if not isinstance(value, str) or not value:
        raise (GraphcheckTypeError if not isinstance(value, str) else GraphcheckValueError)(
            f"{what}: expected a non-empty str, got {value!r}"
        )
    return require_text(value, what)


def checked_runtime(
    owner: str, tensor: object, name: object, reason: object
) -> tuple[str, torch.Tensor, str]:
    """A runtime declaration's ``(name, tensor, reason)``, checked (``owner``: ``Capture``...)."""
    checked = require_tensor(tensor, f"{owner}.declare_runtime(tensor, name, reason)")
    label = require_nonempty_text(name, f"{owner}.declare_runtime: name")
    why = require_nonempty_text(
        reason, f"{owner}.declare_runtime: reason (every exemption says why)"
    )
    return label, checked, why


def checked_input(
    owner: str, name: object, tensor: object, reason: object
) -> tuple[str, torch.Tensor, str]:
    """An input declaration's ``(name, tensor, reason)``, checked (``owner``: ``Capture``...)."""
    label = require_nonempty_text(name, f"{owner}.declare_input(name, tensor): name")
    checked = require_tensor(tensor, f"{owner}.declare_input(name, tensor): tensor")
    why = require_nonempty_text(reason, f"{owner}.declare_input: reason")
    return label, checked, why


def declared_leaves(
    declared: Iterable[tuple[str, torch.Tensor, str]],
) -> list[tuple[str, torch.Tensor, str]]:
    """Declared tensors as ``(name, leaf, reason)`` with wrapper subclasses flattened."""
    return [(ln, leaf, r) for n, t, r in declared for ln, leaf in storage_leaves(n, t)]
