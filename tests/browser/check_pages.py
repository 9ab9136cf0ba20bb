"""The check report's page in the browser tier: what it must show, computed on the side.

The page's summary cards come from the report's `summary`, its map counts from the reference
list the HTML writer embeds; comparing either with the other (or with the JSON report the CLI
writes from the same check) would compare a thing with itself. Here every expected number is
recounted from other material, with the definitions docs/report-format.md gives ("HTML
report"), never read from the page's script:

- references per verdict: the finding verdicts counted over the report's findings, the other
  references classified one by one from the embedded reference list and the snapshot's spans
  and allocations in the checked epoch (the span that covers a reference gives its ok verdict);
  where the snapshot carries an `expect` block for that epoch (known by construction,
  tests/data/README.md), the recount must equal it too;
- graphs and nodes from the snapshot file;
- moved owners (the map's arrows) from the snapshot's spans, as docs/verdicts.md's first stale
  rule has it: the span a reference of the shown graph points into in the baseline epoch, not
  of kind graph, whose kind and name the checked epoch has at another begin and not at its
  own;
- findings, owner and fix groups and warnings recounted from the report's lists.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections import Counter
from pathlib import Path
from typing import Any

Doc = dict[str, Any]

FINDING_VERDICTS = ("stale", "lost", "dangling", "unregistered")
OK_VERDICTS = ("registered", "runtime", "graph", "input", "allowed")
OK_VERDICT_OF_KIND = {
    "parameter": "registered",
    "buffer": "registered",
    "runtime": "runtime",
    "graph": "graph",
    "input": "input",
}
DATA_BLOCK = re.compile(
    r'<script type="application/json" id="graphcheck-data">(.*?)</script>', re.DOTALL
)
# Reference rows of the embedded data: [node, name, param, place, address, size, access,
# finding indexes]; the writer leaves out trailing members equal to their defaults (size 0,
# access "unknown", no finding), so a row may stop after the address.
REF_PLACE, REF_ADDRESS, REF_FINDINGS = 3, 4, 7


def ref_findings(ref: list[Any]) -> list[int]:
    """The indexes of the report's findings about a reference row (none when left out)."""
    return list(ref[REF_FINDINGS]) if len(ref) > REF_FINDINGS else []


def page_data(page: Path) -> Doc:
    """The data block the page embeds: {"report", "snapshot": {"epochs", "graphs", "names"}}."""
    found = DATA_BLOCK.search(page.read_text(encoding="utf-8"))
    if found is None:
        raise SystemExit(f"{page}: no graphcheck-data block")
    data: Doc = json.loads(found.group(1))
    return data


class Ranges:
    """Spans or allocations of one epoch, looked up by address (innermost range first)."""

    def __init__(self, records: list[Doc]) -> None:
        self.items = sorted(
            ((int(r["begin"], 16), int(r["begin"], 16) + int(r["size"]), r) for r in records),
            key=lambda item: item[0],
        )
        self.begins = [item[0] for item in self.items]

    def find(self, address: int) -> Doc | None:
        for begin, end, record in reversed(self.items[: bisect_right(self.begins, address)]):
            if begin <= address < end:
                return record
        return None


def epoch_of(snapshot: Doc, label: str) -> Doc:
    for epoch in snapshot["epochs"]:
        if epoch["label"] == label:
            return epoch  # type: ignore[no-any-return]
    raise SystemExit(f"the snapshot has no epoch {label!r}")


def ok_verdict(ref: list[Any], spans: Ranges, allocations: Ranges) -> str:
    """The ok verdict of a reference no finding is about: its span's kind in the checked epoch,
    else graph memory (a graph's own allocation node, a graph pool), else allowed."""
    address = int(ref[REF_ADDRESS], 16)
    span = spans.find(address)
    if span is not None:
        return OK_VERDICT_OF_KIND[span["kind"]]
    allocation = allocations.find(address)
    pool = str(allocation["pool"]) if allocation else ""
    if ref[REF_PLACE] == "alloc" or pool == "graph" or pool.startswith("graph:"):
        return "graph"
    return "allowed"


def count_nodes(nodes: list[Doc]) -> int:
    """Nodes with those of child graphs and conditional bodies (the summary's `nodes`)."""
    total = len(nodes)
    for node in nodes:
        total += count_nodes(node.get("nodes", []))
        total += sum(count_nodes(body.get("nodes", [])) for body in node.get("bodies", []))
    return total


def verdict_counts(snapshot: Doc, report: Doc, data: Doc) -> Counter[str]:
    """References per verdict: findings by their verdict, the rest by the checked spans."""
    checked = epoch_of(snapshot, report["epoch"])
    spans, allocations = Ranges(checked["spans"]), Ranges(checked["allocations"])
    counts: Counter[str] = Counter(f["verdict"] for f in report["findings"])
    for graph in data["snapshot"]["graphs"]:
        for ref in graph["refs"]:
            if not ref_findings(ref):
                counts[ok_verdict(ref, spans, allocations)] += 1
    return counts


def shown_graph(data: Doc) -> Doc:
    """The graph the map shows first: the first with a finding, else the first."""
    graphs = data["snapshot"]["graphs"]
    with_findings = [g for g in graphs if any(ref_findings(ref) for ref in g["refs"])]
    return (with_findings or graphs)[0]  # type: ignore[no-any-return]


def moved_owners(snapshot: Doc, report: Doc, data: Doc) -> tuple[int, int]:
    """(owners, references): the owners the shown graph points into in the baseline epoch
    that moved by the checked epoch, and the references into them."""
    graph = shown_graph(data)
    baseline_label = report.get("baseline") or graph["epoch"]
    if baseline_label == report["epoch"]:
        return 0, 0
    baseline = Ranges(epoch_of(snapshot, baseline_label)["spans"])
    begins_now: dict[tuple[str, str], set[int]] = {}
    for span in epoch_of(snapshot, report["epoch"])["spans"]:
        begins_now.setdefault((span["kind"], span["name"]), set()).add(int(span["begin"], 16))
    owners: set[tuple[str, str]] = set()
    references = 0
    for ref in graph["refs"]:
        span = baseline.find(int(ref[REF_ADDRESS], 16))
        if span is None or span["kind"] == "graph":
            continue
        key = (span["kind"], span["name"])
        begins = begins_now.get(key, set())
        if begins and int(span["begin"], 16) not in begins:
            owners.add(key)
            references += 1
    return len(owners), references


def expected_counts(snapshot: Doc, report: Doc, data: Doc) -> dict[str, str]:
    """Element id -> the text the page must show in it."""
    verdicts = verdict_counts(snapshot, report, data)
    references = sum(len(g["refs"]) for g in data["snapshot"]["graphs"])
    graphs = len(snapshot["graphs"])
    findings = report["findings"]
    owners, moved_refs = moved_owners(snapshot, report, data)
    counts = {f"count-{v}": str(verdicts[v]) for v in FINDING_VERDICTS + OK_VERDICTS}
    counts.update(
        {
            "count-references": str(references),
            "count-graphs": str(graphs),
            "count-nodes": str(sum(count_nodes(g["nodes"]) for g in snapshot["graphs"])),
            "count-findings": str(len(findings)),
            "count-stale-allow": str(len(report["stale_allow"])),
            "count-warnings": str(len(report.get("warnings", []))),
            "count-owner-groups": str(len({(f.get("owner_kind"), f["owner"]) for f in findings})),
            "count-fix-groups": str(len({f["fix"] for f in findings})),
            "count-map-references": str(references),
            "count-map-graphs": str(graphs),
            "count-map-findings": str(
                sum(1 for g in data["snapshot"]["graphs"] for r in g["refs"] if ref_findings(r))
            ),
            "count-map-arrows": str(owners),
            "count-map-moved-references": str(moved_refs),
        }
    )
    return counts


def expect_block_problems(snapshot: Doc, report: Doc, counts: dict[str, str]) -> list[str]:
    """Where the recount disagrees with the snapshot's expect block for the checked epoch."""
    blocks = [snapshot.get("expect") or {}, *snapshot.get("expect_epochs", [])]
    block = next((b for b in blocks if b.get("epoch") == report["epoch"]), None)
    if block is None:
        return []
    problems = []
    for key, want in block.get("summary", {}).items():
        got = counts.get(f"count-{key}")
        if got is not None and got != str(want):
            problems.append(f"recounted {key} {got}, the snapshot's expect block says {want}")
    return problems
