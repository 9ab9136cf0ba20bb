"""``python -m graphcheck.zoo.baseline``: a baseline allowlist from zoo runs on several CPUs.

A CPU engine's code paths depend on the CPU's capability (:mod:`graphcheck.zoo.cpu`), so one
run's ``--write-allowlist`` is right on its own CPU only. This merges the JSON reports
(``--json``) of runs at several capabilities (native, or emulated with ``--cpu-capability``)
into one baseline: an entry found on every capability its architecture ran on is
unconditional; one found on some of them only holds on those (``[cpu=...]``). "Ran on"
counts a rung where the architecture did not build: its sites there are unknown, and an
unconditional entry would be required there of the class's variants that do build (an entry
naming a class covers its variants). An architecture that ran on one capability only gets
unconditional entries: run the capability-dependent ones (bfloat16, int8, fp8) on every rung
to tell. Reports of the same capability: the later one's result for an architecture replaces
the earlier one's.

    python -m graphcheck.zoo.baseline --output baseline_allow.txt full.json avx2.json ...

``--new-only`` writes only what the reports list as not on their allowlist (a run with
``--baseline``): the blocks a pass adds to the baseline, such as the bfloat16 pass's
``Arch@bf16`` rows, whose sites shared with float32 the class's entries already cover. Its
entries always carry the capabilities they were found on (``[cpu=amx]`` from one run on AMX):
nothing says what the other rungs find.

``--update FILE`` brings an existing baseline in line with runs on a rung its runs did not
cover (the JSON of ``--baseline`` runs against FILE), in place, keeping every other line: an
entry stale on the run's rung no longer holds there (a tagged entry loses the rung, an
untagged one holds on the rungs above it only: nothing was seen below; one left with no rung
is removed); a finding the run made outside the allowlist adds the rung to the entry of the
same architecture, glob and verdict that holds on other rungs, or else a new entry for the
rung alone, in a block of its architecture at the end. The file then allows exactly what the
run found, and nothing changes on the other rungs.

    python -m graphcheck.zoo.baseline --update baseline_allow.txt avx2-f32.json avx2-bf16.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from graphcheck.zoo.allowlist import (
    AllowEntry,
    architecture_blocks,
    read_entries,
    read_zoo_allowlist,
)
from graphcheck.zoo.cpu import LEVELS, rank
from graphcheck.zoo.evaluation import evaluate

__all__ = ["main", "merged_text", "new_only", "updated_text"]

Doc = Mapping[str, Any]


def _runs(docs: Sequence[Doc]) -> dict[str, dict[str, dict[str, Any]]]:
    """Architecture -> capability -> its result (the last report's, per capability)."""
    runs: dict[str, dict[str, dict[str, Any]]] = {}
    for doc in docs:
        level = str(doc.get("cpu_capability") or "")
        if level not in LEVELS:
            raise ValueError(
                f"a report without a known cpu_capability ({level!r}): write it with this "
                "graphcheck's python -m graphcheck.zoo --json"
            )
        for name, result in (doc.get("architectures") or {}).items():
            runs.setdefault(name, {})[level] = result
    return runs


def new_only(result: Mapping[str, Any]) -> dict[str, Any]:
    """``result`` with only what its run found outside the allowlist (its ``*new_findings``)."""
    census = set(result.get("new_findings") or [])
    at_capture = set(result.get("capture_new_findings") or [])
    later = set(result.get("later_new_findings") or [])
    out = dict(result)
    out["findings"] = [f for f in result.get("findings") or [] if f.get("path") in census]
    out["foreign"] = [f for f in result.get("foreign") or [] if f.get("path") in census]
    capture = result.get("capture")
    if isinstance(capture, dict):
        out["capture"] = {
            **capture,
            "unregistered": [o for o in capture.get("unregistered") or [] if o in at_capture],
            "foreign": [o for o in capture.get("foreign") or [] if o in at_capture],
        }
    steps = list(result.get("steps") or [])
    out["steps"] = steps[:1] + [
        {
            **step,
            "owners": {
                verdict: [o for o in owners if f"{step.get('label')} {verdict} {o}" in later]
                for verdict, owners in (step.get("owners") or {}).items()
            },
        }
        for step in steps[1:]
    ]
    return out


def merged_text(docs: Sequence[Doc], header: Sequence[str] = (), *, only_new: bool = False) -> str:
    """The baseline for ``docs`` (zoo JSON reports of one engine and version).

    ``only_new``: the entries for what the reports found outside their allowlist only
    (:func:`new_only`), each conditioned on the capabilities it was found on.
    """
    engines = {(str(d.get("engine")), str(d.get(str(d.get("engine"))))) for d in docs}
    if len(engines) != 1:
        raise ValueError(f"reports of one engine and version only, found {sorted(engines)}")
    ((engine, version),) = engines
    levels = sorted({str(d.get("cpu_capability")) for d in docs}, key=rank)
    lines = [
        f"# graphcheck.zoo baseline allowlist for {engine} {version}",
        "# Format: [conditions] Arch:census-path-glob (docs/zoo.md). Written by",
        "#   python -m graphcheck.zoo.baseline from runs on the CPU capabilities "
        + ", ".join(levels),
        *(f"# {h}" for h in header),
    ]
    for name, by_level in _runs(docs).items():
        built = [lv for lv, r in by_level.items() if r.get("status") == "built"]
        found: dict[str, list[str]] = {}  # entry -> the capabilities it was found on
        blocks: dict[str, list[str]] = {}  # comment -> its entries, each under its first
        for level in sorted(built, key=rank):
            result = new_only(by_level[level]) if only_new else by_level[level]
            for comment, entries in architecture_blocks(name, result):
                block = blocks.setdefault(comment, [])
                for entry in entries:
                    if entry not in found:
                        block.append(entry)
                    found.setdefault(entry, []).append(level)
        order = [(c, e) for c, e in blocks.items() if e or c.startswith("not allowlisted")]
        if not order:
            continue
        model = next(iter(by_level.values())).get("model_type")
        lines += ["", f"# === {name} ({model}; ran on {', '.join(sorted(built, key=rank))})"]
        for comment, entries in order:
            lines.append(f"# {comment}")
            for entry in entries:
                on = found[entry]
                every = len(on) == len(by_level) and not only_new
                condition = "" if every else f"[cpu={','.join(on)}] "
                lines.append(condition + entry)
    return "\n".join(lines) + "\n"


def _key(entry: AllowEntry) -> tuple[str, str, str]:
    """What an entry allows, CPUs aside: architecture, glob, verdict."""
    return entry.arch, entry.path, entry.verdict


def _line(entry: AllowEntry, cpus: Sequence[str]) -> str:
    return str(AllowEntry(entry.arch, entry.path, 0, tuple(sorted(cpus, key=rank)), entry.verdict))


def updated_text(path: Path, doc: Doc) -> tuple[str, dict[str, int]]:
    """Baseline ``path`` brought in line with the run ``doc`` (``--update``; module docstring).

    Returns the new text and counts: ``narrowed`` (stale entries that no longer hold on the
    run's rung), ``removed`` (left with no rung), ``widened`` (entries that now hold on it
    too) and ``added`` (new entries for the rung alone).
    """
    level = str(doc.get("cpu_capability") or "")
    if level not in LEVELS:
        raise ValueError(f"the report has no known cpu_capability ({level!r})")
    lines: list[str | None] = list(path.read_text(encoding="utf-8").splitlines())
    entries = read_zoo_allowlist(path)
    results = doc.get("architectures") or {}
    ev = evaluate(results, entries, level)
    counts = {"narrowed": 0, "removed": 0, "widened": 0, "added": 0}
    for entry in ev.stale:
        held = entry.cpus or tuple(lv for lv in LEVELS if rank(lv) > rank(level))
        cpus = [lv for lv in held if lv != level]
        lines[entry.line - 1] = _line(entry, cpus) if cpus else None
        counts["narrowed" if cpus else "removed"] += 1
    # Entries that hold on other rungs only, by what they allow: a finding of this run that
    # one of them would allow widens it instead of adding a line.
    elsewhere = {_key(e): e for e in ev.other_cpu}
    added: list[str] = []
    for name, result in results.items():
        if result.get("status") != "built":
            continue
        outside = dict(
            result,
            new_findings=ev.new.get(name, []),
            capture_new_findings=ev.capture_new.get(name, []),
            later_new_findings=ev.later_new.get(name, []),
        )
        block: list[str] = []
        for comment, found in architecture_blocks(name, new_only(outside)):
            fresh = []
            for entry in read_entries(found):
                known = elsewhere.get(_key(entry))
                if known is None:
                    fresh.append(_line(entry, (level,)))
                elif level not in known.cpus:
                    widened = dataclasses.replace(known, cpus=(*known.cpus, level))
                    lines[known.line - 1] = _line(widened, widened.cpus)
                    elsewhere[_key(entry)] = widened
                    counts["widened"] += 1
            if fresh:
                block += [f"# {comment}", *fresh]
                counts["added"] += len(fresh)
        if block:
            added += ["", f"# === {name} ({result.get('model_type')}; ran on {level})", *block]
    kept = [line for line in lines if line is not None]
    return "\n".join(kept + added) + "\n", counts


def main(argv: Sequence[str] | None = None) -> int:
    """Writes the merged baseline; returns the exit status (2 for bad input)."""
    p = argparse.ArgumentParser(
        prog="python -m graphcheck.zoo.baseline",
        description="Merge zoo JSON reports of runs on several CPU capabilities into one "
        "baseline allowlist, with a [cpu=...] condition on the entries found on some only.",
    )
    p.add_argument("reports", nargs="+", metavar="REPORT.json")
    p.add_argument("--output", metavar="FILE")
    p.add_argument(
        "--update",
        metavar="FILE",
        help="bring baseline FILE in line with the reports (runs with --baseline against it "
        "on a rung it did not cover), in place",
    )
    p.add_argument("--header", action="append", default=[], metavar="LINE")
    p.add_argument(
        "--new-only",
        action="store_true",
        help="only what the reports found outside their allowlist (a pass's additions), "
        "each entry conditioned on the capabilities it was found on",
    )
    args = p.parse_args(argv)
    if (args.output is None) == (args.update is None):
        print(
            "graphcheck.zoo.baseline: error: give --output FILE (a merge of the reports) or "
            f"--update FILE (a baseline brought in line with them), one of them; got "
            f"{'both' if args.output else 'neither'}",
            file=sys.stderr,
        )
        return 2
    if args.update is not None and (args.new_only or args.header):
        print(
            "graphcheck.zoo.baseline: error: --new-only and --header belong to a merge "
            "(--output); --update keeps the file's own lines",
            file=sys.stderr,
        )
        return 2
    try:
        docs = [json.loads(Path(f).read_text(encoding="utf-8")) for f in args.reports]
        if args.update is not None:
            for report, doc in zip(args.reports, docs, strict=True):
                text, counts = updated_text(Path(args.update), doc)
                Path(args.update).write_text(text, encoding="utf-8")
                done = ", ".join(f"{v} {k}" for k, v in counts.items())
                print(f"graphcheck.zoo.baseline: {args.update} from {report}: {done}")
            return 0
        text = merged_text(docs, args.header, only_new=args.new_only)
        Path(args.output).write_text(text, encoding="utf-8")
    except (OSError, ValueError) as exc:
        print(f"graphcheck.zoo.baseline: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
