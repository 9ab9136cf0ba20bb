"""The server flag's setting readers in process (issue 34): every source's reader on bad
values of any type (environment, an engine's configuration, the vLLM plugin's, the allowlist
file), the C++ reader and the Python side agreeing on the same files, seeded fuzzing of each
reader and of the watch's text report. The host runs are in test_watch_settings.py."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

import graphcheck
from graphcheck._watch import settings as watch_settings
from hostile_values import VARIABLES, one_printable_line, random_bytes, random_value

FUZZ_ROUNDS = 400  # in-process rounds of every reader


def test_the_cpp_reader_and_the_flag_agree_on_every_file(tmp_path: Path) -> None:
    """GRAPHCHECK_ALLOW is read by graphcheck.read_allowlist: the file `check --allow` reads."""
    cases = {
        "good.txt": "\ufeff# sites\n  layers.*.w  \n\ncafé.*\n".encode(),
        "bad.txt": b"model.*\n\xff\xfe\n",
        "nul.txt": b"a\nb\0c\n",
    }
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        globs, problem = watch_settings.read_allow_file(str(path), "GRAPHCHECK_ALLOW")
        try:
            expected: tuple[str, ...] | str = tuple(graphcheck.read_allowlist(path))
        except graphcheck.GraphcheckError as exc:
            expected = str(exc)
        if isinstance(expected, tuple):
            assert (globs, problem) == (expected, None)
        else:
            assert globs == () and problem == f"GRAPHCHECK_ALLOW: {expected}; no allowlist is used"
    assert watch_settings.read_allow_file(str(tmp_path / "good.txt"), "x")[0] == (
        "layers.*.w",
        "café.*",
    )
    # The two refused files, by what each says (not only by agreeing with the C++ reader).
    for name, words in (("bad.txt", "not valid UTF-8"), ("nul.txt", "NUL")):
        globs, problem = watch_settings.read_allow_file(str(tmp_path / name), "GRAPHCHECK_ALLOW")
        assert globs == ()
        assert problem is not None and words in problem and problem.endswith("no allowlist is used")


def test_engine_config_values_of_any_type_are_problems_not_errors(tmp_path: Path) -> None:
    class Hostile(Mapping[str, object]):  # a mapping whose reads fail
        def __getitem__(self, key: str) -> object:
            raise RuntimeError("boom\nsecond line")

        def __iter__(self) -> Iterator[str]:
            raise RuntimeError("boom")

        def __len__(self) -> int:
            return 1

    values: list[object] = [
        None,
        "not a mapping",
        [1, 2],
        Hostile(),
        {"mode": ["error"], "dir": 7, "allow": 3.5},
        {"mode": "ERROR", "dir": "/tmp/x\0y", "allow": ["ok.*", "\udcff", 4, "a\0b"]},
        {"dir": str(tmp_path / "reports"), "allow": str(tmp_path), "colour\x1b[31m": 1},
    ]
    for value in values:
        result = watch_settings.settings_from(value, source="--additional-config graphcheck")
        assert result.mode in ("warn", "error")
        assert all(one_printable_line(p) for p in result.problems), result.problems
    glob_case = watch_settings.settings_from({"allow": ["ok.*", "\udcff", 4, "a\0b"]}, source="cfg")
    assert glob_case.allow == ("ok.*",) and len(glob_case.problems) == 3
    nul_dir = watch_settings.settings_from({"dir": "/tmp/x\0y"}, source="cfg")
    assert nul_dir.out_dir is None and "a NUL byte at offset 6" in nul_dir.problems[0]
    assert watch_settings.settings_from("text", source="cfg").problems == (
        "cfg: expected a mapping of settings, got 'text'; defaults used",
    )


def test_vllm_additional_config_of_any_shape_never_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from graphcheck.integrations import vllm as plugin

    class Hostile(dict[str, object]):
        def get(self, key: str, default: object = None) -> object:
            raise KeyError("boom")

    monkeypatch.delenv("GRAPHCHECK", raising=False)
    configs: list[object] = [
        None,
        [],
        {"graphcheck": "yes"},
        {"graphcheck": {"allow": "a\0b", "dir": "\udcff", "mode": 5}},
        {"graphcheck": {"enabled": False, "mode": object()}},
        {"graphcheck": Hostile()},
        Hostile(),
    ]
    got = []
    for config in configs:
        worker = SimpleNamespace(vllm_config=SimpleNamespace(additional_config=config))
        settings = plugin.settings_for(worker)
        got.append(None if settings is None else len(settings.problems))
        if settings is not None:
            assert all(one_printable_line(p) for p in settings.problems), settings.problems
    # Off, off, off ("yes" is not an entry), on with 3 problems, off, then two configurations
    # that cannot be read: the environment decides (GRAPHCHECK is unset: off).
    assert got == [None, None, None, 3, None, None, None]
    monkeypatch.setenv("GRAPHCHECK", "1")
    worker = SimpleNamespace(vllm_config=SimpleNamespace(additional_config=Hostile()))
    on = plugin.settings_for(worker)
    assert on is not None and on.problems == (
        "--additional-config graphcheck: cannot be read ('boom'); GRAPHCHECK_* used",
    )


def test_an_unreadable_environment_counts_as_off() -> None:
    class Broken(Mapping[str, str]):
        def __getitem__(self, key: str) -> str:
            raise OSError("gone")

        def __iter__(self) -> Iterator[str]:
            return iter(["GRAPHCHECK"])

        def __len__(self) -> int:
            return 1

        def get(self, key: str, default: object = None) -> str:  # type: ignore[override]
            raise OSError("gone")

    assert watch_settings.flag_on(Broken()) is False
    assert watch_settings.env_configured(Broken()) is False
    broken = watch_settings.settings_from_env(Broken())
    assert broken.problems == ("GRAPHCHECK_*: cannot be read (gone); defaults used",)


def test_a_post_import_hook_failure_is_one_line_without_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from graphcheck._watch import import_hook

    def fails(module: object) -> None:
        raise ValueError("bad\nvalue")

    with caplog.at_level("WARNING", logger="graphcheck.watch"):
        import_hook._run(fails, sys)
    (record,) = caplog.records
    assert record.getMessage() == (
        "graphcheck: the post-import hook for sys failed: ValueError: bad\\nvalue"
    )
    assert not record.exc_info  # the traceback only with graphcheck's debug log on


def test_random_settings_never_raise_and_every_problem_isone_printable_line(
    tmp_path: Path,
) -> None:
    rng = random.Random(34)
    files = []
    for i in range(8):
        path = tmp_path / f"allow{i}.txt"
        path.write_bytes(random_bytes(rng) + b"\n" + random_bytes(rng))
        files.append(str(path))
    for _ in range(FUZZ_ROUNDS):
        env = {
            name.decode(): random_bytes(rng, nul=False).decode("utf-8", "surrogateescape")
            for name in VARIABLES
        }
        if rng.random() < 0.5:
            env["GRAPHCHECK_ALLOW"] = rng.choice(files)
        config = {key: random_value(rng) for key in ("mode", "dir", "allow", "enabled")}
        if rng.random() < 0.3:
            config["allow"] = rng.choice(files)
        for result in (
            watch_settings.settings_from_env(env),
            watch_settings.settings_from(config, source="--additional-config graphcheck"),
            watch_settings.settings_from(random_value(rng), source="cfg"),
        ):
            assert result.mode in watch_settings.MODES
            assert all(one_printable_line(p) for p in result.problems), result.problems
            for glob in result.allow:
                glob.encode("utf-8")  # what the checker takes
            assert result.out_dir is None or result.out_dir.encode("utf-8")
        watch_settings.flag_on(env)


def test_random_names_never_reach_the_text_report_raw() -> None:
    from graphcheck._watch.output import CheckResult

    rng = random.Random(3434)
    for _ in range(200):
        name = random_bytes(rng).decode("utf-8", "surrogateescape")
        finding = {
            "graph": 1, "node": 0, "node_type": "kernel", "kernel": name, "param": 0,
            "offset": 0, "address": "0x10", "verdict": "unregistered", "owner": name,
            "owner_kind": None, "detail": name, "fix": name,
        }  # fmt: skip
        report = graphcheck.parse_report(
            json.dumps(
                {
                    "format": "graphcheck-report",
                    "version": 1,
                    "epoch": name,
                    "baseline": "capture",
                    "findings": [finding],
                    "stale_allow": [name],
                    "summary": {
                        "graphs": 1,
                        "nodes": 1,
                        "references": 1,
                        "registered": 0,
                        "runtime": 0,
                        "graph": 0,
                        "input": 0,
                        "allowed": 0,
                        "unregistered": 1,
                        "dangling": 0,
                        "stale": 0,
                        "lost": 0,
                    },
                },  # fmt: skip
                ensure_ascii=False,
            ).encode("utf-8", "replace")
        )
        result = CheckResult(1, name, report, (1,), (name,), {}, 0.0, 1, name, name, (name,),
                             (f"{name}: (4,) float32",))  # fmt: skip
        for text in (result.text(), result.summary_line()):
            assert all(line.isprintable() for line in text.splitlines()), text
