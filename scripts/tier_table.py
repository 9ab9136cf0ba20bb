#!/usr/bin/env python3
"""The table of test tiers `make test` prints after CTest, and its verdict.

Every tier gets a row: ran (CTest's tests passed, failed, skipped; for a tier that runs pytest,
pytest's own counts and every skipped test by name and reason), or skipped with the reason
the configure step recorded (cmake/GraphcheckTiers.cmake: <build>/graphcheck-tiers.txt). A
tier that did not run fails the table: `make test` bootstraps first, so everything a tier
needs is installed. The one exception is the gpu tier on a machine without a GPU, which
may skip and says "no GPU". On a machine with a GPU a skipped gpu test fails, as in
scripts/gpu-check.sh.

Inputs per build folder: graphcheck-tiers.txt, CTest's JUnit report ctest-junit.xml
(CMakePresets.json's outputJUnitFile), the registered tests and their labels (`ctest
--show-only=json-v1`) and the pytest JUnit reports the tiers file names. Standard library
only, so any Python 3.10+ runs it.

usage: tier_table.py --release BUILD [--asan BUILD] [--lint-status N] [--gpu auto|yes|no]
                     [--allow-skipped TIER]... [--ctest CTEST]
Exit status 0 when every tier ran and passed, 1 otherwise (each reason printed below the
table). --allow-skipped is for partial runs by hand (`ctest -LE vllm`): the tier's row says
it was skipped on request and does not fail the table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

# Every tier of the release build, in the order of the table; the sanitizer build runs the
# unit tiers again (README "Tests").
RELEASE_TIERS = (
    "unit",
    "torch",
    "cupti-fake",
    "gpu",
    "python",
    "compat",
    "browser",
    "install",
    "vllm",
)
ASAN_TIERS = ("unit", "cupti-fake")
TIERS_FILE = "graphcheck-tiers.txt"
CTEST_JUNIT = "ctest-junit.xml"
# Names shown per skip reason before "and N more".
NAMES_SHOWN = 8


@dataclass
class Outcome:
    """One CTest test's result: passed, failed, skipped or missing (not in the JUnit report)."""

    state: str
    reason: str = ""


@dataclass
class PytestCounts:
    """What one pytest JUnit report holds: counts, and the skipped tests by reason."""

    passed: int = 0
    failed: int = 0
    xfailed: int = 0
    skipped: dict[str, list[str]] = field(default_factory=dict)

    def total_skipped(self) -> int:
        """How many tests were skipped, over every reason."""
        return sum(len(names) for names in self.skipped.values())


@dataclass
class Build:
    """One build folder's configure records, registered tests and results."""

    name: str
    tiers: tuple[str, ...]
    skipped: dict[str, list[str]] = field(default_factory=dict)
    pytest_reports: dict[str, Path] = field(default_factory=dict)
    labels: dict[str, list[str]] = field(default_factory=dict)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    started: float | None = None
    problems: list[str] = field(default_factory=list)


@dataclass
class Row:
    """One line of the table, the lines under it, and whether it fails the table."""

    tier: str
    build: str
    result: str
    details: list[str] = field(default_factory=list)
    failure: str = ""


def read_tiers_file(build: Build, path: Path) -> None:
    """The configure step's records: skipped tiers with their reasons, pytest reports."""
    if not path.is_file():
        build.problems.append(f"{path} is missing: configure this build folder again")
        return
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != 3 or fields[0] not in ("skipped", "pytest"):
            build.problems.append(
                f"{path}:{number}: expected 'skipped<TAB>tier<TAB>reason' or "
                f"'pytest<TAB>test<TAB>report', found {line!r}"
            )
        elif fields[0] == "skipped":
            build.skipped.setdefault(fields[1], []).append(fields[2])
        else:
            build.pytest_reports[fields[1]] = Path(fields[2])


def read_registered(build: Build, show_only_json: str, source: str) -> None:
    """Test name -> labels, from `ctest --show-only=json-v1`."""
    try:
        tests = json.loads(show_only_json)["tests"]
        for test in tests:
            labels: list[str] = []
            for prop in test.get("properties", []):
                if prop["name"] == "LABELS":
                    labels = list(prop["value"])
            build.labels[test["name"]] = labels
    except (ValueError, KeyError, TypeError) as error:
        build.problems.append(f"{source}: not ctest's json-v1 test list ({error!r})")


def gtest_skip_reason(output: str) -> str:
    """The message of a GTEST_SKIP(): the line after "<file>:<line>: Skipped"."""
    lines = output.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.rstrip().endswith(": Skipped") and lines[i + 1].strip():
            return lines[i + 1].strip()
    return ""


def read_ctest_junit(build: Build, path: Path) -> None:
    """Outcomes of the tests CTest ran, and when the run started."""
    if not path.is_file():
        build.problems.append(f"{path} is missing: CTest did not run in this build folder")
        return
    try:
        suite = ET.parse(path).getroot()
    except ET.ParseError as error:
        build.problems.append(f"{path}: not a JUnit report ({error})")
        return
    try:
        build.started = datetime.strptime(
            suite.get("timestamp", ""), "%Y-%m-%dT%H:%M:%S"
        ).timestamp()
    except ValueError:
        build.started = None
    for case in suite.iter("testcase"):
        name = case.get("name", "")
        status = case.get("status", "")
        skipped = case.find("skipped")
        output = case.findtext("system-out") or ""
        if status == "run":
            build.outcomes[name] = Outcome("passed")
        elif status == "disabled":
            build.outcomes[name] = Outcome("skipped", "disabled")
        elif skipped is not None and skipped.get("message", "").startswith("SKIP_"):
            # SKIP_RETURN_CODE or SKIP_REGULAR_EXPRESSION (GTEST_SKIP): a skip, not a failure.
            reason = gtest_skip_reason(output) or skipped.get("message", "")
            build.outcomes[name] = Outcome("skipped", reason)
        elif skipped is not None:
            # Not run for another reason (a fixture's setup failed, a file is missing): CTest
            # counts it as failed.
            build.outcomes[name] = Outcome("failed", f"not run: {skipped.get('message', '')}")
        else:
            build.outcomes[name] = Outcome("failed")


def read_pytest_junit(path: Path) -> PytestCounts:
    """Counts of one pytest --junitxml report; raises ValueError when it is not one."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as error:
        raise ValueError(f"{path}: not a JUnit report ({error})") from error
    counts = PytestCounts()
    for case in root.iter("testcase"):
        where = "::".join(p for p in (case.get("classname", ""), case.get("name", "")) if p)
        skipped = case.find("skipped")
        if case.find("failure") is not None or case.find("error") is not None:
            counts.failed += 1
        elif skipped is not None and skipped.get("type") == "pytest.xfail":
            counts.xfailed += 1
        elif skipped is not None:
            reason = skipped.get("message", "").removeprefix("Skipped: ") or "no reason given"
            counts.skipped.setdefault(reason, []).append(where)
        else:
            counts.passed += 1
    return counts


def gpu_present() -> bool:
    """Whether this machine has an NVIDIA GPU (as scripts/gpu-check.sh decides)."""
    if Path("/dev/nvidia0").exists():
        return True
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    done = subprocess.run([smi, "-L"], capture_output=True, text=True, check=False)
    return done.returncode == 0 and "GPU " in done.stdout


def tests_text(count: int) -> str:
    """The count with "test" or "tests"."""
    return f"{count} test" if count == 1 else f"{count} tests"


def count_text(counts: Counter[str]) -> str:
    """The non-zero counts of CTest outcomes, as in "3 passed, 1 skipped"."""
    parts = [f"{counts[s]} {s}" for s in ("passed", "failed", "skipped", "missing") if counts[s]]
    return ", ".join(parts) or "no tests"


def reason_lines(reasons: dict[str, list[str]]) -> list[str]:
    """One line per skip reason, most skipped first: the count, the reason, the names."""
    lines = []
    for reason, names in sorted(reasons.items(), key=lambda item: -len(item[1])):
        shown = ", ".join(names[:NAMES_SHOWN])
        more = f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else ""
        lines.append(f"{tests_text(len(names))} skipped: {reason}: {shown}{more}")
    return lines


def pytest_details(build: Build, tests: list[str], row: Row) -> None:
    """Adds pytest's counts and skips of the tier's pytest runs; a problem fails the row."""
    for test in tests:
        report = build.pytest_reports.get(test)
        if report is None or build.outcomes.get(test, Outcome("missing")).state == "missing":
            continue
        fresh = build.started is None or (
            report.is_file() and report.stat().st_mtime >= build.started - 1
        )
        if not report.is_file() or not fresh:
            state = "is older than this run" if report.is_file() else "is missing"
            row.failure = row.failure or f"{test}: its pytest report {report} {state}"
            row.details.append(f"{test}: no pytest report, its skips are not counted")
            continue
        try:
            counts = read_pytest_junit(report)
        except ValueError as error:
            row.failure = row.failure or str(error)
            continue
        skipped = counts.total_skipped()
        text = f"{test}: pytest {counts.passed} passed, {counts.failed} failed, {skipped} skipped"
        row.details.append(text + (f", {counts.xfailed} xfailed" if counts.xfailed else ""))
        row.details += reason_lines(counts.skipped)
        if counts.passed == 0:
            row.failure = row.failure or f"{test}: pytest passed no test"


def tier_row(build: Build, tier: str, gpu: bool, allowed: set[str]) -> Row:
    """The row of one tier in one build."""
    tests = sorted(name for name, labels in build.labels.items() if tier in labels)
    skipped_parts = build.skipped.get(tier, [])
    row = Row(tier, build.name, "")
    if not tests:
        reason = "; ".join(skipped_parts) or "no test registered with this label"
        if tier == "gpu" and not gpu:
            row.result = f"skipped, no GPU ({reason})"
        elif tier in allowed:
            row.result = f"skipped on request (--allow-skipped): {reason}"
        else:
            row.result = f"SKIPPED: {reason}"
            row.failure = f"{tier} ({build.name}) skipped: {reason}"
        return row
    outcomes = [build.outcomes.get(name, Outcome("missing")) for name in tests]
    counts = Counter(o.state for o in outcomes)
    skip_reasons: dict[str, list[str]] = {}
    for name, outcome in zip(tests, outcomes, strict=True):
        if outcome.state == "skipped":
            skip_reasons.setdefault(outcome.reason or "no reason given", []).append(name)
    row.details += reason_lines(skip_reasons)
    if counts["missing"] == len(tests):
        if tier in allowed:
            row.result = f"skipped on request (--allow-skipped): {tests_text(len(tests))} not run"
        else:
            row.result = f"NOT RUN: {tests_text(len(tests))} registered, none in CTest's report"
            row.failure = f"{tier} ({build.name}): registered but not run"
        return row
    ran_all_skipped = counts["skipped"] == len(tests)
    if tier == "gpu" and not gpu and ran_all_skipped:
        row.result = f"skipped, no GPU ({tests_text(len(tests))} registered, each skipped)"
        return row
    row.result = "ran: " + count_text(counts)
    if counts["failed"]:
        failed = [name for name, o in zip(tests, outcomes, strict=True) if o.state == "failed"]
        row.failure = f"{tier} ({build.name}): {counts['failed']} failed: {', '.join(failed[:5])}"
    elif counts["missing"]:
        row.failure = f"{tier} ({build.name}): {counts['missing']} of {len(tests)} tests not run"
    elif tier == "gpu" and counts["skipped"]:
        row.failure = (
            f"gpu ({build.name}): {counts['skipped']} tests skipped on a machine with a GPU"
        )
    elif ran_all_skipped:
        row.failure = f"{tier} ({build.name}): every test skipped"
    if skipped_parts:
        row.details += [f"not registered: {part}" for part in skipped_parts]
        if tier not in allowed:
            row.failure = row.failure or f"{tier} ({build.name}): {'; '.join(skipped_parts)}"
    pytest_details(build, tests, row)
    return row


def build_rows(build: Build, gpu: bool, allowed: set[str]) -> list[Row]:
    """The required tiers' rows, then rows of other labels that have tests in this build."""
    rows = [tier_row(build, tier, gpu, allowed) for tier in build.tiers]
    others = sorted(
        {label for labels in build.labels.values() for label in labels} - set(build.tiers)
    )
    rows += [tier_row(build, label, gpu, allowed | {label}) for label in others]
    rows = [r for r in rows if r.tier in build.tiers or not r.result.startswith("skipped")]
    unlabelled = [name for name, labels in build.labels.items() if not labels]
    if unlabelled:
        counts = Counter(build.outcomes.get(n, Outcome("missing")).state for n in unlabelled)
        row = Row("(no label)", build.name, "tests without a tier label: " + count_text(counts))
        if counts["failed"]:
            row.failure = f"unlabelled tests ({build.name}): {counts['failed']} failed"
        rows.append(row)
    for problem in build.problems:
        rows.append(Row("(build)", build.name, problem, failure=problem))
    return rows


def lint_row(status: int | None) -> Row:
    """The row of scripts/lint.sh, from its exit status (None: not given, a run by hand)."""
    if status is None:
        return Row("lint", "-", "not run here (no --lint-status given)")
    if status == 0:
        return Row("lint", "-", "passed (clang-format, clang-tidy)")
    return Row("lint", "-", f"FAILED (scripts/lint.sh exit {status})", failure="lint failed")


def render(rows: list[Row]) -> str:
    """The table as text: a line per row, its details indented below, then the failures."""
    width = max(len(r.tier) for r in rows)
    bwidth = max(len(r.build) for r in rows)
    lines = ["", "Test tiers", f"  {'tier':<{width}}  {'build':<{bwidth}}  result"]
    for row in rows:
        lines.append(f"  {row.tier:<{width}}  {row.build:<{bwidth}}  {row.result}")
        lines += [f"  {'':<{width}}  {'':<{bwidth}}    {d}" for d in row.details]
    failures = [r.failure for r in rows if r.failure]
    if failures:
        lines.append(f"FAIL ({len(failures)}):")
        lines += [f"  - {f}" for f in failures]
    else:
        lines.append("every tier ran and passed (or is allowed to skip, as said above)")
    return "\n".join(lines)


def load_build(name: str, folder: Path, tiers: tuple[str, ...], ctest: str) -> Build:
    """Everything the table needs from one build folder (``tiers``: those it must run)."""
    build = Build(name, tiers)
    read_tiers_file(build, folder / TIERS_FILE)
    done = subprocess.run(
        [ctest, "--test-dir", str(folder), "--show-only=json-v1"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        build.problems.append(f"ctest --show-only in {folder} failed: {done.stderr.strip()}")
    else:
        read_registered(build, done.stdout, f"ctest --show-only in {folder}")
    read_ctest_junit(build, folder / CTEST_JUNIT)
    return build


def main(argv: list[str] | None = None) -> int:
    """Prints the table; 0 when every tier ran and passed, else 1."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--release", type=Path, required=True, help="the release build folder")
    parser.add_argument("--asan", type=Path, help="the ASan+UBSan build folder")
    parser.add_argument(
        "--lint-status", type=int, help="scripts/lint.sh's exit status (make test passes it)"
    )
    parser.add_argument("--gpu", choices=("auto", "yes", "no"), default="auto")
    parser.add_argument("--allow-skipped", action="append", default=[], metavar="TIER")
    parser.add_argument("--ctest", default="ctest")
    args = parser.parse_args(argv)
    gpu = gpu_present() if args.gpu == "auto" else args.gpu == "yes"
    allowed = set(args.allow_skipped)
    builds = [load_build("release", args.release, RELEASE_TIERS, args.ctest)]
    if args.asan:
        builds.append(load_build("asan", args.asan, ASAN_TIERS, args.ctest))
    rows = [row for build in builds for row in build_rows(build, gpu, allowed)]
    rows.append(lint_row(args.lint_status))
    print(render(rows))
    return 1 if any(r.failure for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
