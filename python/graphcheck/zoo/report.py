"""The zoo's outputs: the baseline allowlist, the validation table and the JSON report.

Allowlist format (``--allow``, ``--write-allowlist``): one entry per line,
``Arch:path-glob``; blank lines and lines starting with ``#`` are comments.
``Arch`` is an architecture name or an fnmatch glob over names
(``LlamaModel@rope_*``, ``*``); ``path-glob`` is a census path glob as
:func:`graphcheck.census` takes it (``*`` and ``?``, brackets literal:
``experts[*].weight``). The file the tool writes groups the entries by
architecture, one glob per site, each under a comment naming the class and
attribute that keep the tensor and the file that defines it.

An entry applies to the architectures its ``Arch`` matches among those that
ran. It is *stale* when every one of them built and no finding of theirs
matched it (a fixed site must leave the baseline); it is *unverified* when
none of them built (nothing to compare with).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from graphcheck._utils import glob_regex
from graphcheck.zoo.sites import generalize, is_allocation_label, owner_entry

__all__ = [
    "AllowEntry",
    "Evaluation",
    "evaluate",
    "is_allocation_label",
    "format_table",
    "read_zoo_allowlist",
    "site_globs",
    "to_json",
    "write_allowlist",
]

Result = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class AllowEntry:
    """One allowlist line: architecture glob, census path glob, and where it was read."""

    arch: str
    path: str
    line: int = 0

    def __str__(self) -> str:
        return f"{self.arch}:{self.path}"


def read_zoo_allowlist(path: str | Path) -> list[AllowEntry]:
    """Parses a zoo allowlist file. Raises ``ValueError`` naming the file and line of a bad entry.

    The zoo's format (``Arch:path-glob`` lines, the module docstring), not the one glob per
    line that :func:`graphcheck.read_allowlist` reads for the checker.
    """
    entries: list[AllowEntry] = []
    text = Path(path).read_text(encoding="utf-8")
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        arch, sep, glob = line.partition(":")
        if not sep or not arch.strip() or not glob.strip():
            raise ValueError(
                f"{path}:{number}: expected 'Arch:path-glob' (e.g. "
                f"'EsmModel@rotary:encoder.layer.*.rotary_embeddings._cos_cached'), found {line!r}"
            )
        entries.append(AllowEntry(arch.strip(), glob.strip(), number))
    return entries


@dataclasses.dataclass
class Evaluation:
    """Findings split by the allowlist, per architecture, and the entries' state.

    ``allowed``/``new`` hold census finding paths, ``capture_allowed``/
    ``capture_new`` the unregistered owners of the capture (where it ran).
    """

    allowed: dict[str, list[str]]
    new: dict[str, list[str]]
    stale: list[AllowEntry]
    unverified: list[AllowEntry]
    capture_allowed: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    capture_new: dict[str, list[str]] = dataclasses.field(default_factory=dict)


def _capture_ran(result: Result) -> bool:
    return isinstance(result.get("capture"), dict)


def evaluate(results: Mapping[str, Result], entries: Sequence[AllowEntry]) -> Evaluation:
    """Matches every built architecture's census findings and capture owners against ``entries``.

    An entry is stale when an architecture it names built, nothing of it
    matched, and the entry could have matched: a census path entry always, an
    allocation label (:func:`is_allocation_label`) only where the capture ran.
    """
    ev = Evaluation({}, {}, [], [])
    used: set[int] = set()
    could_match: set[int] = set()
    applies: dict[int, list[str]] = defaultdict(list)
    compiled = [(i, e, glob_regex(e.path)) for i, e in enumerate(entries)]
    for name, result in results.items():
        mine = [(i, e, rx) for i, e, rx in compiled if fnmatch.fnmatchcase(name, e.arch)]
        for i, _, _ in mine:
            applies[i].append(name)
        if result.get("status") != "built":
            continue
        ran = _capture_ran(result)
        could_match.update(i for i, e, _ in mine if ran or not is_allocation_label(e.path))
        ev.allowed[name], ev.new[name] = [], []
        for finding in result.get("findings", []):
            paths = [finding["path"], *finding.get("aliases", [])]
            hits = [i for i, _, rx in mine if any(rx.fullmatch(p) for p in paths)]
            used.update(hits)
            (ev.allowed if hits else ev.new)[name].append(finding["path"])
        if ran:
            ev.capture_allowed[name], ev.capture_new[name] = [], []
            for owner in result["capture"].get("unregistered", []):
                hits = [i for i, _, rx in mine if rx.fullmatch(owner)]
                used.update(hits)
                (ev.capture_allowed if hits else ev.capture_new)[name].append(owner)
    for i, entry in enumerate(entries):
        names = applies.get(i, [])
        if not names or i in used:
            continue
        (ev.stale if i in could_match else ev.unverified).append(entry)
    return ev


def _reason(error: str) -> str:
    """A failure's group: digits and quoted names normalized, first 110 characters."""
    text = re.sub(r"\d+", "N", error)
    text = re.sub(r"'[^']*'", "'…'", text)
    return text[:110]


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
    results: Mapping[str, Result], evaluation: Evaluation, wall: float, jobs: int
) -> dict[str, Any]:
    """The validation figures (the table's content), as a JSON-ready dict."""
    built = [n for n, r in results.items() if r.get("status") == "built"]
    failed = [n for n, r in results.items() if r.get("status") != "built"]
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
    reasons = Counter(_reason(results[n].get("error", "") or "unknown") for n in failed)
    examples: dict[str, list[str]] = defaultdict(list)
    for n in failed:
        examples[_reason(results[n].get("error", "") or "unknown")].append(n)
    capture = Counter(_reason(str(r.get("capture_status", ""))) for r in results.values())
    steps: Counter[str] = Counter()
    for r in results.values():
        for s in r.get("steps") or []:
            outcome = "equal" if s.get("outputs_equal") else "different"
            if str(s.get("replay", "ran")).startswith("refused"):
                outcome = "replay refused (reads freed memory)"
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
    return {
        "enumerated": len(results),
        "classes": sum(1 for r in results.values() if not r.get("variant")),
        "variants": sum(1 for r in results.values() if r.get("variant")),
        "built": len(built),
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
        "capture": dict(capture),
        "captured": len(captured),
        "capture_clean": len(capture_clean),
        "capture_with_findings": len(capture_new),
        "capture_finding_owners": sorted(capture_new_owners),
        "capture_owners": len(capture_owners),
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


def format_table(summary: Mapping[str, Any], version: str, engine: str = "transformers") -> str:
    """The validation table (plain text, one figure per row); ``version`` is ``engine``'s."""
    s = summary
    sec = s["seconds"]
    rows = [
        (engine, version),
        ("enumerated", f"{s['enumerated']} ({s['classes']} classes + {s['variants']} variants)"),
        (
            "built",
            f"{s['built']} ({_pct(s['built'], s['enumerated'])}); levels "
            + ", ".join(f"{k} {v}" for k, v in sorted(s["levels"].items())),
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
        architectures[name] = entry
    doc: dict[str, Any] = {"engine": engine, engine: version}
    doc.update(extra or {})
    doc["summary"] = dict(summary)
    doc["architectures"] = architectures
    return doc


def write_json(path: str | Path, doc: Mapping[str, Any]) -> None:
    """Writes ``doc`` as indented JSON."""
    Path(path).write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n", encoding="utf-8")


def site_globs(paths: Iterable[str]) -> list[str]:
    """The globs covering the paths of one site: one ``prefix*suffix`` by path components.

    Numeric components become ``*`` first (:func:`~graphcheck.zoo.sites.generalize`);
    paths that still differ keep their common leading and trailing components
    around one ``*`` (``encoder.a.padding_left`` and ``decoder.b.c.padding_left``
    give ``*.padding_left``; ``*`` matches across dots). Paths without a common
    trailing component keep one glob each (a bare ``*`` would allow anything).
    """
    globs = sorted({generalize(p) for p in paths})
    if len(globs) == 1:
        return globs
    split = [[part for part in re.split(r"(?=[.\[])", g) if part] for g in globs]
    head: list[str] = []
    for column in zip(*split, strict=False):
        if len(set(column)) != 1:
            break
        head.append(column[0])
    tail: list[str] = []
    for column in zip(*(parts[len(head) :][::-1] for parts in split), strict=False):
        if len(set(column)) != 1:
            break
        tail.insert(0, column[0])
    while tail and tail[0] in (".*", "[*]"):
        tail.pop(0)  # the joining '*' covers them
    while head and head[-1] in (".*", "[*]", "*"):
        head.pop()
    if not tail:
        return globs
    rest = [parts[len(head)] for parts in split if len(parts) > len(head)]
    dot = "." if head and rest and all(part.startswith(".") for part in rest) else ""
    return ["".join(head) + dot + "*" + "".join(tail)]


def allowlist_text(
    results: Mapping[str, Result],
    version: str,
    header: Iterable[str] = (),
    *,
    engine: str = "transformers",
) -> str:
    """The baseline text: every finding of every built architecture, one glob per site.

    A site is the class that holds the tensor and its attribute; its glob
    covers every path where that architecture keeps one (all layers).
    """
    lines = [
        f"# graphcheck.zoo baseline allowlist for {engine} {version}",
        "# Format: Arch:census-path-glob, one glob per site (see docs/zoo.md). Written by",
        "#   python -m graphcheck.zoo --write-allowlist FILE",
        *(f"# {h}" for h in header),
    ]
    for name, result in results.items():
        owners = (result.get("capture") or {}).get("unregistered") or []
        if result.get("status") != "built" or not (result.get("findings") or owners):
            continue
        lines += ["", f"# === {name} ({result.get('model_type')})"]
        by_site: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for f in result["findings"]:
            site = f.get("site", {})
            key = (str(site.get("owner", "?")), str(site.get("attribute", "?")))
            by_site.setdefault(key, []).append(f)
        written: list[str] = []
        for (owner, attribute), found in by_site.items():
            file = found[0].get("site", {}).get("file") or "?"
            phases = sorted({str(f.get("phase", "static")) for f in found})
            lines.append(
                f"# {owner}.{attribute} ({file}): {len(found)} storage(s), {', '.join(phases)}"
            )
            globs = site_globs(f["path"] for f in found)
            written += globs
            lines += [f"{name}:{g}" for g in globs]
        lines += _capture_lines(name, result, written)
    return "\n".join(lines) + "\n"


def _capture_lines(name: str, result: Result, written: list[str]) -> list[str]:
    """Entries for the capture's unregistered owners that no census glob already covers."""
    patterns = [glob_regex(g) for g in written]
    owners = (result.get("capture") or {}).get("unregistered") or []
    extra = dict(owner_entry(o) for o in owners if not any(p.fullmatch(o) for p in patterns))
    lines: list[str] = []
    for glob, kind in sorted(extra.items()):
        lines.append(f"# unregistered owner at capture ({kind}), not reached by the census")
        lines.append(f"{name}:{glob}")
    return lines


def write_allowlist(
    path: str | Path,
    results: Mapping[str, Result],
    version: str,
    header: Iterable[str] = (),
    *,
    engine: str = "transformers",
) -> None:
    """Writes :func:`allowlist_text` to ``path``."""
    text = allowlist_text(results, version, header, engine=engine)
    Path(path).write_text(text, encoding="utf-8")
