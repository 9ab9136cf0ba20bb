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

import dataclasses
from collections.abc import Callable, Mapping

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

#: Prefix of the buffers :func:`register_held_tensors` owns.
HELD_PREFIX = "_held_"

# Attribute (a ``set[str]`` in the module's ``__dict__``) naming the ``_held_*`` buffers that
# register_held_tensors did not register because a parameter or buffer already covers the
# holder tensor: reload_in_place watches those holder tensors for rebinds too.
_HELD_SHARED_ATTR = "_graphcheck_held_shared"


@dataclasses.dataclass(frozen=True)
class Rebind:
    """A tensor that post-processing rebound during :func:`reload_in_place`.

    ``kind`` is ``"parameter"``, ``"buffer"`` or ``"held"`` (a holder's tensor
    behind a ``_held_*`` buffer). ``restored`` is True when the original
    storage holds the new values and is bound again; otherwise ``detail`` says
    why not and what the model must change.
    """

    path: str
    kind: str
    restored: bool
    detail: str


def _require_module(obj: object, what: str) -> torch.nn.Module:
    if not isinstance(obj, torch.nn.Module):
        raise GraphcheckTypeError(f"{what} must be a torch.nn.Module, got {type(obj).__qualname__}")
    return obj


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _mismatch(old: torch.Tensor, new: torch.Tensor) -> list[str]:
    """What differs between ``old`` (expected) and ``new`` (found)."""
    diffs = []
    if old.shape != new.shape:
        diffs.append(f"shape: expected {tuple(old.shape)}, found {tuple(new.shape)}")
    if old.dtype != new.dtype:
        diffs.append(f"dtype: expected {old.dtype}, found {new.dtype}")
    if old.device != new.device:
        diffs.append(f"device: expected {old.device}, found {new.device}")
    return diffs


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
    _require_module(module, "set_derived_buffer: module")
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
    diffs = _mismatch(old, value)
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
    _require_module(module, "register_constant_buffer: module")
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
    _require_module(module, "is_constant_buffer: module")
    return name in module._buffers and name in module.__dict__.get(CONSTANT_BUFFERS_ATTR, ())


def _held_entries(model: torch.nn.Module) -> list[tuple[torch.nn.Module, str, str, torch.Tensor]]:
    """(module, module path, buffer name, tensor) of every holder tensor."""
    held = []
    for path, module in model.named_modules():
        # Buffer name -> the holder key that claimed it: attribute ``a_b`` with key ``c`` and
        # attribute ``a`` with key ``b_c`` both make ``_held_a_b_c``.
        claimed: dict[str, str] = {}
        for attr, holder in [(a, h) for a, h in vars(module).items() if is_holder(h)]:
            holder_path = _join(path, attr)
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
                        f"registered as the buffer {_join(path, buffer)} (the name joins the "
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
    _require_module(model, "register_held_tensors: model")
    held = _held_entries(model)
    keep = {(id(m), name) for m, _, name, tensor in held if tensor.is_meta}
    # Everything that can fail is read before any module changes: a holder tensor without
    # strided storage (sparse, a storage-less wrapper) raised torch's error after every
    # `_held_*` buffer had been deleted (a hostile tester's finding).
    views_of = {
        id(tensor): _holder_views(tensor, _join(path, name))
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
        module.__dict__.pop(_HELD_SHARED_ATTR, None)
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
            module.__dict__.setdefault(_HELD_SHARED_ATTR, set()).add(name)
            continue
        module.register_buffer(name, tensor, persistent=False)
        registered |= views
        paths.append(_join(path, name))
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


def _own_tensors(module: torch.nn.Module) -> dict[str, tuple[str, torch.Tensor]]:
    """Name -> (kind, tensor) of the module's own parameters and buffers (not None)."""
    own: dict[str, tuple[str, torch.Tensor]] = {
        n: ("parameter", t) for n, t in module._parameters.items() if t is not None
    }
    own.update((n, ("buffer", t)) for n, t in module._buffers.items() if t is not None)
    return own


_REBOUND = "processing rebound it"
_COPY_IN_PLACE = "fill it with set_derived_buffer (or copy_) instead of rebinding"


# Copying back would overwrite the parameter or buffer the holder tensor shared.
_LEFT_SHARED = (
    f"{_REBOUND} away from the storage it shared with a registered parameter or buffer; "
    "captured graphs still read that storage, and the new tensor is registered nowhere (the "
    "values were not copied back: that would overwrite the parameter or buffer). Process into "
    "a declared slot with set_derived_buffer, or call register_held_tensors again after "
    "processing and recapture"
)


def _unfit(old: torch.Tensor, new: torch.Tensor) -> str:
    return (
        f"{_REBOUND} to a tensor that does not fit the original "
        f"({'; '.join(_mismatch(old, new))}); it stays rebound and captured graphs "
        "read the old storage: keep the layout and copy in place"
    )


def _restore(module: torch.nn.Module, path: str, name: str, kind: str, old: torch.Tensor) -> Rebind:
    """Copy a rebound parameter or buffer back into ``old`` and bind ``old`` again."""
    slots = module._parameters if kind == "parameter" else module._buffers
    new = slots.get(name)
    where = _join(path, name)
    if new is not None and _mismatch(old, new):
        return Rebind(where, kind, False, _unfit(old, new))
    if new is None:
        detail = "processing removed it; the original is bound again with its previous values"
    else:
        with torch.no_grad():
            old.copy_(new)
        detail = f"{_REBOUND}; the new values were copied into the original: {_COPY_IN_PLACE}"
    slots[name] = old  # type: ignore[assignment]
    return Rebind(where, kind, True, detail)


def _holders(module: torch.nn.Module, path: str) -> list[tuple[str, object, str]]:
    """(attribute, holder, holder path) of every holder the module keeps."""
    return [(a, h, _join(path, a)) for a, h in list(vars(module).items()) if is_holder(h)]


def _shared_held(module: torch.nn.Module, path: str) -> dict[str, torch.Tensor]:
    """Buffer name -> holder tensor, for the holder tensors a registered tensor covers.

    Taken before processing: these have no ``_held_*`` buffer of their own (see
    :func:`register_held_tensors`), so this is what a rebind is compared with.
    """
    names = module.__dict__.get(_HELD_SHARED_ATTR)
    if not names:
        return {}
    before = {}
    for attr, holder, holder_path in _holders(module, path):
        for name, tensor in holder_tensors(holder, holder_path).items():
            if f"{HELD_PREFIX}{attr}_{name}" in names:
                before[f"{HELD_PREFIX}{attr}_{name}"] = tensor
    return before


def _restore_held(
    module: torch.nn.Module, path: str, shared: Mapping[str, torch.Tensor]
) -> list[Rebind]:
    """Copy holder tensors rebound by processing back into their ``_held_*`` buffers.

    The holder's attribute ``name`` is pointed at the original again when it is
    the rebound tensor; a nested key (``<attr>_<name>``) cannot be, and is
    reported as not restored. A holder tensor that shared a parameter's or
    buffer's storage (``shared``: taken before processing) and was rebound is
    reported as not restored and left as it is.
    """
    rebinds = []
    for attr, holder, holder_path in _holders(module, path):
        for name, new in holder_tensors(holder, holder_path).items():
            buffer = f"{HELD_PREFIX}{attr}_{name}"
            old = module._buffers.get(buffer)
            where = f"{holder_path}.{name}"
            if old is None and buffer in shared:
                if storage_views(new) != storage_views(shared[buffer]):
                    rebinds.append(Rebind(where, "held", False, _LEFT_SHARED))
                continue
            if old is None or storage_views(new) == storage_views(old):
                continue
            if _mismatch(old, new):
                rebinds.append(Rebind(where, "held", False, _unfit(old, new)))
                continue
            with torch.no_grad():
                old.copy_(new)
            restored = getattr(holder, name, None) is new
            if restored:
                setattr(holder, name, old)
            keeps = "the holder keeps it again" if restored else "the holder keeps the new tensor"
            detail = f"{_REBOUND}; the new values were copied into the registered storage and "
            rebinds.append(Rebind(where, "held", restored, f"{detail}{keeps}: {_COPY_IN_PLACE}"))
    return rebinds


def _check_weights(
    model: torch.nn.Module, weights: Mapping[str, torch.Tensor], strict: bool
) -> dict[str, torch.Tensor]:
    """Map each key of ``weights`` to its target tensor, or raise before any copy."""
    targets: dict[str, torch.Tensor] = {}
    for path, module in model.named_modules(remove_duplicate=False):
        for name, t in module._parameters.items():
            if t is not None:
                targets[_join(path, name)] = t
        for name, t in module._buffers.items():
            if t is not None and name not in module._non_persistent_buffers_set:
                targets[_join(path, name)] = t
    unexpected = sorted(k for k in weights if k not in targets)
    if unexpected:
        raise GraphcheckKeyError(
            f"reload_in_place: unexpected keys {unexpected} (not a parameter or "
            "persistent buffer of the model; constant and derived buffers are never loaded)"
        )
    loaded = {id(targets[k]) for k in weights}
    missing = sorted(k for k, t in targets.items() if id(t) not in loaded)
    if missing and strict:
        raise GraphcheckKeyError(
            f"reload_in_place: missing keys {missing} (pass strict=False to keep "
            "their current values)"
        )
    for key, value in weights.items():
        if not isinstance(value, torch.Tensor):
            raise GraphcheckTypeError(
                f"reload_in_place: weights[{key!r}] is "
                f"{type(value).__qualname__}, expected a torch.Tensor"
            )
        if value.shape != targets[key].shape:
            raise GraphcheckValueError(
                f"reload_in_place: weights[{key!r}] has shape "
                f"{tuple(value.shape)}, expected {tuple(targets[key].shape)}"
            )
    return targets


def reload_in_place(
    model: torch.nn.Module,
    weights: Mapping[str, torch.Tensor],
    process: Callable[[torch.nn.Module], object] | None,
    *,
    strict: bool = True,
) -> list[Rebind]:
    """Load ``weights`` into the existing storages of ``model``, layer by layer.

    ``weights`` maps ``state_dict()`` keys (parameters and persistent buffers; tied weights may
    appear under any of their names) to tensors of the same shape; dtype and device are
    converted by ``copy_``. Every key is checked before anything is copied: an unknown key is a
    :class:`~graphcheck.GraphcheckKeyError`, a missing one too unless ``strict=False`` (its
    tensor keeps its values), a shape mismatch a :class:`~graphcheck.GraphcheckValueError`.
    Modules are then visited in post-order (children first, each shared module once): the
    module's own tensors are copied in place, then ``process(module)`` runs (e.g.
    ``process_weights_after_loading``), which refills derived buffers through
    :func:`set_derived_buffer`. A parameter, buffer or holder tensor that ``process`` rebinds
    (one behind a ``_held_*`` buffer, or one that :func:`register_held_tensors` found covered by
    a parameter or buffer) is reported; it is copied back into its original storage, unless that
    storage belongs to a parameter or buffer it only shared (those values are kept). The
    returned list holds every report. Not thread-safe.
    """
    _require_module(model, "reload_in_place: model")
    if not isinstance(weights, Mapping):
        raise GraphcheckTypeError(
            f"reload_in_place: weights must be a mapping of str to Tensor "
            f"(like state_dict()), got {type(weights).__qualname__}"
        )
    targets = _check_weights(model, weights, strict)
    by_target: dict[int, list[torch.Tensor]] = {}
    for key, value in weights.items():
        by_target.setdefault(id(targets[key]), []).append(value)
    rebinds: list[Rebind] = []
    seen: set[int] = set()

    def visit(module: torch.nn.Module, path: str) -> None:
        seen.add(id(module))
        for name, child in module._modules.items():
            if child is not None and id(child) not in seen:
                visit(child, _join(path, name))
        own = _own_tensors(module)
        with torch.no_grad():
            for _, t in own.values():
                for value in by_target.pop(id(t), []):
                    t.copy_(value)
        if process is None:
            return
        shared = _shared_held(module, path)
        process(module)
        for name, (kind, old) in own.items():
            slots = module._parameters if kind == "parameter" else module._buffers
            if not old.is_meta and slots.get(name) is not old:
                rebinds.append(_restore(module, path, name, kind, old))
        rebinds.extend(_restore_held(module, path, shared))

    visit(model, "")
    return rebinds
