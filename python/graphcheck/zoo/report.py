"""The zoo's outputs: the validation table and the JSON report.

The allowlist's format, reading and writing are :mod:`graphcheck.zoo.allowlist`, its
evaluation (what is allowed, new, stale) :mod:`graphcheck.zoo.evaluation`; their names stay
importable from here.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from graphcheck.zoo.allowlist import (
    AllowEntry,
    allowlist_text,
    is_allocation_label,
    read_zoo_allowlist,
    site_globs,
    write_allowlist,
)
from graphcheck.zoo.evaluation import Evaluation, evaluate
from graphcheck.zoo.sites import generalize
from graphcheck.zoo.sweep import sweep_counts

__all__ = [
    "AllowEntry",
    "Evaluation",
    "allowlist_text",
    "evaluate",
    "is_allocation_label",
    "format_table",
    "read_zoo_allowlist",
    "site_globs",
    "to_json",
    "write_allowlist",
]

Result = dict[str, Any]


def _capture_ran(result: Result) -> bool:
    return isinstance(result.get("capture"), dict)


def _reason(error: str) -> str:
    """A failure's group: digits, quoted and class names normalized, first 110 characters.

    The reload's "transformers has no class X" and "transformers' X cannot be built" name
    the architecture's class: one group each, not one per architecture.
    """
    text = re.sub(r"has no class \w+", "has no class of the architecture", error)
    text = re.sub(r"transformers' \w+ cannot", "transformers' class cannot", text)
    text = re.sub(r"\d+", "N", text)
    text = re.sub(r"'[^']*'", "'…'", text)
    return text[:110]


def _failure_group(result: Result) -> str:
    """A build failure's group: whose reason and where, when the engine explained it."""
    group = _reason(result.get("error", "") or "unknown")
    failure = result.get("failure")
    if isinstance(failure, dict) and failure.get("whose"):
        at = f" at {failure['source']}" if failure.get("source") else ""
        group = f"[{failure['whose']}] {group}{at}"
    return group


def _sites(results: Mapping[str, Result], names: Mapping[str, list[str]]) -> dict[str, set[str]]:
    """Distinct sites (``owner.attribute``) of the given findings -> architectures."""
    out: dict[str, set[str]] = defaultdict(set)
    for name, paths in names.items():
        wanted = set(paths)
        for f in results[name].get("findings", []):
            if f["path"] in wanted:
                site = f.get("site", {})
                owner = site.get("owner", "?")
                key = f"{owner.rsplit('.', 1)[-1] if owner != '?' else '?'}.{site.get('attribute')}"
                out[f"{key}  ({site.get('file') or '?'})"].add(name)
    return out


def summarize(
    results: Mapping[str, Result],
    evaluation: Evaluation,
    wall: float,
    jobs: int,
    cpu: str | None = None,
) -> dict[str, Any]:
    """The validation figures (the table's content), as a JSON-ready dict.

    ``cpu`` is the run's CPU capability (:mod:`graphcheck.zoo.cpu`), recorded as given.
    """
    built = [n for n, r in results.items() if r.get("status") == "built"]
    failed = [n for n, r in results.items() if r.get("status") != "built"]
    # A class's rows: itself and its variants (a bfloat16 pass runs each class as Arch@bf16).
    classes = {str(r.get("class") or n.partition("@")[0]) for n, r in results.items()}
    classes_built = {str(results[n].get("class") or n.partition("@")[0]) for n in built}
    clean = [n for n in built if not results[n].get("findings")]
    with_new = [n for n in built if evaluation.new.get(n)]
    allowlisted = [n for n in built if results[n].get("findings") and not evaluation.new.get(n)]
    eligible = [n for n in built if results[n]["forward"]["eligible"]]
    ran = [n for n in eligible if results[n]["forward"]["ran"]]
    # Seconds per phase: floats, which typeshed's Counter (int counts) does not hold.
    phases: defaultdict[str, float] = defaultdict(float)
    for r in results.values():
        for phase, value in r.get("seconds", {}).items():
            if isinstance(value, (int, float)):
                phases[phase] += float(value)
    worker_total = phases.get("wall", 0.0) or 1e-9
    reasons = Counter(_failure_group(results[n]) for n in failed)
    examples: dict[str, list[str]] = defaultdict(list)
    for n in failed:
        examples[_failure_group(results[n])].append(n)
    capture = Counter(_reason(str(r.get("capture_status", ""))) for r in results.values())
    steps: Counter[str] = Counter()
    for r in results.values():
        for s in r.get("steps") or []:
            outcome = "equal" if s.get("outputs_equal") else "different"
            if str(s.get("replay", "ran")).startswith("refused"):
                outcome = "not replayed: reads memory freed since the capture (dangling)"
            elif s.get("error"):
                outcome = f"not compared ({str(s['error']).split(':', 1)[0]} raised)"
            steps[f"{s.get('label')}: {outcome}"] += 1
    foreign = Counter(f.get("kind", "?") for r in results.values() for f in r.get("foreign") or [])
    foreign_archs = [n for n in built if results[n].get("foreign")]
    reloads = Counter(
        _reason(str((r.get("reload") or {}).get("status", "")))
        for r in results.values()
        if r.get("reload") is not None
    )
    new_sites = _sites(results, {n: evaluation.new[n] for n in with_new})
    all_sites = _sites(results, {n: [f["path"] for f in results[n]["findings"]] for n in built})
    captured = [n for n in built if _capture_ran(results[n])]
    capture_clean = [n for n in captured if not results[n]["capture"].get("unregistered")]
    capture_new = [n for n in captured if evaluation.capture_new.get(n)]
    capture_owners = {
        generalize(o) for n in captured for o in results[n]["capture"].get("unregistered", [])
    }
    capture_new_owners = {generalize(o) for n in capture_new for o in evaluation.capture_new[n]}
    later_new = [n for n in built if evaluation.later_new.get(n)]
    later_verdicts = Counter(
        item.split(" ")[1] for n in built for item in evaluation.later_allowed.get(n, [])
    ) + Counter(item.split(" ")[1] for n in later_new for item in evaluation.later_new[n])
    return {
        "cpu_capability": cpu,
        "enumerated": len(results),
        "classes": len(classes),
        "variants": len(results) - len(classes),
        "sweep": sweep_counts(results),
        "built": len(built),
        "classes_built": len(classes_built),
        "failed": len(failed),
        "levels": dict(Counter(str(results[n].get("level")) for n in built)),
        "forward_eligible": len(eligible),
        "forward_ran": len(ran),
        "census_clean": len(clean),
        "with_findings": len(with_new),
        "finding_sites": len(new_sites),
        "allowlisted": len(allowlisted),
        "all_finding_architectures": len(built) - len(clean),
        "all_finding_sites": len(all_sites),
        "stale_allow": [str(e) for e in evaluation.stale],
        "unverified_allow": [str(e) for e in evaluation.unverified],
        "other_cpu_allow": [str(e) for e in evaluation.other_cpu],
        "capture": dict(capture),
        "captured": len(captured),
        "capture_clean": len(capture_clean),
        "capture_with_findings": len(capture_new),
        "capture_finding_owners": sorted(capture_new_owners),
        "capture_owners": len(capture_owners),
        "later_judged": sum(1 for n in built if n in evaluation.later_allowed),
        "later_verdicts": dict(later_verdicts),
        "later_with_findings": len(later_new),
        "later_finding_owners": sorted(
            {generalize(o) for n in later_new for o in evaluation.later_new[n]}
        ),
        "steps": dict(steps),
        "foreign": dict(foreign),
        "foreign_architectures": len(foreign_archs),
        "reload": dict(reloads),
        "failures_by_reason": [
            {"reason": reason, "count": count, "examples": examples[reason][:4]}
            for reason, count in reasons.most_common()
        ],
        "sites": {site: sorted(names) for site, names in sorted(all_sites.items())},
        "new_sites": {site: sorted(names) for site, names in sorted(new_sites.items())},
        "seconds": {
            "wall": wall,
            "jobs": jobs,
            "worker_total": phases.get("wall", 0.0),
            "build": phases.get("build", 0.0),
            "census": phases.get("census", 0.0),
            "forward": phases.get("forward", 0.0),
            "capture": phases.get("capture", 0.0),
            "steps": phases.get("steps", 0.0),
            "census_share": phases.get("census", 0.0) / worker_total,
        },
    }


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole else "-"


def _capture_row(statuses: Mapping[str, int]) -> str:
    ran = statuses.get("ran", 0)
    failed = sum(v for k, v in statuses.items() if k.startswith("failed"))
    other = sum(statuses.values()) - ran - failed
    if ran == 0 and failed == 0:
        return ", ".join(f"{k} ({v})" for k, v in statuses.items()) or "-"
    return f"{ran} ran, {failed} failed, {other} not run"


def _sweep_row(sweep: Mapping[str, int] | None) -> str:
    if not sweep or not (sweep["variants"] or sweep["presets"]):
        return "none selected"
    return (
        f"{sweep['options']} options ({sweep['option_names']} names) of "
        f"{sweep['model_types']} model types, {sweep['values']} values: "
        f"{sweep['variants']} variants, {sweep['built']} built; {sweep['presets']} presets"
    )


def format_table(summary: Mapping[str, Any], version: str, engine: str = "transformers") -> str:
    """The validation table (plain text, one figure per row); ``version`` is ``engine``'s."""
    s = summary
    sec = s["seconds"]
    rows = [
        (engine, version),
        ("enumerated", f"{s['enumerated']} ({s['classes']} classes + {s['variants']} variants)"),
        ("swept variants", _sweep_row(s.get("sweep"))),
        (
            "built",
            f"{s['built']} ({_pct(s['built'], s['enumerated'])}); levels "
            + ", ".join(f"{k} {v}" for k, v in sorted(s["levels"].items()))
            + (f"; {s['classes_built']} of {s['classes']} classes" if "classes_built" in s else ""),
        ),
        ("warm-up forward", f"{s['forward_ran']} ran of {s['forward_eligible']} eligible"),
        ("census clean", f"{s['census_clean']} of {s['built']} built"),
        (
            "with findings",
            f"{s['with_findings']} architectures, {s['finding_sites']} distinct sites "
            f"(not allowlisted)",
        ),
        ("allowlisted", f"{s['allowlisted']} architectures (all findings on the allowlist)"),
        (
            "all findings",
            f"{s['all_finding_architectures']} architectures, "
            f"{s['all_finding_sites']} distinct sites",
        ),
        ("stale allow entries", str(len(s["stale_allow"]))),
        (
            "CPU capability",
            f"{s.get('cpu_capability') or '?'}: "
            f"{len(s.get('other_cpu_allow', []))} allow entries hold on other CPUs only",
        ),
        ("capture", _capture_row(s["capture"])),
        (
            "clean at capture",
            f"{s['capture_clean']} of {s['captured']} captured; "
            f"{s['capture_with_findings']} with unregistered owners not allowlisted "
            f"({len(s['capture_finding_owners'])} distinct), "
            f"{s['capture_owners']} distinct owners in all"
            if s["captured"]
            else "no capture ran",
        ),
        (
            "after the capture",
            ", ".join(f"{k} {v}" for k, v in sorted(s.get("later_verdicts", {}).items()))
            + f" owners; {s.get('later_with_findings', 0)} architectures with owners not "
            "allowlisted"
            if s.get("later_verdicts") or s.get("later_with_findings")
            else "no owner dangling, stale or lost"
            if s.get("later_judged")
            else "no epoch after the capture judged by owner",
        ),
        (
            "replay after steps",
            ", ".join(f"{k} ({v})" for k, v in s["steps"].items()) or "no steps ran",
        ),
    ]
    if s.get("foreign"):
        rows.append(
            (
                "memory torch does not own",
                f"{s['foreign_architectures']} architectures: "
                + ", ".join(f"{k} {v}" for k, v in sorted(s["foreign"].items())),
            )
        )
    if s.get("reload"):
        rows.append(("reload", ", ".join(f"{k} ({v})" for k, v in s["reload"].items())))
    rows += [
        ("wall time", f"{sec['wall']:.1f} s with {sec['jobs']} jobs"),
        (
            "time per phase",
            f"build {sec['build']:.1f} s, census {sec['census']:.1f} s, "
            f"forward {sec['forward']:.1f} s, capture {sec['capture']:.1f} s, "
            f"steps {sec['steps']:.1f} s (sum over workers: "
            f"{sec['worker_total']:.1f} s)",
        ),
        ("census share", f"{100.0 * sec['census_share']:.2f}% of worker time"),
    ]
    width = max(len(k) for k, _ in rows)
    lines = [f"{k.ljust(width)}  {v}" for k, v in rows]
    if s["failures_by_reason"]:
        lines.append(f"build failures by reason ({s['failed']}):")
        for group in s["failures_by_reason"]:
            lines.append(
                f"  {group['count']:4d}  {group['reason']}  [{', '.join(group['examples'])}]"
            )
    if s["new_sites"]:
        lines.append("sites with findings not on the allowlist:")
        for site, names in s["new_sites"].items():
            shown = ", ".join(names[:4]) + (f", ... ({len(names)})" if len(names) > 4 else "")
            lines.append(f"  {site}: {shown}")
    others = [(k, v) for k, v in s["capture"].items() if k != "ran"]
    if others and any(k.startswith("failed") for k, _ in others):
        lines.append("capture not run or failed, by reason:")
        lines += [f"  {v:4d}  {k}" for k, v in sorted(others, key=lambda kv: -kv[1])]
    if s["capture_finding_owners"]:
        lines.append("capture owners not on the allowlist:")
        lines += [f"  {owner}" for owner in s["capture_finding_owners"]]
    if s.get("later_finding_owners"):
        lines.append("owners judged after the capture, not on the allowlist:")
        lines += [f"  {owner}" for owner in s["later_finding_owners"]]
    for entry in s["stale_allow"]:
        lines.append(f"stale allow entry (matched no finding): {entry}")
    return "\n".join(lines)


def to_json(
    results: Mapping[str, Result],
    evaluation: Evaluation,
    summary: Mapping[str, Any],
    version: str,
    extra: Mapping[str, Any] | None = None,
    *,
    engine: str = "transformers",
) -> dict[str, Any]:
    """The ``--json`` document: issue 10 §3's shape, plus the allowlist split per architecture.

    It starts with ``"engine"`` and the engine's version under the engine's name
    (``"transformers": "5.24.0"``, ``"vllm": "0.32.0"``).
    """
    architectures: dict[str, Any] = {}
    for name, result in results.items():
        entry = dict(result)
        entry["allowlisted"] = evaluation.allowed.get(name, [])
        entry["new_findings"] = evaluation.new.get(name, [])
        entry["capture_allowlisted"] = evaluation.capture_allowed.get(name, [])
        entry["capture_new_findings"] = evaluation.capture_new.get(name, [])
        entry["later_allowlisted"] = evaluation.later_allowed.get(name, [])
        entry["later_new_findings"] = evaluation.later_new.get(name, [])
        architectures[name] = entry
    doc: dict[str, Any] = {"engine": engine, engine: version}
    doc.update(extra or {})
    doc["summary"] = dict(summary)
    doc["architectures"] = architectures
    return doc


def write_json(path: str | Path, doc: Mapping[str, Any]) -> None:
    """Writes ``doc`` as indented JSON."""
    Path(path).write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")
