"""The server flag's settings never harm the host (issue 34): whatever GRAPHCHECK_* hold, a host
program runs as it does without graphcheck, with at most one graphcheck line in its log.

Each bad value runs a real host script in its own interpreter, through the installed import
hook (graphcheck_watch.pth), beside the same script with no GRAPHCHECK variable at all; the
runs start together so that the interpreters' start-up overlaps. In-process: every source's
reader (environment, an engine's configuration, the allowlist file) on bad values, and the
C++ reader and the Python side agreeing on the same files.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

import graphcheck
from graphcheck._watch import settings as watch_settings

# Builds a module, runs it, watches it (graphcheck.watch reads GRAPHCHECK_* too), and ends
# with a status of its own, so that an exit status graphcheck changed cannot pass for it.
HOST = """\
import sys
import torch
import graphcheck

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
graphcheck.watch(model)
with torch.no_grad():
    out = model(torch.ones(3, 4))
print("host:", [round(v, 4) for v in out.flatten().tolist()])
print("checkpoint:", graphcheck.checkpoint("after_reload"))
sys.exit(3)
"""
# The issue's other host: a program that only imports torch.
PLAIN = "import torch\nprint(torch.arange(4).sum().item())\n"

_VARIABLES = (b"GRAPHCHECK", b"GRAPHCHECK_MODE", b"GRAPHCHECK_DIR", b"GRAPHCHECK_ALLOW")
# Root reads any file: an unprivileged host runs without the capabilities that let it
# (util-linux's setpriv; the test is skipped without it).
_NO_DAC = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


class Host:
    """One host run: the script, its extra environment (bytes: values need not be UTF-8)."""

    def __init__(
        self, folder: Path, script: str, env: Mapping[bytes, bytes], *, unprivileged: bool
    ) -> None:
        self.folder = folder
        self.script = script
        self.env = env
        self.prefix = _NO_DAC if unprivileged and os.geteuid() == 0 else []

    def run(self) -> subprocess.CompletedProcess[bytes]:
        env = {k: v for k, v in os.environb.items() if k not in _VARIABLES}
        env.update(self.env)
        return subprocess.run(
            [*self.prefix, sys.executable, "-c", self.script],
            cwd=self.folder,
            env=env,
            capture_output=True,
            timeout=300,
            check=False,
        )


def _file(folder: Path, name: str, data: bytes) -> bytes:
    path = folder / name
    path.write_bytes(data)
    return os.fsencode(path)


def _fifo(folder: Path) -> bytes:
    path = folder / "allow.fifo"
    os.mkfifo(path)
    return os.fsencode(path)


def _huge(folder: Path) -> bytes:
    path = folder / "huge.txt"
    with open(path, "wb") as out:
        out.truncate(5 << 20)  # sparse: 5 MiB of zeros, over the 4 MiB an allowlist may hold
    return os.fsencode(path)


def _private(folder: Path) -> bytes:
    path = folder / "private.txt"
    path.write_text("model.*\n")
    path.chmod(0)
    return os.fsencode(path)


# Each kind of bad value: its GRAPHCHECK_* variables, made in the case's own folder.
BAD_VALUES: dict[str, Callable[[Path], dict[bytes, bytes]]] = {
    "allowlist_not_utf8": lambda d: {
        b"GRAPHCHECK_ALLOW": _file(d, "a.txt", b"model.*\n\xff\xfe\n")
    },
    "allowlist_binary": lambda d: {b"GRAPHCHECK_ALLOW": _file(d, "a.bin", bytes(range(256)) * 64)},
    "allowlist_folder": lambda d: {b"GRAPHCHECK_ALLOW": os.fsencode(d)},
    "allowlist_fifo": lambda d: {b"GRAPHCHECK_ALLOW": _fifo(d)},
    "allowlist_huge": lambda d: {b"GRAPHCHECK_ALLOW": _huge(d)},
    "allowlist_permission_denied": lambda d: {b"GRAPHCHECK_ALLOW": _private(d)},
    "allow_path_not_utf8": lambda d: {b"GRAPHCHECK_ALLOW": os.fsencode(d) + b"/\xff.txt"},
    "dir_path_not_utf8": lambda d: {b"GRAPHCHECK_DIR": os.fsencode(d) + b"/r\xfe"},
    "mode_not_utf8": lambda d: {b"GRAPHCHECK_MODE": b"err\xffor"},
}


# ---------------------------------------------------------------------- seeded fuzzing

FUZZ_HOSTS = 1  # host runs with random settings (each its own interpreter)
FUZZ_ROUNDS = 400  # in-process rounds of every reader


def _random_bytes(rng: random.Random, *, nul: bool = True) -> bytes:
    pieces = [
        b"\xff",
        b"\xfe",
        b"\x1b[31m",
        b"\n",
        b"\r",
        b"\x7f",
        b"\xc2\x9b",
        b"/",
        b".",
        b"1",
        b"on",
        b"error",
        b"warn",
        b"model.*",
        "é".encode(),
        b"\\",
    ]
    out = b"".join(rng.choice(pieces) for _ in range(rng.randrange(6)))
    out += bytes(rng.randrange(256) for _ in range(rng.randrange(4)))
    return out if nul else out.replace(b"\0", b"")


def _random_env(seed: int, folder: Path) -> dict[bytes, bytes]:
    """Random GRAPHCHECK_* values (no NUL: an environment cannot hold one) and allowlist."""
    rng = random.Random(seed)
    allow = folder / "fuzz-allow.txt"
    allow.write_bytes(_random_bytes(rng) + b"\n" + _random_bytes(rng))
    env = {name: _random_bytes(rng, nul=False) for name in _VARIABLES}
    env[b"GRAPHCHECK"] = b"1"
    env[b"GRAPHCHECK_DIR"] = os.fsencode(folder) + b"/" + env[b"GRAPHCHECK_DIR"].replace(b"/", b"")
    if rng.random() < 0.5:
        env[b"GRAPHCHECK_ALLOW"] = os.fsencode(allow)
    return env


def _random_value(rng: random.Random, depth: int = 0) -> object:
    kind = rng.randrange(8 if depth < 2 else 5)
    if kind == 0:
        return _random_bytes(rng).decode("utf-8", "surrogateescape")
    if kind == 1:
        return rng.choice([None, True, False, 0, -1, 3.5, float("nan")])
    if kind == 2:
        return _random_bytes(rng)
    if kind == 3:
        return "".join(chr(rng.randrange(0x110000)) for _ in range(rng.randrange(5)))
    if kind == 4:
        return rng.choice(["warn", "error", "ERROR", "", "/tmp", "allow.txt"])
    if kind == 5:
        return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {str(_random_value(rng, depth + 1)): _random_value(rng, depth + 1) for _ in range(3)}


def test_random_settings_never_raise_and_every_problem_is_one_printable_line(
    tmp_path: Path,
) -> None:
    rng = random.Random(34)
    files = []
    for i in range(8):
        path = tmp_path / f"allow{i}.txt"
        path.write_bytes(_random_bytes(rng) + b"\n" + _random_bytes(rng))
        files.append(str(path))
    for _ in range(FUZZ_ROUNDS):
        env = {
            name.decode(): _random_bytes(rng, nul=False).decode("utf-8", "surrogateescape")
            for name in _VARIABLES
        }
        if rng.random() < 0.5:
            env["GRAPHCHECK_ALLOW"] = rng.choice(files)
        config = {key: _random_value(rng) for key in ("mode", "dir", "allow", "enabled")}
        if rng.random() < 0.3:
            config["allow"] = rng.choice(files)
        for result in (
            watch_settings.settings_from_env(env),
            watch_settings.settings_from(config, source="--additional-config graphcheck"),
            watch_settings.settings_from(_random_value(rng), source="cfg"),
        ):
            assert result.mode in watch_settings.MODES
            assert all(_one_printable_line(p) for p in result.problems), result.problems
            for glob in result.allow:
                glob.encode("utf-8")  # what the checker takes
            assert result.out_dir is None or result.out_dir.encode("utf-8")
        watch_settings.flag_on(env)


def test_random_settings_leave_the_host_unharmed(runs: Runs) -> None:
    for seed in range(FUZZ_HOSTS):
        # Up to one line for each of GRAPHCHECK_MODE, GRAPHCHECK_DIR and GRAPHCHECK_ALLOW.
        _expect_unharmed(runs.result(f"fuzz_{seed}"), runs.result("clean"), bad_values=3)


def test_random_names_never_reach_the_text_report_raw() -> None:
    from graphcheck._watch.output import CheckResult

    rng = random.Random(3434)
    for _ in range(200):
        name = _random_bytes(rng).decode("utf-8", "surrogateescape")
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


class Runs:
    """Every host run of this module, started at once; `result(key)` waits for one."""

    def __init__(self, root: Path) -> None:
        self._pool = ThreadPoolExecutor(max_workers=4)
        self._futures: dict[str, Future[subprocess.CompletedProcess[bytes]]] = {}
        self._root = root

    def start(
        self,
        key: str,
        script: str,
        env: Callable[[Path], dict[bytes, bytes]],
        *,
        unprivileged: bool = False,
    ) -> None:
        folder = self._root / key
        folder.mkdir()
        host = Host(folder, script, env(folder), unprivileged=unprivileged)
        self._futures[key] = self._pool.submit(host.run)

    def result(self, key: str) -> subprocess.CompletedProcess[bytes]:
        return self._futures[key].result()

    def close(self) -> None:
        self._pool.shutdown(wait=True)


@pytest.fixture(scope="module")
def runs() -> Iterator[Runs]:
    root = Path(tempfile.mkdtemp(prefix="graphcheck-hosts-"))
    started = Runs(root)
    started.start("clean", HOST, lambda d: {})
    started.start("clean_unprivileged", HOST, lambda d: {}, unprivileged=True)
    started.start("clean_plain", PLAIN, lambda d: {})
    for kind, env in BAD_VALUES.items():
        unprivileged = kind == "allowlist_permission_denied"
        started.start(
            kind,
            HOST,
            lambda d, env=env: {b"GRAPHCHECK": b"1", **env(d)},
            unprivileged=unprivileged,
        )
    # The issue's reproductions: GRAPHCHECK unset, only the allowlist set; and a host that only
    # imports torch.
    started.start("allow_only", HOST, BAD_VALUES["allowlist_not_utf8"])
    started.start(
        "plain",
        PLAIN,
        lambda d: {b"GRAPHCHECK": b"1", **BAD_VALUES["allowlist_not_utf8"](d)},
    )
    for seed in range(FUZZ_HOSTS):
        started.start(f"fuzz_{seed}", HOST, lambda d, seed=seed: _random_env(seed, d))
    yield started
    started.close()
    for private in root.glob("*/private.txt"):
        private.chmod(0o600)
    shutil.rmtree(root)


def _expect_unharmed(
    run: subprocess.CompletedProcess[bytes],
    clean: subprocess.CompletedProcess[bytes],
    *,
    bad_values: int = 1,
) -> str:
    """The host's output and status as without graphcheck; no traceback, and at most one
    graphcheck line per bad value (each printable); returns the first line."""
    err = run.stderr.decode("utf-8", "replace")
    assert run.stdout == clean.stdout, err
    assert run.returncode == clean.returncode, err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if "graphcheck" in line]
    assert len(lines) <= bad_values, err
    assert all(line.startswith("graphcheck: ") and line.isprintable() for line in lines), err
    assert len(err.splitlines()) == len(lines), err  # nothing else on stderr either
    return lines[0] if lines else ""


def test_a_clean_host_runs_as_it_does_without_graphcheck(runs: Runs) -> None:
    clean = runs.result("clean")
    assert clean.returncode == 3 and clean.stdout.startswith(b"host: [")
    assert b"checkpoint: None" in clean.stdout and clean.stderr == b""


@pytest.mark.parametrize("kind", sorted(BAD_VALUES))
def test_a_bad_setting_is_one_log_line_and_the_host_is_unharmed(runs: Runs, kind: str) -> None:
    if kind == "allowlist_permission_denied" and os.geteuid() == 0 and not shutil.which("setpriv"):
        pytest.skip("root reads any file, and setpriv (to run the host without that) is missing")
    unprivileged = kind == "allowlist_permission_denied"
    clean = runs.result("clean_unprivileged" if unprivileged else "clean")
    line = _expect_unharmed(runs.result(kind), clean)
    expected = {
        "allowlist_not_utf8": "a.txt:2: not valid UTF-8 (byte 0xff at byte offset 8",
        "allowlist_binary": "a.bin:1: a NUL byte (byte 0x00 at byte offset 0",
        "allowlist_folder": "found a folder; no allowlist is used",
        "allowlist_fifo": "found a FIFO (named pipe); no allowlist is used",
        "allowlist_huge": "5242880 bytes, more than the 4194304 an allowlist may hold",
        "allowlist_permission_denied": "cannot be read: Permission denied",
        "allow_path_not_utf8": "found not UTF-8 text (byte 0xff at offset",
        "dir_path_not_utf8": "found not UTF-8 text (byte 0xfe at offset",
        "mode_not_utf8": "GRAPHCHECK_* mode 'err\\udcffor': expected one of warn, error; "
        "using warn",
    }[kind]
    assert line.startswith("graphcheck: GRAPHCHECK_* ") and expected in line, line


def test_the_issue_reproductions_leave_the_host_unharmed(runs: Runs) -> None:
    # GRAPHCHECK unset, GRAPHCHECK_ALLOW alone: graphcheck.watch() reads it.
    line = _expect_unharmed(runs.result("allow_only"), runs.result("clean"))
    assert "not valid UTF-8" in line
    # A script that only imports torch: the import hook starts the watch; 44 lines of
    # traceback before the fix.
    line = _expect_unharmed(runs.result("plain"), runs.result("clean_plain"))
    assert "not valid UTF-8" in line


# --------------------------------------------------------------------------- in process


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


def _one_printable_line(text: str) -> bool:
    return text.isprintable()  # no control character, no surrogate, no newline


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
        assert all(_one_printable_line(p) for p in result.problems), result.problems
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
            assert all(_one_printable_line(p) for p in settings.problems), settings.problems
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
