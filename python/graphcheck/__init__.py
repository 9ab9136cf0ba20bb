"""graphcheck: CUDA-graph address integrity checking for PyTorch models.

A captured CUDA graph bakes raw addresses; engines free and restore model memory only through
``named_parameters()`` and ``named_buffers()``. graphcheck maps every address a graph uses to
its owner and reports each reference to memory the registration contract cannot see
(``unregistered``), memory freed (``dangling``), moved (``stale``) or discarded by sleep
(``lost``). See docs/python.md.

What is here:

- the checker and the snapshot and report formats (:func:`check`, :func:`read_snapshot`,
  :class:`Snapshot`, :class:`Report`, ...), from the compiled module ``graphcheck._core``,
  which needs no torch;
- the registration contract (:mod:`graphcheck.contract`), re-exported here, and the census of
  unregistered tensors (:func:`census`, :class:`Census`, :class:`CensusEntry`);
- capture and check of any PyTorch model (:func:`capture`, :class:`Capture`; creation sites of
  the tensors it reads: :func:`record_sites`), the CPU weights
  arena with sleep and wake (:class:`WeightsArena`), the graph-replay test helper
  (:func:`check_graph_replay`, :mod:`graphcheck.testing`) and a reference model
  (:mod:`graphcheck.reference`), on top of the compiled module ``graphcheck._torch``;
- the server debug flag (:func:`watch`, :func:`checkpoint`, :func:`current_watch`): every CUDA
  graph capture of the process recorded and checked, and again at each check point
  (``GRAPHCHECK=1`` turns it on without code changes; docs/server.md); what engine authors
  wire into their own server is :mod:`graphcheck.integrations`;
- the pytest fixture ``graphcheck`` (its type: :class:`GraphcheckFixture`).

Everything past the checker uses torch and is imported on first use: ``import graphcheck``
imports neither torch nor ``graphcheck._torch``.

Errors, the one rule: misuse, bad input and setup failures raise :class:`GraphcheckError`, a
``RuntimeError`` whose message names the cause and the fix; where a built-in exception fits,
the class is also that built-in: :class:`GraphcheckTypeError` (a ``TypeError``),
:class:`GraphcheckValueError` (a ``ValueError``), :class:`GraphcheckKeyError` (a
``KeyError``). Findings are never errors, unless asked for (:class:`FindingsError` of a watch
in ``error`` mode, ``GraphReplayResult.assert_clean``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from graphcheck._core import (
    ACCESSES,
    FINDING_VERDICTS,
    NODE_TYPES,
    OWNER_KINDS,
    REPORT_VERSION,
    SNAPSHOT_VERSION,
    VERDICTS,
    Allocation,
    Epoch,
    Finding,
    GraphcheckError,
    GraphRecord,
    KernelParam,
    Node,
    Operand,
    Producer,
    Report,
    Snapshot,
    Span,
    __version__,
    check,
    format_address,
    parse_address,
    parse_report,
    parse_snapshot,
    read_allowlist,
    read_snapshot,
    write_snapshot,
)
from graphcheck._errors import GraphcheckKeyError, GraphcheckTypeError, GraphcheckValueError

if TYPE_CHECKING:
    from graphcheck import arena, contract, integrations, reference, testing
    from graphcheck._capture import Capture, capture
    from graphcheck._census import RUNTIME_STATE_ATTRS, Census, CensusEntry, census
    from graphcheck._sites import record_sites
    from graphcheck._watch.output import CheckResult, FindingsError
    from graphcheck._watch.process import checkpoint, current_watch, watch
    from graphcheck._watch.watch import Watch
    from graphcheck.arena import WeightsArena
    from graphcheck.contract import (
        CONSTANT_BUFFERS_ATTR,
        HELD_PREFIX,
        Rebind,
        StorageView,
        TensorHolder,
        dataclass_tensors,
        held_tensors,
        holder_tensors,
        is_constant_buffer,
        is_holder,
        register_constant_buffer,
        register_held_tensors,
        reload_in_place,
        set_derived_buffer,
        storage_views,
    )
    from graphcheck.pytest_plugin import GraphcheckFixture
    from graphcheck.testing import GraphReplayResult, ReplayStep, check_graph_replay

# Submodules that import torch, and the names re-exported from them. They are imported on
# first access (PEP 562), so `import graphcheck` stays cheap and works where torch is missing.
# A function whose name a module would take lives in a private module (graphcheck._capture,
# graphcheck._census), so that `graphcheck.capture` and `graphcheck.census` are the functions.
_SUBMODULES = ("arena", "contract", "integrations", "reference", "testing")
_LAZY_MODULES: dict[str, tuple[str, ...]] = {
    "graphcheck.contract": (
        "CONSTANT_BUFFERS_ATTR",
        "HELD_PREFIX",
        "Rebind",
        "StorageView",
        "TensorHolder",
        "dataclass_tensors",
        "held_tensors",
        "holder_tensors",
        "is_constant_buffer",
        "is_holder",
        "register_constant_buffer",
        "register_held_tensors",
        "reload_in_place",
        "set_derived_buffer",
        "storage_views",
    ),
    "graphcheck._capture": ("Capture", "capture"),
    "graphcheck._sites": ("record_sites",),
    "graphcheck._census": ("RUNTIME_STATE_ATTRS", "Census", "CensusEntry", "census"),
    "graphcheck.arena": ("WeightsArena",),
    "graphcheck.testing": ("GraphReplayResult", "ReplayStep", "check_graph_replay"),
    "graphcheck._watch.output": ("CheckResult", "FindingsError"),
    "graphcheck._watch.process": ("checkpoint", "current_watch", "watch"),
    "graphcheck._watch.watch": ("Watch",),
    "graphcheck.pytest_plugin": ("GraphcheckFixture",),
}
_LAZY_NAMES = {name: module for module, names in _LAZY_MODULES.items() for name in names}

__all__ = [
    "ACCESSES",
    "FINDING_VERDICTS",
    "NODE_TYPES",
    "OWNER_KINDS",
    "REPORT_VERSION",
    "SNAPSHOT_VERSION",
    "VERDICTS",
    "Allocation",
    "Epoch",
    "Finding",
    "GraphRecord",
    "GraphcheckError",
    "GraphcheckKeyError",
    "GraphcheckTypeError",
    "GraphcheckValueError",
    "KernelParam",
    "Node",
    "Operand",
    "Producer",
    "Report",
    "Snapshot",
    "Span",
    "__version__",
    "check",
    "format_address",
    "parse_address",
    "parse_report",
    "parse_snapshot",
    "read_allowlist",
    "read_snapshot",
    "write_snapshot",
    # graphcheck.contract
    "CONSTANT_BUFFERS_ATTR",
    "HELD_PREFIX",
    "Rebind",
    "StorageView",
    "TensorHolder",
    "dataclass_tensors",
    "held_tensors",
    "holder_tensors",
    "is_constant_buffer",
    "is_holder",
    "register_constant_buffer",
    "register_held_tensors",
    "reload_in_place",
    "set_derived_buffer",
    "storage_views",
    # the census (graphcheck._census)
    "RUNTIME_STATE_ATTRS",
    "Census",
    "CensusEntry",
    "census",
    # capture, sites, arena, test helper (graphcheck._capture, _sites, arena, testing)
    "Capture",
    "GraphReplayResult",
    "ReplayStep",
    "WeightsArena",
    "capture",
    "check_graph_replay",
    "record_sites",
    # the pytest fixture's type (graphcheck.pytest_plugin)
    "GraphcheckFixture",
    # the server debug flag (graphcheck._watch)
    "CheckResult",
    "FindingsError",
    "Watch",
    "checkpoint",
    "current_watch",
    "watch",
    # submodules
    "arena",
    "contract",
    "integrations",
    "reference",
    "testing",
]


def __getattr__(name: str) -> Any:
    """Imports a submodule, or a name re-exported from one, on first access."""
    if name in _SUBMODULES:
        return importlib.import_module(f"graphcheck.{name}")
    module = _LAZY_NAMES.get(name)
    if module is None:
        raise AttributeError(f"module 'graphcheck' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY_NAMES) | set(_SUBMODULES))
