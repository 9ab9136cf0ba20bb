"""Type stub of graphcheck._core (python/core_*.cc): the checker, snapshot and report I/O.

Value semantics: the classes are copied across the boundary, and list attributes return a new
list on every read; assign a new list to change one.
"""

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import ClassVar, Final, Literal

__version__: Final[str]
SNAPSHOT_VERSION: Final[int]
REPORT_VERSION: Final[int]

_VerdictName = Literal[
    "registered",
    "runtime",
    "graph",
    "input",
    "allowed",
    "unregistered",
    "dangling",
    "stale",
    "lost",
]
_FindingVerdictName = Literal["unregistered", "dangling", "stale", "lost"]
_OwnerKindName = Literal["parameter", "buffer", "runtime", "graph", "input"]
_NodeTypeName = Literal[
    "kernel",
    "memcpy",
    "memset",
    "host",
    "child_graph",
    "empty",
    "event_wait",
    "event_record",
    "ext_semas_signal",
    "ext_semas_wait",
    "mem_alloc",
    "mem_free",
    "batch_mem_op",
    "conditional",
    "op",
]
_AccessName = Literal["unknown", "read", "write", "read-write"]
_StrPath = str | os.PathLike[str]

VERDICTS: Final[tuple[_VerdictName, ...]]
FINDING_VERDICTS: Final[tuple[_FindingVerdictName, ...]]
OWNER_KINDS: Final[tuple[_OwnerKindName, ...]]
NODE_TYPES: Final[tuple[_NodeTypeName, ...]]
ACCESSES: Final[tuple[_AccessName, ...]]

# The metaclass of every class pybind11 binds (pybind11_builtins.pybind11_type at run time, a
# module without a stub): the classes below declare it, as their runtime has it.
class _pybind11_type(type): ...

class GraphcheckError(RuntimeError):
    """Misuse, bad input or a setup failure; the message names the cause and the fix."""

# The value classes compare with == and are unhashable, as pybind11 binds them: their __eq__
# takes only their own class (any other raises TypeError) and their __hash__ is None. Both
# narrow object's, hence the ignores ([override], [assignment]) at the end of each class.

class Span(metaclass=_pybind11_type):
    """An address range [begin, begin + size) with an owner."""

    begin: int
    size: int
    kind: _OwnerKindName
    name: str
    reason: str
    def __init__(
        self,
        begin: int,
        size: int,
        kind: _OwnerKindName = "parameter",
        name: str = "",
        reason: str = "",
    ) -> None: ...
    @property
    def end(self) -> int:
        """One past the last address."""
    def contains(self, address: int) -> bool:
        """True if begin <= address < end."""
    def __eq__(self, other: Span) -> bool: ...  # type: ignore[override]
    __hash__: ClassVar[None]  # type: ignore[assignment]

class Allocation(metaclass=_pybind11_type):
    """A live allocation with its pool and generation."""

    begin: int
    size: int
    pool: str
    generation: int
    label: str
    def __init__(
        self,
        begin: int,
        size: int,
        pool: str = "default",
        generation: int = 0,
        label: str = "",
    ) -> None: ...
    @property
    def end(self) -> int:
        """One past the last address."""
    def contains(self, address: int) -> bool:
        """True if begin <= address < end."""
    def is_graph_pool(self) -> bool:
        """True for pools named 'graph' or 'graph:<anything>'."""
    def __eq__(self, other: Allocation) -> bool: ...  # type: ignore[override]
    __hash__: ClassVar[None]  # type: ignore[assignment]

class Epoch(metaclass=_pybind11_type):
    """The spans and allocations at one moment."""

    label: str
    spans: list[Span]
    allocations: list[Allocation]
    def __init__(
        self,
        label: str,
        spans: Sequence[Span] = ...,
        allocations: Sequence[Allocation] = ...,
    ) -> None: ...
    def __eq__(self, other: Epoch) -> bool: ...  # type: ignore[override]
    __hash__: ClassVar[None]  # type: ignore[assignment]

class KernelParam(metaclass=_pybind11_type):
    """One kernel argument: its offset and its bytes in memory order."""

    offset: int
    data: bytes
    def __init__(self, offset: int, data: bytes) -> None: ...
    def __eq__(self, other: KernelParam) -> bool: ...  # type: ignore[override]
    __hash__: ClassVar[None]  # type: ignore[assignment]

class Operand(metaclass=_pybind11_type):
    """An address operand of a node, with its extent where known."""

    role: str
    begin: int
    size: int
    access: _AccessName
    def __init__(
        self, role: str, begin: int, size: int = 0, access: _AccessName = "unknown"
    ) -> None: ...
    def __eq__(self, other: Operand) -> bool: ...  # type: ignore[override]
    __hash__: ClassVar[None]  # type: ignore[assignment]

class Node(metaclass=_pybind11_type):
    """One graph node; which members are used depends on type."""

    id: int
    type: _NodeTypeName
    name: str
    params: list[KernelParam]
    operands: list[Operand]
    bodies: list[list[Node]]
    def __init__(
        self,
        id: int,
        type: _NodeTypeName = "empty",
        name: str = "",
        params: Sequence[KernelParam] = ...,
        operands: Sequence[Operand] = ...,
        bodies: Sequence[Sequence[Node]] = ...,
    ) -> None: ...
    def __eq__(self, other: Node) -> bool: ...  # type: ignore[override]
    __hash__: ClassVar[None]  # type: ignore[assignment]

class GraphRecord(metaclass=_pybind11_type):
    """A captured graph: its id, its capture epoch and its nodes."""

    id: int
    epoch: str
    nodes: list[Node]
    reader: str
    def __init__(self, id: int, epoch: str, nodes: Sequence[Node] = ...) -> None: ...
    def __eq__(self, other: GraphRecord) -> bool: ...  # type: ignore[override]
    __hash__: ClassVar[None]  # type: ignore[assignment]

class Producer(metaclass=_pybind11_type):
    """Who wrote a snapshot."""

    backend: str
    tool: str
    def __init__(self, backend: str = "synthetic", tool: str = "") -> None: ...
    def __eq__(self, other: Producer) -> bool: ...  # type: ignore[override]
    __hash__: ClassVar[None]  # type: ignore[assignment]

class Snapshot(metaclass=_pybind11_type):
    """Everything the checker reads: epochs in order, graphs, allowlist globs."""

    producer: Producer
    epochs: list[Epoch]
    graphs: list[GraphRecord]
    allow: list[str]
    def __init__(
        self,
        producer: Producer | None = None,
        epochs: Sequence[Epoch] = ...,
        graphs: Sequence[GraphRecord] = ...,
        allow: Sequence[str] = ...,
    ) -> None: ...
    def find_epoch(self, label: str) -> Epoch | None:
        """A copy of the epoch labelled `label`, or None."""
    def to_json(self) -> str:
        """The snapshot as JSON text (format version 1)."""
    def __eq__(self, other: Snapshot) -> bool: ...  # type: ignore[override]
    __hash__: ClassVar[None]  # type: ignore[assignment]

class Finding(metaclass=_pybind11_type):
    """One reference whose verdict is a finding (read-only)."""

    @property
    def verdict(self) -> _FindingVerdictName: ...
    @property
    def owner(self) -> str: ...
    @property
    def owner_kind(self) -> _OwnerKindName | None: ...
    @property
    def graph(self) -> int: ...
    @property
    def node(self) -> int: ...
    @property
    def node_type(self) -> _NodeTypeName: ...
    @property
    def kernel(self) -> str: ...
    @property
    def param(self) -> int | None: ...
    @property
    def offset(self) -> int | None: ...
    @property
    def operand(self) -> str: ...
    @property
    def address(self) -> int: ...
    @property
    def access(self) -> _AccessName: ...
    @property
    def range_begin(self) -> int: ...
    @property
    def range_size(self) -> int: ...
    @property
    def detail(self) -> str: ...
    @property
    def fix(self) -> str: ...
    def __eq__(self, other: Finding) -> bool: ...  # type: ignore[override]
    __hash__: ClassVar[None]  # type: ignore[assignment]

class Report(metaclass=_pybind11_type):
    """The result of checking a snapshot's graphs in one epoch (read-only)."""

    @property
    def epoch(self) -> str: ...
    @property
    def baseline(self) -> str: ...
    @property
    def summary(self) -> dict[str, int]:
        """'graphs', 'nodes', 'references', then each of the nine verdicts."""
    @property
    def findings(self) -> list[Finding]: ...
    @property
    def stale_allow(self) -> list[str]: ...
    @property
    def stale_allow_hints(self) -> list[str]: ...
    @property
    def warnings(self) -> list[str]: ...
    @property
    def unattributed(self) -> list[tuple[int, int, str, int, int]]:
        """(graph, node, kernel, words, first word): pointer-like words in no known memory."""
    @property
    def ok(self) -> bool:
        """True if no findings."""
    def to_json(self, indent: int = 2) -> str:
        """The JSON report (format version 1); one line when indent is negative.

        Releases the GIL while it renders.
        """
    def to_html(
        self,
        snapshot: Snapshot | None = None,
        *,
        subject: str | None = None,
        header: Iterable[str] | None = None,
        allow: Iterable[str] = (),
        navigation: Mapping[str, str | None] | None = None,
    ) -> str:
        """One self-contained HTML page; with the snapshot, a map and every epoch's report.

        Releases the GIL while it renders: do not change the snapshot from another thread
        meanwhile.
        """
    def __eq__(self, other: Report) -> bool: ...  # type: ignore[override]
    __hash__: ClassVar[None]  # type: ignore[assignment]

def check(
    snapshot: Snapshot | _StrPath,
    epoch: str | None = None,
    baseline: str | None = None,
    allow: Iterable[str] = (),
    threads: int = 0,
) -> Report:
    """Checks every graph of `snapshot` (or of the snapshot file) in one epoch."""

class CheckSession(metaclass=_pybind11_type):
    """A snapshot kept between checks: check() returns what check(snapshot) returns."""

    def __init__(self, snapshot: Snapshot) -> None: ...
    def put_epoch(self, epoch: Epoch, *, last: bool = False) -> str:
        """'added', 'unchanged' or 'replaced'."""
    def remove_epoch(self, label: str) -> bool: ...
    @property
    def epochs(self) -> list[str]: ...
    def check(
        self,
        epoch: str | None = None,
        baseline: str | None = None,
        allow: Iterable[str] = (),
        threads: int = 0,
    ) -> Report: ...
    @property
    def last_stats(self) -> dict[str, int | bool]: ...

def parse_snapshot(text: str, source: str = "snapshot") -> Snapshot:
    """Parses and validates snapshot JSON text."""

def read_snapshot(path: _StrPath) -> Snapshot:
    """Reads and parses a snapshot file."""

def write_snapshot(snapshot: Snapshot, path: _StrPath) -> None:
    """Writes the snapshot's JSON to `path` (releases the GIL while it writes)."""

def parse_report(text: str) -> Report:
    """Parses report JSON (format version 1)."""

def glob_matches(glob: str, name: str) -> bool:
    """True if the allowlist glob matches the whole of `name` (linear in both)."""

def owner_families(owners: Iterable[str]) -> list[tuple[str, int]]:
    """The owners as families of numbered names, each (name as the report compacts it, owners)."""

def read_allowlist(path: _StrPath) -> list[str]:
    """Reads allowlist globs from a file, one per line (UTF-8 text, at most 4 MiB)."""

def format_address(address: int) -> str:
    """The address as lower-case hex with a 0x prefix."""

def parse_address(text: str) -> int | None:
    """Parses '0x...' (1 to 16 hex digits); None for any other text."""

def is_graph_pool(pool: tuple[int, int], listed: bool) -> bool:
    """Whether the caching-allocator pool id is a graph's (private, or listed; never (0, 0))."""

def torch_pool_name(pool: tuple[int, int], listed: bool) -> str:
    """'default', 'graph:<a>,<b>' or 'mempool:<a>,<b>'."""

def allocator_allocations(
    segments: Iterable[Mapping[str, object]], graph_pools: Iterable[tuple[int, int]]
) -> list[Allocation]:
    """The caching allocator's segments as allocations in address order."""

def add_allocator_memory(
    epoch: Epoch,
    segments: Iterable[Mapping[str, object]],
    graph_pools: Iterable[tuple[int, int]],
    labels: Iterable[tuple[int, int, str]],
) -> None:
    """Adds the caching allocator's segments and live blocks to epoch.allocations in place."""
