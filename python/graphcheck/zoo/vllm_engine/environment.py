"""The vLLM engine's process environment: offline, contained, imported once before the forks.

vLLM reads its settings from the environment when it is imported, so
:func:`configure` runs first: no hub, no usage statistics, one process (the
engine core and the worker in the zoo's worker process), and every cache vLLM,
torch's inductor and ``tempfile`` write kept in graphcheck's cache folder
(:func:`runtime_dir`), never the user's home cache or ``/tmp``.
:func:`prepare` then imports vLLM and what every architecture needs, once,
before the first fork.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import warnings
from pathlib import Path

__all__ = ["OFFLINE_ENV", "configure", "prepare", "runtime_dir"]

#: Set before vLLM is imported, inherited by every worker.
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    # The engine core and its worker in the calling process: the zoo forks one per model.
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_LOGGING_LEVEL": "WARNING",
    "TOKENIZERS_PARALLELISM": "false",
    "TRANSFORMERS_VERBOSITY": "error",
    "OMP_NUM_THREADS": "1",
}


def runtime_dir() -> Path:
    """``<graphcheck cache>/vllm-runtime``: vLLM's caches, inductor's and temporary files.

    The graphcheck cache is ``$GRAPHCHECK_CACHE``, else ``$XDG_CACHE_HOME/graphcheck``,
    else ``~/.cache/graphcheck`` (as ``scripts/bootstrap.sh``).
    """
    cache = os.environ.get("GRAPHCHECK_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "graphcheck"
    )
    return Path(cache) / "vllm-runtime"


def configure() -> Path:
    """Sets :data:`OFFLINE_ENV` and the cache folders; returns the runtime folder."""
    root = runtime_dir()
    tmp = root / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    os.environ.update(OFFLINE_ENV)
    os.environ["VLLM_CACHE_ROOT"] = str(root / "vllm")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(root / "inductor")
    os.environ["TRITON_CACHE_DIR"] = str(root / "triton")
    os.environ["TMPDIR"] = str(tmp)
    tempfile.tempdir = str(tmp)
    return root


def prepare() -> str:
    """Configures the process, imports vLLM and graphcheck's capture API; returns vLLM's version.

    vLLM's registry inspects a model class in a fresh interpreter the first
    time it meets it (so that a GPU process never initializes CUDA early;
    12-14 s per class here); on the CPU the zoo's worker is already a process
    of its own, so the inspection runs in it (the result is cached on disk by
    vLLM as before). Raises ``ImportError`` when vLLM is missing.
    """
    if importlib.util.find_spec("vllm") is None:  # before configure() changes this process
        raise ImportError("No module named 'vllm'")
    configure()
    warnings.filterwarnings("ignore")
    import torch  # noqa: F401
    import vllm
    import vllm.model_executor.models.registry as registry
    from vllm import LLM  # noqa: F401

    registry._run_in_subprocess = lambda fn: fn()

    import graphcheck._census  # noqa: F401
    import graphcheck.testing  # noqa: F401
    import graphcheck.zoo.vllm_engine.worker  # noqa: F401

    return str(vllm.__version__)
