"""Bad input to the capture (issue 9 §7): a clear exception naming the cause, nothing crashes,
nothing stays installed, and a second capture works after each failure."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
import torch

import graphcheck
from graphcheck import _torch


class Small(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


@pytest.fixture(autouse=True)
def nothing_left_installed() -> Iterator[None]:
    """After each test: the CPU allocator is the one before, and a capture works."""
    allocator = _torch.cpu_allocator()
    yield
    assert _torch.cpu_allocator() == allocator
    model = Small()  # held: a capture keeps its model weakly, and check() reads it
    cap = graphcheck.capture(model, torch.ones(1, 4))
    assert cap.check().ok
    assert torch.equal(cap.replay(), cap.output)


class Raises(torch.nn.Module):
    def __init__(self, fail_on_call: int) -> None:
        super().__init__()
        self.calls = 0
        self.fail_on_call = fail_on_call

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        y = x * 2
        if self.calls == self.fail_on_call:
            raise RuntimeError("shape mismatch in layer 3")
        return y


def test_forward_raising_inside_the_window_propagates_with_a_note() -> None:
    model = Raises(fail_on_call=2)  # the warm-up passes, the captured forward raises
    with pytest.raises(RuntimeError, match="shape mismatch in layer 3") as caught:
        graphcheck.capture(model, torch.ones(2))
    notes = getattr(caught.value, "__notes__", [])
    if sys_has_notes():
        assert any("raised inside the capture window" in n and "Raises" in n for n in notes)


def sys_has_notes() -> bool:
    return hasattr(BaseException, "add_note")


def test_forward_raising_in_warmup_propagates() -> None:
    with pytest.raises(RuntimeError, match="shape mismatch"):
        graphcheck.capture(Raises(fail_on_call=1), torch.ones(2))


def test_forward_raising_inside_an_arena_loading_scope_restores_the_allocator() -> None:
    arena = graphcheck.WeightsArena(1 << 20)
    with pytest.raises(ValueError, match="boom"), arena.loading():
        torch.ones(4)
        raise ValueError("boom")
    assert not arena.asleep
    arena.sleep(1)  # no scope is left open
    arena.wake_up()


def test_a_non_module_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"model must be a torch.nn.Module, got function"):
        graphcheck.capture(lambda x: x * 2, torch.ones(2))
    with pytest.raises(TypeError, match="got dict"):
        graphcheck.capture({"weight": torch.ones(2)})


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="warmup must be an int >= 0, got -1"):
        graphcheck.capture(Small(), torch.ones(1, 4), warmup=-1)
    with pytest.raises(TypeError, match="arena must be a graphcheck.WeightsArena, got str"):
        graphcheck.capture(Small(), torch.ones(1, 4), arena="weights")


def test_a_capture_checked_after_its_model_was_freed() -> None:
    model = Small()
    cap = graphcheck.capture(model, torch.ones(1, 4))
    del model
    gc.collect()
    with pytest.raises(
        graphcheck.GraphcheckError, match=r"Capture.check: the captured Small was freed"
    ):
        cap.check()
    with pytest.raises(graphcheck.GraphcheckError, match="was freed.*capture"):
        cap.epoch("later")
    with pytest.raises(graphcheck.GraphcheckError, match="was freed"):
        _ = cap.model
    assert cap.check("capture").ok  # a recorded epoch needs no model
    # The graph reads the freed parameters: a real graph would read freed memory.
    with pytest.raises(graphcheck.GraphcheckError, match=r"aten::linear.*0x[0-9a-f]+"):
        cap.replay()
    assert "freed" in repr(cap)


class Holder:
    def __init__(self) -> None:
        self.scale = torch.ones(2)

    def persistent_tensors(self) -> dict[str, object]:
        return {"scale": self.scale, "bits": 4}


def test_a_holder_returning_non_tensors_names_the_holder_and_key() -> None:
    model = Small()
    model.quant_method = Holder()
    with pytest.raises(TypeError, match=r"quant_method.*bits"):
        graphcheck.capture(model, torch.ones(1, 4))


class Node:
    def __init__(self) -> None:
        self.next: Node | None = None
        self.payload: torch.Tensor | None = None


def test_a_cyclic_object_graph_terminates_and_is_named_by_path() -> None:
    model = Small()
    a, b = Node(), Node()
    a.next, b.next = b, a
    b.payload = torch.ones(4)
    model.ring = a
    model.me = model

    def forward(x: torch.Tensor) -> torch.Tensor:
        return model.lin(x) + b.payload

    model.forward = forward  # type: ignore[method-assign]
    report = graphcheck.capture(model, torch.ones(1, 4)).check("capture")
    assert {f.owner for f in report.findings} == {"ring.next.payload"}


def test_nested_capture_is_refused() -> None:
    class Nested(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            graphcheck.capture(Small(), torch.ones(1, 4), warmup=0)
            return x + 1

    with pytest.raises(graphcheck.GraphcheckError, match="already has an open capture window"):
        graphcheck.capture(Nested(), torch.ones(1), warmup=0)


def test_bad_declarations() -> None:
    model = Small()
    cap = graphcheck.capture(model, torch.ones(1, 4))
    with pytest.raises(ValueError, match="every exemption says why"):
        cap.declare_runtime(torch.ones(2), "scratch", "")
    with pytest.raises(TypeError, match="expected a torch.Tensor, got str"):
        cap.declare_runtime("kv", "scratch", "reason")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="no memory graphcheck can see.*meta"):
        cap.declare_input("x", torch.empty(2, device="meta"))
    with pytest.raises(TypeError, match="name: expected a non-empty str"):
        cap.declare_input(torch.ones(2), "x")  # type: ignore[arg-type]
