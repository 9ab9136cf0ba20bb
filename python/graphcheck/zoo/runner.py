"""Isolated workers: one forked process per architecture, a timeout each, ``jobs`` at a time.

The parent imports torch and transformers once (:func:`prepare`), then forks
one child per architecture: the child starts from the parent's clean state
(copy on write), so nothing one architecture does (a monkey patch, a global
cache, a crash, a hang) reaches another. The child sends its result through a
pipe after each phase; the parent keeps the latest, kills a child that runs
past its timeout, and records a crash or a timeout as the result of that
architecture (with what had finished before it), never as a crash of the run.

Children run single-threaded (``torch.set_num_threads(1)``): ``jobs`` is the
parallelism. Their stdout and stderr go to a log file whose last line names
the cause when a child dies without a result.
"""

from __future__ import annotations

import collections
import contextlib
import faulthandler
import multiprocessing
import multiprocessing.connection
import multiprocessing.process
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from typing import Any, cast

from graphcheck.zoo._util import error_line
from graphcheck.zoo.catalog import Arch

__all__ = ["OFFLINE_ENV", "Worker", "prepare", "run"]

Result = dict[str, Any]
#: ``worker(arch, emit) -> result``: what a child runs (``emit`` sends a partial result).
Worker = Callable[[Arch, Callable[[Result], None]], Result]

#: Set in the parent before transformers is imported, inherited by every child: never the hub.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",
}


_PRELOAD = (
    "BertModel",
    "LlamaModel",
    "ViTModel",
    "WhisperModel",
    "T5Model",
    "CLIPModel",
    "Qwen2VLModel",
    "MixtralModel",
)


def prepare() -> str:
    """Sets :data:`OFFLINE_ENV`, imports what every child needs; returns transformers' version.

    Imports happen once here, before the first fork, so that each child starts
    with torch, transformers' model base classes and the census loaded.
    Raises ``ImportError`` when transformers is missing (the ``zoo`` extra).
    """
    os.environ.update(OFFLINE_ENV)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import warnings

    warnings.filterwarnings("ignore")
    import torch  # noqa: F401
    import transformers
    import transformers.modeling_utils  # noqa: F401
    from transformers.utils import logging as hf_logging

    import graphcheck._census  # noqa: F401
    import graphcheck.zoo.inputs  # noqa: F401
    import graphcheck.zoo.overrides  # noqa: F401
    import graphcheck.zoo.sites  # noqa: F401
    import graphcheck.zoo.tiny_config  # noqa: F401
    import graphcheck.zoo.variants  # noqa: F401
    import graphcheck.zoo.worker  # noqa: F401

    # The modules most model files import (outputs, activations, masks, rope, generation):
    # loaded once here rather than in every child.
    for name in _PRELOAD:
        with contextlib.suppress(Exception):  # a preload is an optimization only
            getattr(transformers, name)

    # transformers leaves its logging helpers unannotated.
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    # The capture API (graphcheck.testing and the compiled graphcheck._torch), when this build
    # has it: imported once here, at run time, rather than in every child.
    from graphcheck.zoo.capture_phase import capture_api

    capture_api()
    return str(transformers.__version__)


def _child(
    arch: Arch, conn: multiprocessing.connection.Connection, log_path: str, worker: Worker
) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    # Python-level streams too (a parent such as pytest may have replaced them), and no
    # fault handler inherited from the parent writing a crash dump to its terminal.
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
    faulthandler.disable()
    code = 0
    try:
        if "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(1)
        result = worker(arch, lambda partial: conn.send(("partial", partial)))
        conn.send(("done", result))
    except BaseException as exc:  # report anything, then leave without cleanup handlers
        try:
            conn.send(("error", error_line(exc)))
        except Exception:
            code = 3
    finally:
        try:
            conn.close()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)


def _last_line(path: str) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 4096))
            lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines()]
    except OSError:
        return ""
    lines = [ln for ln in lines if ln]
    return lines[-1][:300] if lines else ""


def _death(exitcode: int | None) -> str:
    if exitcode is None:
        return "no exit status"
    if exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


def _finish_abnormal(
    skeleton: Result, latest: Result | None, cause: str, phase_error: str
) -> Result:
    result = latest if latest is not None else skeleton
    if result.get("status") == "built":
        # The build and census finished (they were sent); the phase after them did not.
        result["capture_status"] = f"{phase_error}: {cause}"
    else:
        result["status"] = "failed"
        result["error"] = f"{phase_error}: {cause}"
    return result


class _Running:
    def __init__(
        self,
        arch: Arch,
        proc: multiprocessing.process.BaseProcess,
        conn: multiprocessing.connection.Connection,
        log: str,
        started: float,
    ) -> None:
        self.arch = arch
        self.proc = proc
        self.conn = conn
        self.log = log
        self.started = started
        self.latest: Result | None = None
        self.final: Result | None = None
        self.error: str = ""


def run(
    archs: Iterable[Arch],
    *,
    jobs: int,
    timeout: float,
    worker: Worker | None = None,
    skeleton: Callable[[Arch], Result] | None = None,
    on_done: Callable[[Arch, Result], None] | None = None,
    on_start: Callable[[Arch], None] | None = None,
) -> dict[str, Result]:
    """Runs ``worker`` on every architecture in its own forked process; results by name.

    ``jobs`` children run at a time; a child still running ``timeout`` seconds
    after it started is killed (SIGKILL). ``skeleton(arch)`` is the result
    recorded when a child dies before sending one (default: the worker
    module's :func:`~graphcheck.zoo.worker.new_result`). ``on_done(arch,
    result)`` is called in the parent as each one finishes, ``on_start(arch)`` as each
    worker starts (progress: the architectures in flight).
    Results keep the order of ``archs``. Raises ``ValueError`` for ``jobs < 1``
    or ``timeout <= 0``.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be at least 1, got {jobs}")
    if timeout <= 0:
        raise ValueError(f"timeout must be positive, got {timeout}")
    if worker is None or skeleton is None:
        from graphcheck.zoo.worker import new_result, run_architecture

        worker = worker or run_architecture
        skeleton = skeleton or new_result
    ctx = multiprocessing.get_context("fork")
    order = list(archs)
    pending = collections.deque(order)
    running: dict[multiprocessing.connection.Connection, _Running] = {}
    results: dict[str, Result] = {}
    with tempfile.TemporaryDirectory(prefix="graphcheck-zoo-") as logs:
        while pending or running:
            while pending and len(running) < jobs:
                arch = pending.popleft()
                reader, writer = ctx.Pipe(duplex=False)
                log = os.path.join(logs, f"{len(results) + len(running)}.log")
                proc = ctx.Process(target=_child, args=(arch, writer, log, worker), daemon=True)
                proc.start()
                writer.close()
                running[reader] = _Running(arch, proc, reader, log, time.monotonic())
                if on_start is not None:
                    on_start(arch)
            now = time.monotonic()
            wait_for = min(r.started + timeout - now for r in running.values())
            ready = multiprocessing.connection.wait(list(running), timeout=max(0.0, wait_for))
            # wait returns objects it was given, the keys of `running`; typeshed's wait does not
            # carry their type through (any connection, socket or file descriptor).
            for conn in cast(list[multiprocessing.connection.Connection], ready):
                item = running[conn]
                try:
                    kind, payload = conn.recv()
                except (EOFError, OSError):
                    _complete(item, results, running, skeleton, on_done, timed_out=False)
                    continue
                if kind == "partial":
                    item.latest = payload
                elif kind == "done":
                    item.final = payload
                else:
                    item.error = str(payload)
            now = time.monotonic()
            for item in list(running.values()):
                if item.final is None and now - item.started >= timeout:
                    item.proc.kill()
                    _complete(
                        item, results, running, skeleton, on_done, timed_out=True, timeout=timeout
                    )
                elif item.final is not None:
                    _complete(item, results, running, skeleton, on_done, timed_out=False)
    return {a.name: results[a.name] for a in order if a.name in results}


def _complete(
    item: _Running,
    results: dict[str, Result],
    running: dict[multiprocessing.connection.Connection, _Running],
    skeleton: Callable[[Arch], Result],
    on_done: Callable[[Arch, Result], None] | None,
    *,
    timed_out: bool,
    timeout: float = 0.0,
) -> None:
    if item.conn not in running:
        return
    del running[item.conn]
    item.proc.join(5.0)
    if item.proc.is_alive():
        item.proc.kill()
        item.proc.join()
    item.conn.close()
    seconds = time.monotonic() - item.started
    if item.final is not None:
        result = item.final
    elif timed_out:
        result = _finish_abnormal(
            skeleton(item.arch), item.latest, f"no result after {timeout:g} s", "Timeout"
        )
    elif item.error:
        result = _finish_abnormal(skeleton(item.arch), item.latest, item.error, "WorkerError")
    else:
        last = _last_line(item.log)
        cause = _death(item.proc.exitcode) + (f" (last output: {last})" if last else "")
        result = _finish_abnormal(skeleton(item.arch), item.latest, cause, "WorkerCrash")
    result.setdefault("seconds", {})["wall"] = seconds
    results[item.arch.name] = result
    if on_done is not None:
        on_done(item.arch, result)
