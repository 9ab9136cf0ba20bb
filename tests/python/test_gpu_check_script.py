"""scripts/gpu-check.sh's control flow, with stand-ins for the build and the GPU programs.

A GPU machine is lent for minutes and rarely: a mistake in the check's own flow loses the run.
Each case copies the check into a folder shaped like a checkout, with a stand-in
`scripts/gpu-build.sh` (it makes stand-in programs, then exits with the status the case sets)
and a stand-in Python, runs it as the device runner does (`OUT` set, one command), and reads
`SUMMARY.txt`, the exit status and what came back in `OUT`. What the programs find on a GPU is
the gpu tier's business; this is what the check does with their outcomes.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# Lists two tests, passes each (JUnit XML as gtest writes it) and, under the injection,
# leaves an exit snapshot holding one graph.
GPU_TESTS = """#!/bin/bash
for a in "$@"; do case "$a" in
  --gtest_list_tests) printf 'GpuGraphTest.\\n  PlainKernel\\n  Memset\\n'; exit 0 ;;
  --gtest_output=xml:*) echo '<testsuites><testcase name="x" result="completed"/></testsuites>' \\
    > "${a#--gtest_output=xml:}" ;;
esac; done
exit 0
"""

# cxx: the source's Python scripts and the stand-in programs, then STUB_BUILD_STATUS (3: the
# CUDA programs built, the torch-linked ones not). python: nothing to install.
GPU_BUILD = """#!/bin/bash
action="$1" work="$3"
[[ "${action}" == python ]] && exit 1
mkdir -p "${work}/build/bin" "${work}/build/lib" "${work}/src/tests/gpu" "${work}/src/bench/python"
cp "${STUB_REPO}"/tests/gpu/*.py "${work}/src/tests/gpu/"
cp "${STUB_REPO}"/bench/python/bench_watch.py "${STUB_REPO}"/bench/python/bench_capture.py \\
  "${work}/src/bench/python/"
if [[ "${STUB_BUILD_STATUS}" == 3 || "${STUB_BUILD_STATUS}" == hang ]]; then
  cp "${STUB_GPU_TESTS}" "${work}/build/bin/graphcheck_gpu_tests"
  printf '#!/bin/bash\\nexit 0\\n' > "${work}/build/bin/graphcheck_gpu_bench"
  printf '#!/bin/bash\\nexit 0\\n' > "${work}/build/bin/graphcheck"
  chmod +x "${work}"/build/bin/*
  : > "${work}/build/lib/libgraphcheck_inject.so"
  echo "gpu-build: FAIL the torch-linked targets did not build (stand-in)"
fi
[[ "${STUB_BUILD_STATUS}" == hang ]] && exec sleep 600  # the torch round outlasts the limit
exit "${STUB_BUILD_STATUS}"
"""

# Answers the check's probe with torch alone (no package): the torch steps are noted or fail.
PYTHON = """#!/bin/bash
if [[ "${1:-}" == - ]]; then echo "torch 2.11.0+cu130"; exit 0; fi
exit 1
"""


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    for name in ("gpu-check.sh", "versions.env"):
        shutil.copy2(REPO / "scripts" / name, root / "scripts" / name)
    _executable(root / "scripts" / "gpu-build.sh", GPU_BUILD)
    (root / "gpu-carry").mkdir()
    (root / "gpu-carry" / "MANIFEST.txt").write_text("mode: build-there\n")
    return root


def run_check(
    root: Path, tmp_path: Path, build_status: int | str, **more: str
) -> tuple[int, str, list[str]]:
    out = tmp_path / "out"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "OUT": str(out),
        "GPU_CHECK_WORK": str(tmp_path / "work"),
        "GPU_CHECK_RESULTS": str(tmp_path / "results"),
        "GPU_CHECK_PYTHON": str(_executable(tmp_path / "python", PYTHON)),
        "STUB_REPO": str(REPO),
        "STUB_GPU_TESTS": str(_executable(tmp_path / "gpu_tests", GPU_TESTS)),
        "STUB_BUILD_STATUS": str(build_status),
        **more,
    }
    proc = subprocess.run(
        ["bash", str(root / "scripts" / "gpu-check.sh")],
        env=env, capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    summary = (out / "SUMMARY.txt").read_text() if (out / "SUMMARY.txt").exists() else ""
    returned = sorted(p.name for p in out.iterdir()) if out.exists() else []
    return proc.returncode, summary + proc.stderr[-2000:], returned


def test_a_build_without_its_torch_targets_leaves_the_rest_to_run(
    checkout: Path, tmp_path: Path
) -> None:
    status, summary, returned = run_check(checkout, tmp_path, build_status=3)
    assert status == 1, summary  # a FAIL line fails the check
    assert "FAIL build there: the gpu tier" in summary and "(exit 3 " in summary, summary
    assert "FAIL the torch-linked targets did not build (stand-in)" in summary, summary
    assert "nothing to run" not in summary, summary
    # It went on: the CUDA tests ran, and the missing LibTorch tests are a FAIL line.
    assert "gpu tests: 2 passed, 0 skipped, 0 failed of 2" in summary, summary
    assert "FAIL the build there made no" in summary, summary
    assert "done in " in summary, summary
    assert returned == ["SUMMARY.txt", "gpu-check-results.tar.gz"]
    with tarfile.open(tmp_path / "out" / "gpu-check-results.tar.gz") as tar:
        names = tar.getnames()
    assert "gpu-check/SUMMARY.txt" in names and "gpu-check/logs/build-cxx.log" in names, names
    assert "gpu-check/gtest/GpuGraphTest.PlainKernel.xml" in names, names


def test_a_build_past_its_limit_leaves_what_it_made_to_run(checkout: Path, tmp_path: Path) -> None:
    status, summary, _ = run_check(
        checkout, tmp_path, build_status="hang", GPU_CHECK_BUILD_LIMIT_S="3"
    )
    assert status == 1, summary
    assert "FAIL build there: the gpu tier" in summary and "(timed out" in summary, summary
    assert "FAIL the build ran past its limit" in summary, summary
    assert "nothing to run" not in summary, summary
    assert "gpu tests: 2 passed, 0 skipped, 0 failed of 2" in summary, summary


def test_a_build_that_made_nothing_ends_the_check_with_its_logs_returned(
    checkout: Path, tmp_path: Path
) -> None:
    status, summary, returned = run_check(checkout, tmp_path, build_status=2)
    assert status == 1, summary
    assert "FAIL nothing to run without the build; see logs/build-cxx.log" in summary, summary
    assert "gpu tests:" not in summary, summary
    assert returned == ["SUMMARY.txt", "gpu-check-results.tar.gz"]
