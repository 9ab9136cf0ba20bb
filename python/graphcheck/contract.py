"""The registration contract: every persistent tensor a model keeps is registered.

A captured CUDA graph bakes raw addresses into its kernels, while sleep mode,
weight reload and graph checks only see what ``named_parameters()`` and
``named_buffers()`` return. This module is the contract that closes the gap
(names and semantics follow the seed change for vLLM):

- weight-derived tensors live in non-persistent buffer slots declared in
  ``__init__`` and are filled by :func:`set_derived_buffer`, which copies in
  place once the slot holds a tensor, so the address never changes;
- constants no checkpoint provides are :func:`register_constant_buffer`;
- non-module holders (quantization methods, kernels, attention impls) list
  their tensors in ``persistent_tensors()`` and :func:`register_held_tensors`
  registers them as ``_held_<attr>_<name>`` buffers of the holding module;
- :func:`reload_in_place` loads new weights into the existing storages.

Nothing here is thread-safe where it mutates modules: call it while no other
thread uses the model.
"""

from __future__ import annotations

import torch

from graphcheck._errors import GraphcheckKeyError, GraphcheckTypeError, GraphcheckValueError
from graphcheck._holders import (
    StorageView,
    TensorHolder,
    dataclass_tensors,
    held_tensors,
    holder_tensors,
    is_holder,
    storage_views,
)
from graphcheck._reload import Rebind, reload_in_place
from graphcheck._slots import (
    HELD_PREFIX,
    HELD_SHARED_ATTR,
    join_path,
    require_module,
    tensor_mismatch,
)
from graphcheck._utils import wrapper_leaves

__all__ = [
    "CONSTANT_BUFFERS_ATTR",
    "HELD_PREFIX",
    "Rebind",
    "StorageView",
    "TensorHolder",
    "dataclass_tensors",
    "held_tensors",
    "holder_tensors",
    "is_constant_buffer",
    "is_holder",
    "register_constant_buffer",
    "register_held_tensors",
    "reload_in_place",
    "set_derived_buffer",
    "storage_views",
]

#: Attribute (a ``set[str]`` in the module's ``__dict__``) naming the module's
#: constant buffers. Weight loaders skip these names; it survives ``.to()``.
CONSTANT_BUFFERS_ATTR = "_graphcheck_constant_buffers"


def set_derived_buffer(module: torch.nn.Module, name: str, value: torch.Tensor) -> None:
    """Fill the derived-buffer slot ``name`` of ``module`` with ``value``.

    The slot must be declared in ``__init__`` with ``self.register_buffer(name, None,
    persistent=False)`` (:class:`~graphcheck.GraphcheckKeyError` otherwise; a persistent buffer
    is a :class:`~graphcheck.GraphcheckValueError`: derived state never belongs in
    ``state_dict()``). The first tensor (while the slot is ``None`` or holds a meta tensor) is
    assigned; every later one is copied into the tensor already there, so its address never
    changes, and must match its shape, dtype and device
    (:class:`~graphcheck.GraphcheckValueError` naming each difference, expected vs found). It
    never rebinds. Not thread-safe (mutates ``module``).
    """
    require_module(module, "set_derived_buffer: module")
    if not isinstance(value, torch.Tensor):
        raise GraphcheckTypeError(
            f"set_derived_buffer({type(module).__name__}, {name!r}): value must be a "
            f"torch.Tensor, got {type(value).__qualname__}"
        )
    if name not in module._buffers:
        raise GraphcheckKeyError(
            f"{type(module).__name__} has no buffer slot {name!r}: declare it in "
            f"__init__ with self.register_buffer({name!r}, None, persistent=False)"
        )
    if name not in module._non_persistent_buffers_set:
        raise GraphcheckValueError(
            f"{type(module).__name__}.{name} is a persistent buffer: declare the "
            f"derived slot with self.register_buffer({name!r}, None, persistent=False)"
        )
    old = module._buffers[name]
    if old is None or old.is_meta:
        module._buffers[name] = value.detach()
        return
    if value is old:
        return
    diffs = tensor_mismatch(old, value)
    if diffs:
        raise GraphcheckValueError(
            f"set_derived_buffer({type(module).__name__}, {name!r}) copies in place "
            f"and cannot change the buffer: {'; '.join(diffs)}"
        )
    with torch.no_grad():
        old.copy_(value)


def register_constant_buffer(module: torch.nn.Module, name: str, tensor: torch.Tensor) -> None:
    """Register ``tensor`` as the constant, non-persistent buffer ``name``.

    A constant is a tensor no checkpoint provides (a lookup table, an identity
    permutation). It is registered with ``persistent=False`` so
    ``state_dict()`` is unchanged, and marked so that weight loaders skip it:
    its name is added to the set ``module.<CONSTANT_BUFFERS_ATTR>`` (kept
    across ``.to()``), and the tensor gets ``weight_loader_numel = 0`` as in
    the seed change, for loaders that look at the tensor. Query it with
    :func:`is_constant_buffer`. Raises :class:`~graphcheck.GraphcheckKeyError` for a name
    torch refuses (dotted, empty, an attribute already), before changing anything. Not
    thread-safe (mutates ``module``).
    """
    require_module(module, "register_constant_buffer: module")
    if not isinstance(tensor, torch.Tensor):
        raise GraphcheckTypeError(
            f"register_constant_buffer({type(module).__name__}, {name!r}): tensor must "
            f"be a torch.Tensor, got {type(tensor).__qualname__}"
        )
    try:
        module.register_buffer(name, tensor, persistent=False)
    except (KeyError, TypeError) as exc:
        # torch's own refusal (a dotted or empty name, an attribute of that name already,
        # a name that is no str), said as this function's.
        why = exc.args[0] if exc.args else exc
        raise (GraphcheckTypeError if isinstance(exc, TypeError) else GraphcheckKeyError)(
            f"register_constant_buffer({type(module).__name__}, {name!r}): {why}; pick a "
            "buffer name that is a non-empty str without '.' and not already an attribute"
        ) from None
    tensor.weight_loader_numel = 0  # type: ignore[attr-defined]
    names = module.__dict__.get(CONSTANT_BUFFERS_ATTR)
    if names is None:
        names = set()
        module.__dict__[CONSTANT_BUFFERS_ATTR] = names
    names.add(name)


def is_constant_buffer(module: torch.nn.Module, name: str) -> bool:
    """Whether ``name`` is a constant buffer of ``module`` (loaders must skip it)."""
    require_module(module, "is_constant_buffer: module")
    return name in module._buffers and name in module.__dict__.get(CONSTANT_BUFFERS_ATTR, ())


def _held_entries(model: torch.nn.Module) -> list[tuple[torch.nn.Module, str, str, torch.Tensor]]:
    """(module, module path, buffer name, tensor) of every holder tensor."""
    held = []
    for path, module in model.named_modules():
        # Buffer name -> the holder key that claimed it: attribute ``a_b`` with key ``c`` and
        # attribute ``a`` with key ``b_c`` both make ``_held_a_b_c``.
        claimed: dict[str, str] = {}
        for attr, holder in [(a, h) for a, h in vars(module).items() if is_holder(h)]:
            holder_path = join_path(path, attr)
            for name, tensor in holder_tensors(holder, holder_path).items():
                if "." in name or not name:
                    raise GraphcheckValueError(
                        f"holder {holder_path}: persistent_tensors() key {name!r} "
                        "must be a non-empty name without '.' (it names a buffer)"
                    )
                buffer = f"{HELD_PREFIX}{attr}_{name}"
                where = f"{holder_path}.persistent_tensors()[{name!r}]"
                if buffer in claimed:
                    raise GraphcheckValueError(
                        f"register_held_tensors: {where} and {claimed[buffer]} would both be "
                        f"registered as the buffer {join_path(path, buffer)} (the name joins the "
                        "attribute and the key with '_'); rename the attribute or the key so "
                        "that the joined names differ"
                    )
                claimed[buffer] = where
                held.append((module, path, buffer, tensor))
    return held


def register_held_tensors(model: torch.nn.Module) -> list[str]:
    """Register the tensors of non-module holders as buffers of their module.

    For every attribute of every module of ``model`` that holds a holder (see
    :func:`is_holder`), each tensor of its ``persistent_tensors()`` becomes the non-persistent
    buffer ``_held_<attr>_<name>`` of that module, unless all its storage views
    (:func:`storage_views`) are already registered in the model (a parameter, a buffer, or a
    holder tensor registered earlier in this call). Rerunning replaces every ``_held_*`` buffer
    with what the holders keep now; a holder tensor still on meta (a model built on meta whose
    buffers were imported) keeps the ``_held_*`` buffer already there. Returns the paths of the
    buffers registered by this call, in module order. Raises
    :class:`~graphcheck.GraphcheckValueError` before registering anything when two holder
    tensors of one module would get the same buffer name (attribute ``a_b`` with key ``c`` and
    attribute ``a`` with key ``b_c``), naming both, and for a holder tensor without strided
    storage (sparse, a storage-less wrapper), naming its path. Not thread-safe (mutates the
    modules' buffers).
    """
    require_module(model, "register_held_tensors: model")
    held = _held_entries(model)
    keep = {(id(m), name) for m, _, name, tensor in held if tensor.is_meta}
    # Everything that can fail is read before any module changes: a holder tensor without
    # strided storage (sparse, a storage-less wrapper) raised torch's error after every
    # `_held_*` buffer had been deleted (a hostile tester's finding).
    views_of = {
        id(tensor): _holder_views(tensor, join_path(path, name))
        for _, path, name, tensor in held
        if not tensor.is_meta
    }
    # Only registered tensors that start where a holder tensor starts can share
    # one of its views: data_ptr() is cheap, storage_views() is not.
    starts = {start for _, found in views_of.values() for start in found}
    registered: set[StorageView] = set()
    for module in model.modules():
        own = [*module._parameters.items(), *module._buffers.items()]
        for name, t in own:
            if t is None or (name.startswith(HELD_PREFIX) and (id(module), name) not in keep):
                continue  # about to be dropped below
            for _, leaf in wrapper_leaves("", t):
                if _start_of(leaf) in starts:
                    registered |= storage_views(leaf)
    for module in model.modules():
        module.__dict__.pop(HELD_SHARED_ATTR, None)
        for name in [n for n in module._buffers if n.startswith(HELD_PREFIX)]:
            if (id(module), name) not in keep:
                del module._buffers[name]
                module._non_persistent_buffers_set.discard(name)
    paths = []
    for module, path, name, tensor in held:
        if tensor.is_meta:
            continue
        views = views_of[id(tensor)][0]
        if views <= registered:
            module.__dict__.setdefault(HELD_SHARED_ATTR, set()).add(name)
            continue
        module.register_buffer(name, tensor, persistent=False)
        registered |= views
        paths.append(join_path(path, name))
    return paths


def _start_of(tensor: torch.Tensor) -> int | None:
    """Where ``tensor``'s data starts, or None for a tensor without readable storage."""
    try:
        return tensor.data_ptr()
    except RuntimeError:
        return None


def _holder_views(tensor: torch.Tensor, where: str) -> tuple[frozenset[StorageView], set[int]]:
    """A holder tensor's storage views and where its leaves start; raises for one without."""
    try:
        views = frozenset(storage_views(tensor))
        starts = {leaf.data_ptr() for _, leaf in wrapper_leaves("", tensor)}
    except RuntimeError as exc:
        raise GraphcheckValueError(
            f"register_held_tensors: holder tensor {where}: expected a tensor with strided "
            f"storage to register as a buffer, found {tensor.layout} "
            f"{type(tensor).__name__} ({exc}); keep a dense tensor in persistent_tensors(), "
            "nothing was changed"
        ) from exc
    return views, starts
