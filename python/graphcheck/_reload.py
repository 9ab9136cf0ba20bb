"""The in-place weight reload of the registration contract (:func:`reload_in_place`).

New weights go into the storages captured graphs read; what post-processing rebinds is
copied back and reported (:class:`Rebind`). Re-exported by :mod:`graphcheck.contract`.
Not thread-safe: call it while no other thread uses the model.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import torch

from graphcheck._errors import GraphcheckKeyError, GraphcheckTypeError, GraphcheckValueError
from graphcheck._holders import holder_tensors, is_holder, storage_views
from graphcheck._slots import (
    HELD_PREFIX,
    HELD_SHARED_ATTR,
    join_path,
    require_module,
    tensor_mismatch,
)

__all__ = ["Rebind", "reload_in_place"]


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
        f"({'; '.join(tensor_mismatch(old, new))}); it stays rebound and captured graphs "
        "read the old storage: keep the layout and copy in place"
    )


def _restore(module: torch.nn.Module, path: str, name: str, kind: str, old: torch.Tensor) -> Rebind:
    """Copy a rebound parameter or buffer back into ``old`` and bind ``old`` again."""
    slots = module._parameters if kind == "parameter" else module._buffers
    new = slots.get(name)
    where = join_path(path, name)
    if new is not None and tensor_mismatch(old, new):
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
    return [(a, h, join_path(path, a)) for a, h in list(vars(module).items()) if is_holder(h)]


def _shared_held(module: torch.nn.Module, path: str) -> dict[str, torch.Tensor]:
    """Buffer name -> holder tensor, for the holder tensors a registered tensor covers.

    Taken before processing: these have no ``_held_*`` buffer of their own (see
    :func:`register_held_tensors`), so this is what a rebind is compared with.
    """
    names = module.__dict__.get(HELD_SHARED_ATTR)
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
            if tensor_mismatch(old, new):
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
                targets[join_path(path, name)] = t
        for name, t in module._buffers.items():
            if t is not None and name not in module._non_persistent_buffers_set:
                targets[join_path(path, name)] = t
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
    require_module(model, "reload_in_place: model")
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
                visit(child, join_path(path, name))
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
