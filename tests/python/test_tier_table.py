"""scripts/tier_table.py, the table of tiers `make test` prints: fed fabricated build folders.

Each case writes what a configure and a CTest run leave in a build folder (the tiers file,
CTest's JUnit report, pytest's JUnit reports) and a stand-in `ctest` that prints the
registered tests, then runs the script's main() and reads its table and exit status.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from xml.sax.saxutils import quoteattr

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "tier_table.py"

# One test per tier of the release build; python, compat and vllm run pytest.
RELEASE_TESTS = {
    "unit": ["CheckerTest.Stale", "CheckerTest.Dangling"],
    "torch": ["RegistryTest.Register"],
    "cupti-fake": ["BackendTest.Attach"],
    "gpu": ["GpuGraphTest.PlainKernel", "GpuGraphTest.Memset"],
    "python": ["python_install", "python_pytest"],
    "compat": ["compat_pytest"],
    "browser": ["browser_reports"],
    "install": ["install_consumer"],
    "vllm": ["vllm_install", "vllm_pytest"],
}
ASAN_TESTS = {"unit": ["CheckerTest.Stale"], "cupti-fake": ["BackendTest.Attach"]}
PYTEST_TESTS = ("python_pytest", "compat_pytest", "vllm_pytest")
GTEST_SKIP_OUTPUT = (
    "[ RUN      ] GpuGraphTest.X\n"
    "tests/gpu/gpu_fixture.h:40: Skipped\n"
    "no CUDA driver: could not load libcuda.so.1\n"
    "[  SKIPPED ] GpuGraphTest.X (0 ms)\n"
)


@pytest.fixture(scope="module")
def tier_table() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tier_table", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["tier_table"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def pytest_junit(path: Path, passed: int, skipped: dict[str, list[str]], failed: int = 0) -> None:
    cases = [
        f'<testcase classname="test_mod" name="test_ok{i}" time="0.1"/>' for i in range(passed)
    ]
    cases += [
        f'<testcase classname="test_mod" name="test_bad{i}"><failure message="assert"/></testcase>'
        for i in range(failed)
    ]
    for reason, names in skipped.items():
        for name in names:
            module, _, test = name.rpartition("::")
            cases.append(
                f'<testcase classname="{module}" name="{test}">'
                f'<skipped type="pytest.skip" message={quoteattr(reason)}>x</skipped></testcase>'
            )
    path.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="pytest">'
        + "".join(cases)
        + "</testsuite></testsuites>",
        encoding="utf-8",
    )


class FakeBuild:
    """A build folder as configure and CTest leave it; states maps test -> outcome."""

    def __init__(self, folder: Path, tests: dict[str, list[str]]) -> None:
        self.folder = folder
        self.tests = {tier: list(names) for tier, names in tests.items()}
        self.states = {name: "passed" for names in tests.values() for name in names}
        self.skipped_records: list[tuple[str, str]] = []
        # Without a GPU every gpu test skips, as GTEST_SKIP() makes them.
        for name in self.tests.get("gpu", []):
            self.states[name] = "skipped"
        self.pytest_skips: dict[str, dict[str, list[str]]] = {}

    def drop_tier(self, tier: str, reason: str) -> None:
        """The configure step left the tier out, recording why."""
        for name in self.tests.pop(tier):
            del self.states[name]
        self.skipped_records.append((tier, reason))

    def write(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        lines = [f"skipped\t{tier}\t{reason}" for tier, reason in self.skipped_records]
        for test in PYTEST_TESTS:
            lines.append(f"pytest\t{test}\t{self.folder / test}.xml")
        (self.folder / "graphcheck-tiers.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
        registered = [
            {"name": name, "properties": [{"name": "LABELS", "value": [tier]}]}
            for tier, names in self.tests.items()
            for name in names
        ]
        (self.folder / "tests.json").write_text(json.dumps({"tests": registered}), encoding="utf-8")
        started = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 60))
        cases = []
        for name, state in self.states.items():
            if state == "passed":
                cases.append(f'<testcase name="{name}" status="run"/>')
            elif state == "failed":
                cases.append(
                    f'<testcase name="{name}" status="fail"><failure message=""/></testcase>'
                )
            elif state == "skipped":
                cases.append(
                    f'<testcase name="{name}" status="notrun">'
                    '<skipped message="SKIP_REGULAR_EXPRESSION_MATCHED"/>'
                    f"<system-out>{GTEST_SKIP_OUTPUT}</system-out></testcase>"
                )
            if state != "excluded" and name in PYTEST_TESTS:
                pytest_junit(self.folder / f"{name}.xml", 5, self.pytest_skips.get(name, {}))
        (self.folder / "ctest-junit.xml").write_text(
            f'<?xml version="1.0"?><testsuite name="x" timestamp="{started}" time="60">'
            + "".join(cases)
            + "</testsuite>",
            encoding="utf-8",
        )


class Run:
    """Both build folders, a stand-in ctest, and main()'s exit status and table."""

    def __init__(self, tmp_path: Path) -> None:
        self.release = FakeBuild(tmp_path / "build", RELEASE_TESTS)
        self.asan = FakeBuild(tmp_path / "build-asan", ASAN_TESTS)
        self.ctest = tmp_path / "ctest"
        # `ctest --test-dir <folder> --show-only=json-v1`: that folder's tests.json.
        self.ctest.write_text('#!/bin/sh\nexec cat "$2/tests.json"\n', encoding="utf-8")
        self.ctest.chmod(0o755)

    def __call__(
        self, module: ModuleType, capsys: pytest.CaptureFixture[str], *extra: str, lint: str = "0"
    ) -> tuple[int, str]:
        self.release.write()
        self.asan.write()
        argv = ["--release", str(self.release.folder), "--asan", str(self.asan.folder)]
        argv += ["--ctest", str(self.ctest), "--gpu", "no", *extra]
        argv += ["--lint-status", lint] if lint else []
        status = module.main(argv)
        return status, capsys.readouterr().out


@pytest.fixture
def run(tmp_path: Path) -> Run:
    return Run(tmp_path)


def row(table: str, tier: str, build: str = "release") -> str:
    """The table's line of one tier and the detail lines under it."""
    lines = table.splitlines()
    for i, line in enumerate(lines):
        words = line.split()
        if words[:2] == [tier, build]:
            details = []
            for below in lines[i + 1 :]:
                if not below.startswith("    ") or below.split()[0] in RELEASE_TESTS:
                    break
                details.append(below.strip())
            return "\n".join([" ".join(words), *details])
    raise AssertionError(f"no row for {tier} ({build}) in:\n{table}")


def test_every_tier_ran_and_the_gpu_tier_skips_without_a_gpu(
    tier_table: ModuleType, run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    status, table = run(tier_table, capsys)
    assert status == 0, table
    for tier in ("unit", "torch", "cupti-fake", "python", "compat", "browser", "install", "vllm"):
        assert row(table, tier).split()[2] == "ran:", table
    assert "skipped, no GPU" in row(table, "gpu")
    assert "no CUDA driver: could not load libcuda.so.1" in row(table, "gpu")
    assert row(table, "unit", "asan").startswith("unit asan ran: 1 passed")
    assert row(table, "lint", "-").startswith("lint - passed")
    assert "every tier ran and passed" in table


def test_a_gpu_test_skipped_on_a_machine_with_a_gpu_fails(
    tier_table: ModuleType, run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    status, table = run(tier_table, capsys, "--gpu", "yes")
    assert status == 1
    assert "gpu (release): 2 tests skipped on a machine with a GPU" in table


def test_the_gpu_tier_left_out_by_configure_fails_only_with_a_gpu(
    tier_table: ModuleType, run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    run.release.drop_tier("gpu", "no CUDA toolkit with nvcc")
    status, table = run(tier_table, capsys)
    assert status == 0, table
    assert row(table, "gpu") == "gpu release skipped, no GPU (no CUDA toolkit with nvcc)"
    status, table = run(tier_table, capsys, "--gpu", "yes")
    assert status == 1
    assert "gpu (release) skipped: no CUDA toolkit with nvcc" in table


@pytest.mark.parametrize(
    ("tier", "reason"),
    [
        ("browser", "no chromium-headless-shell, chromium or chromium-browser found"),
        ("vllm", "GRAPHCHECK_VLLM_TIER=OFF"),
        ("torch", "LibTorch not found"),
        ("python", "no Python modules: pybind11 2.12+ not found"),
    ],
)
def test_a_tier_the_configure_step_left_out_fails_with_its_reason(
    tier_table: ModuleType, run: Run, capsys: pytest.CaptureFixture[str], tier: str, reason: str
) -> None:
    run.release.drop_tier(tier, reason)
    status, table = run(tier_table, capsys)
    assert status == 1
    assert row(table, tier) == f"{tier} release SKIPPED: {reason}"
    assert f"{tier} (release) skipped: {reason}" in table


def test_a_part_of_a_tier_left_out_fails(
    tier_table: ModuleType, run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    run.release.skipped_records.append(("python", "python_ruff: ruff not found in venv/bin/python"))
    status, table = run(tier_table, capsys)
    assert status == 1
    assert "not registered: python_ruff: ruff not found" in row(table, "python")


def test_a_tier_excluded_from_the_ctest_run_fails_unless_allowed(
    tier_table: ModuleType, run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    # `ctest -LE vllm`: registered, absent from CTest's report, no pytest report.
    for name in RELEASE_TESTS["vllm"]:
        run.release.states[name] = "excluded"
    status, table = run(tier_table, capsys)
    assert status == 1
    assert row(table, "vllm") == "vllm release NOT RUN: 2 tests registered, none in CTest's report"
    status, table = run(tier_table, capsys, "--allow-skipped", "vllm")
    assert status == 0, table
    assert row(table, "vllm").startswith("vllm release skipped on request")


def test_pytest_skips_are_counted_and_named(
    tier_table: ModuleType, run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    cuda = "built without the CUDA headers"
    run.release.pytest_skips["python_pytest"] = {
        cuda: ["test_watch_reader::test_memset", "test_watch_reader::test_pool"],
        "the example server needs starlette (bootstrap.sh)": ["test_server"],
    }
    run.release.pytest_skips["vllm_pytest"] = {"no AMX": ["test_vllm_zoo::test_w8a8"]}
    status, table = run(tier_table, capsys)
    assert status == 0, table
    python = row(table, "python")
    assert "python_pytest: pytest 5 passed, 0 failed, 3 skipped" in python
    assert (
        f"2 tests skipped: {cuda}: test_watch_reader::test_memset, test_watch_reader::test_pool"
        in python
    )
    assert (
        "1 test skipped: the example server needs starlette (bootstrap.sh): test_server" in python
    )
    vllm = row(table, "vllm")
    assert "vllm_pytest: pytest 5 passed, 0 failed, 1 skipped" in vllm
    assert "1 test skipped: no AMX: test_vllm_zoo::test_w8a8" in vllm


def test_a_pytest_run_without_its_report_or_with_an_old_one_fails(
    tier_table: ModuleType, run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    run.release.write()
    report = run.release.folder / "vllm_pytest.xml"
    report.unlink()
    run.release.write = lambda: None  # type: ignore[method-assign]
    status, table = run(tier_table, capsys)
    assert status == 1
    assert f"vllm_pytest: its pytest report {report} is missing" in table
    pytest_junit(report, 5, {})
    old = time.time() - 3600
    os.utime(report, (old, old))
    status, table = run(tier_table, capsys)
    assert status == 1
    assert f"vllm_pytest: its pytest report {report} is older than this run" in table


def test_failed_tests_and_lint_fail_the_table(
    tier_table: ModuleType, run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    run.asan.states["BackendTest.Attach"] = "failed"
    status, table = run(tier_table, capsys, lint="1")
    assert status == 1
    assert row(table, "cupti-fake", "asan") == "cupti-fake asan ran: 1 failed"
    assert "cupti-fake (asan): 1 failed: BackendTest.Attach" in table
    assert row(table, "lint", "-") == "lint - FAILED (scripts/lint.sh exit 1)"


def test_a_tier_whose_every_test_skipped_fails(
    tier_table: ModuleType, run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    run.release.states["browser_reports"] = "skipped"
    status, table = run(tier_table, capsys)
    assert status == 1
    assert "browser (release): every test skipped" in table


def test_a_build_folder_never_configured_or_run_fails(
    tier_table: ModuleType, run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    run.release.write()
    (run.release.folder / "graphcheck-tiers.txt").unlink()
    (run.release.folder / "ctest-junit.xml").unlink()
    run.release.write = lambda: None  # type: ignore[method-assign]
    status, table = run(tier_table, capsys)
    assert status == 1
    assert "graphcheck-tiers.txt is missing: configure this build folder again" in table
    assert "ctest-junit.xml is missing: CTest did not run in this build folder" in table


def test_a_run_by_hand_without_lint_says_so_and_passes(
    tier_table: ModuleType, run: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    status, table = run(tier_table, capsys, lint="")
    assert status == 0, table
    assert row(table, "lint", "-") == "lint - not run here (no --lint-status given)"
