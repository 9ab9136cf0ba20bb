"""The registry of a model: what it says about memory now, as a capture's epoch takes it.

Shared by :func:`graphcheck.capture` (``graphcheck._capture``) and the watch's registry cache
(``graphcheck._watch.registry``), which computes it once per check point for every graph of a
model. The registry is the model's parameters and buffers (wrapper subclasses flattened), the
runtime state its census finds by attribute name, the census paths of its unregistered
tensors (as labels) and the storages engine objects hold outside it (:class:`EngineState`,
as runtime ranges).
"""

from __future__ import annotations

import dataclasses
import functools
import sys
import weakref
from collections.abc import Callable, Iterable

import torch

from graphcheck._census import census
from graphcheck._utils import named_storage_leaves, storage_leaves

__all__ = ["ENGINE_STATE_REASON", "EngineState", "ModelRegistry", "model_registry"]

#: The reason engine state is exempt (runtime) unless an engine plugin gives another.
ENGINE_STATE_REASON = (
    "held by the engine outside the model (static graph inputs, KV caches, scratch): the "
    "engine refills it, the contract does not cover it"
)


@dataclasses.dataclass(frozen=True)
class EngineState:
    """An engine object whose tensors outside the model are runtime state (weakly held).

    Attributes:
        name: the prefix of its tensors' paths (``model_runner``).
        ref: returns the object, or None once it was freed.
        reason: why its tensors are exempt.
    """

    name: str
    ref: Callable[[], object]
    reason: str

    @classmethod
    def of(cls, name: str, obj: object, reason: str = ENGINE_STATE_REASON) -> EngineState:
        """``obj`` as engine state named ``name``: weakly held where its type allows it."""
        try:
            ref: Callable[[], object] = weakref.ref(obj)
        except TypeError:  # no __weakref__ slot (a dict, a tuple): held strongly
            ref = functools.partial(_same, obj)
        return cls(name, ref, reason)


def _same(obj: object) -> object:
    return obj


@dataclasses.dataclass(frozen=True)
class ModelRegistry:
    """What the model says about memory now, as ``CaptureRecord.epoch`` takes it.

    Attributes:
        parameters: the parameters by module path (wrapper subclasses flattened).
        buffers: the buffers by module path.
        runtime_ranges: ``(begin, end, name, reason)`` of the runtime state the census found
            by attribute name and of the engine state.
        labels: ``(begin, end, label)`` naming memory the registry does not cover (census
            paths of unregistered tensors; the watch adds allocation frames).
        aliases: the other census paths that reach a label's storage, by label (a table
            shared by every layer is labelled by the first layer's path): only labels with any.
    """

    parameters: list[tuple[str, torch.Tensor]]
    buffers: list[tuple[str, torch.Tensor]]
    runtime_ranges: list[tuple[int, int, str, str]]
    labels: list[tuple[int, int, str]]
    aliases: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)


def model_registry(model: torch.nn.Module, engine_states: Iterable[EngineState]) -> ModelRegistry:
    """The registry of ``model`` now: its tensors, census paths and the engine state's ranges.

    The census of ``model`` names its unregistered tensors (labels) and its runtime state by
    attribute name; each live engine state adds the storages reachable from it as runtime
    ranges named ``name.path``, except those the model's census found unregistered: an engine
    object that holds the model never hides a finding of it.
    """
    found = census(model)
    reached = (*found.entries, *found.allowed)
    runtime = [(e.storage_begin, e.storage_end, e.path, e.reason) for e in found.exempt]
    unregistered = {(e.storage_begin, e.storage_end) for e in reached}
    for state in engine_states:
        obj = state.ref()
        if obj is not None:
            runtime += _engine_ranges(obj, state, unregistered)
    parameters = named_storage_leaves(model.named_parameters())
    buffers = named_storage_leaves(model.named_buffers())
    labels = [(e.storage_begin, e.storage_end, e.path) for e in reached]
    known = {_span(t) for _, t in (*parameters, *buffers)} | unregistered
    known |= {(begin, end) for begin, end, _, _ in runtime}
    labels += _global_labels(model, known)
    return ModelRegistry(
        [(text_name(n), t) for n, t in parameters],
        [(text_name(n), t) for n, t in buffers],
        [(b, e, text_name(n), text_name(r)) for b, e, n, r in runtime],
        [(b, e, text_name(n)) for b, e, n in labels],
        {text_name(e.path): tuple(map(text_name, e.aliases)) for e in reached if e.aliases},
    )


def text_name(name: str) -> str:
    """``name`` as text the C++ side takes, its lone surrogates escaped.

    A name decoded from bytes that are not UTF-8 holds a lone surrogate, which failed the
    capture with pybind11's "incompatible function arguments" and a dump of every parameter
    (a hostile tester's finding); it becomes its backslash escape. Other names are returned
    as they are.
    """
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return name.encode("utf-8", "backslashreplace").decode("utf-8")
    return name


def _span(tensor: torch.Tensor) -> tuple[int, int]:
    storage = tensor.untyped_storage()
    return storage.data_ptr(), storage.data_ptr() + storage.nbytes()


def _global_labels(
    model: torch.nn.Module, known: set[tuple[int, int]]
) -> list[tuple[int, int, str]]:
    """Labels ``global <module>.<name>`` for the tensors the model's code keeps as module globals.

    The census walks what the model holds, never module globals (a global is no model
    state: sleep does not touch it, no registry lists it). A forward may still read one (a
    constant such as ``EPS = torch.tensor(...)`` at module level); naming it by the module
    that defines it, instead of by the op that first read it, makes a finding name its site.
    Only the modules that define the model's classes are read, and tensors directly in them.
    """
    names = sorted({type(m).__module__ for m in model.modules()})
    found: list[tuple[int, int, str]] = []
    for name in names:
        module = sys.modules.get(name)
        for attribute, value in sorted(vars(module).items()) if module is not None else ():
            if not isinstance(value, torch.Tensor) or isinstance(value, torch.nn.Parameter):
                continue
            for leaf_name, leaf in storage_leaves(f"global {name}.{attribute}", value):
                span = _span(leaf)
                if span[1] > span[0] and span not in known:
                    known.add(span)
                    found.append((*span, leaf_name))
    return found


def _engine_ranges(
    obj: object, state: EngineState, unregistered: set[tuple[int, int]]
) -> list[tuple[int, int, str, str]]:
    """Storages reachable from an engine object, as runtime ranges named ``name.path``.

    The walk reaches the model too (a runner holds it): its parameters and buffers get spans
    first (registered tensors take precedence), and storages the model's census found
    unregistered are left out.
    """
    holder = torch.nn.Module()
    holder.__dict__[state.name] = obj
    found = census(holder, runtime_attrs={state.name: state.reason})
    return [
        (e.storage_begin, e.storage_end, e.path, state.reason)
        for e in (*found.exempt, *found.entries)
        if (e.storage_begin, e.storage_end) not in unregistered
    ]
