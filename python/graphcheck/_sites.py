"""Creation sites: where each tensor a capture reads was made, for memory no attribute reaches.

Re-exported as ``graphcheck.record_sites``. Imports torch.

Inside :func:`record_sites` (and during :func:`graphcheck.capture`'s warm-up forwards) a
``TorchFunctionMode`` notes, for every tensor a torch function returns whose storage it has not
seen, the innermost Python frame outside torch and graphcheck (the rule of
``graphcheck._utils.internal_prefixes``, as the weights arena's), keyed by the storage's
address and held with a weak reference to the storage, so that a freed storage's address,
reused by another one, is never mistaken for it. A mode sees the call where it is made in
Python, on any device, and leaves the allocator alone: the weights arena's site allocator
cannot serve a forward (CPU kernels such as gelu's take raw scratch memory from the current
allocator, which needs a raw deleter that allocator has not).

When a capture makes an epoch, :func:`label_sites` gives every allocation still labelled
``aten:<op>`` (first seen in the capture window, allocated before it) whose storage was noted
its site: ``transformers/models/beit/modeling_beit.py:213 in
BeitRelativePositionBias.generate_relative_position_index (cached:
BeitRelativePositionBias.generate_relative_position_index)``. The path is relative to
site-packages (as the census' sites are) where the file lies there; ``(cached: name)`` is
appended when the frame's function is what a ``functools.lru_cache``/``functools.cache``
wraps (also through ``functools.wraps`` wrappers and ``staticmethod``, as transformers'
``compile_compatible_method_lru_cache``): the cache keeps the tensor, so nothing in the model
does. Labels of Python frames a weights arena gave get the same short path.
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import sys
import threading
import types
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.multiprocessing.reductions import StorageWeakRef
from torch.overrides import TorchFunctionMode

from graphcheck import _core
from graphcheck._utils import internal_prefixes, is_internal_file, storage_leaves

__all__ = ["cached_name", "label_sites", "record_sites", "short_path"]

_PACKAGE_DIRS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
# A Python frame label: "file:line in qualname" (the arena's, and ours before shortening).
_FRAME_LABEL = re.compile(r"(?P<file>.+):(?P<line>\d+) in (?P<function>.+)")
# How many objects the search for a function's cache visits (wrappers, closure cells).
_CACHE_SEARCH_LIMIT = 32
# torch's weak reference to a storage (``expired()``, ``cdata``), untyped there.
_WEAK_REF: Any = StorageWeakRef


def _qualname(code: types.CodeType) -> str:
    """The function's qualified name (Python 3.11+), else its name, as the arena's labels."""
    return str(getattr(code, "co_qualname", code.co_name))


class _Site:
    """A noted storage: a weak reference to it and the frame that made it."""

    __slots__ = ("code", "line", "ref")

    def __init__(self, ref: Any, code: types.CodeType, line: int) -> None:
        self.ref = ref
        self.code = code
        self.line = line


class _Sites:
    """The process's noted storages by address; pruned of freed ones as it grows."""

    def __init__(self) -> None:
        self.by_address: dict[int, _Site] = {}
        self.prune_at = 4096
        self.prefixes = internal_prefixes()
        self.internal: dict[str, bool] = {}  # file -> machinery (cached: one test per file)

    def frame(self) -> tuple[types.CodeType, int] | None:
        """The innermost frame outside torch and graphcheck of this thread, or None."""
        frame: types.FrameType | None = sys._getframe(1)
        while frame is not None:
            code = frame.f_code
            internal = self.internal.get(code.co_filename)
            if internal is None:
                internal = is_internal_file(code.co_filename, self.prefixes)
                self.internal[code.co_filename] = internal
            if not internal:
                return code, frame.f_lineno
            frame = frame.f_back
        return None

    def note(self, out: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Notes the storages a torch call made, with the frame that made the call.

        Those of ``out`` not noted yet and not an argument's: a view or an in-place op returns
        an argument's storage, made elsewhere (perhaps before any recording).
        """
        arguments: set[int] | None = None
        for tensor in _tensors(out):
            for address, storage in _storages(tensor):
                known = self.by_address.get(address)
                if known is not None and not known.ref.expired():
                    continue
                if arguments is None:
                    arguments = _argument_addresses(args, kwargs)
                if address in arguments:
                    continue
                where = self.frame()
                if where is None:
                    continue
                self.by_address[address] = _Site(_WEAK_REF(storage), *where)
                if len(self.by_address) >= self.prune_at:
                    self.prune()

    def prune(self) -> None:
        self.by_address = {a: s for a, s in self.by_address.items() if not s.ref.expired()}
        self.prune_at = max(4096, 2 * len(self.by_address))

    def find(self, address: int) -> _Site | None:
        """The site of the live storage that starts at ``address``, or None.

        A noted storage that was freed, or whose bytes moved since (``resize_``, ``set_``),
        does not own the address any more: another storage may lie there now.
        """
        site = self.by_address.get(address)
        if site is None or site.ref.expired():
            return None
        storage: Any = torch.UntypedStorage._new_with_weak_ptr(site.ref.cdata)  # None if freed
        return site if storage is not None and storage.data_ptr() == address else None


_SITES = _Sites()
_LOCAL = threading.local()  # torch's function mode stack is per thread, so is the depth


# The helpers below run on every torch call while recording: lists, no generators.


def _tensors(value: Any) -> list[torch.Tensor]:
    """The tensors ``value`` is or holds directly (a tuple's, a list's, a dict's values)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [item for item in value if isinstance(item, torch.Tensor)]
    if isinstance(value, dict):
        return [item for item in value.values() if isinstance(item, torch.Tensor)]
    return []


def _storages(tensor: torch.Tensor) -> list[tuple[int, torch.UntypedStorage]]:
    """``(address, storage)`` of each storage of ``tensor`` that has memory."""
    if type(tensor) is torch.Tensor or type(tensor) is torch.nn.Parameter:
        if tensor.layout != torch.strided or tensor.is_meta:
            return []
        leaves = [tensor]
    else:  # a wrapper subclass by its inner tensors
        leaves = [leaf for _, leaf in storage_leaves("", tensor)]
    found = []
    for leaf in leaves:
        try:
            storage = leaf.untyped_storage()
            address = storage.data_ptr()
        except (RuntimeError, NotImplementedError):  # no storage (functional, fake)
            continue
        if address:
            found.append((address, storage))
    return found


def _argument_addresses(args: tuple[Any, ...], kwargs: dict[str, Any]) -> set[int]:
    """The storage addresses of a call's tensor arguments (also in lists: ``torch.cat``)."""
    return {
        address
        for value in (*args, *kwargs.values())
        for tensor in _tensors(value)
        for address, _ in _storages(tensor)
    }


class _SiteMode(TorchFunctionMode):
    """Notes the storage of every tensor a torch function returns (the mode of record_sites)."""

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        _SITES.note(out, args, kwargs)
        return out


@contextlib.contextmanager
def record_sites() -> Iterator[None]:
    """Record where every tensor made while the ``with`` block runs was created.

    ``with graphcheck.record_sites(): model = build(); model(x)``: a capture of that model
    then labels memory that neither a registered owner nor the census reaches (a tensor a
    ``functools.lru_cache`` or a module global keeps) with its creation site instead of the
    ATen op that first read it: ``file:line in function`` (the innermost frame outside torch
    and graphcheck; the path relative to site-packages), with ``(cached: qualname)`` for a
    cached function's result. :func:`graphcheck.capture` records its warm-up forwards this
    way itself; wrap the model's construction, and any forward run before the capture, to
    name what they create. The sites stay known while their storages live (held weakly).

    Records the calling thread's torch calls, any device, through a ``TorchFunctionMode``
    (a few microseconds per torch call while the block runs; nested blocks record once).
    """
    depth = getattr(_LOCAL, "depth", 0)
    _LOCAL.depth = depth + 1
    try:
        if depth:
            yield
        else:
            with _SiteMode():
                yield
    finally:
        _LOCAL.depth = depth


# ----------------------------------------------------------------------------------- labels


def short_path(path: str) -> str:
    """``path`` relative to the site-packages (or dist-packages) folder it lies in, if any."""
    for marker in _PACKAGE_DIRS:
        head, found, tail = path.rpartition(marker)
        if found and head:
            return tail
    return path


def _module_of(filename: str) -> types.ModuleType | None:
    for module in list(sys.modules.values()):
        if getattr(module, "__file__", None) == filename:
            return module
    return None


def _is_cache(obj: object) -> bool:
    """A ``functools.lru_cache``/``cache`` wrapper (asked of its type: no instance hooks run)."""
    return callable(getattr(type(obj), "cache_info", None)) and hasattr(obj, "__wrapped__")


def _wraps_code(obj: object, code: types.CodeType) -> bool:
    try:
        inner = inspect.unwrap(obj)  # type: ignore[arg-type]
    except ValueError:  # a cycle of __wrapped__
        return False
    return getattr(inner, "__code__", None) is code


def _cache_of(obj: object, code: types.CodeType) -> object | None:
    """The cache among ``obj``, what it wraps and its closure that wraps ``code``, or None."""
    todo, seen = [obj], set[int]()
    while todo and len(seen) < _CACHE_SEARCH_LIMIT:
        item = todo.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, (staticmethod, classmethod, types.MethodType)):
            todo.append(item.__func__)
            continue
        if _is_cache(item) and _wraps_code(item, code):
            return item
        wrapped = getattr(item, "__wrapped__", None) if callable(item) else None
        if wrapped is not None:
            todo.append(wrapped)
        for cell in getattr(item, "__closure__", None) or ():
            with contextlib.suppress(ValueError):  # an empty cell
                value = cell.cell_contents
                if isinstance(value, types.FunctionType) or _is_cache(value):
                    todo.append(value)
    return None


_CACHED_NAMES: dict[types.CodeType, str | None] = {}


def cached_name(code: types.CodeType) -> str | None:
    """The qualified name of the cache that wraps the function of ``code``, or None.

    Found by name: the module that defined the file, then the function's qualified name in
    it (a module function, a method or static method of a class); a function defined inside
    another one (``<locals>``) is not found.
    """
    if code in _CACHED_NAMES:
        return _CACHED_NAMES[code]
    found: str | None = None
    parts = _qualname(code).split(".")
    module = _module_of(code.co_filename)
    if module is not None and "<locals>" not in parts:
        owner: object = module
        for part in parts[:-1]:
            owner = inspect.getattr_static(owner, part, None)
        holder = inspect.getattr_static(owner, parts[-1], None) if owner is not None else None
        cache = _cache_of(holder, code) if holder is not None else None
        if cache is not None:
            found = str(getattr(cache, "__qualname__", _qualname(code)))
    _CACHED_NAMES[code] = found
    return found


def _label(code: types.CodeType, line: int) -> str:
    label = f"{short_path(code.co_filename)}:{line} in {_qualname(code)}"
    cached = cached_name(code)
    return f"{label} (cached: {cached})" if cached is not None else label


def label_sites(epoch: _core.Epoch, *, frames: bool = True) -> _core.Epoch:
    """Relabels ``epoch``'s allocations in place by creation site; returns ``epoch``.

    An allocation labelled ``aten:<op>`` whose storage was noted gets its site; a weights
    arena's (or the CUDA allocator history's) Python frame label gets its path shortened.
    Census paths stay. ``frames=False`` says no allocation can carry a frame label: with no
    site noted either, nothing is read (the CPU twin's captures of a model loaded without
    recording take this path).
    """
    if not frames and not _SITES.by_address:
        return epoch
    allocations = epoch.allocations
    changed = False
    for allocation in allocations:
        label = allocation.label
        new = label
        if label.startswith("aten:"):
            site = _SITES.find(allocation.begin)
            if site is not None:
                new = _label(site.code, site.line)
        elif (frame := _FRAME_LABEL.fullmatch(label)) is not None:
            new = f"{short_path(frame['file'])}:{frame['line']} in {frame['function']}"
        if new != label:
            allocation.label = new
            changed = True
    if changed:
        epoch.allocations = allocations
    return epoch
