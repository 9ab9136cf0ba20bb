"""Capture and check of any PyTorch model: :func:`capture` and :class:`Capture`.

Re-exported as ``graphcheck.capture`` and ``graphcheck.Capture`` (the module has
a private name so that the function keeps the public one). Imports torch and
the compiled module ``graphcheck._torch``.

:func:`capture` runs the model's forward inside the ATen capture window (the
CPU twin of a CUDA graph capture, docs/torch.md): every dispatcher op is
recorded with the storages it reads and writes. The registry is the model's
parameters and buffers (named by module path), the forward's tensor inputs
(declared inputs), the runtime state the census finds by attribute name
(``RUNTIME_STATE_ATTRS``) and whatever :meth:`Capture.declare_runtime` and
:meth:`Capture.declare_input` add. Memory the graph reads that the registry
does not cover is an allocation of the epoch, labelled with its census path
where the census reaches it, else with the Python frame that allocated it in a
:class:`~graphcheck.WeightsArena`, else with the Python frame that created it where
:func:`graphcheck.record_sites` (or the warm-up) recorded it (``graphcheck._sites``), else
with the ATen op that first used it.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

import torch

from graphcheck import _core, _torch
from graphcheck._declarations import (
    checked_input,
    checked_runtime,
    declared_leaves,
    require_nonempty_text,
    storage_range,
)
from graphcheck._errors import (
    GraphcheckTypeError,
    GraphcheckValueError,
    require_text,
    require_texts,
)
from graphcheck._model_registry import EngineState, ModelRegistry, model_registry
from graphcheck._sites import label_sites, record_sites
from graphcheck._utils import input_tensors, storage_leaves
from graphcheck._walk import short_repr as _walk_repr
from graphcheck.arena import WeightsArena, arena_of

__all__ = [
    "CAPTURE_EPOCH",
    "NOW_EPOCH",
    "Capture",
    "capture",
    "capture_arguments",
    "record_forward",
]

#: Label of the epoch recorded at capture.
CAPTURE_EPOCH = "capture"
#: Label of the transient epoch :meth:`Capture.check` builds when given no epoch.
NOW_EPOCH = "now"

_INPUT_REASON = "forward input (a static input of the graph)"


class Capture:
    """One captured forward: the graph, its epochs and its replay.

    Made by :func:`capture`. It keeps the graph's private memory (the
    intermediates and the static output, as a CUDA graph's pool does), the
    forward's inputs (static inputs) and the declared tensors, but only a
    weak reference to the model: a capture does not keep its model alive.

    Epochs: ``capture`` is recorded by :func:`capture`; :meth:`epoch` records
    more; :meth:`check` with no epoch checks the model as it is now. The
    snapshot (:attr:`snapshot`, :meth:`save`) holds the graph and every
    recorded epoch.

    Thread safety: not synchronized. Use a capture from one thread at a time,
    and do not replay it while another thread uses the model's tensors.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        record: _torch.CaptureRecord,
        output: Any,
        inputs: tuple[tuple[Any, ...], dict[str, Any]],
        arena: WeightsArena | None,
        engine_state: Mapping[str, object] | None = None,
        *,
        runtime: Iterable[tuple[str, torch.Tensor, str]] = (),
        declared_inputs: Iterable[tuple[str, torch.Tensor, str]] = (),
    ) -> None:
        # runtime, declared_inputs: (name, tensor, reason) declared before the capture epoch is
        # recorded (a watch's declarations; checked when they were made), so that the epoch
        # holds them from the start instead of each rewriting its spans afterwards.
        self._engine_states = [
            EngineState.of(name, obj) for name, obj in (engine_state or {}).items()
        ]
        self._model = weakref.ref(model)
        self._model_type = type(model).__qualname__
        self._record = record
        self._output = output
        self._inputs = inputs
        self._arena = arena
        self._runtime = list(runtime)
        self._declared_inputs = list(declared_inputs)
        self._epochs = [self._finish_epoch(self._capture_epoch(model))]
        # Made by the first check() from the record's graph (a capture that is never checked
        # on its own, as a watch's, never copies its graph).
        self._session: _core.CheckSession | None = None

    def __repr__(self) -> str:
        alive = "alive" if self._model() is not None else "freed"
        return (
            f"<Capture of {self._model_type} ({alive}): {self._record.node_count} ops, "
            f"epochs {self.epochs}>"
        )

    # ------------------------------------------------------------------ state

    @property
    def model(self) -> torch.nn.Module:
        """The captured model; raises :class:`graphcheck.GraphcheckError` once it was freed."""
        return self._live_model("model")

    @property
    def output(self) -> Any:
        """The captured forward's output: the graph's static output, rewritten by :meth:`replay`."""
        return self._output

    @property
    def arena(self) -> WeightsArena | None:
        """The weights arena the model was loaded into, or None."""
        return self._arena

    @property
    def epochs(self) -> list[str]:
        """Labels of the recorded epochs, in order (``capture`` first)."""
        return [e.label for e in self._epochs]

    @property
    def ops(self) -> list[str]:
        """Names of the ops :meth:`replay` runs (depth 0: ``aten::linear``, not its inner ops)."""
        return list(self._record.op_names)

    @property
    def node_count(self) -> int:
        """Op nodes of the captured graph (every dispatcher op, nested ones included)."""
        return int(self._record.node_count)

    @property
    def snapshot(self) -> _core.Snapshot:
        """A new :class:`graphcheck.Snapshot` of the graph and every recorded epoch."""
        return self._record.snapshot(self._epochs)

    def _live_model(self, what: str) -> torch.nn.Module:
        model = self._model()
        if model is None:
            raise _core.GraphcheckError(
                f"Capture.{what}: the captured {self._model_type} was freed (a Capture keeps "
                f"only a weak reference to its model, as a graph does not own it); keep the "
                f"model alive while you check it, or check a recorded epoch by label "
                f"({', '.join(self.epochs)})"
            )
        return model

    def _model_registry(self, model: torch.nn.Module) -> ModelRegistry:
        """The model's part of the registry now (the watch's captures share one per model)."""
        return model_registry(model, self._engine_states)

    def _capture_epoch(self, model: torch.nn.Module) -> _core.Epoch:
        """The capture epoch of the record, the registry as it is now."""
        return self._record.capture_epoch(*self._registry_state(model))

    def _registry_state(self, model: torch.nn.Module) -> tuple[Any, ...]:
        """The registry now, as ``CaptureRecord.epoch`` takes it after the label."""
        shared = self._model_registry(model)
        return (
            shared.parameters,
            shared.buffers,
            declared_leaves(self._runtime),
            declared_leaves(self._declared_inputs),
            shared.runtime_ranges,
            shared.labels,
        )

    # ------------------------------------------------------------ declarations

    def declare_runtime(self, tensor: torch.Tensor, name: str, reason: str) -> None:
        """Declare ``tensor`` runtime state (a KV cache, scratch): exempt, with ``reason``.

        The declaration holds for the epochs recorded from now on and is added
        to those already recorded (it says what the memory is, not when),
        unless a registered parameter or buffer already owns that storage.
        Runtime state the census finds by attribute name (``kv_cache``,
        ``workspace``, ... see ``RUNTIME_STATE_ATTRS``) is declared already.
        The capture keeps a reference to ``tensor``.
        """
        name, tensor, reason = checked_runtime("Capture", tensor, name, reason)
        self._runtime.append((name, tensor, reason))
        self._add_to_recorded(tensor, name, "runtime", reason)

    def declare_input(
        self, name: str, tensor: torch.Tensor, reason: str = "static graph input"
    ) -> None:
        """Declare ``tensor`` a static input or output of the graph (as :meth:`declare_runtime`).

        The tensors passed to the captured forward are declared already, named
        ``args[i]`` and by keyword.
        """
        name, tensor, reason = checked_input("Capture", name, tensor, reason)
        self._declared_inputs.append((name, tensor, reason))
        self._add_to_recorded(tensor, name, "input", reason)

    def _add_to_recorded(
        self, tensor: torch.Tensor, name: str, kind: Literal["runtime", "input"], reason: str
    ) -> None:
        for leaf_name, leaf in storage_leaves(name, tensor):
            begin, end = storage_range(leaf)
            for i, epoch in enumerate(self._epochs):
                spans = epoch.spans
                if any(span.begin == begin for span in spans):
                    continue
                epoch.spans = [*spans, _core.Span(begin, end - begin, kind, leaf_name, reason)]
                self._epochs[i] = epoch

    # ---------------------------------------------------------- epochs, checks

    def epoch(self, label: str) -> _core.Epoch:
        """Record the model's state now as the epoch ``label`` and return it.

        The state: the registry (parameters and buffers as the model has them
        now, declared and census-found runtime state, inputs), the graph's
        private memory, the weights arena's allocations with their generations
        and every other storage the graph used that is still alive. Raises
        :class:`~graphcheck.GraphcheckValueError` for a label already recorded or
        ``"now"`` (reserved), :class:`graphcheck.GraphcheckError` once the model was
        freed, and what the census raises for a bad holder.
        """
        require_nonempty_text(label, "Capture.epoch: label")
        if label == NOW_EPOCH or label in self.epochs:
            raise GraphcheckValueError(
                f"Capture.epoch: the label {label!r} is "
                + ("reserved for check()" if label == NOW_EPOCH else "already recorded")
                + f" (recorded: {', '.join(self.epochs)}); pick another"
            )
        epoch = self._now(label, "epoch")
        self._epochs.append(epoch)
        return epoch

    def _now(self, label: str, what: str) -> _core.Epoch:
        model = self._live_model(what)
        return self._finish_epoch(self._record.epoch(label, *self._registry_state(model)))

    def _finish_epoch(self, epoch: _core.Epoch) -> _core.Epoch:
        """What every epoch the record builds goes through (labels by creation site)."""
        return label_sites(epoch, frames=self._frame_labels())

    def _frame_labels(self) -> bool:
        """Whether an epoch's allocations may carry Python frame labels (a weights arena's)."""
        return self._arena is not None

    def check(
        self,
        epoch: str | None = None,
        baseline: str | None = None,
        allow: Iterable[str] = (),
    ) -> _core.Report:
        """Check the graph in an epoch; returns a :class:`graphcheck.Report`.

        ``epoch`` is the label of a recorded epoch, or None to check the model
        as it is now (a transient epoch labelled ``"now"``, not added to the
        snapshot; it needs the model alive). ``baseline`` is the epoch to
        compare against for ``stale`` and ``lost`` (default: ``capture``), and
        ``allow`` holds globs over owners and labels (census paths, Python
        sites) that turn ``unregistered`` and ``lost`` into ``allowed``. The
        same check as ``graphcheck check`` of :meth:`save`'s file.

        Checks go through a session the capture keeps: checking again after
        nothing changed costs a comparison of the epochs, and after a sleep
        and wake (new generations, the same ranges) only the references whose
        owner can change are decided again (docs/verdicts.md). Raises
        :class:`~graphcheck.GraphcheckValueError` for a ``baseline`` that is not
        a recorded epoch.
        """
        for value, what in ((epoch, "epoch"), (baseline, "baseline")):
            if value is not None:
                require_text(value, f"Capture.check: {what}")
        allow = require_texts(allow, "Capture.check: allow")
        if baseline is not None and baseline not in self.epochs:
            # Checked here: the session also holds the transient "now", which its own error
            # listed as a label to pass (a review's finding).
            near = difflib.get_close_matches(baseline, self.epochs, n=1)
            raise GraphcheckValueError(
                f"Capture.check: baseline {baseline!r} is not a recorded epoch"
                + (f"; did you mean {near[0]!r}?" if near else "")
                + f" (recorded: {', '.join(self.epochs)}); pass one of those labels, or None "
                "for the capture"
            )
        now = None
        if epoch is None:
            now = self._now(NOW_EPOCH, "check")
            epoch = NOW_EPOCH
        if self._session is None:
            self._session = self._record.check_session()
        # A repeated check costs only what changed (docs/verdicts.md, "Repeated checks"):
        # recorded epochs are put again (a declaration may have changed one; the others
        # compare equal and change nothing), then the transient epoch, last.
        for recorded in self._epochs:
            self._session.put_epoch(recorded)
        if now is None:
            self._session.remove_epoch(NOW_EPOCH)
        else:
            self._session.put_epoch(now, last=True)
        return self._session.check(epoch=epoch, baseline=baseline, allow=allow)

    def replay(self) -> Any:
        """Re-execute the captured ops on the captured storages; returns :attr:`output`.

        As a CUDA graph replays its kernels: the model is not called; every op
        reads the addresses it read at capture (inside the weights arena,
        whatever the arena holds there now: after a reload by rebinding, the
        old parameter's address) and writes the graph's private memory, so the
        static output holds the new values. Raises
        :class:`graphcheck.GraphcheckError` while the arena sleeps, or when a
        storage outside the arena that an op reads was freed (naming the op
        and the address).
        """
        self._record.replay()
        return self._output

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the snapshot (format version 1) that ``graphcheck check`` reads."""
        _core.write_snapshot(self.snapshot, path)


def capture_arguments(
    what: str,
    model: object,
    warmup: object,
    arena: object,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> tuple[WeightsArena | None, list[tuple[str, torch.Tensor]]]:
    """Checks the arguments of a capture (``what`` names the caller in messages).

    Returns the weights arena (the one given, or the live arena holding the model's tensors,
    or None) and the forward's tensor arguments, the graph's static inputs, by name. Raises
    :class:`~graphcheck.GraphcheckTypeError` for a model that is not a module or an arena that
    is not a :class:`~graphcheck.WeightsArena`, :class:`~graphcheck.GraphcheckValueError` for
    a bad ``warmup``.
    """
    if not isinstance(model, torch.nn.Module):
        raise GraphcheckTypeError(
            f"{what}: model must be a torch.nn.Module, got {type(model).__qualname__}"
        )
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise GraphcheckValueError(f"{what}: warmup must be an int >= 0, got {warmup!r}")
    if arena is not None and not isinstance(arena, WeightsArena):
        raise GraphcheckTypeError(
            f"{what}: arena must be a graphcheck.WeightsArena, got {type(arena).__qualname__}"
        )
    inputs = [
        *input_tensors(list(args), "args"),
        *(item for key, value in kwargs.items() for item in input_tensors(value, key)),
    ]
    return (arena if arena is not None else arena_of(model)), inputs


def record_forward(
    what: str,
    model: torch.nn.Module,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    warmup: int,
    arena: WeightsArena | None,
    inputs: Iterable[tuple[str, torch.Tensor]],
    graph_id: int = 1,
    warm_up_in: Callable[[], contextlib.AbstractContextManager[object]] = record_sites,
) -> tuple[_torch.CaptureRecord, Any]:
    """Runs ``warmup`` forwards, then one inside the ATen capture window; ``(record, output)``.

    The arguments as :func:`capture_arguments` returned them; ``inputs`` are declared static
    inputs before the forward runs, ``graph_id`` is the id the record's graph gets (the watch
    numbers its graphs). The warm-up runs inside ``warm_up_in()``: by default
    :func:`graphcheck.record_sites`, so that what it creates and a cache keeps is labelled by
    its creation site. All under ``torch.no_grad()``. When the forward raises, its exception
    propagates with a note naming ``what`` after the window is closed.
    """
    with torch.no_grad():
        with warm_up_in():
            for _ in range(warmup):
                model(*args, **kwargs)
        window = _torch.CaptureWindow(arena._native if arena is not None else None, graph_id)
        try:
            for name, tensor in inputs:
                window.declare_input(name, tensor, _INPUT_REASON)
            output = model(*args, **kwargs)
            record = window.finish()
        except Exception as exc:
            if hasattr(exc, "add_note"):  # Python 3.11+
                exc.add_note(
                    f"{what}: the forward of {type(model).__qualname__} raised inside the "
                    f"capture window; the window is closed and nothing was captured"
                )
            raise
        finally:
            window.close()
    return record, output


def capture(
    model: torch.nn.Module,
    *args: Any,
    warmup: int = 1,
    arena: WeightsArena | None = None,
    engine_state: Mapping[str, object] | None = None,
    **kwargs: Any,
) -> Capture:
    """Capture one forward of ``model`` and record the capture epoch.

    Runs ``warmup`` forwards (as before a CUDA graph capture: lazy state gets
    allocated; inside :func:`graphcheck.record_sites`, so that what they create and a cache
    keeps is labelled by its creation site), then ``model(*args, **kwargs)`` inside the ATen
    capture window, all under ``torch.no_grad()``. The tensors in ``args`` and ``kwargs``
    (also inside lists, tuples and dicts) are declared static inputs.
    ``arena`` is the :class:`~graphcheck.WeightsArena` the model was loaded
    into; by default the live arena that holds any of the model's parameters
    or buffers, if one does. ``engine_state`` maps names to engine objects (a
    model runner, the forward context its attention reads) whose tensors
    outside the model are runtime state in every epoch (``name.path``), as the
    engine plugins declare a model runner for the watch; storages the model's
    census finds unregistered stay findings. They are held
    weakly where possible. ``warmup``, ``arena`` and ``engine_state`` are not
    passed to the forward.

    The window records the ops of the calling thread only. CPU tensors are
    what this has been run with; on CUDA the same ATen window records the
    dispatcher ops, unverified on a GPU so far, and the CUPTI-backed capture of
    a real ``torch.cuda.graph`` is not part of the Python API yet.

    Raises :class:`~graphcheck.GraphcheckTypeError` when ``model`` is not a
    ``torch.nn.Module``; when the forward raises, its exception propagates (with a note)
    after the window is closed. Nothing stays installed after an error. Not thread-safe for one
    model (the forward runs on the calling thread).
    """
    arena, inputs = capture_arguments("graphcheck.capture", model, warmup, arena, args, kwargs)
    if engine_state is not None and (
        not isinstance(engine_state, Mapping) or not all(isinstance(k, str) for k in engine_state)
    ):
        raise GraphcheckTypeError(
            "graphcheck.capture: engine_state must be a mapping of names (str) to engine "
            f"objects, got {_walk_repr(engine_state)}"
        )
    record, output = record_forward(
        "graphcheck.capture", model, args, kwargs, warmup=warmup, arena=arena, inputs=inputs
    )
    return Capture(model, record, output, (args, kwargs), arena, engine_state)
