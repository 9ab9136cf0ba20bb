"""Helpers shared by the package's modules (private module, public names). Imports torch."""

from __future__ import annotations

import fnmatch
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from graphcheck import _core

__all__ = [
    "MODEL_FILES",
    "PathGlob",
    "clone_tensors",
    "compare_tensors",
    "internal_prefixes",
    "is_internal_file",
    "name_glob_regex",
    "named_storage_leaves",
    "storage_leaves",
    "wrapper_leaves",
]


class PathGlob:
    """A path glob: ``*`` within one path component, ``**`` across them, literal brackets.

    ``*`` matches any run of characters but ``.`` (so ``layers.*.scale`` names the layers'
    own attribute, never ``layers.0.mlp.experts.3.scale``), ``**`` any run at all (every
    depth), ``?`` one character but ``.``. ``[`` and ``]`` match themselves, so that paths
    such as ``experts[0].weight`` can be pasted as they are. The census's allowlist and the
    zoo's allowlist read globs this way, matched by the checker's own matcher
    (``_core.glob_matches``, docs/verdicts.md), in time linear in the glob times the path:
    a translation to a regular expression backtracked exponentially on a run of ``*`` (a
    hostile tester's allowlist line of 40 stars hung the census).
    """

    __slots__ = ("pattern",)

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    def fullmatch(self, name: str) -> bool:
        """True if the glob matches the whole of ``name``."""
        return _core.glob_matches(self.pattern, name)

    def __repr__(self) -> str:
        return f"PathGlob({self.pattern!r})"


def name_glob_regex(glob: str) -> re.Pattern[str]:
    """Compile a name glob: fnmatch's ``*`` (anything, dots included) and ``?``, literal brackets.

    For names that are not paths (the zoo's ``--only`` over ``Arch@option=value`` names,
    whose values may hold dots).
    """
    return re.compile(fnmatch.translate(glob.replace("[", "[[]")))


# ------------------------------------------------------------------- wrapper tensor subclasses


def wrapper_leaves(name: str, tensor: torch.Tensor) -> Iterator[tuple[str, torch.Tensor]]:
    """The tensors behind ``tensor``, named as the census names them.

    A traceable wrapper subclass (``__tensor_flatten__``, as TorchAO's) owns no storage: its
    inner tensors do, recursively, named ``name.attr`` (``attr`` alone when ``name`` is
    empty). Any other tensor (parameters included) is its own leaf, meta and sparse ones too.
    """
    if (
        type(tensor) is not torch.Tensor
        and type(tensor) is not torch.nn.Parameter
        and is_traceable_wrapper_subclass(tensor)
    ):
        attrs, _ = tensor.__tensor_flatten__()
        for attr in attrs:
            yield from wrapper_leaves(f"{name}.{attr}" if name else attr, getattr(tensor, attr))
    else:
        yield name, tensor


def storage_leaves(name: str, tensor: torch.Tensor) -> Iterator[tuple[str, torch.Tensor]]:
    """The leaves of ``tensor`` (:func:`wrapper_leaves`) that have memory: strided, not meta.

    Nor a leaf whose storage has no readable data (a wrapper subclass that does not flatten,
    a ZeroTensor): torch's "invalid python storage" error made every capture of a model with
    one among its buffers, or as a global of its module, fail (a hostile tester's finding).
    """
    for leaf_name, leaf in wrapper_leaves(name, tensor):
        if leaf.layout == torch.strided and not leaf.is_meta and _has_data(leaf):
            yield leaf_name, leaf


def _items(container: Any, path: str) -> Iterator[tuple[str, Any]]:
    """A list's, tuple's or mapping's items, each with its path (``x[0]``, ``x['k']``)."""
    if isinstance(container, Mapping):
        for key, item in container.items():
            yield f"{path}[{key!r}]", item
    else:
        for i, item in enumerate(container):
            yield f"{path}[{i}]", item


def input_tensors(value: Any, name: str) -> Iterator[tuple[str, torch.Tensor]]:
    """Tensors with storage in a forward argument, named ``args[0]``, ``x['k'][1]``.

    Depth first, in order, without recursion: a list that holds itself (or nesting deeper
    than Python's recursion limit) is read once, not a RecursionError before the capture.
    """
    stack: list[Iterator[tuple[str, Any]]] = [iter(((name, value),))]
    entered: set[int] = set()  # containers on the way or done: each is read once
    while stack:
        item = next(stack[-1], None)
        if item is None:
            stack.pop()
            continue
        path, obj = item
        if isinstance(obj, torch.Tensor):
            for leaf_name, leaf in storage_leaves(path, obj):
                if leaf.untyped_storage().nbytes() > 0:
                    yield leaf_name, leaf
        elif isinstance(obj, (list, tuple, Mapping)) and id(obj) not in entered:
            entered.add(id(obj))
            stack.append(_items(obj, path))


def _has_data(tensor: torch.Tensor) -> bool:
    try:
        tensor.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return False
    return True


def named_storage_leaves(
    named: Iterable[tuple[str, torch.Tensor | None]],
) -> list[tuple[str, torch.Tensor]]:
    """:func:`storage_leaves` of each named tensor (``None`` slots skipped), in order."""
    return [leaf for name, t in named if t is not None for leaf in storage_leaves(name, t)]


# --------------------------------------------------------------------------- outputs


def clone_tensors(output: Any) -> Any:
    """``output`` with every tensor leaf (of lists, tuples, dicts: a pytree) cloned."""
    return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, output)


def compare_tensors(replayed: Any, eager: Any, *, equal_nan: bool = False) -> tuple[bool, float]:
    """Whether every tensor leaf is equal, and the largest absolute difference.

    NaN never equals NaN (a level-2 sleep's poison must not look right), unless
    ``equal_nan``: then NaN at the same position on both sides is equal and left
    out of the difference, which stays NaN where only one side has NaN. Leaves of other
    shapes, or another number of leaves, are unequal with an infinite difference.
    """
    left = [t for t in pytree.tree_leaves(replayed) if isinstance(t, torch.Tensor)]
    right = [t for t in pytree.tree_leaves(eager) if isinstance(t, torch.Tensor)]
    if len(left) != len(right):
        return False, math.inf
    equal, worst = True, 0.0
    for a, b in zip(left, right, strict=True):
        if a.shape != b.shape:
            return False, math.inf
        if equal_nan:
            both = torch.isnan(a) & torch.isnan(b)
            a, b = a.masked_fill(both, 0), b.masked_fill(both, 0)
        equal = equal and torch.equal(a, b)
        if a.numel():
            diff = float((a.detach().double() - b.detach().double()).abs().max())
            worst = diff if math.isnan(diff) or math.isnan(worst) else max(worst, diff)
    return equal, worst


# ------------------------------------------------------------------------ allocation sites

#: The package's files whose frames are allocation sites although they are graphcheck's: the
#: models it ships (graphcheck.reference), which are models like any user's.
MODEL_FILES = ("reference.py",)


def internal_prefixes() -> tuple[str, ...]:
    """Path prefixes of the files whose stack frames are machinery, not allocation sites.

    The one rule for "graphcheck's own frames", used by the weights arena (its Python
    allocation sites) and the watch (the caching allocator's frames): torch's package, and
    every file and folder of graphcheck's package except :data:`MODEL_FILES`. An allocation is
    labelled with the innermost frame outside these.
    """
    package = os.path.dirname(os.path.abspath(__file__))
    prefixes = [os.path.dirname(os.path.abspath(torch.__file__)) + os.sep]
    for entry in sorted(os.listdir(package)):
        if entry in MODEL_FILES:
            continue
        path = os.path.join(package, entry)
        prefixes.append(path + os.sep if os.path.isdir(path) else path)
    return tuple(prefixes)


def is_internal_file(filename: str, prefixes: Iterable[str]) -> bool:
    """Whether a frame of ``filename`` is machinery: under one of ``prefixes``, or frozen code.

    Frozen importlib (``<frozen ...>``) is machinery; other synthetic names (``<string>``,
    code run with ``exec``) are the user's. The same test as the arena's in C++
    (python/torch_arena.cc).
    """
    return filename.startswith(tuple(prefixes)) or filename.startswith("<frozen ")
