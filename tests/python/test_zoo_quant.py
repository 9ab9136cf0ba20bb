"""The vLLM zoo's quantized reload checkpoints: AWQ and GPTQ int4 as their tools store them.

The reload step of the ``@awq`` and ``@gptq`` variants feeds vLLM checkpoint-format tensors
(graphcheck.zoo.vllm_engine.checkpoint). These tests unpack them the way the formats are
documented (AutoAWQ's GEMM layout: eight nibbles per int32 along the output, in the order
0, 2, 4, 6, 1, 3, 5, 7; AutoGPTQ's: along the input, in order, zero points stored minus one)
and check that they dequantize to the weight within half a quantization step.
"""

from __future__ import annotations

import pytest
import torch

from graphcheck.zoo.vllm_engine import checkpoint as ck

OUT, IN = 64, 96  # three groups of 32 inputs; eight output words of 8 nibbles


def _nibbles(words: torch.Tensor, dim: int, order: tuple[int, ...]) -> torch.Tensor:
    """The 4-bit values of int32 ``words`` along ``dim``, undoing ``order``."""
    unsigned = words.to(torch.int64) & 0xFFFFFFFF
    moved = unsigned.movedim(dim, -1)
    parts = torch.stack([(moved >> (4 * i)) & 0xF for i in range(8)], dim=-1)
    restored = torch.empty_like(parts)
    restored[..., list(order)] = parts
    return restored.reshape(*moved.shape[:-1], -1).movedim(-1, dim)


def _weight() -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(OUT, IN)


def test_awq_packs_the_output_in_autoawqs_order() -> None:
    q = torch.arange(8).repeat(2, 1)  # one row of outputs 0..7, twice
    (word,) = ck._pack(q, 1, ck._AWQ_ORDER)[0].tolist()
    # Nibble i holds output ORDER[i]: 0, 2, 4, 6, 1, 3, 5, 7 from the low bits up.
    assert word == ck._int32(torch.tensor(0x75316420)).item()


def test_awq_dequantizes_within_half_a_step() -> None:
    weight = _weight()
    stored = ck._awq(weight)
    assert stored["qweight"].dtype == torch.int32 and stored["qweight"].shape == (IN, OUT // 8)
    assert stored["qzeros"].shape == (IN // 32, OUT // 8) and stored["scales"].shape == (3, OUT)
    assert stored["scales"].dtype == torch.float16
    q = _nibbles(stored["qweight"], 1, ck._AWQ_ORDER).float()
    zero = _nibbles(stored["qzeros"], 1, ck._AWQ_ORDER).float().repeat_interleave(32, dim=0)
    scale = stored["scales"].float().repeat_interleave(32, dim=0)
    error = ((q - zero) * scale - weight.t()).abs()
    assert bool((error <= scale / 2 + 1e-2).all()), error.max()


def test_gptq_dequantizes_within_half_a_step() -> None:
    weight = _weight()
    stored = ck._gptq(weight)
    assert stored["qweight"].dtype == torch.int32 and stored["qweight"].shape == (IN // 8, OUT)
    assert stored["g_idx"].tolist() == [i // 32 for i in range(IN)]
    zeros = _nibbles(stored["qzeros"], 1, tuple(range(8)))
    assert bool((zeros == 7).all())  # the symmetric zero 8, stored minus one
    q = _nibbles(stored["qweight"], 0, tuple(range(8))).float()
    scale = stored["scales"].float().repeat_interleave(32, dim=0)
    error = ((q - 8) * scale - weight.t()).abs()
    assert bool((error <= scale / 2 + 1e-2).all()), error.max()


@pytest.mark.parametrize("quantization", ["w8a8_int8", "awq", "gptq"])
def test_only_linear_weights_are_quantized(quantization: str) -> None:
    weights = {
        "model.embed_tokens.weight": torch.randn(10, IN),
        "model.layers.0.mlp.down_proj.weight": _weight(),
        "model.layers.0.input_layernorm.weight": torch.ones(IN),
        "lm_head.weight": torch.randn(10, IN),
    }
    out = ck._quantize(weights, quantization)
    kept = ["model.embed_tokens.weight", "model.layers.0.input_layernorm.weight", "lm_head.weight"]
    assert all(out[name] is weights[name] for name in kept)
    assert "model.layers.0.mlp.down_proj.weight" not in out or quantization == "w8a8_int8"
    parts = {n.rsplit(".", 1)[-1] for n in out if n.startswith("model.layers.0.mlp.down_proj.")}
    expected = {
        "w8a8_int8": {"weight", "weight_scale"},
        "awq": {"qweight", "qzeros", "scales"},
        "gptq": {"qweight", "qzeros", "scales", "g_idx"},
    }[quantization]
    assert parts == expected
