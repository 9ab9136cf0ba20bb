"""The reference model in Python: the bug as engines have it, and the contract's fix.

A port of the C++ reference model (``graphcheck/torch/reference_model.cc``): a
small decoder (embedding, per layer RMSNorm, attention with RoPE and a fused
QKV projection, RMSNorm, gated MLP; final RMSNorm and an LM head) whose
projections carry :class:`Int8Method`, a vLLM-style quantization method that
is not a module. At build a projection has a float ``weight`` in checkpoint
format; ``process_weights_after_loading`` turns it into int8 weights with
per-channel scales, stored transposed (the kernel layout) after a constant
+-1 sign table is applied. Each projection dequantizes into a shared runtime
``workspace`` before its matmul.

Two variants keep the derived tensors, the sign tables and the RoPE cache:

- ``legacy``: as plain attributes of the quantization method, the model and a
  shared plain RoPE object (invisible to ``named_buffers()``, so sleep,
  reloads and graph checks miss them; the method derives once, at load);
- ``registered``: through the contract (:func:`~graphcheck.set_derived_buffer`,
  :func:`~graphcheck.register_constant_buffer`, the RoPE object's
  ``persistent_tensors()`` and :func:`~graphcheck.register_held_tensors`).

Both give identical numbers for identical weights. :func:`replay_story` gives
the arguments of :func:`graphcheck.testing.check_graph_replay` for a variant.
Not thread-safe (like any module).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.nn.functional as F

from graphcheck._errors import GraphcheckValueError
from graphcheck.arena import WeightsArena
from graphcheck.contract import (
    held_tensors,
    register_constant_buffer,
    register_held_tensors,
    set_derived_buffer,
)

__all__ = [
    "VARIANTS",
    "Int8Method",
    "ReferenceConfig",
    "ReferenceModel",
    "build_reference_model",
    "make_checkpoint",
    "reference_inputs",
    "replay_story",
]

#: The two variants: where the model keeps its persistent non-parameter tensors.
VARIANTS = ("legacy", "registered")

#: Why the workspace is exempt (it is also exempt by its attribute name).
WORKSPACE_REASON = "dequantization scratch, rewritten before every read"


@dataclasses.dataclass(frozen=True)
class ReferenceConfig:
    """Shape of the reference model; ``hidden`` is a multiple of an even ``head_dim``.

    ``intermediate`` 0 means ``2 * hidden``.
    """

    hidden: int = 64
    layers: int = 2
    vocab: int = 256
    head_dim: int = 16
    intermediate: int = 0
    max_positions: int = 64
    variant: str = "registered"

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise GraphcheckValueError(
                f"ReferenceConfig.variant: expected one of {VARIANTS}, found {self.variant!r}"
            )
        sizes = (self.hidden, self.layers, self.vocab, self.head_dim, self.max_positions)
        if (
            min(sizes) <= 0
            or self.intermediate < 0
            or self.head_dim % 2
            or self.hidden % self.head_dim
        ):
            raise GraphcheckValueError(
                f"ReferenceConfig: expected positive sizes with hidden a multiple of an even "
                f"head_dim, found hidden {self.hidden}, head_dim {self.head_dim}, layers "
                f"{self.layers}, vocab {self.vocab}, max_positions {self.max_positions}"
            )

    @property
    def inter(self) -> int:
        """The MLP width (``intermediate``, or ``2 * hidden`` when 0)."""
        return self.intermediate or 2 * self.hidden


def make_sign_table(width: int) -> torch.Tensor:
    """A fixed +-1 pattern (independent of the weights): the constant every layer reads."""
    index = torch.arange(width)
    return torch.where((index * 7 + 3).remainder(5) < 2, -1.0, 1.0)


def compute_cos_sin_cache(max_positions: int, head_dim: int) -> torch.Tensor:
    """``[max_positions, head_dim]``: the cos half, then the sin half."""
    inv_freq = torch.pow(10000.0, torch.arange(0, head_dim, 2) / head_dim).reciprocal()
    angles = torch.outer(torch.arange(max_positions, dtype=torch.float32), inv_freq)
    return torch.cat([angles.cos(), angles.sin()], 1)


class RotaryCache:
    """The RoPE cache, one object shared by every layer. Not a module."""

    def __init__(self, max_positions: int, head_dim: int) -> None:
        self.cos_sin_cache = compute_cos_sin_cache(max_positions, head_dim)


class RotaryEmbedding(RotaryCache):
    """The registered variant's RoPE cache: a holder that lists its tensor."""

    def persistent_tensors(self) -> dict[str, torch.Tensor]:
        """The tensors :func:`~graphcheck.register_held_tensors` registers."""
        return held_tensors(self, "cos_sin_cache")


def _weight(module: torch.nn.Module) -> torch.Tensor:
    """``module.weight``, narrowed: torch types a module's attributes as tensors or modules."""
    weight = module.weight
    assert isinstance(weight, torch.Tensor), f"{type(module).__name__}.weight is not a tensor"
    return weight


class Int8Method:
    """The int8 quantization method of one projection (not a module).

    ``legacy`` keeps the derived ``packed`` and ``scale`` tensors as its own
    attributes and derives them once; ``registered`` fills the layer's derived
    buffer slots ``weight_packed`` and ``weight_scale`` in place on every call
    and registers the sign table as a constant buffer of the layer.
    """

    def __init__(self, variant: str, sign_table: torch.Tensor) -> None:
        self.variant = variant
        self.sign_table = sign_table
        self.packed: torch.Tensor | None = None
        self.scale: torch.Tensor | None = None

    def create_weights(self, layer: torch.nn.Module, in_features: int, out_features: int) -> None:
        """The checkpoint-format ``weight`` and, registered, the constant and derived slots."""
        layer.weight = torch.nn.Parameter(
            torch.empty(out_features, in_features), requires_grad=False
        )
        if self.variant == "registered":
            register_constant_buffer(layer, "sign_table", self.sign_table)
            layer.register_buffer("weight_packed", None, persistent=False)
            layer.register_buffer("weight_scale", None, persistent=False)

    def process_weights_after_loading(self, layer: torch.nn.Module) -> None:
        """Quantize the sign-rotated weight per output channel, stored ``[in, out]``."""
        if self.variant == "legacy" and self.packed is not None:
            return  # legacy methods derive once, at load, as engines call them
        with torch.no_grad():
            rotated = _weight(layer) * self.sign_table
            scale = rotated.abs().amax(1).clamp_min(1e-8).div_(127.0)
            packed = (rotated / scale.unsqueeze(1)).round_().clamp_(-127, 127)
            packed = packed.to(torch.int8).t().contiguous()
        if self.variant == "legacy":
            self.packed, self.scale = packed, scale
            return
        set_derived_buffer(layer, "weight_packed", packed)
        set_derived_buffer(layer, "weight_scale", scale)

    def apply(self, layer: torch.nn.Module, x: torch.Tensor, workspace: torch.Tensor) -> Any:
        """``((x * signs) @ dequant(packed)) * scale``, dequantizing into ``workspace``."""
        # The registered slots are the layer's buffers, which torch types as tensors or modules.
        packed: torch.Tensor | torch.nn.Module | None
        scale: torch.Tensor | torch.nn.Module | None
        if self.variant == "legacy":
            packed, scale = self.packed, self.scale
        else:
            packed, scale = layer.weight_packed, layer.weight_scale
        assert isinstance(packed, torch.Tensor) and isinstance(scale, torch.Tensor), (
            "process_weights_after_loading first"
        )
        rows, cols = packed.shape
        dequant = workspace[: rows * cols].view(rows, cols)
        dequant.copy_(packed)
        return torch.mm(x * self.sign_table, dequant).mul_(scale)


class QuantLinear(torch.nn.Module):
    """A projection whose weights its :class:`Int8Method` owns the layout of."""

    def __init__(self, variant: str, in_features: int, out_features: int, signs: torch.Tensor):
        super().__init__()
        self.quant_method = Int8Method(variant, signs)
        self.quant_method.create_weights(self, in_features, out_features)

    def process_weights_after_loading(self) -> None:
        """Runs the quantization method (vLLM calls it once per layer after loading)."""
        self.quant_method.process_weights_after_loading(self)

    def forward(self, x: torch.Tensor, workspace: torch.Tensor) -> Any:
        return self.quant_method.apply(self, x, workspace)


class RMSNorm(torch.nn.Module):
    """``x / rms(x) * weight``."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(width), requires_grad=False)

    def forward(self, x: torch.Tensor) -> Any:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Attention(torch.nn.Module):
    """Fused QKV projection, RoPE from the shared cache, causal attention, output projection."""

    def __init__(
        self, config: ReferenceConfig, signs: list[torch.Tensor], rotary: RotaryCache
    ) -> None:
        super().__init__()
        h = config.hidden
        self.config = config
        self.qkv_proj = QuantLinear(config.variant, h, 3 * h, signs[0])
        self.o_proj = QuantLinear(config.variant, h, h, signs[0])
        self.rotary_emb = rotary

    def rope(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        half = self.config.head_dim // 2
        x1, x2 = x[..., :half], x[..., half:]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, workspace: torch.Tensor) -> Any:
        c = self.config
        tokens, heads, half = x.shape[0], c.hidden // c.head_dim, c.head_dim // 2
        q, k, v = self.qkv_proj(x, workspace).view(tokens, 3, heads, c.head_dim).unbind(1)
        cs = self.rotary_emb.cos_sin_cache.index_select(0, positions).unsqueeze(1)
        cos, sin = cs[..., :half], cs[..., half:]
        q = self.rope(q, cos, sin).transpose(0, 1)
        k = self.rope(k, cos, sin).transpose(0, 1)
        attended = F.scaled_dot_product_attention(q, k, v.transpose(0, 1), is_causal=True)
        return self.o_proj(attended.transpose(0, 1).reshape(tokens, c.hidden), workspace)


class MLP(torch.nn.Module):
    """Gated MLP: ``down(silu(gate) * up)``."""

    def __init__(self, config: ReferenceConfig, signs: list[torch.Tensor]) -> None:
        super().__init__()
        self.gate_up_proj = QuantLinear(config.variant, config.hidden, 2 * config.inter, signs[0])
        self.down_proj = QuantLinear(config.variant, config.inter, config.hidden, signs[1])

    def forward(self, x: torch.Tensor, workspace: torch.Tensor) -> Any:
        gate, up = self.gate_up_proj(x, workspace).chunk(2, -1)
        return self.down_proj(F.silu(gate) * up, workspace)


class DecoderLayer(torch.nn.Module):
    """Pre-norm attention and MLP with residuals."""

    def __init__(
        self, config: ReferenceConfig, signs: list[torch.Tensor], rotary: RotaryCache
    ) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden)
        self.self_attn = Attention(config, signs, rotary)
        self.post_attention_layernorm = RMSNorm(config.hidden)
        self.mlp = MLP(config, signs)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, workspace: torch.Tensor) -> Any:
        h = x + self.self_attn(self.input_layernorm(x), positions, workspace)
        return h + self.mlp(self.post_attention_layernorm(h), workspace)


class ReferenceModel(torch.nn.Module):
    """The decoder; build it with :func:`build_reference_model`.

    ``forward(input_ids, positions)`` (both int64 ``[tokens]``) returns logits
    ``[tokens, vocab]``.
    """

    def __init__(self, config: ReferenceConfig) -> None:
        super().__init__()
        self.config = config
        legacy = config.variant == "legacy"
        self.embed_tokens = torch.nn.Module()
        self.embed_tokens.weight = torch.nn.Parameter(
            torch.empty(config.vocab, config.hidden), requires_grad=False
        )
        rotary = (RotaryCache if legacy else RotaryEmbedding)(config.max_positions, config.head_dim)
        # One table per input width, shared by every layer: plain attributes (legacy) or
        # constant buffers of each projection (registered, via Int8Method.create_weights).
        self.sign_tables = [make_sign_table(config.hidden), make_sign_table(config.inter)]
        self.layers = torch.nn.ModuleList(
            DecoderLayer(config, self.sign_tables, rotary) for _ in range(config.layers)
        )
        self.norm = RMSNorm(config.hidden)
        self.lm_head = torch.nn.Module()
        self.lm_head.weight = torch.nn.Parameter(
            torch.empty(config.vocab, config.hidden), requires_grad=False
        )
        self.workspace: torch.Tensor | None = None

    def forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> Any:
        """Logits ``[tokens, vocab]`` for ``input_ids`` at ``positions``."""
        assert self.workspace is not None, "allocate_runtime_state() first"
        with torch.no_grad():
            x = F.embedding(input_ids, _weight(self.embed_tokens))
            for layer in self.layers:
                x = layer(x, positions, self.workspace)
            return F.linear(self.norm(x), _weight(self.lm_head))

    def process_weights_after_loading(self) -> None:
        """Runs every projection's quantization method (legacy: derives once)."""
        for module in self.modules():
            if isinstance(module, QuantLinear):
                module.process_weights_after_loading()

    def allocate_runtime_state(self) -> None:
        """The dequantization workspace (runtime state, exempt by its attribute name)."""
        c = self.config
        largest = max(3 * c.hidden * c.hidden, 2 * c.inter * c.hidden)
        self.workspace = torch.empty(largest, device=_weight(self.lm_head).device)


def make_checkpoint(model: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    """Deterministic checkpoint values for every parameter of ``model`` (no files)."""
    generator = torch.Generator().manual_seed(seed)
    checkpoint = {}
    for name, parameter in model.named_parameters():
        noise = torch.randn(parameter.shape, generator=generator)
        checkpoint[name] = noise.mul_(0.1).add_(1.0) if "norm" in name else noise.mul_(0.05)
    return checkpoint


def _load_in_place(model: torch.nn.Module, checkpoint: Mapping[str, torch.Tensor]) -> None:
    parameters = dict(model.named_parameters())
    with torch.no_grad():
        for name, value in checkpoint.items():
            parameters[name].copy_(value)


def build_reference_model(
    config: ReferenceConfig | None = None,
    seed: int = 0,
    arena: WeightsArena | None = None,
    *,
    device: torch.device | str | None = None,
) -> ReferenceModel:
    """Build and load the model as an engine does.

    Construction, the checkpoint of ``seed``, ``process_weights_after_loading``
    and (registered) :func:`~graphcheck.register_held_tensors` run inside
    ``arena.loading()`` when an arena is given; the runtime workspace is
    allocated after it (runtime state is not weights). ``device`` (default: torch's
    default device) is where every tensor of the model is made, the ones it keeps outside
    its parameters and buffers included: ``.to(device)`` afterwards would move only its
    parameters and buffers and leave those behind. The checkpoint's values come from the CPU
    whatever the device, so they are the same on every device.
    """
    config = config or ReferenceConfig()

    def on_device() -> contextlib.AbstractContextManager[object]:
        return torch.device(device) if device is not None else contextlib.nullcontext()

    with arena.loading() if arena is not None else contextlib.nullcontext():
        with on_device():
            model = ReferenceModel(config)
        checkpoint = make_checkpoint(model, seed)  # a CPU generator: outside the device
        with on_device():
            _load_in_place(model, checkpoint)
            model.process_weights_after_loading()
            if config.variant == "registered":
                register_held_tensors(model)
    with on_device():
        model.allocate_runtime_state()
    return model.eval()


def reference_inputs(
    model: ReferenceModel, tokens: int = 8, seed: int = 1
) -> dict[str, torch.Tensor]:
    """Forward keyword arguments: ``tokens`` random ids (from ``seed``) and their positions."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(model.config.vocab, (tokens,), generator=generator)
    return {"input_ids": ids, "positions": torch.arange(tokens)}


def replay_story(
    variant: str = "registered",
    config: ReferenceConfig | None = None,
    seed: int = 0,
    tokens: int = 8,
) -> dict[str, Callable[..., Any]]:
    """Keyword arguments of :func:`graphcheck.testing.check_graph_replay` for a variant.

    ``factory`` builds the model (the helper runs it inside its arena's
    loading scope), ``make_inputs`` gives ``tokens`` ids, and
    ``second_checkpoint`` the values of seed ``seed + 2000`` (a weight update
    as an RL trainer pushes it), computed on a meta copy of the model.
    """
    config = dataclasses.replace(config or ReferenceConfig(), variant=variant)

    def second_checkpoint() -> dict[str, torch.Tensor]:
        with torch.device("meta"):
            shapes = ReferenceModel(config)
        return make_checkpoint(shapes, seed + 2000)

    return {
        "factory": lambda: build_reference_model(config, seed),
        "make_inputs": lambda model: reference_inputs(model, tokens),
        "second_checkpoint": second_checkpoint,
    }
