"""Text that cannot be UTF-8 raises the package's error naming the argument (issue 34), never
pybind11's "incompatible function arguments" TypeError, and a C++ message holding bytes that
are not UTF-8 (a path) still arrives as a GraphcheckError."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

import graphcheck
from graphcheck import _core
from watch_fakes import capture_fake, fake_watch

BAD = "x\udcff"  # what the byte 0xff of a file name or environment variable decodes to


@pytest.fixture
def watched() -> Iterator[graphcheck.Watch]:
    watch = fake_watch(model=torch.nn.Linear(4, 4))
    yield watch
    watch.close()


def test_checkpoint_names_its_label(watched: graphcheck.Watch) -> None:
    graph = capture_fake(torch.nn.Linear(4, 4), input=torch.ones(1, 4))
    assert graph.captured and len(watched.graphs) == 1
    with pytest.raises(graphcheck.GraphcheckValueError, match="graphcheck.checkpoint: label") as e:
        graphcheck.checkpoint(BAD)
    assert "lone surrogate U+DCFF at index 1" in str(e.value)
    assert graphcheck.checkpoint("after_reload") is not None  # the watch still works


def test_capture_methods_name_their_arguments() -> None:
    model = torch.nn.Linear(4, 4)  # a Capture holds its model weakly: keep it alive
    capture = graphcheck.capture(model, torch.ones(1, 4))
    with pytest.raises(graphcheck.GraphcheckValueError, match="Capture.epoch: label"):
        capture.epoch(BAD)
    for kwargs, name in (
        ({"epoch": BAD}, "Capture.check: epoch"),
        ({"baseline": BAD}, "Capture.check: baseline"),
        ({"allow": ["ok", BAD]}, r"Capture.check: allow\[1\]"),
    ):
        with pytest.raises(graphcheck.GraphcheckValueError, match=name):
            capture.check(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(graphcheck.GraphcheckValueError, match="Capture.declare_runtime: name"):
        capture.declare_runtime(torch.ones(2), BAD, "scratch")
    assert capture.check().ok  # the refused arguments changed nothing: a plain Linear is clean


def test_watch_allow_is_checked_when_given() -> None:
    with pytest.raises(graphcheck.GraphcheckValueError, match=r"graphcheck.watch: allow\[0\]"):
        fake_watch(allow=[BAD])
    assert graphcheck.current_watch() is None


# Every entry of the compiled module that takes text, called with a str that is not UTF-8:
# the argument's name in a GraphcheckValueError.
def _snapshot() -> _core.Snapshot:
    return _core.Snapshot(epochs=[_core.Epoch("capture")])


def _set(obj: object, name: str) -> Callable[[], object]:
    return lambda: setattr(obj, name, BAD)


CORE_ENTRIES: dict[str, tuple[Callable[[], object], str]] = {
    "Span": (lambda: _core.Span(0, 8, "parameter", BAD), "Span.name"),
    "Span.reason": (lambda: _core.Span(0, 8, "runtime", "w", BAD), "Span.reason"),
    "Span.kind": (lambda: _core.Span(0, 8, BAD), "Span.kind"),
    "Span.name=": (_set(_core.Span(0, 8), "name"), "Span.name"),
    "Allocation": (lambda: _core.Allocation(0, 8, BAD), "Allocation.pool"),
    "Allocation.label=": (_set(_core.Allocation(0, 8), "label"), "Allocation.label"),
    "Epoch": (lambda: _core.Epoch(BAD), "Epoch.label"),
    "Operand": (lambda: _core.Operand(BAD, 0), "Operand.role"),
    "Operand.access": (lambda: _core.Operand("src", 0, 8, BAD), "Operand.access"),
    "Node": (lambda: _core.Node(0, "kernel", BAD), "Node.name"),
    "Node.type": (lambda: _core.Node(0, BAD), "Node.type"),
    "GraphRecord": (lambda: _core.GraphRecord(1, BAD), "GraphRecord.epoch"),
    "Producer": (lambda: _core.Producer(BAD), "Producer.backend"),
    "Snapshot": (lambda: _core.Snapshot(allow=["a", BAD]), r"Snapshot.allow\[1\]"),
    "Snapshot.allow=": (lambda: setattr(_snapshot(), "allow", [BAD]), r"Snapshot.allow\[0\]"),
    "find_epoch": (lambda: _snapshot().find_epoch(BAD), "label"),
    "check epoch": (lambda: _core.check(_snapshot(), epoch=BAD), "epoch"),
    "check baseline": (lambda: _core.check(_snapshot(), baseline=BAD), "baseline"),
    "check allow": (lambda: _core.check(_snapshot(), allow=[BAD]), r"allow\[0\]"),
    "parse_snapshot": (lambda: _core.parse_snapshot(BAD), "text"),
    "parse_snapshot source": (lambda: _core.parse_snapshot("{}", source=BAD), "source"),
    "parse_report": (lambda: _core.parse_report(BAD), "text"),
    "parse_address": (lambda: _core.parse_address(BAD), "text"),
}


@pytest.mark.parametrize("entry", sorted(CORE_ENTRIES))
def test_compiled_entries_name_their_text_argument(entry: str) -> None:
    call, name = CORE_ENTRIES[entry]
    with pytest.raises(graphcheck.GraphcheckValueError, match=f"^{name}: expected text"):
        call()


def test_a_message_with_bytes_that_are_not_utf8_is_still_a_graphcheck_error(
    tmp_path: Path,
) -> None:
    # Paths are file system bytes: this one reaches C++ as \xff and comes back in the message.
    missing = os.fsdecode(os.fsencode(tmp_path) + b"/snap\xff.json")
    with pytest.raises(graphcheck.GraphcheckError, match=r"snap\\xff\.json"):
        graphcheck.read_snapshot(missing)
    with pytest.raises(graphcheck.GraphcheckError, match=r"snap\\xff\.json"):
        graphcheck.read_allowlist(missing)
