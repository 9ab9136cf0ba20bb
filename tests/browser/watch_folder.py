"""The server flag's folder in the browser: index.html and the check point pages' links.

Two processes run the real watch (graphcheck.watch on the CPU twin: the reference model in a
weights arena, captured, slept at level 2 and woken, then its parameters rebound) into one
folder, as two ranks of a server would: "worker rank 0" with the legacy model, "worker rank 1"
with the registered one. The folder is then moved, and the checks read the moved copy:

- index.html has one row per line of index.jsonl, oldest first, coloured by the line's `ok`,
  with its process, role, label and model, and in its "since the previous" column what
  changed since the previous check point of the same process, recomputed here from the
  summaries in index.jsonl;
- every link of index.html, and the index / previous / next links of every page, name files
  of the moved folder (relative links), and the chain of previous / next follows each
  process's check points in time order;
- neither index.html nor any page holds the folder's original path;
- each page's tab title names the model, the process, the epoch and pass or fail;
- index.html does not scroll sideways at a phone's width.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

RANKS = (("worker rank 0", "legacy"), ("worker rank 1", "registered"))

STORY = r"""
import sys, torch, graphcheck
from graphcheck.reference import ReferenceConfig, build_reference_model, reference_inputs
out, role, variant = sys.argv[1:4]
watch = graphcheck.watch(out_dir=out, allocator_history=False)
watch.role = role
arena = graphcheck.WeightsArena(1 << 30)
model = build_reference_model(ReferenceConfig(variant=variant), 0, arena)
watch.capture(model, **reference_inputs(model))
arena.sleep(2, model)
arena.wake_up()
graphcheck.checkpoint("after_wake")
with arena.loading(), torch.no_grad():
    for parameter in model.parameters():
        parameter.data = parameter.data.clone()
graphcheck.checkpoint("after_reload")
watch.close()
"""

FINDING_VERDICTS = ("stale", "lost", "dangling", "unregistered")
OTHER_COUNTS = ("census", "registered", "runtime", "graph", "input", "allowed")
LINK = re.compile(r'<a [^>]*href="([^"]*)"[^>]*>')
NAV = re.compile(r'<a href="([^"]*)" id="nav-(index|previous|next)"')


def make_folder(python: str, out: Path) -> Path:
    """Runs the story in one process per rank into ``out``/written, then moves that folder to
    ``out``/moved; returns the moved folder."""
    out = out.resolve()  # the story runs in `out`: a relative path would nest
    written = out / "written"
    shutil.rmtree(out, ignore_errors=True)
    written.mkdir(parents=True)
    for role, variant in RANKS:
        done = subprocess.run(
            [python, "-c", STORY, str(written), role, variant],
            capture_output=True,
            text=True,
            cwd=out,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"the watch story ({role}) failed: {done.stderr[-3000:]}")
    moved = out / "moved"
    written.rename(moved)
    return moved


def entries(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / "index.jsonl").read_text(encoding="utf-8").splitlines()
    return sorted((json.loads(line) for line in lines if line.strip()), key=lambda e: e["time"])


def counts(entry: dict[str, Any]) -> dict[str, int]:
    summary = dict(entry["summary"])
    summary["census"] = len(entry.get("census", []))
    return summary


def expected_change(entry: dict[str, Any], previous: dict[str, Any] | None) -> str:
    """What the index says changed: verdict counts that moved, findings first, and a change
    between passing and failing first of all."""
    if previous is None:
        return "first check point of this process"
    now, before = counts(entry), counts(previous)
    parts = []
    if now["graphs"] != before["graphs"]:
        parts.append(f"graphs {now['graphs'] - before['graphs']:+d}")
    parts += [
        f"{key} {now[key] - before[key]:+d}"
        for key in FINDING_VERDICTS + OTHER_COUNTS
        if now[key] != before[key]
    ]
    if entry["ok"] != previous["ok"]:
        parts.insert(0, "now passes" if entry["ok"] else "now fails")
    return ", ".join(parts) or "no change"


def index_problems(folder: Path, texts: dict[str, str], classes: dict[str, str]) -> list[str]:
    problems = []
    lines = entries(folder)
    last: dict[tuple[int, str], dict[str, Any]] = {}
    for n, entry in enumerate(lines, 1):
        row = texts.get(f"checkpoint-{n}")
        if row is None:
            problems.append(f"index.html has no row {n} (index.jsonl has {len(lines)} lines)")
            continue
        key = (entry["pid"], entry["role"])
        want_class = "pass" if entry["ok"] else "fail"
        change = expected_change(entry, last.get(key))
        last[key] = entry
        for piece in (entry["role"], entry["label"], entry["model"], f"pid {entry['pid']}", change):
            if piece not in row:
                problems.append(f"index row {n} lacks {piece!r}: {row[:200]!r}")
        if classes.get(f"checkpoint-{n}") != want_class:
            problems.append(f"index row {n} is {classes.get(f'checkpoint-{n}')}, not {want_class}")
    if f"checkpoint-{len(lines) + 1}" in texts:
        problems.append("index.html has more rows than index.jsonl has lines")
    return problems


def link_problems(folder: Path, original: Path) -> list[str]:
    """Links resolve in the moved folder; no file names the original folder."""
    problems = []
    index = (folder / "index.html").read_text(encoding="utf-8")
    for href in LINK.findall(index):
        if not (folder / href).is_file():
            problems.append(f"index.html links {href!r}, not a file of the moved folder")
    for page in [folder / "index.html", *sorted(folder.glob("*.report.html"))]:
        if str(original) in page.read_text(encoding="utf-8"):
            problems.append(f"{page.name} holds the path of the folder that wrote it")
    return problems


def expected_chain(folder: Path) -> dict[str, dict[str, str]]:
    """Per page: the index, previous and next links it must have (same process, by time)."""
    chain: dict[str, dict[str, str]] = {}
    by_process: dict[tuple[int, str], list[str]] = {}
    for entry in entries(folder):
        key = (entry["pid"], entry["role"])
        by_process.setdefault(key, []).append(Path(entry["files"]["report_html"]).name)
    for pages in by_process.values():
        for i, page in enumerate(pages):
            chain[page] = {"index": "index.html"}
            if i > 0:
                chain[page]["previous"] = pages[i - 1]
            if i + 1 < len(pages):
                chain[page]["next"] = pages[i + 1]
    return chain


def nav_problems(page: str, dom: str, want: dict[str, str], folder: Path) -> list[str]:
    got = {kind: href for href, kind in NAV.findall(dom)}
    problems = []
    if got != want:
        problems.append(f"{page}: links {got}, expected {want}")
    problems += [
        f"{page}: its {kind} link {href!r} is not a file of the folder"
        for kind, href in got.items()
        if not (folder / href).is_file()
    ]
    return problems


def page_subject(entry: dict[str, Any]) -> str:
    who = entry["role"] or f"pid {entry['pid']}"
    return f"{entry['model'] or 'model'} \u00b7 {who} #{entry['seq']}"


def main() -> int:
    """Standalone: python watch_folder.py PYTHON OUT makes the folder and prints its path."""
    print(make_folder(sys.argv[1], Path(sys.argv[2])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
