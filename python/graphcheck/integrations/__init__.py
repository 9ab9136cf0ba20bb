"""Integrations of graphcheck into serving engines (vLLM, SGLang).

:mod:`graphcheck.integrations.targets` names, per engine and version, every class, method and
hook point the engine plugins patch or rely on. It is plain data (no import of vllm, sglang or
torch) shared by the plugins, which patch by those names, and by the ``compat`` test tier,
which checks them against the released wheels (docs/compat.md).
"""
