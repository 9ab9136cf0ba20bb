"""The zoo's engines: whose architectures it enumerates, builds and checks.

``transformers`` (the default) builds every model class of Hugging Face
transformers directly (:mod:`graphcheck.zoo.worker`); ``vllm`` builds every
architecture of vLLM's registry through vLLM's own engine on the CPU
(:mod:`graphcheck.zoo.vllm_engine`). Both share the runner, the allowlist, the
table and the JSON report; an :class:`Engine` says what differs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from graphcheck.zoo.catalog import Arch
from graphcheck.zoo.runner import Result, Worker

__all__ = ["ENGINES", "Engine", "engine"]


@dataclasses.dataclass(frozen=True)
class Engine:
    """What one engine brings to a zoo run.

    ``prepare()`` sets the process up before the first fork and returns the
    engine's version (``ImportError`` when it is not installed: ``missing``
    says how to install it); ``enumerate(dtype)`` lists the corpus for one of
    ``dtypes`` (the passes ``--dtype`` offers, the first the default) and
    ``pass_globs(globs, dtype)`` the ``--only`` globs that select its rows;
    ``subset`` is the test subset (globs); ``baseline`` the shipped allowlist;
    ``worker`` and ``skeleton`` what each worker process runs and the result
    recorded when it dies.
    """

    name: str
    missing: str
    prepare: Callable[[], str]
    enumerate: Callable[[str], list[Arch]]
    subset: Sequence[str]
    baseline: Path
    worker: Worker
    skeleton: Callable[[Arch], Result]
    dtypes: tuple[str, ...] = ("float32",)
    pass_globs: Callable[[list[str], str], list[str]] = lambda globs, _dtype: list(globs)


def _transformers() -> Engine:
    from graphcheck.zoo import BASELINE
    from graphcheck.zoo.catalog import enumerate_architectures
    from graphcheck.zoo.runner import prepare
    from graphcheck.zoo.subset import SUBSET
    from graphcheck.zoo.worker import new_result, run_architecture

    return Engine(
        "transformers",
        "install the zoo extra: pip install 'graphcheck[zoo]'",
        prepare,
        lambda _dtype: enumerate_architectures(),
        SUBSET,
        BASELINE,
        run_architecture,
        new_result,
    )


def _vllm() -> Engine:
    from graphcheck.zoo.vllm_engine import BASELINE
    from graphcheck.zoo.vllm_engine.catalog import DTYPE_PASSES, enumerate_architectures, pass_globs
    from graphcheck.zoo.vllm_engine.environment import prepare
    from graphcheck.zoo.vllm_engine.subset import SUBSET

    def worker(arch: Arch, emit: Callable[[Result], None]) -> Result:
        from graphcheck.zoo.vllm_engine.worker import run_architecture

        return run_architecture(arch, emit)

    def skeleton(arch: Arch) -> Result:
        from graphcheck.zoo.vllm_engine.worker import new_result

        return new_result(arch)

    return Engine(
        "vllm",
        "run it with the vLLM environment's python: \"$(scripts/bootstrap.sh vllm | tail -n 1)"
        '/bin/python" -m graphcheck.zoo --engine vllm',
        prepare,
        lambda dtype: enumerate_architectures(dtype=dtype),
        SUBSET,
        BASELINE,
        worker,
        skeleton,
        tuple(DTYPE_PASSES),
        pass_globs,
    )


#: Engine name -> factory (each imports its modules on use).
ENGINES: dict[str, Callable[[], Engine]] = {"transformers": _transformers, "vllm": _vllm}


def engine(name: str) -> Engine:
    """The engine ``name``; ``ValueError`` naming the choices for another name."""
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name!r}; expected one of {sorted(ENGINES)}")
    return ENGINES[name]()
