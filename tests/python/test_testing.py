"""graphcheck.testing.check_graph_replay and the pytest fixture (issue 9 §6)."""

from __future__ import annotations

import math
import textwrap
from typing import Any

import pytest
import torch

from graphcheck import GraphcheckError, ReplayStep, _torch
from graphcheck.contract import set_derived_buffer
from graphcheck.testing import STEP_LABELS, GraphReplayResult, check_graph_replay

pytest_plugins = ("pytester",)


class Scaled(torch.nn.Module):
    """A weight and a weight-derived scale, kept by the contract or as a plain attribute."""

    def __init__(self, registered: bool) -> None:
        super().__init__()
        self.registered = registered
        self.weight = torch.nn.Parameter(torch.randn(8, 8), requires_grad=False)
        if registered:
            self.register_buffer("scale", None, persistent=False)
        else:
            self.scale = None
        self.process_weights_after_loading()

    def process_weights_after_loading(self) -> None:
        scale = self.weight.abs().amax(1)
        if self.registered:
            set_derived_buffer(self, "scale", scale)
        elif self.scale is None:
            self.scale = scale  # derived once, as legacy methods do

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.weight) * self.scale


def inputs(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {"x": torch.ones(2, 8)}


def test_a_registered_model_is_clean_through_sleep_level_2() -> None:
    result = check_graph_replay(lambda: Scaled(registered=True), inputs)
    assert isinstance(result, GraphReplayResult)
    assert [s.label for s in result] == list(STEP_LABELS[:3])
    assert all(isinstance(s, ReplayStep) and s.ok for s in result)
    assert result.ok
    result.assert_clean()
    step = result["after_wake_l2_reload"]
    assert step.outputs_equal and step.max_abs_diff == 0.0
    assert set(step.summary) >= {"registered", "unregistered", "lost"}
    assert step.findings == [] and step.rebinds == ()
    assert result.capture.epochs == list(STEP_LABELS[:3])
    assert result.arena.holds(result.capture.model)


def test_a_plain_derived_tensor_is_found_and_lost() -> None:
    result = check_graph_replay(lambda: Scaled(registered=False), inputs)
    capture, l1, l2 = result.steps
    assert capture.outputs_equal and l1.outputs_equal
    assert {(f.verdict, f.owner) for f in capture.findings} == {("unregistered", "scale")}
    assert not l2.outputs_equal and math.isnan(l2.max_abs_diff)
    assert {(f.verdict, f.owner) for f in l2.findings} == {("lost", "scale")}
    with pytest.raises(AssertionError) as failed:
        result.assert_clean()
    message = str(failed.value)
    assert "capture: unregistered scale (allocation label): 1 reference(s)" in message
    assert "after_wake_l2_reload: lost scale" in message
    assert "after_wake_l2_reload: the replayed graph's output differs" in message


def test_a_second_checkpoint_reloaded_by_rebinding_is_stale() -> None:
    second = {"weight": torch.linspace(-1.0, 1.0, 64).view(8, 8)}
    result = check_graph_replay(
        lambda: Scaled(registered=True), inputs, second_checkpoint=lambda: second
    )
    assert [s.label for s in result] == list(STEP_LABELS)
    rebind = result["after_reload_rebind"]
    assert not rebind.outputs_equal
    assert {(f.verdict, f.owner) for f in rebind.findings} == {("stale", "weight")}
    assert "after_reload_rebind: stale weight (parameter)" in "\n".join(result.problems())
    assert "DIFFER" in str(result)
    # The derived buffer was refilled in place from the new weight.
    model = result.capture.model
    assert torch.equal(model.weight, second["weight"])
    assert torch.equal(model.scale, second["weight"].abs().amax(1))


def test_inputs_as_tuple_or_single_tensor_and_module_checkpoints() -> None:
    single = check_graph_replay(lambda: Scaled(registered=True), lambda m: torch.ones(2, 8))
    assert single.ok
    result = check_graph_replay(
        lambda: Scaled(registered=True),
        lambda m: (torch.ones(2, 8),),
        second_checkpoint=lambda: Scaled(registered=True),
    )
    assert len(result) == 4 and result["capture"].ok


def test_allow_globs_apply_to_every_check() -> None:
    result = check_graph_replay(lambda: Scaled(registered=False), inputs, allow=["sc*"])
    assert all(s.report.ok for s in result)
    assert result["capture"].summary["allowed"] == 1


def test_bad_factories_and_checkpoints() -> None:
    allocator = _torch.cpu_allocator()
    with pytest.raises(TypeError, match=r"factory\(\) must return a torch.nn.Module, got int"):
        check_graph_replay(lambda: 3, inputs)  # type: ignore[arg-type,return-value]

    def broken() -> torch.nn.Module:
        torch.ones(4)
        raise RuntimeError("checkpoint file missing")

    with pytest.raises(RuntimeError, match="checkpoint file missing"):
        check_graph_replay(broken, inputs)
    with pytest.raises(KeyError, match="no parameter or persistent buffer.*'bogus'"):
        check_graph_replay(
            lambda: Scaled(registered=True), inputs, second_checkpoint={"bogus": torch.ones(1)}
        )
    with pytest.raises(TypeError, match="second_checkpoint must be a mapping"):
        check_graph_replay(lambda: Scaled(registered=True), inputs, second_checkpoint=lambda: 7)
    assert _torch.cpu_allocator() == allocator


def test_a_replay_of_freed_inputs_outside_the_arena_is_an_error() -> None:
    keep: dict[str, Any] = {}

    class External(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)

        def forward(self, x: torch.Tensor) -> Any:
            return self.lin(x) + keep["bias"]

    keep["bias"] = torch.ones(2)  # outside the arena, freed after the capture
    result = check_graph_replay(External, lambda m: torch.ones(1, 2))
    assert {f.owner for f in result["capture"].findings} == {"aten:aten::add"}
    keep.clear()
    with pytest.raises(GraphcheckError, match="aten::add"):
        result.capture.replay()


def test_the_fixture(graphcheck: Any) -> None:
    result = graphcheck.check_graph_replay(lambda: Scaled(registered=True), inputs)
    result.assert_clean()
    arena = graphcheck.arena(1 << 20)
    with arena.loading():
        model = Scaled(registered=False)
    cap = graphcheck.capture(model, torch.ones(2, 8))
    assert cap.arena is arena
    assert graphcheck.census(model).paths == ["scale"]


def test_the_plugin_loads_by_entry_point_and_fails_a_leaked_scope(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(
        textwrap.dedent(
            """
            import torch

            def test_clean(graphcheck):
                arena = graphcheck.arena(1 << 20)
                with arena.loading():
                    torch.ones(2)

            def test_leaks_a_scope(graphcheck):
                arena = graphcheck.arena(1 << 20)
                arena._native.enter_loading()
                leaked.append(arena)

            leaked = []
            """
        )
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*CPU allocator was not restored*"])


class Routed(torch.nn.Module):
    """A MoE-style router: which rows go on depends on the weights (``nonzero``)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = torch.nn.Parameter(torch.randn(8), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        chosen = (x * self.gate).sum(1).gt(0).nonzero().flatten()
        return x.index_select(0, chosen).sum(0)


def test_a_replay_of_another_shape_after_a_reload_is_the_steps_result() -> None:
    x = torch.randn(64, 8, generator=torch.Generator().manual_seed(0))

    def routed() -> Routed:  # built inside the arena, as every factory's model is
        model = Routed()
        with torch.no_grad():
            model.gate.copy_(torch.ones(8))
        return model

    def flip(module: torch.nn.Module) -> None:
        """Post-processing that rewrites the loaded gate in place: other rows are routed."""
        if isinstance(module, Routed):
            module.gate.neg_()

    result = check_graph_replay(routed, lambda m: {"x": x}, process=flip)
    steps = {s.label: s for s in result}
    assert all(steps[label].ok and not steps[label].error for label in STEP_LABELS[:2])
    reloaded = steps["after_wake_l2_reload"]
    assert reloaded.error.startswith("replay: GraphcheckError: CapturedGraph::replay: op ")
    assert "aten::nonzero" in reloaded.error and "returned shape" in reloaded.error
    assert not reloaded.outputs_equal and math.isnan(reloaded.max_abs_diff)
    assert reloaded.report.ok  # checked all the same: the gate was reloaded in place
    assert any(
        "after_wake_l2_reload: outputs not compared: replay:" in p for p in result.problems()
    )


class Gathered(torch.nn.Module):
    """Keeps an index tensor outside the registry: sleep level 2 discards it."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 8), requires_grad=False)
        self.rows = torch.tensor([3, 1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.weight.t()).index_select(1, self.rows)


def test_an_eager_forward_that_raises_after_sleep_is_the_steps_result() -> None:
    result = check_graph_replay(Gathered, lambda m: {"x": torch.ones(2, 8)})
    steps = {s.label: s for s in result}
    assert steps["capture"].outputs_equal and steps["after_wake_l1"].outputs_equal
    after_sleep = steps["after_wake_l2_reload"]
    # The replay reads the index sleep poisoned and its gather raises (as the model's own
    # forward would); the check names the owner all the same.
    assert after_sleep.error.startswith(("replay: RuntimeError", "eager forward: IndexError"))
    assert {f.verdict for f in after_sleep.findings} >= {"lost"}


def test_a_forward_that_raises_at_capture_is_raised() -> None:
    class Raises(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            raise ValueError("no forward here")

    with pytest.raises(ValueError, match="no forward here"):
        check_graph_replay(Raises, lambda m: {"x": torch.ones(1)})


class RandomLength(torch.nn.Module):
    """Keeps a random number of rows: the length is read on the host, so a capture bakes it."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(8), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = int(torch.randint(1, x.shape[0], ()))
        return x[:n] * self.weight


def test_a_seed_makes_the_captured_shape_the_one_the_replays_draw() -> None:
    x = torch.ones(1000, 8)
    torch.manual_seed(12345)  # the capture's draw differs from the seeded ones unless seeded
    result = check_graph_replay(RandomLength, lambda m: {"x": x}, seed=7)
    assert [s.outputs_equal for s in result] == [True, True, True]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(7)
        expected = int(torch.randint(1, 1000, ()))
    assert result.capture.output.shape == (expected, 8)
