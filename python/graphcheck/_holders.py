"""Holders and storage views: the read-only half of the registration contract.

Re-exported by :mod:`graphcheck.contract`, which documents the contract; kept
apart so that the census walk can use it without the mutating half.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol, runtime_checkable

import torch

from graphcheck._errors import GraphcheckTypeError, GraphcheckValueError
from graphcheck._utils import wrapper_leaves


class StorageView(NamedTuple):
    """One view of a storage: what a kernel argument pointing into it means."""

    storage_ptr: int
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]
    dtype: torch.dtype


@runtime_checkable
class TensorHolder(Protocol):
    """A non-module object that keeps persistent tensors (see :func:`is_holder`)."""

    def persistent_tensors(self) -> dict[str, torch.Tensor]:
        """The tensors the object keeps, by a name unique within the object."""
        ...


# Builtin types (and plain tensors) have no persistent_tensors() method: a fast "no".
_NOT_HOLDERS = frozenset(
    {
        type(None),
        bool,
        int,
        float,
        str,
        bytes,
        dict,
        list,
        tuple,
        set,
        collections.OrderedDict,
        torch.Tensor,
        torch.nn.Parameter,
    }
)


def is_holder(obj: object) -> bool:
    """Whether ``obj`` is a tensor holder.

    A holder is a non-module object (not a class) whose type defines
    ``persistent_tensors()``.
    """
    t = type(obj)
    return (
        t not in _NOT_HOLDERS
        and not issubclass(t, (torch.nn.Module, type))
        and callable(getattr(t, "persistent_tensors", None))
    )


def holder_tensors(holder: object, path: str) -> dict[str, torch.Tensor]:
    """``holder.persistent_tensors()``, checked: a ``dict`` of ``str`` to tensors.

    ``path`` names the holder in errors. Raises :class:`~graphcheck.GraphcheckTypeError` naming the
    holder path and the offending key when the result is not such a dict.
    """
    tensors = holder.persistent_tensors()  # type: ignore[attr-defined]
    where = f"holder {path} ({type(holder).__qualname__})"
    if not isinstance(tensors, Mapping):
        raise GraphcheckTypeError(
            f"{where}: persistent_tensors() must return dict[str, Tensor], "
            f"got {type(tensors).__qualname__}"
        )
    for key, value in tensors.items():
        if not isinstance(key, str):
            raise GraphcheckTypeError(f"{where}: persistent_tensors() key {key!r} is not a str")
        if not isinstance(value, torch.Tensor):
            raise GraphcheckTypeError(
                f"{where}: persistent_tensors()[{key!r}] is "
                f"{type(value).__qualname__}, expected a torch.Tensor"
            )
    return dict(tensors)


_SLOT_NAMES: dict[type, tuple[str, ...]] = {}


def slot_names(t: type) -> tuple[str, ...]:
    """The ``__slots__`` of ``t`` and its bases (fixed once a class exists: cached)."""
    names = _SLOT_NAMES.get(t)
    if names is None:
        found: list[str] = []
        for cls in t.__mro__:
            slots = cls.__dict__.get("__slots__", ())
            for slot in (slots,) if isinstance(slots, str) else slots:
                if slot not in ("__dict__", "__weakref__") and slot not in found:
                    found.append(slot)
        names = _SLOT_NAMES[t] = tuple(found)
    return names


def _attributes(obj: object) -> list[tuple[str, Any]]:
    """The instance attributes of ``obj``: its ``__dict__`` and set ``__slots__``."""
    d = getattr(obj, "__dict__", None)
    items = list(d.items()) if d else []
    for slot in slot_names(type(obj)):
        if hasattr(obj, slot):
            items.append((slot, getattr(obj, slot)))
    return items


_MISSING = object()

# Ids of the holders whose held_tensors() is running on this thread (cycle guard).
_held_in_progress = threading.local()


def held_tensors(obj: object, *names: str) -> dict[str, torch.Tensor]:
    """Default ``persistent_tensors()`` of a non-module holder.

    Returns the tensor attributes ``names`` of ``obj`` (an attribute that is
    ``None`` is skipped: an optional tensor; a missing one is a
    :class:`~graphcheck.GraphcheckValueError`, a non-tensor a
    :class:`~graphcheck.GraphcheckTypeError`), plus the persistent tensors of every holder
    ``obj`` keeps in an attribute (``__dict__`` or ``__slots__``), named ``<attr>_<name>``;
    two tensors under one joined name are a :class:`~graphcheck.GraphcheckValueError` naming
    both. A holder reached again while its own tensors are being collected (a cycle)
    contributes nothing.
    """
    tensors: dict[str, torch.Tensor] = {}
    for name in names:
        value = getattr(obj, name, _MISSING)
        if value is _MISSING:
            raise GraphcheckValueError(
                f"held_tensors: {type(obj).__qualname__} has no attribute {name!r} (a name "
                "given to held_tensors must be an attribute of the holder)"
            )
        if value is None:
            continue
        if not isinstance(value, torch.Tensor):
            raise GraphcheckTypeError(
                f"held_tensors: {type(obj).__qualname__}.{name} is "
                f"{type(value).__qualname__}, expected a torch.Tensor or None"
            )
        tensors[name] = value
    nested = [(attr, value) for attr, value in _attributes(obj) if is_holder(value)]
    if not nested:
        return tensors
    in_progress: set[int] = _held_in_progress.__dict__.setdefault("ids", set())
    in_progress.add(id(obj))
    try:
        for attr, value in nested:
            if id(value) in in_progress:
                continue
            where = f"{type(obj).__qualname__}.{attr}"
            for name, tensor in holder_tensors(value, where).items():
                joined = f"{attr}_{name}"
                if joined in tensors:
                    raise GraphcheckValueError(
                        f"held_tensors: {where}'s key {name!r} is named {joined!r}, which "
                        f"{type(obj).__qualname__} already lists (an attribute or another "
                        "holder's key joined with '_'); rename one of them"
                    )
                tensors[joined] = tensor
    finally:
        in_progress.discard(id(obj))
    return tensors


def dataclass_tensors(obj: Any, prefix: str = "") -> dict[str, torch.Tensor]:
    """Tensors inside the (nested) dataclass ``obj``, named by field path.

    Nested field names are joined with ``_`` (``prefix_field_subfield``) so
    that they are valid buffer names. A tensor passed as ``obj`` is returned
    under ``prefix``; fields that are neither tensors nor dataclasses are
    ignored.
    """
    if isinstance(obj, torch.Tensor):
        return {prefix: obj}
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return {}
    tensors: dict[str, torch.Tensor] = {}
    for field in dataclasses.fields(obj):
        path = f"{prefix}_{field.name}" if prefix else field.name
        tensors |= dataclass_tensors(getattr(obj, field.name), path)
    return tensors


def storage_views(tensor: torch.Tensor) -> set[StorageView]:
    """The storage views behind ``tensor``.

    A plain tensor has one view ``(storage pointer, offset, shape, stride,
    dtype)``. A traceable wrapper subclass (``__tensor_flatten__``, as
    TorchAO's) has no storage of its own: its views are those of its inner
    tensors, recursively. A meta tensor's storage pointer is 0.
    """
    return {
        StorageView(
            t.untyped_storage().data_ptr(),
            int(t.storage_offset()),
            tuple(t.shape),
            tuple(t.stride()),
            t.dtype,
        )
        for _, t in wrapper_leaves("", tensor)
    }
