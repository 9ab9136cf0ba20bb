"""The engine's own forward of a vLLM model runner, recorded, captured, replayed and run eagerly.

vLLM's CPU build captures no CUDA graphs. Its CPU twin is the forward the model runner runs in
its own dummy batch (``_dummy_run`` with attention metadata forced: the batch a GPU worker
warms up with, and for an encoder-decoder model the encoder length it captures its graphs
with, :func:`_capture_batch`): :class:`EngineForward` runs that batch once with the model's
``forward`` wrapped, which records the forward's arguments and vLLM's forward context
(attention metadata, KV cache slots), and can then capture the same forward in the ATen window
under that context (through the process's watch, or :func:`graphcheck.capture`), replay the
capture and run the forward eagerly, each from the same KV caches.

Shared by the vLLM plugin's CPU mode (:mod:`graphcheck.integrations._vllm_cpu`) and the vLLM
zoo (``python -m graphcheck.zoo --engine vllm``). Runs inside a vLLM worker process (it
imports vLLM when called); not thread-safe: the worker's thread only.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import torch

import graphcheck
from graphcheck._utils import clone_tensors, compare_tensors

if TYPE_CHECKING:
    from graphcheck._capture import Capture
    from graphcheck._watch.watch import Watch

__all__ = [
    "COMPARE_LIMIT_BYTES",
    "DUMMY_TOKENS",
    "Comparison",
    "EngineForward",
    "NotCalled",
    "TargetAndDraft",
    "compare",
    "draft_model",
    "served_forwards",
]

#: Tokens in the captured batch (spread over requests by the runner, as its warm-up does).
DUMMY_TOKENS = 16


class NotCalled(RuntimeError):
    """The runner's dummy batch did not call the model's ``forward`` (a compiled call path)."""


class TargetAndDraft(torch.nn.Module):
    """The target (``model``) and the draft (``draft_model``); its forward is the draft's.

    Neither model is changed: this module only holds both, so that one census and one
    registry cover what the draft shares with its target (EAGLE drafts read the target's
    embedding and head), under the names the server flag's watch gives them. With
    ``runs_draft`` False its forward is the target's (the target's graph, beside its draft).
    """

    def __init__(
        self, target: torch.nn.Module, draft: torch.nn.Module, *, runs_draft: bool = True
    ) -> None:
        super().__init__()
        self.model = target
        self.draft_model = draft
        self._runs_draft = runs_draft

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The draft's forward (the target's with ``runs_draft`` False)."""
        return (self.draft_model if self._runs_draft else self.model)(*args, **kwargs)


def draft_model(runner: Any) -> torch.nn.Module | None:
    """The speculative-decoding draft model ``runner``'s drafter holds (EAGLE, Medusa, MTP).

    None for a runner without a drafter, or one whose proposer has no model (n-gram, suffix
    decoding).
    """
    draft = getattr(getattr(runner, "drafter", None), "model", None)
    return draft if isinstance(draft, torch.nn.Module) else None


def served_forwards(runner: Any) -> list[EngineForward | NotCalled]:
    """The forwards a GPU worker would capture graphs of: the served model's, then its draft's.

    With a draft model, both are checked as one model (:class:`TargetAndDraft`: ``model.*``
    and ``draft_model.*``, as the watch's census names them), the draft's forward with its
    target's attention metadata. Each entry is the :class:`EngineForward`, or the
    :class:`NotCalled` that says why the batch never called that forward.
    """
    target = runner.get_model()
    draft = draft_model(runner)
    pairs: list[tuple[torch.nn.Module, torch.nn.Module | None]]
    if draft is None:
        pairs = [(target, None)]
    else:
        pairs = [
            (TargetAndDraft(target, draft, runs_draft=False), target),
            (TargetAndDraft(target, draft), draft),
        ]
    out: list[EngineForward | NotCalled] = []
    for model, forward_module in pairs:
        try:
            out.append(EngineForward(runner, model, forward_module))
        except NotCalled as exc:
            out.append(exc)
    return out


class Comparison(NamedTuple):
    """A replay beside an eager forward, from the same KV caches and states."""

    replay: str  #: "ran", "refused: <why>", or "not compared: <why>" (nothing ran)
    eager: Any  #: the eager forward's outputs (cloned)
    #: outputs equal (NaN at the same positions) and the same cache writes; False if refused
    equal: bool
    #: the largest absolute difference over both; inf where other cache positions were
    #: written, NaN where the replay was refused
    diff: float


class EngineForward:
    """The forward of ``forward_module`` in ``runner``'s dummy batch, with its arguments.

    ``model`` is what is captured and checked (the served model, or a target and its draft);
    ``forward_module`` is the module whose call the dummy batch makes (``model`` by default).
    Raises :class:`NotCalled` when the batch never calls ``forward_module.forward`` (vLLM's
    compiled models call inductor's code instead). A draft's forward (``forward_module`` not
    the runner's model) is recorded with its target's attention metadata
    (:func:`_draft_context`).
    """

    def __init__(
        self,
        runner: Any,
        model: torch.nn.Module,
        forward_module: torch.nn.Module | None = None,
    ) -> None:
        self.runner = runner
        self.model = model
        self._forward_module = forward_module
        module = forward_module if forward_module is not None else model
        # A draft's forward runs in the dummy batch after its target's, which the runner
        # calls with the batch's attention metadata: recorded too, for _draft_context.
        target = runner.get_model() if forward_module is not None else model
        draft = module is not target  # not the served model's own forward
        seen: dict[str, Any] = {}
        target_seen: dict[str, Any] = {}
        wrapped = [(module, seen)] + ([(target, target_seen)] if draft else [])
        for wrapped_module, record in wrapped:
            wrapped_module.forward = _recording(wrapped_module.forward, record)
        try:
            _capture_batch(runner)
            drafter = getattr(runner, "drafter", None)
            if "context" not in seen and draft and drafter is not None:
                # The dummy batch runs only EAGLE-style, draft-model and hidden-state drafters
                # (v1/worker/gpu_model_runner.py:5856-5860); Medusa's heads have a dummy run
                # of their own (v1/spec_decode/medusa.py:72) that nothing else calls.
                drafter.dummy_run(DUMMY_TOKENS)
        finally:
            for wrapped_module, _ in wrapped:
                del wrapped_module.forward  # the class's forward again
        if "context" not in seen:
            raise NotCalled(
                f"the model runner's dummy batch did not call {type(module).__qualname__}."
                "forward (a compiled forward runs inductor's code instead)"
            )
        self.args: tuple[Any, ...] = seen["args"]
        self.kwargs: dict[str, Any] = seen["kwargs"]
        self.context: Any = _draft_context(seen["context"], target_seen.get("context"))

    def eager(self) -> Any:
        """The forward run now, eagerly, under the recorded context (outputs cloned)."""
        from vllm.forward_context import override_forward_context

        with override_forward_context(self.context), torch.no_grad():
            return clone_tensors(self.model(*self.args, **self.kwargs))

    def capture(self, watch: Watch | None = None, context_name: str = "forward_context") -> Capture:
        """The forward captured in the ATen window under the recorded context.

        With ``watch``, the watch records it (the CPU twin of a graph; the forward context is
        declared engine state of the watch, as ``context_name``: each twin's its own, since
        each recorded its own batch); without, :func:`graphcheck.capture` does, with the
        runner and the context as engine state.
        """
        from vllm.forward_context import override_forward_context

        with override_forward_context(self.context):
            if watch is not None:
                watch.add_engine_state(self.context, context_name)
                return watch.capture(self.model, *self.args, **self.kwargs)
            state = {"model_runner": self.runner, "forward_context": self.context}
            return graphcheck.capture(self.model, *self.args, engine_state=state, **self.kwargs)

    def replay(self, capture: Capture) -> tuple[Any, str]:
        """The replayed output and ``"ran"``, or None and why graphcheck refused it."""
        from vllm.forward_context import override_forward_context

        try:
            with override_forward_context(self.context):
                return clone_tensors(capture.replay()), "ran"
        except graphcheck.GraphcheckError as exc:
            return None, f"refused: {str(exc).splitlines()[0]}"

    def replay_and_eager(self, capture: Capture, *, refresh: bool = False) -> Comparison:
        """``replay(capture)`` beside an eager forward, each from the same KV caches and states.

        Either may write the runner's KV caches and recurrent (Mamba) states, which vLLM
        keeps in ``kv_caches``: what each wrote there is compared too (a forward's effect is
        its outputs and its cache writes; some return nothing), and their contents are put
        back after each, so that the second does not start from what the first wrote, and
        serving goes on from what it had. ``refresh``: the eager forward is this one recorded
        again (:meth:`refreshed`: after requests). Caches past :data:`COMPARE_LIMIT_BYTES` are
        not copied: nothing runs, and the comparison says why (``replay`` "not compared").
        """
        size = sum(t.numel() * t.element_size() for t in _cache_tensors(self.runner))
        if size > COMPARE_LIMIT_BYTES:
            why = (
                f"not compared: the KV caches and states hold {size / 2**30:.1f} GiB, more "
                f"than the {COMPARE_LIMIT_BYTES >> 30} GiB graphcheck copies to compare (a "
                f"copy would stall the engine for seconds and double their memory)"
            )
            return Comparison(why, None, False, math.nan)
        eager_from = self.refreshed() if refresh else None
        with _caches_kept(self.runner) as kept:
            replayed, replay = self.replay(capture)
            ran = replay == "ran"  # a forward may return None; a refused replay says why
            replay_writes = kept.writes() if ran else []
        with _caches_kept(self.runner) as kept:
            eager = (eager_from or self).eager()
            eager_writes = kept.writes() if ran else []
        if not ran:
            return Comparison(replay, eager, False, math.nan)
        equal, diff = _compare_effects((replayed, replay_writes), (eager, eager_writes))
        return Comparison(replay, eager, equal, diff)

    def refreshed(self) -> EngineForward:
        """The same forward recorded again: the runner's dummy batch refills its input buffers.

        Serving rewrites the runner's persistent input and metadata buffers, which both the
        recorded arguments and the captured graph read: after requests, compare a replay
        with an eager forward only once this put the dummy batch back (its KV cache writes
        are undone).
        """
        with _caches_kept(self.runner):
            return EngineForward(self.runner, self.model, self._forward_module)


def _capture_batch(runner: Any) -> None:
    """Runs ``runner``'s dummy batch: the warm-up's, with what a capture's has that matters.

    An encoder-decoder model's cross-attention gets no encoder token in a warm-up batch: the
    CPU kernel then writes no output row and the decoder computes on uninitialized memory.
    A GPU worker captures with ``is_graph_capturing`` (``GPUModelRunner.capture_model``),
    under which the cross-attention attends to the encoder's full length
    (``_get_encoder_seq_lens(for_cudagraph_capture=True)``: ``max_source_positions``): for an
    encoder-decoder model the batch runs so. Not for the others: under it, the metadata
    builders of decode-only captures (MLA, Mamba, gated delta-net) refuse this mixed batch.
    """
    import inspect

    options: dict[str, Any] = {"force_attention": True}
    encoder_decoder = bool(
        getattr(getattr(runner, "model_config", None), "is_encoder_decoder", False)
    )
    if encoder_decoder and "is_graph_capturing" in inspect.signature(runner._dummy_run).parameters:
        options["is_graph_capturing"] = True
    runner._dummy_run(DUMMY_TOKENS, **options)


def _recording(forward: Any, seen: dict[str, Any]) -> Any:
    """``forward``, recording its first call's arguments and vLLM's forward context in ``seen``."""
    from vllm.forward_context import get_forward_context

    def recording(*args: Any, **kwargs: Any) -> Any:
        if "context" not in seen:
            seen.update(args=args, kwargs=kwargs, context=get_forward_context())
        return forward(*args, **kwargs)

    return recording


def _draft_context(context: Any, target_context: Any) -> Any:
    """A draft's forward context, with its target's attention metadata where it has none.

    vLLM's proposer runs the draft in the dummy batch without attention metadata
    (``set_forward_context(None, ...)``, ``v1/spec_decode/llm_base_proposer.py``: a profiling
    pass), so each attention layer of the draft returns its output buffer unwritten
    (``v1/attention/backends/cpu_attn.py``: ``if attn_metadata is None: return output``) and
    the forward computes on uninitialized memory: two eager forwards differ, and a replay
    differs from both. When serving, the draft's attention reads metadata built from the
    batch's; the target's forward in the same dummy batch (the same tokens) has metadata
    for every KV-cache layer, the draft's included. That metadata and its slot mapping are
    taken when they cover every layer the draft's context maps; otherwise ``context`` stays.
    """
    import dataclasses

    if target_context is None or context.attn_metadata is not None:
        return context
    metadata = target_context.attn_metadata
    draft_slots = context.slot_mapping
    target_slots = target_context.slot_mapping
    if not (
        isinstance(metadata, dict)
        and isinstance(draft_slots, dict)
        and isinstance(target_slots, dict)
        and draft_slots
        and all(name in metadata and name in target_slots for name in draft_slots)
    ):
        return context
    return dataclasses.replace(context, attn_metadata=metadata, slot_mapping=target_slots)


class _KeptCaches:
    """The runner's KV caches and states, and a copy of each taken when made."""

    def __init__(self, runner: Any) -> None:
        self.caches = _cache_tensors(runner)
        self.saved = [t.clone() for t in self.caches]

    def writes(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per cache, the flat positions whose bits changed since the copy, and their values.

        Bits, not values, decide what changed: uninitialized cache slots may hold NaN, and
        an FP8 cache has no comparison on the CPU. One cache's mask is alive at a time.
        """
        written = []
        for cache, saved in zip(self.caches, self.saved, strict=True):
            changed = _bits(cache).reshape(-1) != _bits(saved).reshape(-1)
            positions = changed.nonzero().squeeze(1)
            written.append((positions, cache.reshape(-1)[positions]))
        return written

    def restore(self) -> None:
        with torch.no_grad():
            for cache, copy in zip(self.caches, self.saved, strict=True):
                cache.copy_(copy)


#: A forward's effect: its outputs and its cache writes (:meth:`_KeptCaches.writes`).
_Effects = tuple[Any, list[tuple[torch.Tensor, torch.Tensor]]]

#: The integer type each element size's bits are compared as.
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor``'s elements as integers of their size, where it can be viewed so."""
    bits = _BITS.get(tensor.dtype.itemsize)
    if bits is None or tensor.dtype == torch.bool or not tensor.is_contiguous():
        return tensor
    return tensor.view(bits)


def _compare_effects(replayed: _Effects, eager: _Effects) -> tuple[bool, float]:
    """Outputs (:func:`compare`) and cache writes (:meth:`_KeptCaches.writes`).

    Writes are equal where the same positions changed to the same bits; writes to other
    positions are unequal with an infinite difference. The difference is over both.
    """
    (out_r, writes_r), (out_e, writes_e) = replayed, eager
    equal, diff = compare(out_r, out_e)
    for (positions_r, values_r), (positions_e, values_e) in zip(writes_r, writes_e, strict=True):
        if not torch.equal(positions_r, positions_e):
            return False, math.inf
        if torch.equal(_bits(values_r), _bits(values_e)):
            continue
        equal = False
        worst = float((values_r.double() - values_e.double()).abs().max())
        diff = worst if math.isnan(worst) or math.isnan(diff) else max(diff, worst)
    return equal, diff


#: KV caches and states larger than this (in all) are not copied to compare a replay with an
#: eager forward: a 2 GiB cache took 7.8 s per copy and compare on a 2-core machine, with the
#: copy's 2 GiB on top (a review, 2026-12-07); vLLM's CPU worker sizes the cache at most of
#: its memory by default.
COMPARE_LIMIT_BYTES = 1 << 30


def _cache_tensors(runner: Any) -> list[torch.Tensor]:
    return [t for t in _leaves(runner.kv_caches) if isinstance(t, torch.Tensor)]


@contextlib.contextmanager
def _caches_kept(runner: Any) -> Iterator[_KeptCaches]:
    """Puts the runner's KV caches and states back as they were when the block ends."""
    kept = _KeptCaches(runner)
    try:
        yield kept
    finally:
        kept.restore()


def compare(replayed: Any, eager: Any) -> tuple[bool, float]:
    """:func:`graphcheck._utils.compare_tensors` with NaN equal to NaN at the same position.

    An exact comparison: an eager output that holds NaN is equal to a replay with NaN at the
    same positions and the same values elsewhere.
    """
    return compare_tensors(replayed, eager, equal_nan=True)


def _leaves(value: object) -> list[object]:
    """The items of nested lists and tuples (vLLM keeps KV caches per layer, states in tuples)."""
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]
