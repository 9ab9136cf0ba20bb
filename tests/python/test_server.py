"""The server debug flag end to end on the CPU (issue 11 §5): examples/server/server.py started
on 127.0.0.1 with GRAPHCHECK=1, driven over HTTP through capture, sleep, wake and both reloads
for the legacy and registered reference models, and in error mode; bad requests get clear
HTTP errors. The three servers start at once (each imports torch) to keep the test quick."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from watch_fakes import PLANTED, READ_PARAMETERS, owners_of

pytest.importorskip("starlette", reason="the example server needs starlette (bootstrap.sh)")
pytest.importorskip("uvicorn", reason="the example server needs uvicorn (bootstrap.sh)")

SERVER = Path(__file__).resolve().parents[2] / "examples" / "server" / "server.py"
STARTUP_S = 90


class Server:
    """One example server process on a free port, with its report folder and log."""

    def __init__(self, root: Path, name: str, variant: str, mode: str) -> None:
        self.name = name
        self.reports = root / name / "reports"
        self.log = root / name / "server.log"
        self.log.parent.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHCHECK")}
        env.update(GRAPHCHECK="1", GRAPHCHECK_MODE=mode, GRAPHCHECK_DIR=str(self.reports))
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(SERVER), "--port", "0", "--variant", variant],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=root / name,
            )
        self.url = ""

    def wait(self) -> None:
        """Until uvicorn says where it listens (port 0: the kernel chose a free one)."""
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            found = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", self.log.read_text())
            if found:
                self.url = found.group(1)
                return
            if self.process.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError(f"{self.name} did not start:\n{self.log.read_text()}")

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """``(status, JSON or text)`` of one request."""
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body))
        request = urllib.request.Request(
            self.url + path,
            data=data.encode() if isinstance(data, str) else data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                status, raw, kind = response.status, response.read(), response.headers
        except urllib.error.HTTPError as exc:
            status, raw, kind = exc.code, exc.read(), exc.headers
        text = raw.decode()
        return status, json.loads(text) if "json" in kind.get("content-type", "") else text

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.call(method, path, body)
        assert status == 200, (path, answer)
        return answer

    def report(self, seq: int | None = None) -> dict[str, Any]:
        """The check point's JSON (``GET /graphcheck/report``)."""
        return self.ok("GET", "/graphcheck/report" + (f"?seq={seq}" if seq else ""))


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Server]]:
    root = tmp_path_factory.mktemp("servers")
    started = {
        "legacy": Server(root, "legacy", "legacy", "warn"),
        "registered": Server(root, "registered", "registered", "warn"),
        "error": Server(root, "error", "legacy", "error"),
    }
    try:
        for server in started.values():
            server.wait()
        yield started
    finally:
        for server in started.values():
            server.process.terminate()
        for server in started.values():
            try:
                server.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                server.process.kill()


def step(server: Server, method: str, path: str, body: Any = None) -> dict[str, Any]:
    """One request that triggers a check point; returns that check point's report."""
    answer = server.ok(method, path, body)
    assert "graphcheck" in answer, (path, answer)
    return server.report(answer["graphcheck"]["seq"])


def test_legacy_reports_name_the_sites(servers: dict[str, Server]) -> None:
    server = servers["legacy"]
    status, answer = server.call("GET", "/graphcheck/report")
    assert status == 404 and "no such check point yet" in answer["error"]["message"]
    capture = step(server, "POST", "/capture")
    assert capture["label"] == "capture" and capture["origin"] == "GRAPHCHECK=1 import hook"
    assert owners_of(capture["report"]) == {"unregistered": PLANTED}
    assert server.ok("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2})["graph"] == {
        "replayed": True,
        "matches_eager": True,
    }
    server.ok("POST", "/sleep?level=1")
    assert server.ok("GET", "/is_sleeping") == {"is_sleeping": True}
    level1 = step(server, "POST", "/wake_up")
    assert level1["label"] == "after_wake"
    assert owners_of(level1["report"]) == {"unregistered": PLANTED}
    server.ok("POST", "/sleep?level=2")
    level2 = step(server, "POST", "/wake_up?tags=weights")
    assert level2["label"] == "after_wake[weights]"
    assert owners_of(level2["report"]) == {"lost": PLANTED}
    in_place = step(server, "POST", "/reload_weights", {"mode": "in_place"})
    assert in_place["label"] == "after_reload_in_place"
    assert owners_of(in_place["report"]) == {"lost": PLANTED}  # legacy derives once, at load
    rebind = step(server, "POST", "/reload_weights?mode=rebind")
    assert owners_of(rebind["report"])["stale"] >= READ_PARAMETERS
    # One text and one JSON report per check point, and the snapshot, in GRAPHCHECK_DIR.
    assert len(list(server.reports.glob("*.report.json"))) == 5
    text = server.ok("GET", "/graphcheck/report?format=text")
    assert text.startswith("graphcheck watch: check point #5 'after_reload_rebind'")
    assert "STALE embed_tokens.weight (parameter)" in text
    listing = server.ok("GET", "/graphcheck/reports")["checkpoints"]
    assert [c["label"] for c in listing] == [
        "capture",
        "after_wake",
        "after_wake[weights]",
        "after_reload_in_place",
        "after_reload_rebind",
    ]


def test_registered_is_clean_through_level_2(servers: dict[str, Server]) -> None:
    server = servers["registered"]
    capture = step(server, "POST", "/capture")
    assert capture["ok"] and capture["summary"]["registered"] > 0
    for level in (1, 2):
        server.ok("POST", f"/sleep?level={level}")
        woke = step(server, "POST", "/wake_up")
        assert woke["ok"], woke["report"]["findings"][:1]
    # Level 2 kept only the buffers: the weights come back with a reload, as in vLLM.
    assert step(server, "POST", "/reload_weights", {"mode": "in_place", "seed": 3})["ok"]
    completion = server.ok("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 2})
    assert completion["graph"]["matches_eager"] is True
    rebind = step(server, "POST", "/reload_weights", {"mode": "rebind"})
    assert owners_of(rebind["report"]) == {"stale": READ_PARAMETERS}


def test_bad_requests_get_clear_http_errors(servers: dict[str, Server]) -> None:
    server = servers["registered"]
    cases = [
        ("POST", "/sleep?level=3", None, 400, "level: expected an integer in 1..2, got '3'"),
        ("POST", "/reload_weights", {"mode": "swap"}, 400, "mode: expected one of in_place"),
        ("POST", "/reload_weights", {"seed": -1}, 400, "seed: expected an integer in 0.."),
        ("POST", "/v1/completions", b"{not json", 400, "the body is not JSON"),
        ("POST", "/v1/completions", [1], 400, "the body must be a JSON object, got list"),
        ("POST", "/v1/completions", {"max_tokens": 2}, 400, "prompt: expected a non-empty"),
        ("POST", "/wake_up", None, 409, "the engine is not sleeping"),
        ("GET", "/graphcheck/report?seq=x", None, 400, "seq: expected a positive integer"),
        ("GET", "/graphcheck/report?format=xml", None, 400, "format: expected json or text"),
        ("GET", "/graphcheck/report?seq=999", None, 404, "no such check point yet"),
    ]
    for method, path, body, status, message in cases:
        got, answer = server.call(method, path, body)
        assert got == status, (path, answer)
        assert message in answer["error"]["message"], (path, answer)
        assert answer["error"]["code"] == status
    server.ok("POST", "/sleep?level=1")
    got, answer = server.call("POST", "/v1/completions", {"prompt": "x"})
    assert got == 409 and "generate: the engine is sleeping" in answer["error"]["message"]
    server.ok("POST", "/wake_up")


def test_error_mode_fails_the_request_not_the_server(servers: dict[str, Server]) -> None:
    server = servers["error"]
    status, answer = server.call("POST", "/capture")
    assert status == 500 and answer["error"]["type"] == "GraphcheckFindings"
    assert answer["error"]["message"].startswith("graphcheck: check point #1 'capture'")
    assert (
        "UNREGISTERED layers.{0-1}.self_attn.qkv_proj.quant_method.packed"
        in (answer["error"]["text"])
    )
    assert server.ok("GET", "/health")["status"] == "ok"  # the server goes on
    completion = server.ok("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 1})
    assert completion["graph"]["matches_eager"] is True
    assert server.report()["label"] == "capture" and server.process.poll() is None
