"""The graphs :func:`graphcheck.watch` records, and the registry they are checked against.

Private to :mod:`graphcheck._watch`. A :class:`WatchedCapture` is a
:class:`graphcheck.Capture` whose model is resolved at every epoch from a
:class:`ModelSource` (the model given to the watch, the models an engine plugin
registered, or the root modules found on the capture's device) and whose
registry comes from a :class:`RegistryCache` shared by every graph of the watch:
an engine captures dozens of graphs of one model, and the census behind the
registry is computed once per check point, not once per graph.

The registry adds to :class:`~graphcheck.Capture`'s: engine state (tensors an
engine object such as a model runner holds outside the model: static inputs,
KV caches, scratch) as runtime spans, and, on CUDA, the allocation's Python
frame from the caching allocator's history as the label of memory the census
does not reach.
"""

from __future__ import annotations

import bisect
import dataclasses
import gc
import os
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch

from graphcheck import _core

#: The reason engine state is exempt (runtime) unless the plugin gives another.
ENGINE_STATE_REASON = (
    "held by the engine outside the model (static graph inputs, KV caches, scratch): the "
    "engine refills it, the contract does not cover it"
)

ModelGetter = Callable[[], "torch.nn.Module | None"]


class _Roots(torch.nn.Module):
    """Several models under one root, each under its name (a view: it owns nothing)."""

    def __init__(self, members: Sequence[tuple[str, torch.nn.Module]]) -> None:
        super().__init__()
        for name, module in members:
            self.add_module(name, module)


def _weak_getter(model: torch.nn.Module | ModelGetter) -> ModelGetter:
    """A getter that never keeps a module alive (a graph does not own its model)."""
    if isinstance(model, torch.nn.Module):
        ref = weakref.ref(model)
        return ref
    if not callable(model):
        raise TypeError(
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
        if id(module) in children or isinstance(module, _Roots):
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
        return _Roots(live)


@dataclasses.dataclass
class EngineState:
    """An engine object whose tensors outside the model are runtime state (weakly held)."""

    name: str
    ref: Callable[[], object]
    reason: str


def _engine_ref(obj: object) -> Callable[[], object]:
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


@dataclasses.dataclass(frozen=True)
class RegistryState:
    """The model-derived part of a registry, as ``CaptureRecord.epoch`` takes it."""

    parameters: list[tuple[str, torch.Tensor]]
    buffers: list[tuple[str, torch.Tensor]]
    runtime_ranges: list[tuple[int, int, str, str]]
    labels: list[tuple[int, int, str]]


class RegistryCache:
    """The registry of a model, computed once per :meth:`invalidate` and shared by graphs.

    ``invalidate()`` is called at every check point and whenever the watch's
    models or engine state change: between two calls the model is taken as
    unchanged (an engine capturing its graphs one after another). Not
    thread-safe: the watch calls it under its lock.
    """

    def __init__(self) -> None:
        self._token = 0
        self._key: tuple[Any, ...] | None = None
        self._state: RegistryState | None = None
        self.engine_states: list[EngineState] = []
        self.site_labels: Callable[[], list[tuple[int, int, str]]] | None = None

    def invalidate(self) -> None:
        """Forget the cached registry: the next graph or epoch computes it anew."""
        self._token += 1

    def state(self, model: torch.nn.Module) -> RegistryState:
        """The registry of ``model`` now (cached until the next :meth:`invalidate`)."""
        members = tuple(id(m) for m in model.children()) if isinstance(model, _Roots) else ()
        key = (self._token, id(model), members)
        if self._key != key or self._state is None:
            self._state = self._compute(model)
            self._key = key
        return self._state

    def _compute(self, model: torch.nn.Module) -> RegistryState:
        from graphcheck.arena import _leaves
        from graphcheck.census import census

        found = census(model)
        unregistered = {(e.storage_begin, e.storage_end) for e in (*found.entries, *found.allowed)}
        runtime = [(e.storage_begin, e.storage_end, e.path, e.reason) for e in found.exempt]
        for state in self.engine_states:
            obj = state.ref()
            if obj is not None:
                runtime += _engine_ranges(obj, state, unregistered)
        reached = (*found.entries, *found.allowed)
        labels = [(e.storage_begin, e.storage_end, e.path) for e in reached]
        if self.site_labels is not None:
            labels += _outside(self.site_labels(), labels)
        return RegistryState(
            _leaves(model.named_parameters()), _leaves(model.named_buffers()), runtime, labels
        )


def _engine_ranges(
    obj: object, state: EngineState, unregistered: set[tuple[int, int]]
) -> list[tuple[int, int, str, str]]:
    """Storages reachable from an engine object, as runtime ranges named ``name.path``.

    The walk reaches the model too (a runner holds it): its parameters and
    buffers get spans first (registered tensors take precedence), and storages
    the model's census found unregistered are left out, so an engine that
    holds the model never hides a finding of it.
    """
    from graphcheck.census import census

    holder = torch.nn.Module()
    holder.__dict__[state.name] = obj
    found = census(holder, runtime_attrs={state.name: state.reason})
    return [
        (e.storage_begin, e.storage_end, e.path, state.reason)
        for e in (*found.exempt, *found.entries)
        if (e.storage_begin, e.storage_end) not in unregistered
    ]


def _outside(
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


def _internal_dirs() -> tuple[str, ...]:
    import graphcheck

    return (
        os.path.dirname(os.path.abspath(torch.__file__)) + os.sep,
        os.path.dirname(os.path.abspath(graphcheck.__file__)) + os.sep,
    )


def frame_label(frames: Sequence[dict[str, Any]], internal: Sequence[str]) -> str | None:
    """``file:line in function`` of the innermost Python frame outside torch and graphcheck.

    ``frames`` as the caching allocator's snapshot lists them, innermost first;
    C++ frames (no ``.py`` file) are skipped.
    """
    for frame in frames:
        filename = str(frame.get("filename", ""))
        if not filename.endswith(".py") or filename.startswith(tuple(internal)):
            continue
        return f"{filename}:{frame.get('line', '?')} in {frame.get('name', '?')}"
    return None


def allocator_sites(snapshot: dict[str, Any]) -> list[tuple[int, int, str]]:
    """Label ranges from a ``torch.cuda.memory._snapshot()``: each live block's frame.

    Reads the block's ``frames`` (recent torch) or the last ``history`` entry's
    frames (older torch); blocks without a Python frame outside torch are skipped.
    """
    internal = _internal_dirs()
    sites = []
    for segment in snapshot.get("segments", ()):
        for block in segment.get("blocks", ()):
            if block.get("state") != "active_allocated":
                continue
            frames = block.get("frames")
            if frames is None and block.get("history"):
                frames = block["history"][-1].get("frames")
            label = frame_label(frames or (), internal)
            if label is not None:
                begin = int(block["address"])
                sites.append((begin, begin + int(block["size"]), label))
    return sites


class WatchedCapture:
    """Factory of the :class:`graphcheck.Capture` subclass the watch records (see below).

    The subclass is built on first use, so importing this module does not import
    ``graphcheck._capture`` (and with it the compiled ``graphcheck._torch``).
    """

    _cls: type | None = None

    @classmethod
    def make(
        cls,
        source: ModelSource,
        registry: RegistryCache,
        record: Any,
        output: Any = None,
        inputs: tuple[tuple[Any, ...], dict[str, Any]] = ((), {}),
        arena: Any = None,
    ) -> Any:
        """A capture of ``record`` whose model comes from ``source``."""
        if cls._cls is None:
            cls._cls = _capture_class()
        model = source.resolve()
        if model is None:
            model = torch.nn.Module()  # nothing to register: every address is judged bare
        return cls._cls(source, registry, model, record, output, inputs, arena)


def _capture_class() -> type:
    from graphcheck._capture import Capture
    from graphcheck.arena import _flatten

    class _WatchedCapture(Capture):
        """A capture whose model is resolved at each epoch and whose registry is shared."""

        def __init__(
            self,
            source: ModelSource,
            registry: RegistryCache,
            model: torch.nn.Module,
            record: Any,
            output: Any,
            inputs: tuple[tuple[Any, ...], dict[str, Any]],
            arena: Any,
        ) -> None:
            self._source = source
            self._registry = registry
            self._fallback = model if type(model) is torch.nn.Module else None
            super().__init__(model, record, output, inputs, arena)

        def _live_model(self, what: str) -> torch.nn.Module:
            model = self._source.resolve()
            if model is not None:
                return model
            if self._fallback is not None:
                return self._fallback
            raise _core.GraphcheckError(
                f"Capture.{what}: the watched graph's model was freed ("
                f"{self._model_type}); check a recorded epoch by label ({', '.join(self.epochs)})"
            )

        def _registry_state(self, model: torch.nn.Module) -> tuple[Any, ...]:
            shared = self._registry.state(model)
            return (
                shared.parameters,
                shared.buffers,
                [(ln, leaf, r) for n, t, r in self._runtime for ln, leaf in _flatten(n, t)],
                [(ln, leaf, r) for n, t, r in self._declared_inputs for ln, leaf in _flatten(n, t)],
                shared.runtime_ranges,
                shared.labels,
            )

        @property
        def source(self) -> ModelSource:
            """Where the model comes from."""
            return self._source

    return _WatchedCapture
