"""Helpers of the watch, integration and server tests: the planted sites of the reference model,
a stand-in for torch.cuda.CUDAGraph, and fake engine packages written to a folder."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

import graphcheck
from graphcheck._watch.cuda_capture import READER_CUDA_GRAPH, ReadNodes

# The legacy model's planted sites, and the parameters the forward reads directly (stale after
# a rebinding reload), by census path.
from test_reference import PLANTED as PLANTED
from test_reference import READ_PARAMETERS as READ_PARAMETERS


class FakeCUDAGraph:
    """Stands in for torch.cuda.CUDAGraph on the CPU: capture_begin/capture_end do nothing
    (the ATen window the watch opens records the forward run between them)."""

    fail_end = False

    def __init__(self) -> None:
        self.captured = False

    def capture_begin(self, pool: Any = None, capture_error_mode: str = "global") -> None:
        self.captured = False

    def capture_end(self) -> None:
        if self.fail_end:
            raise RuntimeError("capture invalidated")
        self.captured = True


class NodesReader:
    """Stands in for the CUDA graph reader: every graph it reads holds ``nodes`` (kernels no
    dispatcher op saw, such as a Triton-compiled forward's)."""

    name = READER_CUDA_GRAPH

    def __init__(self, nodes: list[graphcheck.Node]) -> None:
        self.nodes = nodes

    def begin(self, graph: object) -> object:
        return "stream"

    def read(self, token: object) -> ReadNodes:
        return ReadNodes(self.nodes)


def cpu_device(graph: object) -> torch.device:
    return torch.device("cpu")


def fake_watch(**kwargs: Any) -> graphcheck.Watch:
    """The process watch, hooked on FakeCUDAGraph, discovering models on the CPU."""
    options: dict[str, Any] = {
        "graph_class": FakeCUDAGraph,
        "hooks_module": None,
        "device_of": cpu_device,
        "allocator_history": False,
    }
    options.update(kwargs)
    return graphcheck.watch(**options)


def capture_fake(model: torch.nn.Module, **inputs: torch.Tensor) -> FakeCUDAGraph:
    """One 'CUDA graph' capture of model(**inputs) on the fake graph class."""
    graph = FakeCUDAGraph()
    with torch.no_grad():
        model(**inputs)  # warm-up, as before a real capture
        graph.capture_begin()
        model(**inputs)
        graph.capture_end()
    return graph


def owners(report: graphcheck.Report) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for f in report.findings:
        found.setdefault(f.verdict, set()).add(f.owner)
    return found


def owners_of(report_json: dict[str, Any]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for f in report_json["findings"]:
        found.setdefault(f["verdict"], set()).add(f["owner"])
    return found


def write_package(root: Path, files: dict[str, str]) -> None:
    """Writes ``{"pkg/mod.py": source}`` under ``root`` (every folder gets an __init__.py)."""
    for relative, source in files.items():
        path = root / relative
        for parent in path.relative_to(root).parents:
            if str(parent) != ".":
                init = root / parent / "__init__.py"
                init.parent.mkdir(parents=True, exist_ok=True)
                init.touch()
        path.write_text(textwrap.dedent(source))


def forget_modules(prefix: str) -> Iterator[None]:
    """Generator for a fixture: drop ``prefix*`` from sys.modules afterwards.

    Post-import callbacks still waiting for such a module (a plugin's hook on a worker module
    the test never imported, as the vLLM plugin's on the CPU worker) are dropped too.
    """
    from graphcheck._watch import import_hook

    yield
    for name in [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]:
        del sys.modules[name]
    finder = import_hook._FINDER
    if finder is not None:
        with import_hook._FINDER_LOCK:
            for name in [n for n in finder.callbacks if n.startswith(prefix + ".")]:
                del finder.callbacks[name]
            if not finder.callbacks and finder in sys.meta_path:
                sys.meta_path.remove(finder)
