"""Creation sites: owners nobody reaches by attribute are labelled where they were made (issue 20).

graphcheck.record_sites and the warm-up of graphcheck.capture record where each tensor was
created; a capture labels the memory it reads that no registered owner and no census path
covers with that site (``file:line in function``, ``(cached: name)`` for a cached function's
result) instead of the ATen op that first read it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch

import graphcheck
from graphcheck import _sites

_GLOBALS: dict[str, torch.Tensor] = {}


def _line_of(function: Callable[..., Any], text: str) -> int:
    """The line of ``function``'s source that contains ``text``."""
    lines, first = inspect.getsourcelines(inspect.unwrap(function))
    return first + next(i for i, line in enumerate(lines) if text in line)


@functools.lru_cache(maxsize=4)
def cached_table(n: int) -> torch.Tensor:
    return torch.arange(n, dtype=torch.float32) + 1  # the site of the cached tensor


def compatible_cache(function: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """A cache behind a ``functools.wraps`` wrapper, as transformers' method lru_cache."""
    with_cache = functools.lru_cache(maxsize=4)(function)

    @functools.wraps(function)
    def wrapper(*args: Any) -> torch.Tensor:
        return with_cache(*args)

    return wrapper


class Tables:
    @staticmethod
    @compatible_cache
    def index(n: int) -> torch.Tensor:
        return torch.ones(n) * 3  # the site of the static method's cached tensor


def make_global(n: int) -> torch.Tensor:
    return torch.full((n,), 2.0)  # the site of the module global


class Reader(torch.nn.Module):
    """Reads a cached function's result, a cached static method's and a module global."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        _GLOBALS["scale"] = make_global(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x) * cached_table(8).view(-1)
        return y + Tables.index(8) * _GLOBALS["scale"]


def unregistered(capture: graphcheck.Capture, epoch: str | None = "capture") -> set[str]:
    return {f.owner for f in capture.check(epoch).findings if f.verdict == "unregistered"}


def labels() -> tuple[str, str, str]:
    table = _line_of(cached_table, "the site of the cached tensor")
    index = _line_of(Tables.index, "the site of the static method's")
    scale = _line_of(make_global, "the site of the module global")
    return (
        f"{__file__}:{table} in cached_table (cached: cached_table)",
        f"{__file__}:{index} in Tables.index (cached: Tables.index)",
        f"{__file__}:{scale} in make_global",
    )


def setup_function() -> None:
    """Empty caches: each test's warm-up decides where the cached tensors are made."""
    cached_table.cache_clear()
    for cell in Tables.index.__closure__ or ():
        getattr(cell.cell_contents, "cache_clear", lambda: None)()


def test_a_cache_filled_by_the_warm_up_and_a_global_built_while_recording_name_their_site() -> None:
    with graphcheck.record_sites():
        model = Reader()  # the module global: made at construction
    cap = graphcheck.capture(model, torch.ones(2, 8))  # the warm-up fills both caches
    table, index, scale = labels()
    assert unregistered(cap) == {table, index, scale}
    assert unregistered(cap, None) == {table, index, scale}  # every epoch, not only capture's
    assert cap.check("capture", allow=["**(cached: **)", "**in make_global"]).ok
    # A creation site holds its file's path: "*" does not cross its dots, "**" does.
    assert not cap.check("capture", allow=["*in make_global"]).ok


def test_a_forward_recorded_before_the_capture_names_the_cache_it_filled() -> None:
    model = Reader()  # built outside: the global is labelled by the op that read it
    with graphcheck.record_sites(), torch.no_grad():
        model(torch.ones(2, 8))  # the user's own warm-up fills the caches
    cap = graphcheck.capture(model, torch.ones(2, 8), warmup=0)
    table, index, _ = labels()
    assert unregistered(cap) == {table, index, "aten:aten::mul"}


def test_without_a_recorded_site_the_label_is_the_op_that_first_read_it() -> None:
    model = Reader()
    with torch.no_grad():
        model(torch.ones(2, 8))  # the caches are filled outside any recording
    cap = graphcheck.capture(model, torch.ones(2, 8))
    assert unregistered(cap) == {"aten:aten::view", "aten:aten::mul"}


def test_a_freed_or_moved_storage_loses_its_site() -> None:
    with graphcheck.record_sites():
        kept, moved, freed = torch.ones(4), torch.ones(4), torch.ones(4)
    addresses = [t.untyped_storage().data_ptr() for t in (kept, moved, freed)]
    moved.resize_(1 << 16)  # its bytes move: the old address is not its storage's any more
    del freed
    found = [_sites._SITES.find(a) for a in addresses]
    assert found[0] is not None and found[1] is None and found[2] is None
    assert moved.untyped_storage().data_ptr() != addresses[1]


def test_epoch_labels_keep_census_paths_and_shorten_python_frames() -> None:
    allocations = [
        graphcheck.Allocation(
            1 << 20, 64, label="/venv/lib/python3.11/site-packages/pkg/m.py:3 in f"
        ),
        graphcheck.Allocation(2 << 20, 64, label="/home/me/model.py:9 in Model.__init__"),
        graphcheck.Allocation(3 << 20, 64, label="aten:aten::mm"),  # nothing recorded there
        graphcheck.Allocation(4 << 20, 64, label="layers.0.scale"),
    ]
    epoch = _sites.label_sites(graphcheck.Epoch("e", allocations=allocations))
    assert [a.label for a in epoch.allocations] == [
        "pkg/m.py:3 in f",
        "/home/me/model.py:9 in Model.__init__",
        "aten:aten::mm",
        "layers.0.scale",
    ]
    assert _sites.short_path("/usr/lib/python3/dist-packages/a/b.py") == "a/b.py"


def test_recording_nests_and_restores_the_mode_stack() -> None:
    with graphcheck.record_sites():
        with graphcheck.record_sites():
            inner = torch.zeros(3)
        outer = torch.zeros(3)
    after = torch.zeros(3)
    assert _sites._SITES.find(inner.untyped_storage().data_ptr()) is not None
    assert _sites._SITES.find(outer.untyped_storage().data_ptr()) is not None
    assert _sites._SITES.find(after.untyped_storage().data_ptr()) is None
    assert not torch._C._is_torch_function_mode_enabled()
