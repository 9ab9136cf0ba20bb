"""The CPU capability a zoo run had, as the code paths of a CPU engine depend on it.

vLLM's CPU backend picks its kernels, and with them what a model keeps outside its
registry, from torch's ISA probes (``torch.cpu._is_avx512_supported()``,
``_is_avx512_bf16_supported()``, ``_is_amx_tile_supported()``): on AVX-512 BF16 it prepacks
the gated delta-net's conv weight and stashes the unpacked copy
(``vllm/model_executor/layers/utils.py``, ``_cpu_unpacked_conv_weight``); with AMX it packs
bfloat16 and int8 linear weights with its sgl kernels instead of oneDNN
(``check_cpu_sgl_kernel``). So a baseline site may exist on one CPU and not on another, and
a run records the capability it had.

The capabilities form a ladder, each implying the ones before it on the x86 CPUs vLLM
supports (:data:`LEVELS`): ``default`` (no AVX2), ``avx2``, ``avx512`` (AVX-512F without
BF16: Skylake-SP, Ice Lake), ``avx512_bf16`` (AVX-512 BF16 without AMX tiles: Cooper Lake,
AMD Zen 4 and 5), ``amx`` (AMX tiles: Sapphire Rapids and later).

:func:`emulate` runs a lower rung on a higher CPU: it masks torch's probes above the rung
(and sets ATen's own dispatch, ``ATEN_CPU_CAPABILITY``, when torch is not imported yet), so
that an engine that asks the probes takes the lower rung's code paths, and caps oneDNN's
instruction set at the rung (``ONEDNN_MAX_CPU_ISA``, read when oneDNN first runs, in this
process and the workers it starts): vLLM asks oneDNN for a bfloat16 matmul, which oneDNN
refuses below AVX-512 (vLLM then keeps the plain weight and ``torch.nn.functional.linear``),
so without the cap an AVX2 run emulated on an AVX-512 CPU kept oneDNN handles that a real
AVX2 CPU never makes (found on an AVX2 machine, 2026-12-07). What neither a probe nor a cap
decides (another library's own ``cpuid`` check) keeps the real CPU's choice.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["ATEN_NAMES", "LEVELS", "ONEDNN_ISAS", "current", "emulate", "native", "rank"]

#: The capability ladder, lowest first.
LEVELS = ("default", "avx2", "avx512", "avx512_bf16", "amx")

#: ATen's name for the dispatch level that matches each rung (``ATEN_CPU_CAPABILITY``).
ATEN_NAMES = {
    "default": "default",
    "avx2": "avx2",
    "avx512": "avx512",
    "avx512_bf16": "avx512",
    "amx": "avx512",
}

#: oneDNN's ``ONEDNN_MAX_CPU_ISA`` for each rung an emulation runs at (the top rung is never
#: emulated: nothing is above it).
ONEDNN_ISAS = {
    "default": "SSE41",
    "avx2": "AVX2",
    "avx512": "AVX512_CORE",
    "avx512_bf16": "AVX512_CORE_BF16",
}

# Probe (a torch.cpu function) -> the lowest rung at which it may answer True.
_PROBES = {
    "_is_avx2_supported": "avx2",
    "_is_avx512_supported": "avx512",
    "_is_vnni_supported": "avx512",
    "_is_avx512_bf16_supported": "avx512_bf16",
    "_is_amx_tile_supported": "amx",
    "_is_amx_fp16_supported": "amx",
}
# torch.cpu.get_capabilities() keys masked below a rung: prefix -> lowest rung.
_CAPABILITY_KEYS = (
    ("amx", "amx"),
    ("avx512_bf16", "avx512_bf16"),
    ("avx512", "avx512"),
    ("avx10", "avx512"),
    ("avx2", "avx2"),
)
# The capability key that puts a CPU on each rung (torch.cpu._is_*_supported read these).
_NATIVE_KEYS = (("avx2", "avx2"), ("avx512_f", "avx512"), ("avx512_bf16", "avx512_bf16"),
                ("amx_tile", "amx"))  # fmt: skip

_emulated: str | None = None


def rank(level: str) -> int:
    """The position of ``level`` on :data:`LEVELS`; ``ValueError`` naming the rungs otherwise."""
    if level not in LEVELS:
        raise ValueError(f"unknown CPU capability {level!r}; expected one of {', '.join(LEVELS)}")
    return LEVELS.index(level)


def _torch_cpu() -> Any:
    import torch

    return torch.cpu


def native() -> str:
    """The highest rung this CPU has, from torch's CPU capabilities (never the masked ones)."""
    cpu = _torch_cpu()
    capabilities = getattr(cpu, "_graphcheck_native_get_capabilities", None) or getattr(
        cpu, "get_capabilities", None
    )
    if capabilities is not None:
        found = capabilities()
        have = {level for key, level in _NATIVE_KEYS if found.get(key, False)}
    else:  # a torch without get_capabilities(): its probes ask the CPU themselves
        have = {
            level
            for probe, level in _PROBES.items()
            if getattr(cpu, f"_graphcheck_native{probe}", getattr(cpu, probe, lambda: False))()
        }
    return max(have | {"default"}, key=rank)


def current() -> str:
    """The rung this process runs at: :func:`native`, or the one :func:`emulate` set."""
    return _emulated or native()


def _masked(original: Callable[[], bool], allowed: bool) -> Callable[[], bool]:
    def probe() -> bool:
        return allowed and bool(original())

    return probe


def emulate(level: str) -> str:
    """Makes this process (and the workers it forks later) run at ``level``; returns it.

    ``ValueError`` when ``level`` is not a rung or is above what this CPU has (a kernel of a
    higher rung would not run). Emulating the native rung changes nothing. Call it before the
    engine is imported: an engine that caches a probe's answer at import keeps the real one.
    """
    rank(level)
    # ATen reads its dispatch level once, at first use: set it before torch is imported.
    aten_unset = "torch" not in sys.modules and "ATEN_CPU_CAPABILITY" not in os.environ
    if aten_unset:
        os.environ["ATEN_CPU_CAPABILITY"] = ATEN_NAMES[level]
    top = native()
    if rank(level) > rank(top):
        if aten_unset:
            del os.environ["ATEN_CPU_CAPABILITY"]
        raise ValueError(
            f"cannot emulate CPU capability {level!r} on a CPU whose capability is {top!r} "
            f"(only the rungs up to it: {', '.join(LEVELS[: rank(top) + 1])})"
        )
    global _emulated
    _emulated = level
    if level == top:
        return level
    # A cap the caller set stays (it may be lower still); oneDNN reads it at its first use.
    os.environ.setdefault("ONEDNN_MAX_CPU_ISA", ONEDNN_ISAS[level])
    cpu = _torch_cpu()
    for probe, lowest in _PROBES.items():
        saved = f"_graphcheck_native{probe}"
        if not hasattr(cpu, probe):
            continue
        if not hasattr(cpu, saved):
            setattr(cpu, saved, getattr(cpu, probe))
        setattr(cpu, probe, _masked(getattr(cpu, saved), rank(level) >= rank(lowest)))
    if hasattr(cpu, "get_capabilities"):
        if not hasattr(cpu, "_graphcheck_native_get_capabilities"):
            cpu._graphcheck_native_get_capabilities = cpu.get_capabilities
        original = cpu._graphcheck_native_get_capabilities

        def capabilities() -> dict[str, Any]:
            found = dict(original())
            for key in found:
                for prefix, lowest in _CAPABILITY_KEYS:
                    if key.startswith(prefix) and rank(level) < rank(lowest):
                        found[key] = False
                        break
            return found

        cpu.get_capabilities = capabilities
    return level
