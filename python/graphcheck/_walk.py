"""The object-graph walk behind :func:`graphcheck.census` (private).

Layout: :class:`Walker` enters every object once (``visited`` keeps each one
alive by id, so ids are not reused during the walk), dispatches on the exact
type through a per-type handler cache, and records each unregistered storage
in ``found`` under ``(device, storage pointer)`` in traversal order.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
import enum
import functools
import reprlib
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from graphcheck._holders import holder_tensors, slot_names
from graphcheck._utils import wrapper_leaves

StorageKey = tuple[torch.device, int]
Handler = Callable[[Any, str, int, str], None]

# Types that never hold tensors: skipped before any bookkeeping.
_ATOMIC: frozenset[type] = frozenset({
    type(None), bool, int, float, complex, str, bytes, bytearray, range, slice, type(Ellipsis),
    type(NotImplemented), torch.dtype, torch.device, torch.Size, torch.layout,
    torch.memory_format, torch.qscheme,
})  # fmt: skip
_EMPTY_SKIPPED: frozenset[type] = frozenset({dict, collections.OrderedDict, list, tuple, set})

# Objects from these packages are not walked (foreign or huge): torch
# internals other than tensors, modules and distributions, numpy arrays
# (host memory a graph does not read), tokenizers, runtime plumbing.
_FOREIGN_ROOTS = frozenset({
    "numpy", "logging", "threading", "_thread", "asyncio", "concurrent", "multiprocessing",
    "socket", "ssl", "io", "_io", "re", "typing", "weakref", "_weakref", "inspect", "ctypes",
    "queue", "subprocess", "tokenizers", "sympy",
})  # fmt: skip
_WALKED_TORCH = ("torch.nn.modules", "torch.distributions")
_FOREIGN_PREFIXES = ("transformers.tokenization",)
_SKIPPED_TYPES = (
    type, types.ModuleType, enum.Enum, str, bytes, int, float, complex, types.CodeType,
    types.FrameType, types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType,
    types.TracebackType, memoryview, property,
)  # fmt: skip
_MODULE_SLOTS = frozenset({"_parameters", "_buffers", "_modules"})


def short_repr(obj: object) -> str:
    """A bounded repr for error messages."""
    r = reprlib.Repr()
    r.maxstring = r.maxother = 60
    return r.repr(obj)


def tree_modules(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The modules of ``model``'s tree (reachable through ``_modules``), once each."""
    seen = {id(model)}
    out = [model]
    for m in out:  # grows while iterating: a breadth-first walk
        for c in m._modules.values():
            if c is not None and id(c) not in seen:
                seen.add(id(c))
                out.append(c)
    return out


def registered_tensors(modules: Iterable[torch.nn.Module]) -> Iterable[torch.Tensor]:
    """The parameters and buffers of ``modules`` (with repeats)."""
    for m in modules:
        for slots in (m._parameters, m._buffers):
            for t in slots.values():
                if t is not None:
                    yield t


def _extent(t: torch.Tensor) -> int:
    """Bytes from ``t.data_ptr()`` to one past the last element it views."""
    if t.is_contiguous():
        return t.nbytes  # the common case, without the slow shape and stride calls
    if t.numel() == 0:
        return 0
    last = sum((s - 1) * st for s, st in zip(t.shape, t.stride(), strict=True))
    return (last + 1) * t.element_size()


def _storage_of(t: torch.Tensor) -> tuple[int, int] | None:
    """``(pointer, nbytes)`` of ``t``'s storage, or None without real memory."""
    if t.is_meta:
        return None
    try:
        st = t.untyped_storage()
        size = st.nbytes()
        return (st.data_ptr(), size) if size else None
    except (RuntimeError, NotImplementedError, TypeError):
        return None  # sparse, fake or functional tensors: no storage to report


def _odd_key(path: str, key: object) -> str:
    """The path of an attribute whose ``__dict__`` key is no str (``vars(m)[1] = t``).

    Spelled as a dict's item, ``layer[1]``, so it cannot pass for an attribute of that name.
    """
    return f"{path}[{key!r}]"


@dataclasses.dataclass(slots=True)
class Found:
    """A storage with unregistered tensors: each (path, tensor) that reached it."""

    key: StorageKey
    views: list[tuple[str, torch.Tensor]]
    reason: str
    storage_begin: int
    storage_end: int

    @property
    def tensor(self) -> torch.Tensor:
        """The tensor at the first path."""
        return self.views[0][1]

    @property
    def paths(self) -> list[str]:
        """The paths in traversal order."""
        return [p for p, _ in self.views]


class Walker:
    """One census walk. Not reusable; not thread-safe (its own state only)."""

    def __init__(self, model: torch.nn.Module, runtime: dict[str, str], max_depth: int) -> None:
        self.modules = tree_modules(model)
        self.tree_ids = {id(m) for m in self.modules}
        # Filled as the walk enters tree modules: a shortcut only. A registered
        # tensor reached earlier (or beyond the depth bound) becomes a
        # candidate, and finish() finds it covered by its own bytes.
        self.registered_ids: set[int] = set()
        self.runtime = runtime
        self.max_depth = max_depth
        self.visited: dict[int, object] = {}
        self.found: dict[StorageKey, Found] = {}
        self.tensor_keys: dict[int, StorageKey] = {}
        self.declared: dict[StorageKey, str] = {}
        self.truncated: list[str] = []
        self._handlers: dict[type, Handler | None] = {}

    def walk_root(self) -> None:
        """Walk the model; its attributes get paths without a leading dot."""
        root = self.modules[0]
        self.visited[id(root)] = root
        self._module(root, "", 1, "")

    def walk(self, obj: object, path: str, depth: int, reason: str) -> None:
        """Enter ``obj`` reached at ``path`` (``reason``: exempt when non-empty)."""
        t = type(obj)
        if t in _ATOMIC or (t in _EMPTY_SKIPPED and not obj):
            return
        try:
            handler = self._handlers[t]
        except KeyError:
            handler = self._handlers[t] = self._classify(t)
        if handler is None:
            return
        oid = id(obj)
        if oid in self.visited:
            key = self.tensor_keys.get(oid)
            if key is not None:
                self._alias(self.found[key], path, obj, reason)  # type: ignore[arg-type]
            return
        if oid in self.tree_ids:
            # A module of the tree reached through an attribute (an engine config's table of
            # layers, a back reference): it is walked from its place in the tree, so what it
            # holds is named by its module path, not by the first detour that reached it.
            return
        if depth >= self.max_depth:
            self.truncated.append(path)
            return
        self.visited[oid] = obj
        handler(obj, path, depth + 1, reason)

    def _classify(self, t: type) -> Handler | None:
        if issubclass(t, torch.Tensor):
            return self._tensor
        if issubclass(t, torch.nn.Module):
            return self._module
        if issubclass(t, _SKIPPED_TYPES):
            return None
        if issubclass(t, dict):
            return self._dict
        if issubclass(t, tuple) and hasattr(t, "_fields"):
            return self._namedtuple
        if issubclass(t, (list, tuple, collections.deque, set, frozenset)):
            return self._sequence
        if issubclass(t, types.FunctionType):
            return self._function
        if issubclass(t, types.MethodType):
            return self._method
        if issubclass(t, types.BuiltinMethodType):
            return self._builtin
        if issubclass(t, functools.partial):
            return self._partial
        if issubclass(t, (torch.UntypedStorage, torch.TypedStorage)):
            return self._storage
        mod = getattr(t, "__module__", None) or ""
        root = mod.partition(".")[0]
        if (root == "torch" and not mod.startswith(_WALKED_TORCH)) or (
            root in _FOREIGN_ROOTS or mod.startswith(_FOREIGN_PREFIXES)
        ):
            return None
        if callable(getattr(t, "persistent_tensors", None)):
            return self._holder
        return self._object

    # Handlers: (object, its path, depth of its children, exempt reason).

    def _attrs(self, items: Iterable[tuple[Any, Any]], path: str, depth: int, reason: str) -> None:
        prefix = f"{path}." if path else ""
        runtime = self.runtime
        for k, v in items:
            if type(v) not in _ATOMIC:
                name = prefix + k if type(k) is str else _odd_key(path, k)
                self.walk(v, name, depth, reason or runtime.get(k, ""))

    def _module(self, m: torch.nn.Module, path: str, depth: int, reason: str) -> None:
        # The hot loop of a census (one pass per module): locals, no copies.
        # Order: parameters, buffers, submodules, then the other attributes.
        prefix = f"{path}." if path else ""
        runtime = self.runtime
        registered = self.registered_ids
        walk = self.walk
        d = m.__dict__
        in_tree = id(m) in self.tree_ids
        for slots in (d.get("_parameters", {}), d.get("_buffers", {})):
            for n, x in slots.items():
                if x is None:
                    continue
                if in_tree:
                    registered.add(id(x))
                    if type(x) is not torch.nn.Parameter and type(x) is not torch.Tensor:
                        registered.update(id(leaf) for _, leaf in wrapper_leaves("", x))
                if id(x) not in registered:
                    walk(x, prefix + n, depth, reason or runtime.get(n, ""))
                    continue
                # Covered: only attributes on it (lin.weight.absmax) can matter.
                xd = getattr(x, "__dict__", None)
                if xd:
                    self._attrs(list(xd.items()), prefix + n, depth, reason or runtime.get(n, ""))
        visited = self.visited
        for n, c in d.get("_modules", {}).items():
            if c is None or id(c) in visited:
                continue
            if depth >= self.max_depth:
                self.truncated.append(prefix + n)
                continue
            visited[id(c)] = c
            self._module(c, prefix + n, depth + 1, reason or runtime.get(n, ""))
        atomic = _ATOMIC
        empty = _EMPTY_SKIPPED
        for k, v in d.items():
            tv = type(v)
            if tv in atomic or (tv in empty and not v) or k in _MODULE_SLOTS:
                continue
            name = prefix + k if type(k) is str else _odd_key(path, k)
            walk(v, name, depth, reason or runtime.get(k, ""))

    def _tensor(self, t: torch.Tensor, path: str, depth: int, reason: str) -> None:
        if id(t) not in self.registered_ids:
            if is_traceable_wrapper_subclass(t):
                names, _ = t.__tensor_flatten__()
                for n in names:
                    self.walk(getattr(t, n), f"{path}.{n}", depth, reason)
            else:
                self._record(t, path, reason)
        d = getattr(t, "__dict__", None)
        if d:
            self._attrs(list(d.items()), path, depth, reason)

    def _dict(self, d: dict[Any, Any], path: str, depth: int, reason: str) -> None:
        for k, v in list(d.items()):
            if type(v) not in _ATOMIC:
                self.walk(v, f"{path}[{k!r}]", depth, reason)

    def _sequence(self, seq: Iterable[Any], path: str, depth: int, reason: str) -> None:
        for i, v in enumerate(list(seq)):
            if type(v) not in _ATOMIC:
                self.walk(v, f"{path}[{i}]", depth, reason)

    def _namedtuple(self, nt: tuple[Any, ...], path: str, depth: int, reason: str) -> None:
        self._attrs(zip(type(nt)._fields, nt, strict=False), path, depth, reason)  # type: ignore[attr-defined]

    def _function(self, f: types.FunctionType, path: str, depth: int, reason: str) -> None:
        if f.__closure__:
            cells = []
            for name, cell in zip(f.__code__.co_freevars, f.__closure__, strict=False):
                try:
                    cells.append((name, cell.cell_contents))
                except ValueError:
                    continue  # an empty cell: the variable is not bound yet
            self._attrs(cells, path, depth, reason)
        extras = [("__defaults__", f.__defaults__), ("__kwdefaults__", f.__kwdefaults__)]
        self._attrs([*extras, *f.__dict__.items()], path, depth, reason)

    def _method(self, m: types.MethodType, path: str, depth: int, reason: str) -> None:
        self.walk(m.__self__, f"{path}.__self__", depth, reason)
        self.walk(m.__func__, path, depth, reason)

    def _builtin(self, b: types.BuiltinMethodType, path: str, depth: int, reason: str) -> None:
        self.walk(b.__self__, f"{path}.__self__", depth, reason)

    def _partial(self, p: functools.partial[Any], path: str, depth: int, reason: str) -> None:
        self.walk(p.func, f"{path}.func", depth, reason)
        for i, a in enumerate(p.args):
            self.walk(a, f"{path}.args[{i}]", depth, reason)
        for k, v in p.keywords.items():
            self.walk(v, f"{path}.keywords[{k!r}]", depth, reason)
        self._attrs(list(p.__dict__.items()), path, depth, reason)

    def _storage(self, s: torch.UntypedStorage, path: str, depth: int, reason: str) -> None:
        untyped = s._untyped_storage if isinstance(s, torch.TypedStorage) else s
        view = torch.empty(0, dtype=torch.uint8, device=untyped.device).set_(untyped)
        self.visited[id(view)] = view  # keeps its id unique for the walk
        self._record(view, path, reason)

    def _holder(self, obj: object, path: str, depth: int, reason: str) -> None:
        for tensor in holder_tensors(obj, path).values():
            for _, leaf in wrapper_leaves("", tensor):
                storage = _storage_of(leaf)
                if storage is not None:
                    self.declared.setdefault((leaf.device, storage[0]), path)
        self._object(obj, path, depth, reason)

    def _object(self, obj: object, path: str, depth: int, reason: str) -> None:
        try:
            d = obj.__dict__
        except AttributeError:
            d = None
        if d:
            self._attrs(list(d.items()), path, depth, reason)
        for name in slot_names(type(obj)):
            try:
                value = getattr(obj, name)
            except AttributeError:
                continue  # an unset slot
            self._attrs(((name, value),), path, depth, reason)

    # Recording: candidates during the walk, coverage once at the end.

    def _alias(self, rec: Found, path: str, t: torch.Tensor, reason: str) -> None:
        if all(p != path for p, _ in rec.views):  # a wrapper's inner tensor is in its __dict__
            rec.views.append((path, t))
        if reason and not rec.reason:
            rec.reason = reason

    def _record(self, t: torch.Tensor, path: str, reason: str) -> None:
        storage = _storage_of(t)
        if storage is None:
            return
        ptr, size = storage
        key = (t.device, ptr)
        rec = self.found.get(key)
        if rec is None:
            self.found[key] = Found(key, [(path, t)], reason, ptr, ptr + size)
        else:
            self._alias(rec, path, t, reason)
        self.tensor_keys[id(t)] = key

    def finish(self) -> list[Found]:
        """The storages with uncovered tensors, keeping only the uncovered views.

        A view is covered when the bytes it views lie within the union of the
        byte ranges that registered tensors view on the same device: through
        the same storage, or through another storage object over the same bytes
        (two ``from_numpy`` of one array, ``from_blob``, DLPack).
        """
        spans = self._registered_spans()
        out = []
        for rec in self.found.values():
            begins, ends = spans.get(rec.key[0], ((), ()))
            rec.views = [(p, t) for p, t in rec.views if not _within(t, begins, ends)]
            if rec.views:
                out.append(rec)
        return out

    def _registered_spans(self) -> dict[torch.device, tuple[list[int], list[int]]]:
        """Per device, the merged byte ranges registered tensors view over candidate storages.

        Only candidates another tensor may share (:func:`_maybe_shared`) are
        looked at. A registered tensor counts when its first byte lies in such a
        candidate's storage (one ``data_ptr()`` and a bisection per tensor), or,
        where a candidate's memory is not torch's own (another storage object
        may begin before it), when any of its bytes do.
        """
        by_device: dict[torch.device, list[Found]] = {}
        for rec in self.found.values():
            if _maybe_shared(rec):
                by_device.setdefault(rec.key[0], []).append(rec)
        out: dict[torch.device, tuple[list[int], list[int]]] = {}
        for device, recs in by_device.items():
            begins, ends = _merge((r.storage_begin, r.storage_end) for r in recs)
            overlap = any(_foreign(r) for r in recs)
            raw: list[tuple[int, int]] = []
            plain = (torch.Tensor, torch.nn.Parameter)
            for r in registered_tensors(self.modules):
                for t in (r,) if type(r) in plain else (leaf for _, leaf in wrapper_leaves("", r)):
                    ptr = t.data_ptr()
                    last = ptr + _extent(t) - 1 if overlap else ptr
                    i = bisect.bisect_right(begins, last) - 1
                    if i < 0 or ptr >= ends[i] or t.device != device:
                        continue
                    if _storage_of(t) is not None:
                        raw.append((ptr, ptr + _extent(t)))
            if raw:
                out[device] = _merge(raw)
        return out


# torch's count of references to a StorageImpl (private; a shortcut only).
_storage_use_count: Callable[[int], int] | None = getattr(torch._C, "_storage_Use_Count", None)


def _foreign(rec: Found) -> bool:
    """Whether ``rec``'s storage wraps memory torch's allocator does not own.

    ``from_numpy``, ``from_blob`` and DLPack storages are not resizable; another
    storage object may view the same bytes.
    """
    try:
        return not rec.tensor.untyped_storage().resizable()
    except (RuntimeError, NotImplementedError, TypeError):
        return False


def _maybe_shared(rec: Found) -> bool:
    """Whether a tensor other than the recorded ones may use ``rec``'s bytes.

    Every tensor using a storage holds a reference to it, and so does the
    Python storage object made here: a count of at most those proves that no
    registered tensor shares the storage, and spares the scan of every
    registered tensor (the common case: a plain unregistered tensor). Memory
    torch does not own may be viewed through another storage object: always
    maybe shared.
    """
    if _storage_use_count is None or _foreign(rec):
        return True
    storage = rec.tensor.untyped_storage()
    known = len({id(t) for _, t in rec.views})
    return _storage_use_count(storage._cdata) > known + 1


def _merge(spans: Iterable[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """Sorted, disjoint ``(begins, ends)`` covering the union of ``spans``."""
    begins: list[int] = []
    ends: list[int] = []
    for b, e in sorted(spans):
        if begins and b <= ends[-1]:
            ends[-1] = max(ends[-1], e)
        else:
            begins.append(b)
            ends.append(e)
    return begins, ends


def _within(t: torch.Tensor, begins: Sequence[int], ends: Sequence[int]) -> bool:
    """Whether the bytes ``t`` views lie within one of the merged spans."""
    begin = t.data_ptr()
    i = bisect.bisect_right(begins, begin) - 1
    return i >= 0 and begin + _extent(t) <= ends[i]
