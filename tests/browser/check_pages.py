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
- findings, owner and fix groups and warnings recounted from the report's lists;
- the to-do list (one line per fix: its owners and references, most urgent first), the rows
  and findings a search or filter leaves, node numbers and short kernel names, by the rules
  docs/report-format.md states, implemented here on their own.
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
# finding indexes] (the indexes are not used: a reference is matched to its findings by key).
REF_PLACE, REF_ADDRESS = 3, 4


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

    def ending_at(self, address: int) -> Doc | None:
        """A range whose end is ``address`` (innermost last), or None."""
        found = [record for _, end, record in self.items if end == address]
        return found[-1] if found else None

    def begins_at(self, address: int) -> bool:
        """Whether a range begins at ``address``."""
        i = bisect_right(self.begins, address)
        return i > 0 and self.begins[i - 1] == address


def epoch_of(snapshot: Doc, label: str) -> Doc:
    for epoch in snapshot["epochs"]:
        if epoch["label"] == label:
            return epoch  # type: ignore[no-any-return]
    raise SystemExit(f"the snapshot has no epoch {label!r}")


def ok_verdict(ref: list[Any], spans: Ranges, allocations: Ranges) -> str:
    """The ok verdict of a reference no finding is about: its span's kind in the checked epoch
    (the span it lies in, or whose end it is when no range begins there), else graph memory
    (a graph's own allocation node, a graph pool), else allowed."""
    address = int(ref[REF_ADDRESS], 16)
    span = spans.find(address)
    if span is None and not spans.begins_at(address) and not allocations.begins_at(address):
        span = spans.ending_at(address)  # a tensor's end pointer is that tensor's (verdicts.md)
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


def finding_key(f: Doc) -> tuple[Any, ...]:
    """The use of memory a finding is about: graph, node, and the argument word or operand."""
    if f.get("operand"):
        return (f["graph"], f["node"], "o", f["operand"])
    return (f["graph"], f["node"], "p", f.get("param"), f.get("offset"))


def ref_key(graph: Doc, ref: list[Any]) -> tuple[Any, ...]:
    """The same for an embedded reference row: [node, name, param or -1, offset or role, ...]."""
    if ref[2] < 0:
        return (graph["id"], ref[0], "o", ref[REF_PLACE])
    return (graph["id"], ref[0], "p", ref[2], ref[REF_PLACE])


def verdict_counts(snapshot: Doc, report: Doc, data: Doc) -> Counter[str]:
    """References per verdict: findings by their verdict, the rest by the spans of the report's
    epoch (a reference is matched to its findings by graph, node and argument word or operand,
    not by the indexes the page embeds)."""
    checked = epoch_of(snapshot, report["epoch"])
    spans, allocations = Ranges(checked["spans"]), Ranges(checked["allocations"])
    counts: Counter[str] = Counter(f["verdict"] for f in report["findings"])
    keys = {finding_key(f) for f in report["findings"]}
    for graph in data["snapshot"]["graphs"]:
        for ref in graph["refs"]:
            if ref_key(graph, ref) not in keys:
                counts[ok_verdict(ref, spans, allocations)] += 1
    return counts


def shown_graph(data: Doc, checked: Doc) -> Doc:
    """The graph the map shows: the first with a finding in the checked epoch, else the first."""
    graphs = data["snapshot"]["graphs"]
    keys = {finding_key(f) for f in checked["findings"]}
    with_findings = [g for g in graphs if any(ref_key(g, ref) in keys for ref in g["refs"])]
    return (with_findings or graphs)[0]  # type: ignore[no-any-return]


def moved_owners(snapshot: Doc, report: Doc, data: Doc, checked: Doc) -> tuple[int, int]:
    """(owners, references): the owners the shown graph points into in the baseline epoch
    that moved by the report's epoch, and the references into them."""
    graph = shown_graph(data, checked)
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


def expected_counts(
    snapshot: Doc, report: Doc, data: Doc, checked: Doc | None = None
) -> dict[str, str]:
    """Element id -> the text the page must show in it, showing `report`'s epoch (`checked`:
    the report of the page's checked epoch, when `report` is another epoch's)."""
    verdicts = verdict_counts(snapshot, report, data)
    references = sum(len(g["refs"]) for g in data["snapshot"]["graphs"])
    graphs = len(snapshot["graphs"])
    findings = report["findings"]
    keys = {finding_key(f) for f in findings}
    owners, moved_refs = moved_owners(snapshot, report, data, checked or report)
    counts = {f"count-{v}": str(verdicts[v]) for v in FINDING_VERDICTS + OK_VERDICTS}
    counts.update(
        {
            "count-references": str(references),
            "count-graphs": str(graphs),
            "count-nodes": str(sum(count_nodes(g["nodes"]) for g in snapshot["graphs"])),
            "count-findings": str(len(findings)),
            "count-stale-allow": str(len(report["stale_allow"])),
            "count-warnings": str(len(report.get("warnings", []))),
            "count-unattributed": str(len(report.get("unattributed", []))),
            "count-owner-groups": str(
                len({(f["fix"], f.get("owner_kind"), f["owner"]) for f in findings})
            ),
            "count-fix-groups": str(len({f["fix"] for f in findings})),
            "count-map-references": str(references),
            "count-map-graphs": str(graphs),
            "count-map-findings": str(
                sum(
                    1
                    for g in data["snapshot"]["graphs"]
                    for r in g["refs"]
                    if ref_key(g, r) in keys
                )
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


def expected_fixes(report: Doc) -> list[tuple[str, int, int]]:
    """(fix, owners, references) per fix, in the to-do list's order: the worst verdict among
    the fix's findings (stale, lost, dangling, unregistered), then most references, then
    first appearance."""
    groups: dict[str, dict[str, Any]] = {}
    for i, f in enumerate(report["findings"]):
        group = groups.setdefault(f["fix"], {"first": i, "worst": 9, "owners": set(), "refs": 0})
        group["worst"] = min(group["worst"], FINDING_VERDICTS.index(f["verdict"]))
        group["owners"].add((f.get("owner_kind"), f["owner"]))
        group["refs"] += 1
    order = sorted(groups.items(), key=lambda kv: (kv[1]["worst"], -kv[1]["refs"], kv[1]["first"]))
    return [(fix, len(g["owners"]), g["refs"]) for fix, g in order]


def search_matches(finding: Doc, query: str) -> bool:
    """The page's search rule: the text (any case) in the owner, kernel or address, or a hex
    address inside the bytes the finding names (its operand part, else an 8-byte word)."""
    q = query.strip().lower()
    if not q:
        return True
    fields = (finding.get(k) or "" for k in ("owner", "kernel", "address", "range_begin"))
    if any(q in str(field).lower() for field in fields):
        return True
    if not re.fullmatch(r"0x[0-9a-f]+", q):
        return False
    begin = int(finding.get("range_begin") or finding["address"], 16)
    return begin <= int(q, 16) < begin + (finding.get("range_size") or 8)


def filtered(report: Doc, query: str = "", verdicts: tuple[str, ...] = (), owner: str = "") -> Doc:
    """The findings a selection shows, and the owner rows (fix, kind, owner) they make."""
    kept = [
        f
        for f in report["findings"]
        if (not verdicts or f["verdict"] in verdicts)
        and (not owner or f["owner"] == owner)
        and search_matches(f, query)
    ]
    return {"findings": kept, "rows": {(f["fix"], f.get("owner_kind"), f["owner"]) for f in kept}}


def node_numbers(snapshot: Doc) -> dict[int, dict[int, int]]:
    """Per graph, node id -> the node's position in depth-first order (a node, then the nodes
    of its child graph or conditional bodies), counted from 0; the first node with an id
    keeps it."""
    out: dict[int, dict[int, int]] = {}
    for graph in snapshot["graphs"]:
        order: list[int] = []
        stack = [iter(graph["nodes"])]
        while stack:
            node = next(stack[-1], None)
            if node is None:
                stack.pop()
                continue
            order.append(int(node["id"]))
            nested = list(node.get("nodes", []))
            for body in node.get("bodies", []):
                nested += body.get("nodes", [])
            stack.append(iter(nested))
        numbers: dict[int, int] = {}
        for position, ident in enumerate(order):
            numbers.setdefault(ident, position)
        out[int(graph["id"])] = numbers
    return out


def short_kernel(name: str) -> str:
    """The page's short kernel name, by the documented rule, written apart from its script:
    drop every bracketed group (innermost first: template arguments, argument lists, lambdas),
    keep "(anonymous namespace)" as a namespace, then the last word (not a qualifier) and its
    last "::" part. A name the rule would make empty or odd stays whole."""
    if not re.search(r"[<(:]", name):
        return name
    text = name.replace("(anonymous namespace)", "anonymous_namespace")
    previous = None
    while previous != text:
        previous = text
        text = re.sub(r"<[^<>()]*>|\([^<>()]*\)", "", text)
    words = [w for w in text.split() if w not in ("const", "volatile", "&", "&&", "noexcept")]
    last = words[-1].split("::")[-1] if words else ""
    return last if re.fullmatch(r"[A-Za-z_$~][\w$~]*", last) else name


# Real kernel names the CUPTI reader recorded on the H200 (tests/data/gpu/watch_legacy.json)
# and what the page must show for them; short_kernel is checked against these first.
KNOWN_SHORT_NAMES = {
    "void at::native::(anonymous namespace)::indexSelectSmallIndex<float, long, unsigned int, 2,"
    " 2, -2>(at::cuda::detail::TensorInfo<float, unsigned int>, at::cuda::detail::TensorInfo<"
    "float const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, "
    "int, unsigned int, long)": "indexSelectSmallIndex",
    "void gemmSN_TN_kernel<float, 128, 16, 2, 4, 8, 9, false, cublasGemvTensorStridedBatched<"
    "float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<"
    "float> >(cublasGemmSmallNParams<cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float>)": (
        "gemmSN_TN_kernel"
    ),
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::"
    "BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > >(at::"
    "TensorIteratorBase&, at::native::BinaryFunctor<float, float, float, at::native::"
    "binary_internal::MulFunctor<float> > const&)::{lambda(int)#1}>(int, at::native::"
    "gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, float, float, at::native::"
    "binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, at::native::BinaryFunctor<"
    "float, float, float, at::native::binary_internal::MulFunctor<float> > const&)::{lambda(int)"
    "#1})": "elementwise_kernel",
    "gemm_kernel": "gemm_kernel",
    "triton_poi_fused_add_0": "triton_poi_fused_add_0",
}


def short_name_problems() -> list[str]:
    """Where short_kernel disagrees with the known answers (a broken test, not a page)."""
    return [
        f"short_kernel({name[:40]}...) = {short_kernel(name)}, expected {want}"
        for name, want in KNOWN_SHORT_NAMES.items()
        if short_kernel(name) != want
    ]


def expected_compare(shown: Doc, other: Doc) -> dict[str, str]:
    """Compare mode: (verdict, owner) pairs new in `shown` since `other`, and those fixed."""

    def pairs(report: Doc) -> set[tuple[str, Any, str]]:
        return {(f["verdict"], f.get("owner_kind"), f["owner"]) for f in report["findings"]}

    now, before = pairs(shown), pairs(other)
    return {
        "count-compare-added": str(len(now - before)),
        "count-compare-fixed": str(len(before - now)),
    }
