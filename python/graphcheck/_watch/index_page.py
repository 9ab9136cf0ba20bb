"""The folder's ``index.html`` and the links between its check point pages.

:func:`index_html` makes the page from ``index.jsonl`` as it is now (whichever process writes
last lists every process): one row per check point, ordered by time, with its process and
role, label, model, time, counts, a pass or fail colour, what changed since the previous
check point of the same process, and links to its page and reports. Links are the files'
names, relative to the folder, so the folder can be moved or copied; the folder's own path
(the machine that wrote it) appears nowhere.

Each check point's page (``Report.to_html``) carries a navigation block of a fixed size:
links to ``index.html`` and to the previous check point of its process.
:func:`set_navigation` rewrites that block in place, so that when a process writes its next
check point, the previous page gains its "next" link without being written again.

It imports nothing of graphcheck (the standard library only): the browser tier loads it by its
path (tests/browser/watch_folder.py).
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["id_ranges", "index_html", "set_navigation"]

FINDING_VERDICTS = ("stale", "lost", "dangling", "unregistered")
VERDICTS = ("registered", "runtime", "graph", "input", "allowed", *FINDING_VERDICTS)

#: The page's navigation block (report_html.h: kHtmlNavigationBytes): its JSON and padding.
NAV_BYTES = 1024
_NAV_OPEN = b'<script type="application/json" id="graphcheck-nav">'
_NAV_CLOSE = b"</script>"
# Where the block is: in the page's <head>, within its first few kilobytes.
_NAV_SEARCH = 65536


def set_navigation(page: str | Path, links: Mapping[str, str | None]) -> bool:
    """Rewrite the navigation block of ``page`` in place with ``links``.

    ``links``: ``index``, ``previous``, ``next``, relative hrefs or None. Returns False, changing
    nothing, when the page has no block of the expected size (a page written without
    navigation) or the links do not fit in it.
    """
    with open(page, "r+b") as out:
        head = out.read(_NAV_SEARCH)
        start = head.find(_NAV_OPEN)
        if start < 0:
            return False
        start += len(_NAV_OPEN)
        end = head.find(_NAV_CLOSE, start)
        if end - start != NAV_BYTES:
            return False
        block = json.dumps(
            {k: links.get(k) or "" for k in ("index", "previous", "next")}, ensure_ascii=True
        ).replace("<", "\\u003c")
        if len(block) > NAV_BYTES:
            return False
        out.seek(start)
        out.write(block.encode("ascii").ljust(NAV_BYTES, b" "))
    return True


def _entries(folder: Path) -> list[dict[str, Any]]:
    entries = []
    for line in (folder / "index.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # another process is appending this line right now, or it was torn
        if isinstance(entry, dict):
            entries.append(entry)
    entries.sort(key=lambda e: (_number(e.get("time")), _number(e.get("seq"))))
    return entries


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) else 0.0


def _summary(entry: Mapping[str, Any]) -> dict[str, int]:
    summary = entry.get("summary")
    summary = summary if isinstance(summary, dict) else {}
    out = {k: int(summary.get(k, 0) or 0) for k in ("graphs", "references", *VERDICTS)}
    census = entry.get("census")
    out["census"] = len(census) if isinstance(census, list) else 0
    return out


def failed(entry: Mapping[str, Any]) -> bool:
    """Whether a check point failed: ``ok`` false, or (without ``ok``) a finding counted."""
    ok = entry.get("ok")
    if isinstance(ok, bool):
        return not ok
    counts = _summary(entry)
    return any(counts[v] for v in (*FINDING_VERDICTS, "census"))


def changes(entry: Mapping[str, Any], previous: Mapping[str, Any] | None) -> str:
    """What changed since ``previous``, the process's check point before (None: the first).

    The verdict counts that moved (``stale +7, registered -7``), graphs added, and whether it
    now fails or passes; over another set of graphs (each capture's check, then a check point
    of them all) only which graphs, since counts over other graphs tell no change.
    """
    if previous is None:
        return "first check point of this process"
    now, before = _summary(entry), _summary(previous)
    parts = []
    ids, ids_before = _graph_ids(entry), _graph_ids(previous)
    if ids is not None and ids_before is not None and set(ids) != set(ids_before):
        # Counts over other graphs say nothing of a change (a check point over ten graphs
        # after a capture's check of one read "registered +345, graph +6336": a review).
        parts.append(
            f"graphs {id_ranges(ids)} (before: {id_ranges(ids_before)}): counts not compared"
        )
    else:
        if now["graphs"] != before["graphs"]:
            parts.append(f"graphs {now['graphs'] - before['graphs']:+d}")
        verdicts = (*FINDING_VERDICTS, "census", "registered", "runtime", "graph", "input")
        for key in (*verdicts, "allowed"):
            if now[key] != before[key]:
                parts.append(f"{key} {now[key] - before[key]:+d}")
    was, fails = failed(previous), failed(entry)
    if was != fails:
        parts.insert(0, "now fails" if fails else "now passes")
    return ", ".join(parts) or "no change"


def _graph_ids(entry: Mapping[str, Any]) -> list[int] | None:
    """The ids of the graphs a check point covered (None: its index line has no such list)."""
    graphs = entry.get("graphs")
    if not isinstance(graphs, list) or not all(
        isinstance(g, int) and not isinstance(g, bool) for g in graphs
    ):
        return None
    return sorted(set(graphs))


def id_ranges(ids: Sequence[int]) -> str:
    """Sorted ids as runs: ``[1, 2, 3, 7]`` as ``1-3, 7``; ``none`` for no id."""
    runs: list[list[int]] = []
    for graph in ids:
        if runs and graph == runs[-1][1] + 1:
            runs[-1][1] = graph
        else:
            runs.append([graph, graph])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs) or "none"


def _counts(entry: Mapping[str, Any]) -> str:
    counts = _summary(entry)
    found = [f"{v} {counts[v]}" for v in FINDING_VERDICTS if counts[v]]
    if counts["census"]:
        found.append(f"census {counts['census']}")
    return ", ".join(found) or "no findings"


def _links(entry: Mapping[str, Any]) -> str:
    files = entry.get("files")
    files = files if isinstance(files, dict) else {}
    links = []
    for kind, text in (("report_html", "page"), ("report_text", "text"), ("report_json", "json")):
        path = files.get(kind)
        if isinstance(path, str) and path:
            # The file's name: the folder may have moved since the index line was written.
            name = Path(path).name
            links.append(f'<a class="{kind}" href="{html.escape(name)}">{text}</a>')
    return " ".join(links)


_STYLE = """
:root { --fg: #1d232b; --muted: #5f6b7a; --line: #d8dee6; --bg: #f6f8fa; --fail: #b3261e;
        --pass: #1b7f3b; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
       margin: 0; }
header { padding: 12px 24px; border-bottom: 1px solid var(--line); background: var(--bg); }
h1 { font-size: 18px; margin: 0 0 4px; }
main { padding: 8px 24px 32px; }
.muted { color: var(--muted); }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line);
         vertical-align: top; overflow-wrap: break-word; }
thead th { background: var(--bg); }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr.fail td.result { color: #fff; background: var(--fail); font-weight: 600; }
tr.pass td.result { color: #fff; background: var(--pass); font-weight: 600; }
tr.fail td:first-child { border-left: 4px solid var(--fail); }
tr.pass td:first-child { border-left: 4px solid var(--pass); }
td.changes { font-size: 13px; }
td.nowrap { white-space: nowrap; }
code { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; }
@media (max-width: 720px) {
  header, main { padding-left: 12px; padding-right: 12px; }
  table, tbody, tr, td { display: block; width: 100%; }
  thead { display: none; }
  tr { border: 1px solid var(--line); border-radius: 6px; margin: 8px 0; }
  td { border: none; padding: 2px 10px; }
  td.num { text-align: left; }
  td.nowrap { white-space: normal; }
  td::before { content: attr(data-label) ": "; color: var(--muted); font-size: 12px; }
  td.result::before { content: none; }
}
"""


def index_html(folder: str | Path) -> str:
    """``index.html`` of ``folder``: every check point of ``index.jsonl``, oldest first."""
    entries = _entries(Path(folder))
    last: dict[tuple[Any, Any], dict[str, Any]] = {}
    rows = []
    processes = set()
    failures = 0
    for number, entry in enumerate(entries, 1):
        key = (entry.get("pid"), entry.get("role") or "")
        processes.add(key)
        fails = failed(entry)
        failures += fails
        counts = _summary(entry)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(_number(entry.get("time"))))
        cells = [
            ("time (UTC)", stamp, "nowrap"),
            ("process", f"pid {html.escape(str(entry.get('pid', '?')))}", "nowrap"),
            ("role", html.escape(str(entry.get("role") or "-")), "nowrap"),
            (
                "check point",
                f"#{html.escape(str(entry.get('seq', '?')))} "
                f"<code>{html.escape(str(entry.get('label', '')))}</code>",
                "",
            ),
            ("model", html.escape(str(entry.get("model") or "-")), ""),
            ("references", str(counts["references"]), "num"),
            ("findings", html.escape(_counts(entry)), ""),
            ("result", "FAIL" if fails else "PASS", "result"),
            ("since the previous", html.escape(changes(entry, last.get(key))), "changes"),
            ("reports", _links(entry), ""),
        ]
        last[key] = entry
        tds = "".join(
            f'<td data-label="{label}"{f" class={chr(34)}{cls}{chr(34)}" if cls else ""}>'
            f"{text}</td>"
            for label, text, cls in cells
        )
        rows.append(
            f'<tr id="checkpoint-{number}" class="{"fail" if fails else "pass"}">{tds}</tr>'
        )
    heads = "".join(
        f"<th>{h}</th>"
        for h in (
            "time (UTC)",
            "process",
            "role",
            "check point",
            "model",
            "references",
            "findings",
            "result",
            "since the previous (same process)",
            "reports",
        )
    )
    title = (
        f"graphcheck watch: {len(entries)} check points, {failures} failing, "
        f"{len(processes)} process{'es' if len(processes) != 1 else ''}"
    )
    body = "\n".join(rows)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f'<header><h1 id="index-title">{html.escape(title)}</h1>'
        '<div class="muted">Every check point the processes of this run wrote into this folder, '
        "oldest first. Open a page for the findings, what to fix and the memory map.</div>"
        f'</header><main><table id="checkpoints"><thead><tr>{heads}</tr></thead>'
        f"<tbody>\n{body}\n</tbody></table></main></body></html>\n"
    )
