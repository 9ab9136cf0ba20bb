"""Type stub of graphcheck._cuda (python/cuda_module.cc): the CUDA graph reader of the watch.

Private: :func:`graphcheck.watch` uses it through ``graphcheck._watch.graph_reader``. Built
only where the CUDA and CUPTI headers were found; it loads the driver on first use (never at
import). graphcheck::Error raises graphcheck.GraphcheckError. Unverified on a GPU.
"""

from typing import Final

from graphcheck._core import Node, _pybind11_type

__version__: Final[str]
READER: Final[str]

class ReadGraph(metaclass=_pybind11_type):
    """The nodes read from one CUDA graph and what could not be read in it."""

    @property
    def nodes(self) -> list[Node]: ...
    @property
    def capture_id(self) -> int: ...
    @property
    def unreadable(self) -> list[tuple[int, str, str]]: ...
    @property
    def conditionals_without_bodies(self) -> list[int]: ...

def driver_problem() -> str:
    """Why CUDA graphs cannot be read here, or '' when they can."""

def read_capture(stream: int) -> ReadGraph:
    """Reads the graph the CUDA stream ``stream`` is capturing into (before the capture ends)."""

def read_graph(graph: int) -> ReadGraph:
    """Reads the CUDA graph ``graph`` (a cudaGraph_t as int)."""
