"""The compat tier: graphcheck.integrations.targets against the released vLLM and SGLang
wheels, read statically (CTest label ``compat``; docs/compat.md).

Needs no graphcheck package, no torch and no engine installed: targets.py is loaded by file
path, the wheels are opened as zip files. The helper modules of this folder are put on
sys.path here (pyproject's importlib import mode does not add test folders).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compat_wheels  # noqa: E402


def pytest_report_header(config: pytest.Config) -> str:
    pins = ", ".join(
        f"{dist} {version} (from {source})"
        for dist, (version, source) in (
            (d, compat_wheels.pinned(d)) for d in compat_wheels.DEFAULT_PINS
        )
    )
    return f"compat pins: {pins}; wheel cache: {compat_wheels.cache_dir()}"
