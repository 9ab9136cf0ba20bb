"""Census: every tensor a model keeps that no registered parameter or buffer covers.

Re-exported as ``graphcheck.census``, ``graphcheck.Census``, ``graphcheck.CensusEntry`` and
``graphcheck.RUNTIME_STATE_ATTRS`` (the module has a private name so that the function keeps
the public one).

:func:`census` walks everything reachable from a module tree (attributes,
containers, closures, ``functools.partial`` arguments, attributes on tensors,
holders) and reports each storage that holds real memory but lies outside the
registered parameters and buffers, by attribute path. It is the CI oracle of
the registration contract (:mod:`graphcheck.contract`).

Path grammar (pinned; reports and allowlists use it):

- ``a.b``: an attribute (``__dict__``, ``__slots__``, dataclass and namedtuple
  fields, registered parameters, buffers and submodules, attributes on a
  tensor's ``__dict__`` such as ``lin.weight.absmax``, the inner tensors of a
  traceable wrapper subclass such as ``w.qdata``);
- ``[i]``: an item of a list, tuple, deque or set (sets in iteration order);
- ``['key']``: a dict item (``[repr(key)]`` for other keys, e.g. ``[3]``);
- closure cells by variable name (``act.bias`` for a lambda ``act`` closing
  over ``bias``), ``__defaults__``/``__kwdefaults__`` of functions, and a bound
  method's object as ``m.__self__``;
- ``functools.partial``: ``fn.func``, ``fn.args[0]``, ``fn.keywords['k']``.

Out of reach of an attribute walk (by design): module globals and function
``__globals__`` (a capture sees what the graph reads there), Python modules,
classes, torch internals (other than tensors, modules and
``torch.distributions``), and foreign objects (numpy, logging, threading,
io, ...). The walk is bounded by ``max_depth`` hops; where it stops, the
path is listed in :attr:`Census.truncated`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType

import torch

from graphcheck import _walk
from graphcheck._errors import GraphcheckTypeError, GraphcheckValueError
from graphcheck._utils import PathGlob

__all__ = ["RUNTIME_STATE_ATTRS", "Census", "CensusEntry", "census"]

#: Attribute names whose tensors are runtime state, with the reason each one
#: is exempt: the engine allocates them, their contents need not survive
#: sleep or reload, and the capture declares them as runtime spans.
RUNTIME_STATE_ATTRS: Mapping[str, str] = MappingProxyType(
    {
        "kv_cache": "KV cache: allocated and owned by the engine's cache manager, "
        "discarded on sleep and reset rather than reloaded",
        "kv_caches": "KV caches (one per virtual engine or layer): engine-owned runtime state",
        "k_cache": "key cache: engine-owned runtime state",
        "v_cache": "value cache: engine-owned runtime state",
        "key_cache": "key cache: engine-owned runtime state",
        "value_cache": "value cache: engine-owned runtime state",
        "conv_state": "Mamba convolution state: per-request runtime state, reset, never loaded",
        "ssm_state": "Mamba SSM state: per-request runtime state, reset, never loaded",
        "recurrent_states": "recurrent (RG-LRU) state between decode steps: per-request "
        "runtime state, reset, never loaded",
        "workspace": "kernel workspace: scratch whose contents do not outlive a kernel call "
        "(a workspace that must hold zeros at launch, as Marlin's locks, is re-zeroed by "
        "its owner after wake: declare it in persistent_tensors() to keep it instead)",
        "scratch": "scratch memory: contents do not outlive a kernel call",
        "scratchpad": "scratch memory: contents do not outlive a kernel call",
        "_compiled_call_impl": "torch.compile artifact (Module.compile()): recreated by the "
        "compiler, holds no model state",
    }
)


@dataclasses.dataclass(frozen=True)
class CensusEntry:
    """One storage a census found, by the first path that reached it.

    ``nbytes`` is the first tensor's own size (``numel * element_size``);
    ``storage_begin``/``storage_end`` bound the bytes its whole storage holds.
    ``reason`` is the runtime reason (exempt entries), the matching glob
    (allowed entries) or empty (findings); ``fix`` says how to register it.
    """

    path: str
    aliases: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: torch.dtype
    device: torch.device
    nbytes: int
    storage_begin: int
    storage_end: int
    reason: str
    fix: str

    @property
    def storage_range(self) -> tuple[int, int]:
        """``(begin, end)`` of the bytes the tensor's storage holds."""
        return (self.storage_begin, self.storage_end)

    @property
    def paths(self) -> tuple[str, ...]:
        """The path and its aliases, in traversal order."""
        return (self.path, *self.aliases)


@dataclasses.dataclass(frozen=True)
class Census:
    """What :func:`census` found.

    ``entries`` are the findings (unregistered storages), ``allowed`` those an
    allowlist glob matched, ``exempt`` the runtime state; ``stale_allow`` lists
    the globs that matched no finding, and ``truncated`` the paths where the
    depth bound stopped the walk.
    """

    entries: tuple[CensusEntry, ...]
    allowed: tuple[CensusEntry, ...]
    exempt: tuple[CensusEntry, ...]
    stale_allow: tuple[str, ...]
    truncated: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """True when there is no finding and no stale allowlist entry."""
        return not self.entries and not self.stale_allow

    @property
    def paths(self) -> list[str]:
        """The finding paths, in traversal order."""
        return [e.path for e in self.entries]

    def __str__(self) -> str:
        total = sum(e.storage_end - e.storage_begin for e in self.entries)
        lines = [
            f"census: {len(self.entries)} unregistered storage(s), {total} bytes; "
            f"{len(self.allowed)} allowed, {len(self.exempt)} exempt, "
            f"{len(self.stale_allow)} stale allow glob(s)"
        ]
        if self.entries:
            lines += _table(self.entries, "aliases", lambda e: ", ".join(e.aliases) or "-")
            lines.append(f"fix: {_GENERIC_FIX}")
            lines += [f"  {e.path}: {e.fix}" for e in self.entries if e.fix != _GENERIC_FIX]
        if self.allowed:
            lines += ["allowed:"] + _table(self.allowed, "glob", lambda e: e.reason)
        if self.exempt:
            lines += ["exempt (runtime state):"] + _table(self.exempt, "reason", lambda e: e.reason)
        lines += [f"stale allow glob: {g!r}" for g in self.stale_allow]
        lines += [f"truncated (depth bound) at: {p}" for p in self.truncated]
        return "\n".join(lines)


def _table(
    entries: Iterable[CensusEntry], last: str, cell: Callable[[CensusEntry], str]
) -> list[str]:
    rows = [("path", "shape", "dtype", "device", "nbytes", "storage", last)]
    rows += [
        (
            e.path,
            str(e.shape),
            str(e.dtype).removeprefix("torch."),
            str(e.device),
            str(e.nbytes),
            f"0x{e.storage_begin:x}-0x{e.storage_end:x}",
            cell(e),
        )
        for e in entries
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1]
        for r in rows
    ]


_GENERIC_FIX = (
    "register it: fill a declared slot with set_derived_buffer, or "
    "register_constant_buffer for a constant, or list it in persistent_tensors() "
    "of its holder and call register_held_tensors"
)


def census(
    model: torch.nn.Module,
    *,
    allow: Iterable[str] = (),
    runtime_attrs: Mapping[str, str] = RUNTIME_STATE_ATTRS,
    max_depth: int = 64,
) -> Census:
    """Every storage reachable from ``model`` that no registered tensor covers.

    Registered tensors are the parameters and buffers of ``model``'s module
    tree (``_held_*`` buffers included). A storage is covered when the bytes a
    tensor views lie within the union of the byte ranges registered tensors
    view on the same storage: tied weights, aliases and views of registered
    tensors are not findings, nor are meta tensors, tensors without storage
    and empty storages. Tensors under an attribute named in
    ``runtime_attrs`` (attribute name -> reason) are exempt, and a storage
    reached under any such attribute is exempt everywhere. ``allow`` holds
    globs over paths (see :class:`graphcheck._utils.PathGlob`); a finding any of whose paths
    matches is allowed, and a glob that matches no finding is stale.

    Raises :class:`graphcheck.GraphcheckTypeError` when ``model`` is not a module, or when a
    holder's ``persistent_tensors()`` returns non-tensors (naming the holder path and the
    key), :class:`graphcheck.GraphcheckValueError` for a ``max_depth`` out of range (a
    :class:`graphcheck.GraphcheckTypeError` for one that is no int). Cycles
    terminate (each object is entered once). Thread-safe as long as no other thread mutates
    the model; it mutates nothing, except that reading a tensor's ``__dict__`` creates it
    (CPython materializes it).
    """
    if not isinstance(model, torch.nn.Module):
        raise GraphcheckTypeError(
            f"census: model must be a torch.nn.Module, got {type(model).__qualname__}: "
            f"{_walk.short_repr(model)}"
        )
    if not isinstance(max_depth, int) or isinstance(max_depth, bool):
        raise GraphcheckTypeError(
            f"census: max_depth must be an int in [1, 256], got {type(max_depth).__name__}"
        )
    if not 1 <= max_depth <= 256:
        raise GraphcheckValueError(f"census: max_depth must be in [1, 256], got {max_depth}")
    if isinstance(allow, str):
        raise GraphcheckTypeError("census: allow must be an iterable of str globs, not a str")
    globs = list(dict.fromkeys(allow))
    bad = [g for g in globs if not isinstance(g, str)]
    if bad:
        raise GraphcheckTypeError(f"census: allow globs must be str, got {bad[0]!r}")
    walker = _walk.Walker(model, dict(runtime_attrs), max_depth)
    walker.walk_root()
    findings: list[CensusEntry] = []
    exempt: list[CensusEntry] = []
    for rec in walker.finish():
        holder = walker.declared.get(rec.key)
        fix = (
            f"its holder {holder} declares it in persistent_tensors() but it is not "
            f"registered: call register_held_tensors(model) after loading"
            if holder is not None
            else _GENERIC_FIX
        )
        entry = _entry(rec, rec.reason, fix)
        (exempt if rec.reason else findings).append(entry)
    patterns = [(g, PathGlob(g)) for g in globs]
    used: set[str] = set()
    kept: list[CensusEntry] = []
    allowed: list[CensusEntry] = []
    for entry in findings:
        matching = [g for g, rx in patterns if any(rx.fullmatch(p) for p in entry.paths)]
        used.update(matching)
        if matching:
            allowed.append(dataclasses.replace(entry, reason=matching[0]))
        else:
            kept.append(entry)
    return Census(
        entries=tuple(kept),
        allowed=tuple(allowed),
        exempt=tuple(exempt),
        stale_allow=tuple(g for g in globs if g not in used),
        truncated=tuple(walker.truncated),
    )


def _entry(rec: _walk.Found, reason: str, fix: str) -> CensusEntry:
    t = rec.tensor
    try:
        shape, nbytes = tuple(t.shape), t.numel() * t.element_size()
    except RuntimeError:
        # A strided nested tensor has no sizes torch can give ("NestedTensorImpl doesn't
        # support sizes"): its storage's bytes, no shape (a census of such a model failed).
        shape, nbytes = (), rec.storage_end - rec.storage_begin
    return CensusEntry(
        path=rec.paths[0],
        aliases=tuple(rec.paths[1:]),
        shape=shape,
        dtype=t.dtype,
        device=t.device,
        nbytes=nbytes,
        storage_begin=rec.storage_begin,
        storage_end=rec.storage_end,
        reason=reason,
        fix=fix,
    )
