"""Where a watched graph's model comes from, and the registry the graphs of a watch share.

A watched graph's model is resolved at every epoch from a :class:`ModelSource` (the model
given to the watch, the models an engine plugin registered, or the root modules found on the
capture's device), and its registry comes from a :class:`RegistryCache` shared by every graph
of the watch: an engine captures dozens of graphs of one model, and the census behind the
registry is computed once per check point, not once per graph.

The registry is :func:`graphcheck._model_registry.model_registry`'s (parameters, buffers, census
paths, engine state as runtime spans) plus, on CUDA, the allocation's Python frame from the
caching allocator's history as the label of memory the census does not reach.
"""

from __future__ import annotations

import bisect
import dataclasses
import gc
import weakref
from collections.abc import Callable, Iterable, Sequence

import torch

from graphcheck import _torch
from graphcheck._errors import GraphcheckError, GraphcheckTypeError
from graphcheck._model_registry import EngineState, ModelRegistry, model_registry
from graphcheck._watch.allocator_history import AllocatorFrames

__all__ = [
    "ModelGetter",
    "ModelSource",
    "RegistryCache",
    "Roots",
    "WatchedModels",
    "discover_roots",
    "outside",
    "registered_fingerprint",
    "weak_getter",
]

ModelGetter = Callable[[], "torch.nn.Module | None"]


class Roots(torch.nn.Module):
    """Several models under one root, each under its name (a view: it owns nothing)."""

    def __init__(self, members: Sequence[tuple[str, torch.nn.Module]]) -> None:
        super().__init__()
        for name, module in members:
            self.add_module(name, module)


def weak_getter(model: torch.nn.Module | ModelGetter) -> ModelGetter:
    """A getter that never keeps a module alive (a graph does not own its model)."""
    if isinstance(model, torch.nn.Module):
        ref = weakref.ref(model)
        return ref
    if not callable(model):
        raise GraphcheckTypeError(
            f"graphcheck.watch: a model must be a torch.nn.Module or a callable returning one, "
            f"got {type(model).__qualname__}"
        )
    return model


def discover_roots(device: torch.device) -> list[torch.nn.Module]:
    """Every root ``nn.Module`` (no other module's child) with a parameter on ``device``.

    Found by scanning the garbage collector's objects, in creation order: the
    models of a process that gave the watch none.
    """
    module_type = torch.nn.Module
    # type(), not isinstance(): isinstance reads __class__, which some proxies turn into a call.
    modules = [obj for obj in gc.get_objects() if issubclass(type(obj), module_type)]
    children = {id(c) for m in modules for c in m._modules.values() if c is not None}
    roots = []
    for module in modules:
        if id(module) in children or isinstance(module, Roots):
            continue
        if any(p.device == device for p in module.parameters()):
            roots.append(module)
    return roots


def _unique_names(modules: Sequence[torch.nn.Module]) -> list[tuple[str, torch.nn.Module]]:
    named: list[tuple[str, torch.nn.Module]] = []
    seen: dict[str, int] = {}
    for module in modules:
        base = type(module).__name__
        seen[base] = seen.get(base, 0) + 1
        named.append((base if seen[base] == 1 else f"{base}_{seen[base]}", module))
    return named


class ModelSource:
    """Where a graph's model comes from, resolved anew at every epoch.

    Either fixed members (name -> weak getter: the model given to the watch, or
    what engine plugins registered; one member is used as is, several under a
    container whose children are named by member), or discovery on a device
    (the roots found when the graph was captured, re-found once one of them is
    freed). Holds no strong reference to a model.
    """

    def __init__(
        self,
        members: Sequence[tuple[str, ModelGetter]] = (),
        device: torch.device | None = None,
    ) -> None:
        self._members = list(members)
        self._device = device
        self._found: list[tuple[str, weakref.ReferenceType[torch.nn.Module]]] = []

    @property
    def discovered(self) -> bool:
        """Whether the model is found by discovery rather than given."""
        return not self._members

    def describe(self) -> str:
        """One line for reports: the member names and types, or what discovery found."""
        members = self._live()
        if not members:
            return "no model (nothing registered, nothing found)"
        how = "found on " + str(self._device) if self.discovered else "given"
        return ", ".join(f"{n} ({type(m).__qualname__})" for n, m in members) + f" [{how}]"

    def _live(self) -> list[tuple[str, torch.nn.Module]]:
        if self._members:
            live = [(name, getter()) for name, getter in self._members]
            return [(name, m) for name, m in live if isinstance(m, torch.nn.Module)]
        found = [(name, ref()) for name, ref in self._found]
        if not found or any(m is None for _, m in found):
            roots = discover_roots(self._device or torch.device("cpu"))
            self._found = [(name, weakref.ref(m)) for name, m in _unique_names(roots)]
            found = [(name, ref()) for name, ref in self._found]
        return [(name, m) for name, m in found if m is not None]

    def resolve(self) -> torch.nn.Module | None:
        """The model now: one module, a container of several, or None when none is alive."""
        live = self._live()
        if not live:
            return None
        if len(live) == 1 and (self.discovered or len(self._members) == 1):
            return live[0][1]
        return Roots(live)


class WatchedModels:
    """The models a watch checks its graphs against: those added, else discovered per device.

    Not thread-safe: the watch calls it under its lock. Holds no strong reference to a model.
    """

    def __init__(self) -> None:
        self._members: dict[str, ModelGetter] = {}
        self._discovery: dict[str, ModelSource] = {}

    def add(self, name: str, model: torch.nn.Module | ModelGetter) -> None:
        """Adds ``model`` (a module, weakly held, or a getter) under ``name``; raises for others."""
        self._members[name] = weak_getter(model)

    def given(self) -> ModelSource | None:
        """The models added so far, or None when none was."""
        return ModelSource(list(self._members.items())) if self._members else None

    def source(self, device: torch.device) -> ModelSource:
        """The models added so far, else the roots found on ``device`` (kept per device)."""
        given = self.given()
        if given is not None:
            return given
        key = str(device)
        if key not in self._discovery:  # a source each capture would forget what it found
            self._discovery[key] = ModelSource(device=device)
        return self._discovery[key]


class RegistryCache:
    """The registry of a model, computed once per :meth:`invalidate` and shared by graphs.

    ``invalidate()`` is called at every check point and whenever the watch's models or engine
    state change: the next :meth:`state` takes a fresh census. ``recheck()`` is called at every
    capture: the next :meth:`state` reuses the cached registry when the model's registered
    tensors are the same objects at the same addresses (:func:`registered_fingerprint`, read
    in C++: about a hundredth of the census it saves), else computes it anew. An engine capturing
    dozens of graphs of one model takes one census; a reload that rebinds a parameter between two
    captures is seen at the next one. A plain attribute rebound between two captures, with no
    parameter or buffer changed, keeps its previous census path until the next check point
    (the new storage is still judged, named by its allocation until then; a runtime-state
    attribute such as a KV cache first bound between two captures is judged unregistered until
    then). The cached registry holds the model's parameters and buffers, so it is dropped
    at :meth:`invalidate` and as soon as one of its modules dies (a weak reference's
    callback, which takes no lock): a model the engine dropped takes its weights with it. Not
    thread-safe otherwise: the watch calls it under its lock.
    """

    def __init__(self) -> None:
        self._token = 0
        self._key: tuple[int, int, tuple[int, ...], object] | None = None
        self._scope: object = None
        self._state: ModelRegistry | None = None
        self._spans: _torch.RegistrySpans | None = None
        #: Weak references to the cached registry's modules: the first to die drops it.
        self._alive: tuple[weakref.ref[torch.nn.Module], ...] = ()
        self._fingerprint = b""
        self._recheck = False
        self.computed = 0  # registries computed so far (each a census): for tests and benches
        self.engine_states: list[EngineState] = []
        #: The allocator history's frames (``AllocatorHistory.sites``): labels of memory the
        #: census does not reach, and torch's own graph state as runtime ranges.
        self.site_labels: Callable[[], AllocatorFrames] | None = None
        #: Whether the cached registry's labels hold Python frames (``site_labels``' ranges).
        self.frames = False

    def invalidate(self) -> None:
        """Forget the cached registry: the next graph or epoch computes it anew."""
        self._token += 1
        self._drop()

    def _drop(self) -> None:
        # The registry holds the model's parameters and buffers: kept past the model's life,
        # it kept a dropped model's weights alive until the next census.
        self._state = self._spans = None
        self._key, self._alive = None, ()

    def recheck(self, scope: object = None) -> None:
        """The next :meth:`state` reuses the cached registry only if the model is unchanged.

        ``scope``: what else the cached registry must have been computed for (the watch: the
        capture's device and how many graphs were freed so far, the allocator history's
        runtime ranges being that device's as of then); another computes it anew.
        """
        self._recheck = True
        self._scope = scope

    def state(self, model: torch.nn.Module) -> ModelRegistry:
        """The registry of ``model`` now (cached until the next :meth:`invalidate`)."""
        members = tuple(id(m) for m in model.children()) if isinstance(model, Roots) else ()
        key = (self._token, id(model), members, self._scope)
        recheck, self._recheck = self._recheck, False
        if self._key == key and self._state is not None:
            if not recheck:
                return self._state
            fingerprint = registered_fingerprint(model)
            if fingerprint == self._fingerprint:
                return self._state
        else:
            fingerprint = registered_fingerprint(model)
        self._alive = ()  # from here, no older registry's callback drops this one
        state = self._compute(model)
        roots = list(model.children()) if isinstance(model, Roots) else [model]  # Roots: a view
        alive = tuple(weakref.ref(m, self._died) for m in roots)
        self._state, self._spans, self._key, self._fingerprint = state, None, key, fingerprint
        self._alive = alive
        self.computed += 1
        return state

    def _died(self, ref: weakref.ref[torch.nn.Module]) -> None:
        # A weak reference's callback: it runs wherever the collector runs, so it takes no
        # lock; a registry computed since then holds other references and stays.
        if ref in self._alive:
            self._drop()

    def spans(self) -> _torch.RegistrySpans:
        """The registry :meth:`state` returned last, as spans (made once per registry).

        Call it right after :meth:`state` with a recheck: the spans are read from the
        tensors when first asked for, and the fingerprint that kept the registry (data
        addresses and storage sizes) says they are the same as at its census.
        """
        if self._state is None:
            raise GraphcheckError("RegistryCache.spans: no registry yet; call state() first")
        if self._spans is None:
            state = self._state
            self._spans = _torch.RegistrySpans(
                state.parameters, state.buffers, state.runtime_ranges, state.labels
            )
        return self._spans

    def _compute(self, model: torch.nn.Module) -> ModelRegistry:
        registry = model_registry(model, self.engine_states)
        frames = self.site_labels() if self.site_labels else AllocatorFrames()
        sites = outside(frames.labels, registry.labels)
        self.frames = bool(sites)
        if not sites and not frames.runtime:
            return registry
        return dataclasses.replace(
            registry,
            labels=registry.labels + sites,
            runtime_ranges=registry.runtime_ranges + frames.runtime,
        )


def registered_fingerprint(model: torch.nn.Module) -> bytes:
    """Which modules, parameters and buffers ``model`` holds, and where their data lives.

    Equal fingerprints mean no module, parameter or buffer was added, removed, rebound,
    given new data (``param.data = ...``) or a storage of another size in between: the
    registry's spans are the same.
    A tensor whose data pointer cannot be read (a wrapper subclass) counts by identity only.
    Read in C++ (``graphcheck._torch``): the watch asks it at every capture. Raises
    :class:`graphcheck.GraphcheckTypeError` for anything but a module.
    """
    if not isinstance(model, torch.nn.Module):
        raise GraphcheckTypeError(
            f"registered_fingerprint: expected a torch.nn.Module, got {type(model).__name__}"
        )
    try:
        return _torch.registered_fingerprint(model)
    except TypeError:
        # A TorchScript module keeps its tensors in wrappers, not dicts, which the C++ walk
        # refuses (Watch.capture refused a scripted model graphcheck.capture takes): the same
        # facts through the module API, slower.
        return _fingerprint_by_api(model)


def _fingerprint_by_api(model: torch.nn.Module) -> bytes:
    """:func:`registered_fingerprint` read through ``named_modules`` and ``named_*`` calls."""
    words: list[object] = []
    for path, module in model.named_modules(remove_duplicate=True):
        words += ["module", path, id(module)]
        for name, tensor in (*module.named_parameters(recurse=False),
                             *module.named_buffers(recurse=False)):  # fmt: skip
            words += [name, id(tensor), *_data_place(tensor)]
    return repr(words).encode()


def _data_place(tensor: torch.Tensor) -> tuple[int, int]:
    try:
        return tensor.data_ptr(), tensor.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):
        return -1, 0  # no readable data: by identity only, as the C++ walk counts it


def outside(
    candidates: Iterable[tuple[int, int, str]], taken: Sequence[tuple[int, int, str]]
) -> list[tuple[int, int, str]]:
    """The candidate label ranges that overlap none of ``taken`` (census paths win)."""
    merged: list[list[int]] = []  # disjoint, sorted: the one starting last before `end` decides
    for b, e in sorted((b, e) for b, e, _ in taken):
        if merged and b <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([b, e])
    begins = [b for b, _ in merged]
    kept = []
    for begin, end, label in candidates:
        i = bisect.bisect_left(begins, end)
        if i and merged[i - 1][1] > begin:
            continue
        kept.append((begin, end, label))
    return kept
