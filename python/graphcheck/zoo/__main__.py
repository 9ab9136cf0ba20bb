"""``python -m graphcheck.zoo``: every architecture of an engine, tiny, through graphcheck.

``--engine transformers`` (the default): every model class of Hugging Face
transformers; ``--engine vllm``: every architecture vLLM registers, built by
vLLM's own engine on the CPU (docs/vllm-zoo.md).

Exit status: 0 when every finding is on the allowlist and no allowlist entry
is stale, 1 otherwise, 2 for bad usage or input (an unreadable allowlist, a
glob that selects nothing, the engine missing, an output path that cannot be
written, a timeout that is not a finite positive number: each one line,
checked before any model is built). Build failures are results (in the table
and the JSON), not errors.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from graphcheck.zoo._options import ZooParser, option_errors, usage_error
from graphcheck.zoo.catalog import Arch
from graphcheck.zoo.engines import ENGINES, engine

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = ZooParser(
        prog="python -m graphcheck.zoo",
        description="Build every model class of the installed transformers (or every "
        "architecture of vLLM's registry, --engine vllm) from a tiny config (offline, random "
        "weights, CPU), each in its own worker process, and list every tensor the model keeps "
        "outside its parameters and buffers; capture, check, and replay its forward.",
    )
    p.add_argument(
        "--engine",
        choices=sorted(ENGINES),
        default="transformers",
        help="whose architectures: transformers (default) or vllm (needs the vLLM "
        "environment: scripts/bootstrap.sh vllm)",
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="GLOB",
        help="class names or Arch@variant globs to run (repeatable; default: all)",
    )
    p.add_argument(
        "--subset",
        action="store_true",
        help="run the engine's fixed test subset (graphcheck.zoo.subset, "
        "graphcheck.zoo.vllm_engine.subset) instead of all",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="worker processes at a time (default: the number of CPUs)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=240.0,
        metavar="S",
        help="seconds one architecture may take before its worker is killed (default: 240)",
    )
    p.add_argument("--json", metavar="FILE", help="write the per-architecture report here")
    p.add_argument(
        "--html",
        metavar="FILE",
        help="write the same report as one self-contained HTML page (summary, a sortable "
        "table of the architectures, each linked to its findings)",
    )
    p.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="FILE",
        help="allowlist file(s): Arch:path-glob lines (repeatable)",
    )
    p.add_argument(
        "--baseline",
        action="store_true",
        help="use the baseline allowlist shipped for the engine's pinned release "
        "(graphcheck/zoo/baseline_allow.txt, graphcheck/zoo/vllm_engine/baseline_allow.txt)",
    )
    p.add_argument(
        "--write-allowlist",
        metavar="FILE",
        help="write every finding of this run as an allowlist (one glob per site)",
    )
    p.add_argument(
        "--cpu-capability",
        metavar="LEVEL",
        help="run the engine as on a CPU of this capability (one of "
        "default, avx2, avx512, avx512_bf16, amx; at most this CPU's): torch's ISA probes above "
        "it answer False, so vLLM takes that CPU's code paths, and the baseline's CPU "
        "conditions are read for it (default: this CPU's, graphcheck.zoo.cpu)",
    )
    p.add_argument(
        "--dtype",
        choices=("float32", "bfloat16"),
        default="float32",
        help="the pass of the corpus (vllm only): float32 (default: each class, then its "
        "variants) or bfloat16 (each class once, as its Arch@bf16 row, as published "
        "checkpoints run; a class whose CPU kernels are bfloat16-only as itself)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--list", action="store_true", help="list the selected architectures and exit")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the zoo; returns the exit status."""
    args = _parser().parse_args(argv)
    # Before any engine is imported or model built: outputs and numbers (one line, exit 2).
    errors = option_errors(args)
    if errors:
        return usage_error(errors[0] if len(errors) == 1 else "; ".join(errors))
    from graphcheck.zoo import cpu
    from graphcheck.zoo import report as rep
    from graphcheck.zoo.catalog import filter_architectures
    from graphcheck.zoo.runner import run

    if args.cpu_capability is not None:
        try:
            cpu.emulate(args.cpu_capability)
        except ValueError as exc:
            return usage_error(f"--cpu-capability: {exc}")

    chosen = engine(args.engine)
    if args.dtype not in chosen.dtypes:
        return usage_error(
            f"--dtype {args.dtype}: the {chosen.name} engine runs {', '.join(chosen.dtypes)} only"
        )
    allow_files = list(args.allow) + ([str(chosen.baseline)] if args.baseline else [])
    entries: list[rep.AllowEntry] = []
    try:
        for f in allow_files:
            entries += rep.read_zoo_allowlist(f)
    except (OSError, ValueError) as exc:
        return usage_error(f"cannot read allowlist: {exc}")
    try:
        version = chosen.prepare()
    except ImportError as exc:
        print(
            f"graphcheck.zoo: {chosen.name} is required ({exc}); {chosen.missing}", file=sys.stderr
        )
        return 2
    archs = chosen.enumerate(args.dtype)
    globs = list(args.only) + (list(chosen.subset) if args.subset else [])
    selected = filter_architectures(archs, chosen.pass_globs(globs, args.dtype))
    if not selected:
        return usage_error(f"no architecture matches {globs}")
    if args.list:
        for a in selected:
            print(a.name)
        return 0
    progress = None
    if not args.no_progress:
        import tqdm

        tqdm.tqdm.monitor_interval = 0  # no monitor thread in a process that forks
        progress = tqdm.tqdm(
            total=len(selected), unit="arch", file=sys.stderr, mininterval=1.0, dynamic_ncols=True
        )
    failed = 0
    in_flight: list[str] = []  # the architectures whose workers run now, oldest first

    def show() -> None:
        if progress is not None:
            progress.set_postfix_str(f"failed {failed}, running {', '.join(in_flight)}")

    def start(arch: Arch) -> None:
        in_flight.append(arch.name)
        show()

    def done(arch: Arch, result: dict[str, Any]) -> None:
        nonlocal failed
        failed += result.get("status") != "built"
        if arch.name in in_flight:
            in_flight.remove(arch.name)
        if progress is not None:
            progress.update(1)
        show()

    began = time.monotonic()
    results = run(
        selected,
        jobs=args.jobs,
        timeout=args.timeout,
        worker=chosen.worker,
        skeleton=chosen.skeleton,
        on_done=done,
        on_start=start,
    )
    wall = time.monotonic() - began
    if progress is not None:
        progress.close()
    level = cpu.current()
    evaluation = rep.evaluate(results, entries, level)
    summary = rep.summarize(results, evaluation, wall, args.jobs, level)
    print(rep.format_table(summary, version, chosen.name))
    if args.json or args.html:
        import torch

        extra = {
            "torch": torch.__version__,
            # The kernels a CPU engine picks depend on it (vLLM: AMX changes the linear path).
            "cpu_capability": level,
            "dtype": args.dtype,
            "native_cpu_capability": cpu.native(),
            "aten_cpu_capability": torch.backends.cpu.get_cpu_capability(),
            # A bfloat16 pass runs each class once, as its @bf16 row.
            "enumerated_classes": len({a.class_name for a in archs}),
            "enumerated_variants": len(archs) - len({a.class_name for a in archs}),
            "options": {
                "only": globs,
                "jobs": args.jobs,
                "timeout": args.timeout,
                "allow": allow_files,
            },
        }
        doc = rep.to_json(results, evaluation, summary, version, extra, engine=chosen.name)
        if args.json:
            rep.write_json(args.json, doc)
        if args.html:
            from graphcheck.zoo.report_html import write_html

            write_html(args.html, doc)
    if args.write_allowlist:
        rep.write_allowlist(args.write_allowlist, results, version, engine=chosen.name)
    return 1 if evaluation.failed() else 0


if __name__ == "__main__":
    sys.exit(main())
