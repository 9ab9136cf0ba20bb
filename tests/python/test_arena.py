"""graphcheck.WeightsArena: loading, allocation sites, sleep levels and wake (issue 9 §5)."""

from __future__ import annotations

import math

import pytest
import torch

import graphcheck
from graphcheck import _torch
from graphcheck.arena import arena_of


def make_scales() -> torch.Tensor:
    return torch.full((16,), 2.0)


class Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.full((16, 16), 3.0), requires_grad=False)
        self.register_buffer("table", torch.arange(16, dtype=torch.float32))
        self.scales = make_scales()  # plain attribute: neither parameter nor buffer


def site_of(arena: graphcheck.WeightsArena, tensor: torch.Tensor) -> graphcheck.Allocation:
    begin = tensor.untyped_storage().data_ptr()
    return next(a for a in arena.allocations() if a.begin == begin)


def test_loading_allocates_in_the_arena_with_python_sites() -> None:
    arena = graphcheck.WeightsArena(1 << 20, pool="weights")
    allocator = _torch.cpu_allocator()
    with arena.loading() as same:
        assert same is arena
        assert _torch.cpu_allocator() != allocator
        layer = Layer()
    assert _torch.cpu_allocator() == allocator
    outside = torch.ones(16)
    assert arena.contains(layer.weight) and arena.contains(layer.scales)
    assert not arena.contains(outside)
    assert arena.holds(layer) and arena_of(layer) is arena
    assert arena.used >= layer.weight.nbytes + layer.scales.nbytes
    scales = site_of(arena, layer.scales)
    assert (scales.pool, scales.generation) == ("weights", 1)
    assert scales.label.startswith(f"{__file__}:") and scales.label.endswith(" in make_scales")
    assert site_of(arena, layer.weight).label.endswith(" in Layer.__init__")
    assert "awake" in repr(arena) and arena.capacity >= 1 << 20


def test_freed_tensors_return_to_the_arena_and_scopes_nest() -> None:
    arena = graphcheck.WeightsArena(1 << 20)
    other = graphcheck.WeightsArena(1 << 20)
    with arena.loading():
        a = torch.ones(1024)
        with other.loading():
            b = torch.ones(8)
            with arena.loading():
                c = torch.ones(8)
        d = torch.ones(8)
    assert arena.contains(a) and other.contains(b) and arena.contains(c) and arena.contains(d)
    used = arena.used
    del a
    assert arena.used == used - 4096


def test_sleep_level_1_restores_everything() -> None:
    arena = graphcheck.WeightsArena(1 << 20)
    with arena.loading():
        layer = Layer()
    before = {a.begin: a.generation for a in arena.allocations()}
    arena.sleep(1)
    assert arena.asleep
    arena.wake_up()
    assert not arena.asleep
    assert torch.equal(layer.weight, torch.full((16, 16), 3.0))
    assert torch.equal(layer.scales, make_scales())
    assert {a.begin: a.generation for a in arena.allocations()} == before


def test_sleep_level_2_keeps_registered_buffers_only() -> None:
    arena = graphcheck.WeightsArena(1 << 20)
    with arena.loading():
        layer = Layer()
    arena.sleep(2, layer)
    arena.wake_up()
    assert torch.equal(layer.table, torch.arange(16, dtype=torch.float32))
    assert layer.weight.isnan().all() and layer.scales.isnan().all()  # 0xFF poison
    assert layer.weight.view(torch.int32)[0, 0].item() == -1  # every byte 0xFF
    assert site_of(arena, layer.table).generation == 1
    assert site_of(arena, layer.weight).generation == 2
    assert site_of(arena, layer.scales).generation == 2
    # A reload in place brings the weights back; the plain attribute stays poisoned.
    with torch.no_grad():
        layer.weight.fill_(3.0)
    assert not layer.weight.isnan().any() and math.isnan(layer.scales[0].item())


def test_misuse_raises_with_the_cause() -> None:
    arena = graphcheck.WeightsArena(1 << 16)
    with pytest.raises(graphcheck.GraphcheckError, match="not asleep"):
        arena.wake_up()
    with arena.loading(), pytest.raises(graphcheck.GraphcheckError, match="LoadScope.*open"):
        arena.sleep(1)
    arena.sleep(1)
    with pytest.raises(graphcheck.GraphcheckError, match="already asleep"):
        arena.sleep(1)
    with pytest.raises(graphcheck.GraphcheckError, match="asleep"), arena.loading():
        pass
    arena.wake_up()
    with pytest.raises(ValueError, match="level must be 1 or 2, got 3"):
        arena.sleep(3)
    with pytest.raises(TypeError, match="pass the model"):
        arena.sleep(2)
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        arena.sleep(2, torch.ones(2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="capacity must be a positive int"):
        graphcheck.WeightsArena(0)
    allocator = _torch.cpu_allocator()
    # Raised inside a torch op: torch re-raises it as a RuntimeError with graphcheck's message.
    with (
        pytest.raises(RuntimeError, match="exceeds the arena's capacity of 65536 bytes"),
        arena.loading(),
    ):
        torch.empty(1 << 20)
    assert _torch.cpu_allocator() == allocator


def test_capture_of_a_model_in_an_arena_replays_after_sleep_and_wake() -> None:
    arena = graphcheck.WeightsArena(1 << 20)
    with arena.loading():
        layer = Layer()

    class Use(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layer = layer

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.layer.weight + self.layer.table * self.layer.scales

    model = Use()
    cap = graphcheck.capture(model, torch.ones(1, 16))
    expected = cap.output.clone()
    arena.sleep(1)
    with pytest.raises(graphcheck.GraphcheckError, match="asleep"):
        cap.replay()
    arena.wake_up()
    assert torch.equal(cap.replay(), expected)
    arena.sleep(2, model)
    arena.wake_up()
    assert cap.replay().isnan().all()
    cap.epoch("after_wake")
    report = cap.check("after_wake")
    # The weight is registered (a reload restores it); the plain attribute is lost.
    assert {(f.verdict, f.owner) for f in report.findings} == {("lost", "layer.scales")}
