"""The example server's engine: graphcheck's reference model on the CPU twin, shaped like vLLM.

:class:`ReferenceEngine` has the methods of vLLM's ``Worker`` that the vLLM plugin patches
(``load_model``, ``compile_or_warm_up_model``, ``wake_up``, ``reload_weights``) and is
patched the same way, through graphcheck's public integration API (:mod:`graphcheck.integrations`),
when ``GRAPHCHECK`` is on (:func:`install_graphcheck`). Underneath it runs the CPU twin of a
CUDA-graph engine: the model lives in a :class:`graphcheck.WeightsArena` (vLLM's weights pool:
sleep level 1 keeps everything, level 2 only the registered buffers, wake poisons the rest
with 0xFF), its forward is captured once through the ATen window (by the process's watch
when the flag is on, else by :func:`graphcheck.capture`), and completions replay the captured
graph on static input buffers, as a decode step replays a CUDA graph: the model is never
called, so what sleep or a rebinding reload did to the memory the graph reads shows up in the
output.

Not thread-safe: the server calls it from its event loop only.
"""

from __future__ import annotations

import dataclasses
import logging
import sys
from typing import Any

import torch

import graphcheck
from graphcheck import integrations
from graphcheck.contract import reload_in_place
from graphcheck.integrations import SELF, Action, Need, kw, pos
from graphcheck.reference import (
    VARIANTS,
    ReferenceConfig,
    ReferenceModel,
    build_reference_model,
    make_checkpoint,
)
from graphcheck.testing import process_weights_after_loading

log = logging.getLogger("graphcheck.example_server")

#: Reload modes of :meth:`ReferenceEngine.reload_weights`.
RELOAD_MODES = ("in_place", "rebind")
#: The byte that pads a prompt shorter than the graph's static input.
PAD = ord(" ")


class EngineStateError(RuntimeError):
    """A request that does not fit the engine's state (asleep, not captured, ...): HTTP 409."""


class ReferenceEngine:
    """The reference model, its weights arena, its captured graph and its static inputs.

    ``variant`` is ``legacy`` (derived tensors, tables and the RoPE cache kept as plain
    attributes, as engines do today) or ``registered`` (the registration contract).
    ``tokens`` is the graph's static input length (the decode window); ``seed`` the
    checkpoint loaded at start.
    """

    def __init__(self, variant: str = "registered", *, tokens: int = 8, seed: int = 0) -> None:
        if variant not in VARIANTS:
            raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
        if not 1 <= tokens <= 64:
            raise ValueError(f"tokens: expected 1..64, got {tokens}")
        self.variant = variant
        self.config = ReferenceConfig(variant=variant, max_positions=64)
        self.tokens = tokens
        self.seed = seed
        self.arena: graphcheck.WeightsArena | None = None
        self.model: ReferenceModel | None = None
        self.graph: Any = None
        self.sleep_level = 0
        self.input_ids = torch.full((tokens,), PAD, dtype=torch.int64)
        self.positions = torch.arange(tokens)

    # ------------------------------------------------------------- vLLM's Worker

    def load_model(self) -> None:
        """Builds the model inside a new weights arena and loads the checkpoint of ``seed``."""
        self.arena = graphcheck.WeightsArena(1 << 32)
        self.model = build_reference_model(self.config, self.seed, self.arena)

    def get_model(self) -> ReferenceModel:
        """The model (raises :class:`EngineStateError` before :meth:`load_model`)."""
        if self.model is None:
            raise EngineStateError("the model is not loaded")
        return self.model

    def compile_or_warm_up_model(self) -> None:
        """Warms up and captures the forward on the static inputs (once).

        Through the process's watch when one runs (the graph is then watched, as a CUDA
        graph capture would be), else through :func:`graphcheck.capture`.
        """
        if self.graph is not None:
            raise EngineStateError("the graph is captured already")
        self._awake("capture")
        model = self.get_model()
        watch = graphcheck.current_watch()
        capture = watch.capture if watch is not None else graphcheck.capture
        self.graph = capture(model, input_ids=self.input_ids, positions=self.positions)

    def sleep(self, level: int = 1) -> None:
        """Sleep as vLLM does: level 1 keeps every weight, level 2 the registered buffers."""
        if level not in (1, 2):
            raise ValueError(f"level: expected 1 or 2, got {level!r}")
        self._awake("sleep")
        assert self.arena is not None
        self.arena.sleep(level, self.get_model())
        self.sleep_level = level

    def wake_up(self, tags: list[str] | None = None) -> None:
        """Wakes the weights (what sleep did not keep reads 0xFF until reloaded)."""
        if not self.sleep_level:
            raise EngineStateError("the engine is not sleeping")
        assert self.arena is not None
        self.arena.wake_up()
        self.sleep_level = 0

    def reload_weights(self, *, mode: str = "in_place", seed: int | None = None) -> None:
        """Loads the checkpoint of ``seed`` (default: the current one), in place or by rebinding.

        ``in_place`` copies into the existing storages and re-derives through
        ``process_weights_after_loading`` (what a graph can survive); ``rebind`` gives every
        parameter a new tensor (``param.data = new``: the RL weight-update bug, which the
        captured graph does not see).
        """
        if mode not in RELOAD_MODES:
            raise ValueError(f"mode: expected one of {RELOAD_MODES}, got {mode!r}")
        self._awake("reload_weights")
        model = self.get_model()
        self.seed = self.seed if seed is None else seed
        with torch.device("meta"):
            shapes = ReferenceModel(self.config)
        weights = make_checkpoint(shapes, self.seed)
        assert self.arena is not None
        with self.arena.loading():
            if mode == "in_place":
                reload_in_place(model, weights, process_weights_after_loading, strict=False)
            else:
                _rebind(model, weights)

    # ------------------------------------------------------------------ serving

    @property
    def is_sleeping(self) -> bool:
        """Between :meth:`sleep` and :meth:`wake_up`."""
        return bool(self.sleep_level)

    def _awake(self, what: str) -> None:
        if self.sleep_level:
            raise EngineStateError(f"{what}: the engine is sleeping (POST /wake_up first)")

    def generate(self, prompt: bytes, max_tokens: int) -> tuple[bytes, bool]:
        """Greedy decoding by replaying the graph; returns the bytes and whether replay = eager.

        Each step writes the last ``tokens`` bytes (left-padded with spaces) into the static
        inputs and replays the graph; the first step is also run eagerly on the model as it
        is now, and the two outputs compared (a graph reading lost or stale memory differs).
        """
        self._awake("generate")
        if self.graph is None:
            self.compile_or_warm_up_model()
        window = list(prompt[-self.tokens :])
        window = [PAD] * (self.tokens - len(window)) + window
        out = bytearray()
        matches = True
        for step in range(max_tokens):
            self.input_ids.copy_(torch.tensor(window[-self.tokens :]))
            logits = self.graph.replay()
            if step == 0:
                with torch.no_grad():
                    eager = self.get_model()(self.input_ids, self.positions)
                matches = bool(torch.equal(logits, eager))
            token = int(torch.nan_to_num(logits[-1], nan=-1.0).argmax())
            out.append(token)
            window.append(token)
        return bytes(out), matches


def _rebind(model: torch.nn.Module, weights: dict[str, torch.Tensor]) -> None:
    """Every parameter gets a fresh tensor with the new values, then post-processing."""
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in weights.items():
            parameter = parameters[name]
            parameter.data = value.to(parameter.dtype).clone()
    for module in reversed(list(model.modules())):
        process_weights_after_loading(module)


# ------------------------------------------------------------------------ graphcheck

#: The engine's patch points, as the vLLM plugin's (graphcheck.integrations.targets).
PATCH_POINTS = (
    integrations.PatchPoint(
        "server.engine.load_model", "ReferenceEngine.load_model", Action.REGISTER_MODEL,
        Need.REQUIRED, (SELF,), point="load",
    ),
    integrations.PatchPoint(
        "server.engine.compile_or_warm_up_model", "ReferenceEngine.compile_or_warm_up_model",
        Action.CHECK_CAPTURE, Need.REQUIRED, (SELF,), point="capture",
    ),
    integrations.PatchPoint(
        "server.engine.wake_up", "ReferenceEngine.wake_up", Action.NEW_EPOCH, Need.OPTIONAL,
        (SELF, pos("tags", default=True)), point="wake",
    ),
    integrations.PatchPoint(
        "server.engine.reload_weights", "ReferenceEngine.reload_weights", Action.NEW_EPOCH,
        Need.OPTIONAL, (SELF, kw("mode", default=True)), point="reload",
    ),
)  # fmt: skip


def _hook(point: integrations.PatchPoint) -> integrations.AfterHook | None:
    if point.action is Action.REGISTER_MODEL:

        def registered(result: Any, engine: ReferenceEngine, *args: Any, **kwargs: Any) -> None:
            integrations.model_loaded(
                engine.get_model, settings=integrations.settings_from_env(), origin="server"
            )

        return registered
    if point.action is Action.CHECK_CAPTURE:
        return lambda result, engine, *args, **kwargs: integrations.graphs_captured()
    if point.point == "wake":

        def woke(result: Any, engine: ReferenceEngine, *args: Any, **kwargs: Any) -> None:
            tags = kwargs.get("tags", args[0] if args else None)
            integrations.new_epoch(integrations.tags_label("after_wake", tags))

        return woke

    def reloaded(result: Any, engine: ReferenceEngine, *args: Any, **kwargs: Any) -> None:
        integrations.new_epoch(f"after_reload_{kwargs.get('mode', 'in_place')}")

    return reloaded


@dataclasses.dataclass(frozen=True)
class GraphcheckSetup:
    """What :func:`install_graphcheck` found and did."""

    report: integrations.PatchReport
    origin: str


def install_graphcheck() -> GraphcheckSetup | None:
    """With ``GRAPHCHECK`` on, patch :class:`ReferenceEngine` as the vLLM plugin patches Worker.

    The watch itself is started by the package's import hook when torch is imported; where
    the hook is not installed (a source checkout on ``PYTHONPATH``) it is started here.
    Returns None when the flag is off.
    """
    if not integrations.flag_on():
        return None
    active = graphcheck.watch(origin="example server")
    report = integrations.PatchReport("example server")
    integrations.patch_methods(sys.modules[__name__], PATCH_POINTS, _hook, report)
    report.log()
    return GraphcheckSetup(report, active.origin if active is not None else "none")
