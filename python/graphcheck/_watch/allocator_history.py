"""The caching allocator's history, and what its frames say of the live blocks.

The allocator history (:class:`AllocatorHistory`) is turned on through
``torch.cuda._lazy_call``, so that watching never initializes CUDA itself (a
process that forks workers must not have a CUDA context before the fork). Its
frames label memory the census does not reach (:func:`allocator_sites`), by the
rule of :func:`graphcheck._utils.internal_prefixes` for which frames are
graphcheck's own, and name torch's own graph state, which is runtime state
(:func:`torch_graph_state`). Unverified on a GPU.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

from graphcheck._utils import internal_prefixes, is_internal_file
from graphcheck._watch.cuda_hooks import at_cuda_initialization

__all__ = [
    "TORCH_GRAPH_STATE",
    "AllocatorFrames",
    "AllocatorHistory",
    "allocator_frames",
    "allocator_sites",
    "frame_label",
    "torch_graph_state",
]

log = logging.getLogger("graphcheck.watch")


class AllocatorHistory:
    """The caching allocator's history with Python stacks, recorded only if nobody else does.

    :meth:`enable` queues the switch until CUDA is initialized
    (``torch.cuda._lazy_call``); :meth:`sites` returns each live block's
    allocation frame as a label range once it is on, and torch's own graph state as runtime
    ranges (:func:`torch_graph_state`). :meth:`disable` turns it
    off only if this object turned it on. Unverified on a GPU.
    """

    def __init__(self) -> None:
        self.owned = False
        self.skipped_reason = ""
        # torch runs a queued call at CUDA's initialization and cannot drop it: a history
        # disabled before then must not switch itself on later.
        self._cancelled = False

    def enable(self) -> None:
        """Turns the history on at CUDA's initialization (now, if CUDA is initialized)."""
        if not hasattr(torch.cuda.memory, "_record_memory_history") or not at_cuda_initialization(
            self._switch_on
        ):
            self.skipped_reason = "this torch has no allocator history API"

    def _switch_on(self) -> None:
        if self._cancelled:
            return
        try:
            is_enabled = getattr(torch._C, "_cuda_isHistoryEnabled", None)
            if callable(is_enabled) and is_enabled():
                self.skipped_reason = "someone else records the allocator history"
                return
            torch.cuda.memory._record_memory_history(
                enabled="state", context="alloc", stacks="python"
            )
            self.owned = True
        except Exception as exc:  # never break CUDA's initialization
            self.skipped_reason = f"could not turn the allocator history on: {exc}"

    def sites(self) -> AllocatorFrames:
        """What the live blocks' frames say, when the history is on (else nothing)."""
        # torch.cuda.is_initialized has no annotations in torch's sources.
        if not self.owned or not torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
            return AllocatorFrames()
        try:
            snapshot = torch.cuda.memory._snapshot()
        except RuntimeError as exc:  # an allocator backend that takes no snapshot
            log.debug("graphcheck: no allocator snapshot for frame labels: %s", exc)
            return AllocatorFrames()
        return allocator_frames(snapshot)

    def disable(self) -> None:
        """Turns the history off if this object turned it on; a queued switch never runs."""
        self._cancelled = True
        if self.owned:
            self.owned = False
            try:
                torch.cuda.memory._record_memory_history(enabled=None)
            except Exception:
                log.exception("graphcheck: could not turn the allocator history off")


def frame_label(frames: Iterable[Mapping[str, Any]], internal: Sequence[str]) -> str | None:
    """``file:line in function`` of the innermost Python frame outside ``internal``.

    ``frames`` as the caching allocator's snapshot lists them, innermost first; C++ frames
    (no ``.py`` file) are skipped, and so are graphcheck's and torch's own frames
    (:func:`graphcheck._utils.is_internal_file` with ``internal``, the prefixes of
    :func:`graphcheck._utils.internal_prefixes`).
    """
    for frame in frames:
        filename = str(frame.get("filename", ""))
        if not filename.endswith(".py") or is_internal_file(filename, internal):
            continue
        return f"{filename}:{frame.get('line', '?')} in {frame.get('name', '?')}"
    return None


#: The block states the epochs hold as live memory (``_core.add_allocator_memory``'s rule): a
#: block freed while a stream still uses it is pending, and still read.
_LIVE_STATES = frozenset({"active_allocated", "active_pending_free"})


#: The runtime-state name and reason of torch's CUDA generator state for graphs.
TORCH_GRAPH_STATE = (
    "torch.cuda generator graph state",
    "torch's CUDA generator keeps its seed and offset for captured random ops here and "
    "rewrites them before each replay",
)


@dataclasses.dataclass(frozen=True)
class AllocatorFrames:
    """What the allocator history's frames say of the live blocks.

    Attributes:
        labels: ``(begin, end, label)``: each block's allocation site (:func:`allocator_sites`).
        runtime: ``(begin, end, name, reason)``: torch's own runtime state
            (:func:`torch_graph_state`).
    """

    labels: list[tuple[int, int, str]] = dataclasses.field(default_factory=list)
    runtime: list[tuple[int, int, str, str]] = dataclasses.field(default_factory=list)


def _live_blocks(snapshot: Mapping[str, Any]) -> Iterable[tuple[int, int, Sequence[Any]]]:
    """``(begin, end, frames)`` of each live block, its frames innermost first.

    The block's ``frames`` (recent torch) or its last ``history`` entry's (older torch).
    """
    for segment in snapshot.get("segments", ()):
        for block in segment.get("blocks", ()):
            if block.get("state") not in _LIVE_STATES:
                continue
            frames = block.get("frames")
            if frames is None and block.get("history"):
                frames = block["history"][-1].get("frames")
            begin = int(block["address"])
            yield begin, begin + int(block["size"]), frames or ()


def _torch_dir() -> str:
    return os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


def _allocated_in_capture_begin(frames: Sequence[Mapping[str, Any]], torch_dir: str) -> bool:
    """Whether the innermost Python frame is a ``capture_begin`` of torch's package."""
    python = [f for f in frames if str(f.get("filename", "")).endswith(".py")]
    return bool(python) and (
        str(python[0].get("filename", "")).startswith(torch_dir)
        and python[0].get("name") == "capture_begin"
    )


def allocator_frames(snapshot: Mapping[str, Any]) -> AllocatorFrames:
    """What a ``torch.cuda.memory._snapshot()``'s frames say of its live blocks, in one pass.

    ``labels``: each block's innermost Python frame outside torch and graphcheck (blocks with
    none are skipped). ``runtime``: the blocks torch allocated inside a graph's
    ``capture_begin``, where its CUDA generator allocates its seed and offset for graphs, at
    the first capture while no graph is registered with it (``CUDAGeneratorState::
    register_graph``, two ``at::empty`` of one int64); every random op captured afterwards
    reads them (its ``PhiloxCudaState`` argument holds their addresses under capture) and
    every replay rewrites them first. That allocation is made before the stream capture
    starts, so no capture window sees it: without this, each such read was an
    ``unregistered`` finding labelled with the caller's ``torch.cuda.graph`` line (found by a
    review, not on a GPU). Named by the innermost Python frame: ``capture_begin`` in torch's
    package.
    """
    internal, torch_dir = internal_prefixes(), _torch_dir()
    frames_say = AllocatorFrames()
    for begin, end, frames in _live_blocks(snapshot):
        if _allocated_in_capture_begin(frames, torch_dir):
            frames_say.runtime.append((begin, end, *TORCH_GRAPH_STATE))
            continue
        label = frame_label(frames, internal)
        if label is not None:
            frames_say.labels.append((begin, end, label))
    return frames_say


def allocator_sites(snapshot: Mapping[str, Any]) -> list[tuple[int, int, str]]:
    """Label ranges: each live block's allocation frame (:func:`allocator_frames`' labels)."""
    return allocator_frames(snapshot).labels


def torch_graph_state(snapshot: Mapping[str, Any]) -> list[tuple[int, int, str, str]]:
    """Torch's own graph state as runtime ranges (:func:`allocator_frames`' runtime)."""
    return allocator_frames(snapshot).runtime
