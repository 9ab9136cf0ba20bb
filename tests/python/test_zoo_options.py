"""``python -m graphcheck.zoo`` checks its options before it builds a model (issue 34): every
output path and number, one line ``graphcheck.zoo: error: ...`` naming the option, exit 2;
argparse's own errors are one line too. Exit 1 stays for findings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from graphcheck.zoo import __main__ as zoo_cli
from graphcheck.zoo.__main__ import main as zoo_main

MISSING_FOLDER = "/proc/graphcheck-no-such-folder/out"
UNWRITABLE_FOLDER = "/proc/1"  # a folder no one may create files in, root included


@pytest.fixture(autouse=True)
def no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any engine the zoo picks fails the test: options are checked before one is used."""

    def refuse(name: str) -> object:
        raise AssertionError(f"the zoo picked the engine {name!r} before checking its options")

    monkeypatch.setattr(zoo_cli, "engine", refuse)


def one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphcheck.zoo: error: "), err
    return lines[0]


@pytest.mark.parametrize("option", ["--json", "--html", "--write-allowlist"])
def test_every_output_path_is_checked_before_anything_runs(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = {
        f"{MISSING_FOLDER}/y.json": "the folder '/proc/graphcheck-no-such-folder/out' does not "
        "exist; create it first",
        str(tmp_path): "is a folder; expected a file path to write",
        f"{UNWRITABLE_FOLDER}/y.json": "the folder '/proc/1' is not writable",
        "": "expected a file path, got an empty string",
    }
    for path, reason in cases.items():
        assert zoo_main(["--only", "BertModel", option, path]) == 2
        line = one_error_line(capsys.readouterr().err)
        assert line.startswith(f"graphcheck.zoo: error: {option}") and reason in line, line
    # --list writes nothing, but a bad output still stops it.
    assert zoo_main(["--list", option, f"{MISSING_FOLDER}/y.json"]) == 2
    one_error_line(capsys.readouterr().err)


def test_two_outputs_to_one_file_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "zoo.json")
    assert zoo_main(["--json", out, "--html", out]) == 2
    assert f"--html '{out}': the same file as --json" in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--timeout", "nan"], "--timeout must be a finite number of seconds > 0, found nan"),
        (["--timeout", "inf"], "--timeout must be a finite number of seconds > 0, found inf"),
        (["--timeout", "-5"], "--timeout must be a finite number of seconds > 0, found -5.0"),
        (["--jobs", "0"], "--jobs must be >= 1, found 0"),
    ],
)
def test_numbers_are_checked(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert zoo_main(argv) == 2
    assert needle in one_error_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--timeout", "abc"], "argument --timeout: invalid float value: 'abc'"),
        (["--engine", "nosuch"], "argument --engine: invalid choice: 'nosuch'"),
        (["--jobs"], "argument --jobs: expected one argument"),
        (["--colour"], "unrecognized arguments: --colour"),
    ],
)
def test_argparse_errors_are_one_line(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        zoo_main(argv)
    assert exited.value.code == 2
    line = one_error_line(capsys.readouterr().err)
    assert needle in line and "python -m graphcheck.zoo --help" in line, line


def test_the_issue_reproduction_stops_before_building_a_model() -> None:
    # Before: BertModel was built, captured and checked, then a FileNotFoundError traceback
    # and exit status 1 (which reads as findings).
    proc = subprocess.run(
        [sys.executable, "-m", "graphcheck.zoo", "--only", "BertModel", "--no-progress",
         "--json", f"{MISSING_FOLDER}/y.json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert "--json" in one_error_line(proc.stderr)
