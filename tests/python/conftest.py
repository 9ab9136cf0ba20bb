"""The python tier: pytest against the INSTALLED package `graphcheck` (CTest label `python`).

CTest runs it from the build folder with the bootstrap environment's python, after the setup
test `python_install` installed the package from that build (cmake/GraphcheckPythonInstall.cmake);
`make run` and `make test` install it too. pyproject.toml's pytest options (importlib import
mode, tests/python on sys.path for helper modules) keep the repository's C++ folder graphcheck/
from shadowing the package.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import graphcheck

REPO = Path(__file__).resolve().parents[2]


def pytest_report_header(config: pytest.Config) -> str:
    return f"graphcheck {graphcheck.__version__} from {Path(graphcheck.__file__).parent}"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """tests/data: the example snapshots with their expect blocks."""
    return REPO / "tests" / "data"


@pytest.fixture(scope="session")
def cli() -> Path:
    """The `graphcheck` CLI of the build under test (GRAPHCHECK_CLI, set by CTest)."""
    path = os.environ.get("GRAPHCHECK_CLI")
    if not path:
        pytest.skip("GRAPHCHECK_CLI is not set (CTest sets it to the build's graphcheck binary)")
    return Path(path)


@pytest.fixture
def no_watch_left() -> Iterator[None]:
    """Closes the process watch a test left active (watch tests: ``usefixtures``)."""
    yield
    active = graphcheck.current_watch()
    if active is not None:
        active.close()
