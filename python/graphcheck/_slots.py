"""What the registration contract and its in-place reload share.

The names of the buffers :func:`~graphcheck.contract.register_held_tensors` owns, and the
checks both make.
"""

from __future__ import annotations

import torch

from graphcheck._errors import GraphcheckTypeError

#: Prefix of the buffers :func:`~graphcheck.contract.register_held_tensors` owns.
HELD_PREFIX = "_held_"

# Attribute (a ``set[str]`` in the module's ``__dict__``) naming the ``_held_*`` buffers that
# register_held_tensors did not register because a parameter or buffer already covers the
# holder tensor: reload_in_place watches those holder tensors for rebinds too.
HELD_SHARED_ATTR = "_graphcheck_held_shared"


def require_module(obj: object, what: str) -> torch.nn.Module:
    """``obj``, or a :class:`~graphcheck.GraphcheckTypeError` naming ``what`` it should be."""
    if not isinstance(obj, torch.nn.Module):
        raise GraphcheckTypeError(f"{what} must be a torch.nn.Module, got {type(obj).__qualname__}")
    return obj


def join_path(prefix: str, name: str) -> str:
    """``prefix.name``, or ``name`` at the root."""
    return f"{prefix}.{name}" if prefix else name


def tensor_mismatch(old: torch.Tensor, new: torch.Tensor) -> list[str]:
    """What differs between ``old`` (expected) and ``new`` (found)."""
    diffs = []
    if old.shape != new.shape:
        diffs.append(f"shape: expected {tuple(old.shape)}, found {tuple(new.shape)}")
    if old.dtype != new.dtype:
        diffs.append(f"dtype: expected {old.dtype}, found {new.dtype}")
    if old.device != new.device:
        diffs.append(f"device: expected {old.device}, found {new.device}")
    return diffs
