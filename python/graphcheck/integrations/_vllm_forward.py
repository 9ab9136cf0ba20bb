"""The engine's own forward of a vLLM model runner, recorded, captured, replayed and run eagerly.

vLLM's CPU build captures no CUDA graphs. Its CPU twin is the forward the model runner runs in
its own dummy batch (``_dummy_run`` with attention metadata forced: the batch a GPU worker
warms up and captures its graphs with): :class:`EngineForward` runs that batch once with the
model's ``forward`` wrapped, which records the forward's arguments and vLLM's forward context
(attention metadata, KV cache slots), and can then capture the same forward in the ATen window
under that context (through the process's watch, or :func:`graphcheck.capture`), replay the
capture and run the forward eagerly, each from the same KV caches.

Shared by the vLLM plugin's CPU mode (:mod:`graphcheck.integrations._vllm_cpu`) and the vLLM
zoo (``python -m graphcheck.zoo --engine vllm``). Runs inside a vLLM worker process (it
imports vLLM when called); not thread-safe: the worker's thread only.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import torch

import graphcheck
from graphcheck._utils import clone_tensors, compare_tensors

if TYPE_CHECKING:
    from graphcheck._capture import Capture
    from graphcheck._watch.watch import Watch

__all__ = ["DUMMY_TOKENS", "EngineForward", "NotCalled", "compare"]

#: Tokens in the captured batch (spread over requests by the runner, as its warm-up does).
DUMMY_TOKENS = 16


class NotCalled(RuntimeError):
    """The runner's dummy batch did not call the model's ``forward`` (a compiled call path)."""


class EngineForward:
    """The forward of ``forward_module`` in ``runner``'s dummy batch, with its arguments.

    ``model`` is what is captured and checked (the served model, or a target and its draft);
    ``forward_module`` is the module whose call the dummy batch makes (``model`` by default).
    Raises :class:`NotCalled` when the batch never calls ``forward_module.forward`` (vLLM's
    compiled models call inductor's code instead).
    """

    def __init__(
        self,
        runner: Any,
        model: torch.nn.Module,
        forward_module: torch.nn.Module | None = None,
    ) -> None:
        from vllm.forward_context import get_forward_context

        self.runner = runner
        self.model = model
        self._forward_module = forward_module
        module = forward_module if forward_module is not None else model
        seen: dict[str, Any] = {}
        original = module.forward

        def recording(*args: Any, **kwargs: Any) -> Any:
            if "context" not in seen:
                seen.update(args=args, kwargs=kwargs, context=get_forward_context())
            return original(*args, **kwargs)

        module.forward = recording
        try:
            runner._dummy_run(DUMMY_TOKENS, force_attention=True)
        finally:
            del module.forward  # the class's forward again
        if "context" not in seen:
            raise NotCalled(
                f"the model runner's dummy batch did not call {type(module).__qualname__}."
                "forward (a compiled forward runs inductor's code instead)"
            )
        self.args: tuple[Any, ...] = seen["args"]
        self.kwargs: dict[str, Any] = seen["kwargs"]
        self.context: Any = seen["context"]

    def eager(self) -> Any:
        """The forward run now, eagerly, under the recorded context (outputs cloned)."""
        from vllm.forward_context import override_forward_context

        with override_forward_context(self.context), torch.no_grad():
            return clone_tensors(self.model(*self.args, **self.kwargs))

    def capture(self, watch: Watch | None = None) -> Capture:
        """The forward captured in the ATen window under the recorded context.

        With ``watch``, the watch records it (the CPU twin of a graph; the forward context is
        declared engine state of the watch); without, :func:`graphcheck.capture` does, with
        the runner and the context as engine state.
        """
        from vllm.forward_context import override_forward_context

        with override_forward_context(self.context):
            if watch is not None:
                watch.add_engine_state(self.context, "forward_context")
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

    def replay_and_eager(
        self, capture: Capture, eager_from: EngineForward | None = None
    ) -> tuple[Any, str, Any]:
        """``replay(capture)`` and an eager forward, each from the same KV caches and states.

        Either may write the runner's KV caches and recurrent (Mamba) states, which vLLM
        keeps in ``kv_caches``: their contents are put back after each, so that the second
        does not start from what the first wrote, and serving goes on from what it had.
        ``eager_from`` runs the eager forward instead of this one (:meth:`refreshed`).
        """
        with _caches_kept(self.runner):
            replayed, replay = self.replay(capture)
        with _caches_kept(self.runner):
            eager = (eager_from or self).eager()
        return replayed, replay, eager

    def refreshed(self) -> EngineForward:
        """The same forward recorded again: the runner's dummy batch refills its input buffers.

        Serving rewrites the runner's persistent input and metadata buffers, which both the
        recorded arguments and the captured graph read: after requests, compare a replay
        with an eager forward only once this put the dummy batch back (its KV cache writes
        are undone).
        """
        with _caches_kept(self.runner):
            return EngineForward(self.runner, self.model, self._forward_module)


@contextlib.contextmanager
def _caches_kept(runner: Any) -> Iterator[None]:
    """Puts the runner's KV caches and states back as they were when the block ends."""
    caches = [t for t in _leaves(runner.kv_caches) if isinstance(t, torch.Tensor)]
    saved = [t.clone() for t in caches]
    try:
        yield
    finally:
        with torch.no_grad():
            for cache, copy in zip(caches, saved, strict=True):
                cache.copy_(copy)


def compare(replayed: Any, eager: Any) -> tuple[bool, float]:
    """:func:`graphcheck._utils.compare_tensors` with NaN equal to NaN at the same position.

    A draft's output in the dummy batch holds NaN (docs/vllm-zoo.md, "Open questions").
    """
    return compare_tensors(replayed, eager, equal_nan=True)


def _leaves(value: object) -> list[object]:
    """The items of nested lists and tuples (vLLM keeps KV caches per layer, states in tuples)."""
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]
