"""The vllm tier: graphcheck on vLLM's own code, in the vLLM environment (docs/vllm-zoo.md).

CTest runs it with the vLLM environment's python (scripts/bootstrap.sh vllm) from the build
folder, after `vllm_install` installed this build's package into that environment.
"""

from __future__ import annotations

import importlib.util

import pytest

import graphcheck

if importlib.util.find_spec("vllm") is None:
    pytest.exit(
        "the vllm tier needs vLLM: run it with the vLLM environment's python "
        '("$(scripts/bootstrap.sh vllm | tail -n 1)/bin/python" -m pytest tests/vllm)',
        returncode=4,
    )


def pytest_report_header(config: pytest.Config) -> str:
    import vllm

    return f"graphcheck {graphcheck.__version__}, vllm {vllm.__version__}"
