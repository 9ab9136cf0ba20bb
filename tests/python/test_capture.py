"""graphcheck.capture and Capture: registry, labels, epochs, checks, replay, save (issue 9 §4)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import collective_ranks
import graphcheck
from graphcheck import _torch

_GLOBAL_TABLES: dict[str, torch.Tensor] = {}


def make_global_table() -> torch.Tensor:
    return torch.arange(8, dtype=torch.float32)


class Planted(torch.nn.Module):
    """A linear layer plus an unregistered plain attribute, a KV cache and a global table."""

    def __init__(self, *, with_global: bool = False) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.lin.requires_grad_(False)
        self.shift = torch.full((8,), 0.5)  # plain attribute: the census names it
        self.kv_cache = torch.zeros(8)  # runtime by attribute name
        self.with_global = with_global
        if with_global:
            _GLOBAL_TABLES["table"] = make_global_table()  # out of the census' reach

    def forward(self, x: torch.Tensor, *, scale: float = 1.0) -> torch.Tensor:
        self.kv_cache.copy_(x[0])
        y = self.lin(x) + self.shift + self.kv_cache
        if self.with_global:
            y = y * _GLOBAL_TABLES["table"]
        return y * scale


def owners(report: graphcheck.Report, verdict: str) -> set[str]:
    return {f.owner for f in report.findings if f.verdict == verdict}


def span_names(epoch: graphcheck.Epoch, kind: str) -> set[str]:
    return {s.name for s in epoch.spans if s.kind == kind}


def test_capture_names_unregistered_memory_by_census_path() -> None:
    model = Planted()
    cap = graphcheck.capture(model, torch.ones(2, 8))
    assert isinstance(cap, graphcheck.Capture)
    assert cap.epochs == ["capture"]
    report = cap.check("capture")
    assert not report.ok
    assert owners(report, "unregistered") == {"shift"}
    assert set(report.summary) == {"graphs", "nodes", "references", *graphcheck.VERDICTS}
    assert report.summary["registered"] > 0 and report.summary["runtime"] > 0
    assert report.summary["input"] > 0 and report.summary["graph"] > 0
    assert "UNREGISTERED shift" in str(report)
    assert graphcheck.parse_report(report.to_json()) == report
    assert json.loads(report.to_json())["epoch"] == "capture"
    # The fix, and an allowlist glob over the census path.
    assert cap.check("capture", allow=["sh*"]).ok


def test_registry_parameters_buffers_inputs_and_runtime_by_name() -> None:
    model = Planted()
    model.register_buffer("offset", torch.zeros(8))
    cap = graphcheck.capture(model, torch.ones(2, 8), scale=2.0)
    epoch = cap.snapshot.epochs[0]
    assert span_names(epoch, "parameter") == {"lin.weight", "lin.bias"}
    assert span_names(epoch, "buffer") == {"offset"}
    assert span_names(epoch, "input") == {"args[0]"}
    assert span_names(epoch, "runtime") == {"kv_cache"}
    runtime = next(s for s in epoch.spans if s.kind == "runtime")
    assert runtime.reason.startswith("KV cache")
    assert cap.snapshot.producer.backend == "aten"


def test_keyword_and_nested_inputs_are_declared_by_name() -> None:
    class TwoInputs(torch.nn.Module):
        def forward(self, pair: list[torch.Tensor], mask: torch.Tensor) -> torch.Tensor:
            return pair[0] + pair[1] * mask

    model = TwoInputs()  # held: a capture keeps its model weakly, and check() reads it
    cap = graphcheck.capture(model, [torch.ones(3), torch.ones(3)], mask=torch.ones(3))
    assert span_names(cap.snapshot.epochs[0], "input") == {"args[0][0]", "args[0][1]", "mask"}
    assert cap.check().ok


def test_declarations_apply_to_recorded_epochs_too() -> None:
    model = Planted()
    cap = graphcheck.capture(model, torch.ones(2, 8))
    cap.epoch("later")
    cap.declare_runtime(model.shift, "shift", "a per-step bias the engine rewrites")
    for label in ("capture", "later", None):
        report = cap.check(label)
        assert report.ok, label
        assert report.summary["unregistered"] == 0
    assert "shift" in span_names(cap.snapshot.epochs[1], "runtime")
    # A declared input likewise; a registered tensor keeps its owner.
    cap.declare_input("bias", model.lin.bias)
    assert "bias" not in span_names(cap.snapshot.epochs[0], "input")


class EngineContext:
    """What an engine keeps outside the model: tables the forward reads, and the model."""

    def __init__(self, model: torch.nn.Module) -> None:
        self.tables = _GLOBAL_TABLES
        self.model = model


def test_engine_state_is_runtime_and_never_hides_a_finding_of_the_model() -> None:
    model = Planted(with_global=True)
    plain = graphcheck.capture(model, torch.ones(2, 8)).check("capture")
    assert "shift" in owners(plain, "unregistered") and len(owners(plain, "unregistered")) == 2
    context = EngineContext(model)
    cap = graphcheck.capture(model, torch.ones(2, 8), engine_state={"forward_context": context})
    for label in ("capture", None):
        report = cap.check(label)
        # The engine's table is runtime state named by its path; the model's own plain
        # attribute stays a finding although the engine object reaches it too.
        assert owners(report, "unregistered") == {"shift"}, label
        assert report.summary["runtime"] == plain.summary["runtime"] + 1, label
    runtime = {s.name for s in cap.snapshot.epochs[0].spans if s.kind == "runtime"}
    assert "forward_context.tables['table']" in runtime
    assert not any(name.startswith("forward_context.model") for name in runtime)
    with pytest.raises(TypeError, match="engine_state must be a mapping of names"):
        graphcheck.capture(model, torch.ones(2, 8), engine_state=[context])


def test_python_frame_labels_memory_the_census_cannot_reach() -> None:
    arena = graphcheck.WeightsArena(1 << 24)
    with arena.loading():
        model = Planted(with_global=True)
    cap = graphcheck.capture(model, torch.ones(2, 8))
    assert cap.arena is arena  # found without being passed
    found = owners(cap.check("capture"), "unregistered")
    assert "shift" in found
    frame = [o for o in found if o != "shift"]
    assert len(frame) == 1
    assert frame[0].startswith(f"{__file__}:")
    assert frame[0].endswith(" in make_global_table")
    # The same memory outside an arena: labelled with the ATen op that first used it.
    model = Planted(with_global=True)
    found = owners(graphcheck.capture(model, torch.ones(2, 8)).check("capture"), "unregistered")
    assert found == {"shift", "aten:aten::mul"}


_FLOOR = torch.full((8,), -1.0)  # a module-level constant, as gemma3n.py's EPS


class ReadsAGlobal(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.maximum(self.lin(x), _FLOOR)


def test_a_module_global_is_named_by_its_module_not_by_the_op_that_read_it() -> None:
    report = graphcheck.capture(ReadsAGlobal(), torch.ones(2, 8)).check("capture")
    assert owners(report, "unregistered") == {f"global {__name__}._FLOOR"}
    # Registered, it is no finding; the census still does not walk globals.
    model = ReadsAGlobal()
    model.register_buffer("floor", _FLOOR, persistent=False)
    assert graphcheck.capture(model, torch.ones(2, 8)).check("capture").ok
    assert not graphcheck.census(ReadsAGlobal()).entries


def test_arena_allocations_carry_pool_and_generation() -> None:
    arena = graphcheck.WeightsArena(1 << 24, pool="weights")
    with arena.loading():
        model = Planted()
    cap = graphcheck.capture(model, torch.ones(2, 8), arena=arena)
    shift = model.shift.untyped_storage().data_ptr()
    allocation = next(a for a in cap.snapshot.epochs[0].allocations if a.begin == shift)
    assert (allocation.pool, allocation.generation, allocation.label) == ("weights", 1, "shift")
    arena.sleep(2, model)
    arena.wake_up()
    after = cap.epoch("after_wake")
    allocation = next(a for a in after.allocations if a.begin == shift)
    assert allocation.generation == 2
    report = cap.check("after_wake")
    assert owners(report, "lost") == {"shift"}
    assert "lost" in {f.verdict for f in report.findings}


def test_repeated_checks_use_the_session_and_report_what_a_fresh_check_reports() -> None:
    arena = graphcheck.WeightsArena(1 << 24, pool="weights")
    with arena.loading():
        model = Planted()
    cap = graphcheck.capture(model, torch.ones(2, 8), arena=arena)

    def fresh(epoch: str) -> str:
        return graphcheck.check(cap.snapshot, epoch=epoch).to_json()

    first = cap.check("capture")
    assert first.to_json() == fresh("capture")
    assert cap.check("capture").to_json() == first.to_json()
    assert cap._session is not None and cap._session.last_stats["reused_report"]
    assert cap.check().epoch == "now"  # the transient epoch, then gone again
    assert cap._session.epochs == ["capture", "now"]
    for level in (1, 2):  # sleep and wake: new generations, the same ranges
        arena.sleep(level, model)
        arena.wake_up()
        label = f"after_wake_{level}"
        cap.epoch(label)
        report = cap.check(label, allow=["never.*"])
        assert (
            report.to_json()
            == graphcheck.check(cap.snapshot, epoch=label, allow=["never.*"]).to_json()
        )
        assert cap._session.epochs == ["capture", "after_wake_1", label][: level + 1]
        assert not cap._session.last_stats["reused_report"]
    assert owners(cap.check("after_wake_2"), "lost") == {"shift"}
    cap.declare_runtime(model.shift, "shift", "refilled before replay")  # changes every epoch
    report = cap.check("after_wake_2")
    assert "shift" not in owners(report, "lost")
    assert report.to_json() == fresh("after_wake_2")
    with pytest.raises(graphcheck.GraphcheckError, match='epoch "missing"'):
        cap.check("missing")


def test_replay_returns_the_static_output_with_new_values() -> None:
    model = Planted()
    x = torch.ones(2, 8)
    cap = graphcheck.capture(model, x)
    out = cap.output
    before = out.clone()
    assert cap.replay() is out
    assert torch.equal(out, before)
    with torch.no_grad():
        model.lin.weight.mul_(2)  # in place: the graph reads it
        x.add_(1)  # the static input, as an engine fills it before a replay
        eager = model(x)
    cap.replay()
    assert torch.equal(out, eager)
    assert not torch.equal(out, before)
    assert "aten::linear" in cap.ops and cap.node_count >= len(cap.ops)


def test_rebinding_reload_is_stale_and_the_replay_reads_the_old_address() -> None:
    arena = graphcheck.WeightsArena(1 << 24)
    with arena.loading():
        model = Planted()
    x = torch.ones(2, 8)
    cap = graphcheck.capture(model, x, arena=arena)
    with arena.loading(), torch.no_grad():
        model.lin.weight.data = model.lin.weight.detach() * 3
        eager = model(x)
    assert not torch.equal(cap.replay(), eager)
    report = cap.check()
    assert report.epoch == "now"
    assert owners(report, "stale") == {"lin.weight"}
    stale = next(f for f in report.findings if f.verdict == "stale")
    assert stale.owner_kind == "parameter" and "copy_" in stale.fix


def test_epoch_labels_and_check_errors() -> None:
    model = Planted()  # held: a capture keeps its model weakly, and epoch() reads it
    cap = graphcheck.capture(model, torch.ones(2, 8))
    epoch = cap.epoch("after")
    assert isinstance(epoch, graphcheck.Epoch) and epoch.label == "after"
    assert cap.epochs == ["capture", "after"]
    with pytest.raises(ValueError, match="already recorded"):
        cap.epoch("after")
    with pytest.raises(ValueError, match="reserved"):
        cap.epoch("now")
    with pytest.raises(graphcheck.GraphcheckError, match='epoch "missing".*capture, after'):
        cap.check("missing")
    with pytest.raises(TypeError, match="single string"):
        cap.check("after", allow="shift")
    assert cap.check().epoch == "now"
    assert cap.epochs == ["capture", "after"]  # the transient epoch is not kept
    # A bad baseline names the recorded epochs only, not the transient "now" it cannot be.
    for epoch in (None, "after"):
        with pytest.raises(graphcheck.GraphcheckValueError) as raised:
            cap.check(epoch, baseline="x")
        assert str(raised.value) == (
            "Capture.check: baseline 'x' is not a recorded epoch (recorded: capture, after); "
            "pass one of those labels, or None for the capture"
        )
    with pytest.raises(graphcheck.GraphcheckValueError, match="; did you mean 'after'\\? \\("):
        cap.check(baseline="afetr")
    with pytest.raises(graphcheck.GraphcheckError, match='did you mean "after"\\?'):
        cap.check("afetr")  # the checker's own error, through the session


def test_save_writes_a_snapshot_the_cli_checks_identically(tmp_path: Path, cli: Path) -> None:
    arena = graphcheck.WeightsArena(1 << 24)
    with arena.loading():
        model = Planted()
    cap = graphcheck.capture(model, torch.ones(2, 8), arena=arena)
    arena.sleep(2, model)
    arena.wake_up()
    cap.epoch("after_wake")
    path = tmp_path / "capture.json"
    cap.save(path)
    assert graphcheck.read_snapshot(path) == cap.snapshot
    for epoch in ("capture", "after_wake"):
        text = subprocess.run(
            [str(cli), "check", str(path), "--epoch", epoch], capture_output=True, text=True
        )
        assert text.returncode == 1, text.stderr
        assert text.stdout == str(cap.check(epoch))
        out = subprocess.run(
            [str(cli), "check", str(path), "--epoch", epoch, "--format", "json"],
            capture_output=True,
            text=True,
        )
        assert graphcheck.parse_report(out.stdout) == cap.check(epoch)
    assert graphcheck.check(path).summary == cap.check("after_wake").summary


def test_wrapper_subclass_parameters_register_their_inner_tensors() -> None:
    from wrapper_tensor import TwoPartTensor

    class Quantized(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(
                TwoPartTensor(torch.ones(4, 4), torch.tensor(0.5)), requires_grad=False
            )

        def forward(self, x: torch.Tensor) -> Any:
            return x @ self.weight

    cap = graphcheck.capture(Quantized(), torch.ones(2, 4))
    assert span_names(cap.snapshot.epochs[0], "parameter") == {"weight.data_", "weight.scale"}
    report = cap.check("capture")
    assert report.ok and report.summary["registered"] > 0


def test_import_graphcheck_loads_neither_torch_nor_the_torch_module() -> None:
    code = (
        "import sys, graphcheck; "
        "print('torch' in sys.modules, 'graphcheck._torch' in sys.modules, "
        "callable(graphcheck.__dict__.get('capture')))"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], check=True, capture_output=True)
    assert out.stdout.split() == [b"False", b"False", b"False"]


def test_lazy_names_stay_the_api_after_submodule_imports() -> None:
    import graphcheck.testing  # imports graphcheck._capture

    assert callable(graphcheck.capture) and graphcheck.capture.__name__ == "capture"
    assert graphcheck.Capture.__module__ == "graphcheck._capture"
    assert graphcheck.check_graph_replay is graphcheck.testing.check_graph_replay
    for name in ("capture", "Capture", "WeightsArena", "check_graph_replay", "testing"):
        assert name in graphcheck.__all__ and name in dir(graphcheck)
    assert _torch.__version__ == graphcheck.__version__


class SqrtBound(torch.autograd.Function):
    """A custom autograd function, as many models use (RecurrentGemma's SqrtBoundDerivative)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return torch.sqrt(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad


class Constants(torch.nn.Module):
    """Tensors made from Python data in the forward, and an autograd function."""

    def forward(self, x: torch.Tensor) -> Any:
        order = torch.tensor([2, 0, 1])  # aten::empty, then a copy outside the dispatcher
        return SqrtBound.apply(x.index_select(0, order) * torch.tensor(4.0))


def test_constants_made_in_the_forward_and_autograd_functions_replay() -> None:
    model = Constants()  # held: a capture keeps its model weakly, and check() reads it
    cap = graphcheck.capture(model, torch.tensor([1.0, 4.0, 9.0]))
    expected = torch.tensor([6.0, 2.0, 4.0])
    assert torch.equal(cap.output, expected)
    for _ in range(2):
        assert torch.equal(cap.replay(), expected)
    assert cap.check().ok


class VmappedMask(torch.nn.Module):
    """A mask built with torch.vmap, as transformers' ``and_masks`` builds attention masks."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.lin.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def keep(q: torch.Tensor) -> torch.Tensor:
            return q.new_ones((), dtype=torch.bool) & (q > 1)

        mask = torch.vmap(keep)(torch.arange(x.shape[0]))
        return self.lin(x) * mask[:, None]


def test_ops_under_vmap_replay_through_the_ops_on_the_tensors_they_wrap() -> None:
    model = VmappedMask()
    x = torch.randn(4, 4)
    cap = graphcheck.capture(model, x)
    # The batched new_ones has no storage to replay; the one its batching rule ran does.
    assert {"aten::new_ones", "aten::bitwise_and", "aten::linear"} <= set(cap.ops)
    with torch.no_grad():
        model.lin.weight.mul_(2)
        eager = model(x)
    assert torch.equal(cap.replay(), eager)
    assert eager[:2].abs().sum() == 0 and eager[2:].abs().sum() > 0
    assert cap.check().ok


class FuncGrad(torch.nn.Module):
    """A forward that takes a gradient with torch.func.grad (its tensors are wrapped)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.func.grad(lambda v: (v * self.w).sin().sum())(x) * 2


def test_ops_under_func_grad_are_refused_at_replay_not_replayed_wrong() -> None:
    cap = graphcheck.capture(FuncGrad(), torch.randn(4))
    with pytest.raises(graphcheck.GraphcheckError, match="without readable strided storage"):
        cap.replay()


def test_a_collective_in_the_forward_replays_after_its_work_is_done(tmp_path: Path) -> None:
    # c10d::allreduce_ runs asynchronously and returns its Work; the eager caller waits on it.
    # The replay waits too, or the next op reads a half-reduced tensor (tensor parallel).
    context = torch.multiprocessing.get_context("spawn")
    results = context.Queue()
    store = str(tmp_path / "store")
    ranks = [
        context.Process(target=collective_ranks.replay_over_ranks, args=(r, store, results))
        for r in (0, 1)
    ]
    for process in ranks:
        process.start()
    for process in ranks:
        process.join(timeout=180)
    assert [p.exitcode for p in ranks] == [0, 0]
    assert sorted(results.get(timeout=5) for _ in ranks) == [(0, True, True), (1, True, True)]
