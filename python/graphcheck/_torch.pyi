"""Type stub of graphcheck._torch (python/torch_*.cc): capture window, weights arena, replay.

Private: graphcheck.capture, graphcheck.WeightsArena and graphcheck.testing are its API. It
imports torch and graphcheck._core when loaded; the Epoch, Snapshot and Allocation values it
returns are _core's classes. graphcheck::Error raises graphcheck.GraphcheckError.
"""

from collections.abc import Sequence
from typing import Final, Literal

import torch

from graphcheck._core import Allocation, CheckSession, Epoch, Node, Snapshot, _pybind11_type

__version__: Final[str]

def cpu_allocator() -> int:
    """The address of torch's current CPU allocator."""

def registered_fingerprint(model: torch.nn.Module) -> bytes:
    """Which modules, parameters and buffers ``model`` holds and where their data lives."""

class WeightsArena(metaclass=_pybind11_type):
    """The CPU weights arena with Python allocation sites (graphcheck.arena wraps it)."""

    def __init__(self, capacity: int, pool: str, internal_prefixes: Sequence[str]) -> None: ...
    def enter_loading(self) -> None: ...
    def exit_loading(self) -> None: ...
    @property
    def open_scopes(self) -> int: ...
    def sleep(self, level: int, buffers: Sequence[tuple[str, torch.Tensor]]) -> None: ...
    def wake_up(self) -> None: ...
    def allocations(self) -> list[Allocation]: ...
    def contains(self, address: int) -> bool: ...
    @property
    def asleep(self) -> bool: ...
    @property
    def begin(self) -> int: ...
    @property
    def capacity(self) -> int: ...
    @property
    def used(self) -> int: ...

_Named = Sequence[tuple[str, torch.Tensor]]
_Declared = Sequence[tuple[str, torch.Tensor, str]]
_RuntimeRanges = Sequence[tuple[int, int, str, str]]
_Labels = Sequence[tuple[int, int, str]]

class RegistrySpans(metaclass=_pybind11_type):
    """A model's registry turned into spans once, for many epochs of one unchanged registry."""

    def __init__(
        self,
        parameters: _Named,
        buffers: _Named,
        runtime_ranges: _RuntimeRanges,
        labels: _Labels,
    ) -> None: ...
    def __len__(self) -> int: ...

class CaptureRecord(metaclass=_pybind11_type):
    """What a capture window recorded: the graph of op nodes and the replayable ops."""

    def capture_epoch(
        self,
        parameters: _Named,
        buffers: _Named,
        runtime: _Declared,
        inputs: _Declared,
        runtime_ranges: _RuntimeRanges,
        labels: _Labels,
    ) -> Epoch: ...
    def capture_epoch_from(
        self, registry: RegistrySpans, runtime: _Declared, inputs: _Declared
    ) -> Epoch: ...
    def epoch(
        self,
        label: str,
        parameters: _Named,
        buffers: _Named,
        runtime: _Declared,
        inputs: _Declared,
        runtime_ranges: _RuntimeRanges,
        labels: _Labels,
    ) -> Epoch: ...
    def snapshot(self, epochs: Sequence[Epoch]) -> Snapshot: ...
    def check_session(self) -> CheckSession: ...
    def with_nodes(self, nodes: Sequence[Node], reader: str) -> CaptureRecord: ...
    @property
    def reader(self) -> str: ...
    def replay(self) -> None: ...
    @property
    def node_count(self) -> int: ...
    @property
    def operands(self) -> int: ...
    @property
    def foreign_ops(self) -> int: ...
    @property
    def allocations_watched(self) -> bool: ...
    @property
    def op_names(self) -> list[str]: ...
    @property
    def private_bytes(self) -> int: ...
    @property
    def preexisting_count(self) -> int: ...

class CaptureWindow(metaclass=_pybind11_type):
    """The ATen capture window of this thread."""

    def __init__(
        self,
        arena: WeightsArena | None,
        graph_id: int = 1,
        epoch: str = "capture",
        replay_ops: Literal["keep", "drop"] = "keep",
    ) -> None: ...
    def declare_input(self, name: str, tensor: torch.Tensor, reason: str) -> None: ...
    def finish(self) -> CaptureRecord: ...
    def close(self) -> None: ...
    @property
    def is_open(self) -> bool: ...
