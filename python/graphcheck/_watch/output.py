"""What a check point of :func:`graphcheck.watch` produces: one report, its files, its log.

Every graph is checked on its own (in its
own epoch: graphs of one engine share a memory pool, so one graph's private
memory may be another's later), and the reports are merged into one report of
format version 1 (:func:`merge_reports`): summaries added, findings in graph
order (graph ids are unique in a watch), a glob stale only when it matched
nothing in any graph. :mod:`graphcheck._watch.writer` writes the files of each check point.
:func:`log_result` logs a check point as its mode says.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from graphcheck import _core
from graphcheck._watch.index_page import FINDING_VERDICTS, id_ranges

if TYPE_CHECKING:
    from graphcheck._census import CensusEntry

__all__ = [
    "CheckResult",
    "FindingsError",
    "finding_key",
    "census_lines",
    "census_result",
    "log_result",
    "merge_reports",
    "printable",
    "safe_label",
]

log = logging.getLogger("graphcheck.watch")

#: What to do about a census finding (the contract, docs/python-contract.md).
CENSUS_FIX = (
    "register it: set_derived_buffer for a tensor derived from the weights, "
    "register_constant_buffer for a constant, persistent_tensors() and "
    "register_held_tensors for a non-module holder"
)

#: How many owners a check point's log line names (the report names them all).
SUMMARY_OWNERS = 3

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# What a terminal must not get raw: C0 and C1 controls, DEL, and lone surrogates (bytes that
# were not UTF-8, decoded with surrogateescape).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
_NAMED_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\0": "\\0"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if char in _NAMED_ESCAPES:
        return _NAMED_ESCAPES[char]
    if 0xDC80 <= code <= 0xDCFF:  # the byte surrogateescape stood in for
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def printable(text: str) -> str:
    r"""``text`` safe for a terminal, one line: what the C++ text report does to names.

    Control characters (C0, DEL, C1) become visible escapes (``\n``, ``\t``, ``\0``,
    ``\x1b``), as do lone surrogates (``\xff`` for a byte that was not UTF-8).
    """
    return _CONTROL.sub(_escape, text)


def safe_label(label: str) -> str:
    """``label`` as a file-name part: letters, digits, ``_.-`` (others become ``-``)."""
    return _UNSAFE.sub("-", label).strip("-.") or "checkpoint"


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """One check point: every graph checked, one merged report and the files written.

    Attributes:
        seq: the check point's number in this process (1, 2, ...).
        label: the check point's label (``capture``, ``after_wake``, ...).
        report: the merged :class:`graphcheck.Report` (format version 1).
        graphs: ids of the graphs checked.
        skipped: graphs not checked, each with why (its model was freed).
        files: what was written: ``report_json``, ``report_text`` and
            ``snapshot:<graph id>`` paths (empty without an output folder).
        time: seconds since the epoch, when the check point ran.
        pid: the process.
        model: what the model was (names and types, or what discovery found).
        role: the process's role in its engine (``worker rank 0``), empty when unknown.
        notes: what the check point could not check, or checked besides the report (the
            CPU twin's replay against an eager forward, a compiled forward's unseen ops).
        census: the census findings of a census check point (:meth:`Watch.census_point
            <graphcheck.Watch.census_point>`), one ``path: shape dtype`` line each; they
            count as findings (:attr:`ok`).
        seconds: how long the check point took (epochs, census, checks; not the files).
        readers: what read each checked graph's nodes, by graph id: ``"cuda-graph"`` (the
            CUDA graph itself) or ``"aten-dispatcher"`` (the ATen window's ops).
        epochs: the epoch each checked graph's snapshot holds for this check point, by graph
            id: the label, or ``after_wake-2`` for a graph's second ``after_wake`` (what
            ``graphcheck check <snapshot> --epoch`` takes).
        aliases: the other paths that reach the storage of a finding's owner, by owner (a
            table every layer shares is named by the first layer's path): only owners with any.
    """

    seq: int
    label: str
    report: _core.Report
    graphs: tuple[int, ...]
    skipped: tuple[str, ...] = ()
    files: dict[str, str] = dataclasses.field(default_factory=dict)
    time: float = 0.0
    pid: int = 0
    model: str = ""
    role: str = ""
    notes: tuple[str, ...] = ()
    census: tuple[str, ...] = ()
    seconds: float = 0.0
    readers: dict[int, str] = dataclasses.field(default_factory=dict)
    epochs: dict[int, str] = dataclasses.field(default_factory=dict)
    aliases: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """No findings in any graph, and none in the census of a census check point."""
        return self.report.ok and not self.census

    @property
    def counts(self) -> dict[str, int]:
        """The finding verdicts with a non-zero count, most urgent first (as the reports)."""
        summary = self.report.summary
        counts: dict[str, int] = {v: summary[v] for v in FINDING_VERDICTS if summary[v]}
        if self.census:
            counts["unregistered (census)"] = len(self.census)
        return counts

    def header(self) -> str:
        """The lines the text report file starts with: what was checked, when, where."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.time))
        where = f"process {self.pid}" + (f" ({printable(self.role)})" if self.role else "")
        model = printable(self.model) or "-"
        lines = [
            f"graphcheck watch: check point #{self.seq} {self.label!r} in {where} at {stamp}",
            f"graphs: {', '.join(map(str, self.graphs)) or 'none'}; model: {model}",
        ]
        if self.readers:
            # One entry per reader ("graphs 1-10: aten-dispatcher"), not one per graph: a
            # server's check point covers dozens.
            by_reader: dict[str, list[int]] = {}
            for graph, reader in self.readers.items():
                by_reader.setdefault(reader, []).append(graph)
            lines.append(
                "read by: "
                + "; ".join(
                    f"graph{'s' if len(ids) > 1 else ''} {id_ranges(sorted(ids))}: {reader}"
                    for reader, ids in sorted(by_reader.items(), key=lambda item: min(item[1]))
                )
            )
        for owner, paths in self.aliases.items():
            # One tensor reached from many places: registered once, where it belongs.
            names = ", ".join(printable(name) for name, _ in _core.owner_families(paths))
            lines.append(
                f"shared: {printable(owner)} is one storage, also reached as {names} "
                f"({len(paths) + 1} paths)"
            )
        lines += [f"skipped: {printable(s)}" for s in self.skipped]
        lines += [f"note: {printable(n)}" for n in self.notes]
        if self.census:
            lines.append(
                f"census: {len(self.census)} unregistered storage(s) the model keeps outside "
                f"its parameters and buffers (fix: {CENSUS_FIX}):"
            )
            lines += [f"  {printable(line)}" for line in self.census]
        return "\n".join(lines)

    def text(self) -> str:
        """The header and the text report (``str(report)``)."""
        return f"{self.header()}\n\n{self.report}"

    def summary_line(self, owners: bool = True) -> str:
        """One line for logs: label, graphs, the finding counts and the first owners by name.

        A server's log may be all an engineer reads: the line names up to
        :data:`SUMMARY_OWNERS` owners or numbered families of them (``layers.{0-31}.x``, in the
        report's order) and how many more owners there are
        (none with ``owners`` False: a line that says they were logged before).
        """
        counts = ", ".join(f"{v} {n}" for v, n in self.counts.items()) or "no findings"
        who = f"graphcheck[{printable(self.role)}]" if self.role else "graphcheck"
        found = list(dict.fromkeys(f.owner for f in self.report.findings))
        named = ""
        if found and owners:
            # Numbered families as one name (layers.{0-31}.x), as the text report shows them:
            # three names of 32 layers' sites were three names of layer 0.
            families = _core.owner_families(found)[:SUMMARY_OWNERS]
            shown = ", ".join(printable(name) for name, _ in families)
            more = len(found) - sum(count for _, count in families)
            named = f" in {len(found)} owner(s): {shown}" + (
                f" and {more} more" if more > 0 else ""
            )
        return (
            f"{who}: check point #{self.seq} {self.label!r}: {len(self.graphs)} graph(s), "
            f"{self.report.summary['references']} references: {counts}{named}"
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (what ``index.jsonl`` holds; the report is in its own file)."""
        return {
            "seq": self.seq,
            "label": self.label,
            "time": round(self.time, 3),
            "pid": self.pid,
            "graphs": list(self.graphs),
            "skipped": list(self.skipped),
            "model": self.model,
            "role": self.role,
            "notes": list(self.notes),
            "census": list(self.census),
            "seconds": round(self.seconds, 4),
            "readers": {str(g): r for g, r in self.readers.items()},
            "ok": self.ok,
            "summary": self.report.summary,
            "files": dict(self.files),
        }


class FindingsError(_core.GraphcheckError):
    """A check point of a watch in ``error`` mode found something; the message is the report.

    Attributes:
        result: the :class:`CheckResult` (report, files).
    """

    def __init__(self, result: CheckResult) -> None:
        super().__init__(
            f"{result.summary_line()}\n{result.text()}"
            + (f"\nreport file: {result.files['report_text']}" if result.files else "")
        )
        self.result = result


def merge_reports(reports: Sequence[_core.Report], epoch: str, baseline: str) -> _core.Report:
    """One report of format version 1 from per-graph reports (graph ids must be distinct).

    Summaries are added, findings concatenated in the order given, warnings
    kept once each, and a glob is stale only when it is stale in every report. One report
    already under these labels is returned as is (merging it would copy it: a check at
    capture, which must stay cheap, has one).
    """
    if len(reports) == 1 and (reports[0].epoch, reports[0].baseline) == (epoch, baseline):
        return reports[0]
    merged: dict[str, Any] = {
        "format": "graphcheck-report",
        "version": _core.REPORT_VERSION,
        "epoch": epoch,
        "baseline": baseline,
        "summary": {k: 0 for k in ("graphs", "nodes", "references", *_core.VERDICTS)},
        "findings": [],
        "stale_allow": [],
        "warnings": [],
        "stale_allow_policy": "fail",
    }
    stale: list[str] | None = None
    for report in reports:
        data = json.loads(report.to_json(-1))
        for key, value in data["summary"].items():
            merged["summary"][key] = merged["summary"].get(key, 0) + value
        merged["findings"] += data["findings"]
        merged["warnings"] += [w for w in data["warnings"] if w not in merged["warnings"]]
        if data.get("unattributed"):  # optional: words no known memory holds, per node
            merged.setdefault("unattributed", []).extend(data["unattributed"])
        globs = data["stale_allow"]
        stale = globs if stale is None else [g for g in stale if g in globs]
    merged["stale_allow"] = stale or []
    return _core.parse_report(json.dumps(merged))


def census_lines(entries: Iterable[CensusEntry]) -> tuple[str, ...]:
    """A census point's lines: ``path: (shape) dtype``, with the aliases when there are any."""
    return tuple(
        f"{e.path}: {tuple(e.shape)} {str(e.dtype).removeprefix('torch.')}"
        + (f" (aliases: {', '.join(e.aliases)})" if e.aliases else "")
        for e in entries
    )


def census_result(
    seq: int, label: str, entries: Iterable[CensusEntry], model: str, role: str, seconds: float
) -> CheckResult:
    """A census point (:meth:`Watch.census_point`) as a check point without graphs."""
    return CheckResult(
        seq,
        label,
        merge_reports([], label, label),
        (),
        time=time.time(),
        pid=os.getpid(),
        model=model,
        role=role,
        census=census_lines(entries),
        seconds=seconds,
    )


def finding_key(result: CheckResult) -> frozenset[tuple[str, str]]:
    """What a check point found, graphs aside: each finding's verdict and owner, the census."""
    found = {(f.verdict, f.owner) for f in result.report.findings}
    return frozenset(found | {("census", line) for line in result.census})


def log_result(result: CheckResult, mode: str, same_as: int | None = None) -> None:
    """Logs a check point: skipped graphs and stale globs as warnings, then its summary line.

    Clean: info. Findings in ``warn`` mode: a warning with the report file, or the text report
    when none was written, unless check point ``same_as`` found the same (:func:`finding_key`;
    an engine's graphs of one model read the same tensors: neither its text report nor its
    owners are logged once per graph, with a folder or without). In ``error`` mode the findings
    are the :class:`FindingsError`'s.
    """
    where = f" (report: {result.files['report_text']})" if result.files else ""
    if same_as is not None:
        where = f" (the same verdicts and owners as check point #{same_as}" + (
            f"; report: {result.files['report_text']})" if result.files else ", logged there)"
        )
    for skip in result.skipped:
        log.warning("graphcheck: check point %r: %s", result.label, skip)
    if result.report.stale_allow:
        hints = result.report.stale_allow_hints
        log.warning(
            "graphcheck: allowlist globs that matched nothing: %s",
            ", ".join(
                printable(glob) + (f" ({printable(hint)})" if hint else "")
                for glob, hint in zip(result.report.stale_allow, hints, strict=True)
            ),
        )
    if result.ok:
        log.info("%s%s", result.summary_line(), where)
    elif mode == "warn":
        text = "" if result.files or same_as is not None else f"\n{result.text()}"
        log.warning("%s%s%s", result.summary_line(owners=same_as is None), where, text)
