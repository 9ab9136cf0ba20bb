"""The browser tier: headless Chromium opens HTML reports and the test reads what they show.

For each case, `graphcheck check --format json` and `--format html` run on one snapshot;
Chromium loads the page from disk (--dump-dom runs its scripts first), and the counts the
page wrote into its elements (count-<verdict>, count-references, count-map-arrows, ...) and
the rows of its findings tables and lists must equal what check_pages.py recounts from the
snapshot, the embedded reference list and the report's findings (never the report's
summary); #page-errors must be empty and #page-ready say "ready". A screenshot of each page
is saved in the output folder. Cases: snapshots from tests/data, the demo's legacy and
registered snapshots when graphcheck-demo is built, and a generated 10,000-node graph.

The zoo's page (python -m graphcheck.zoo --html) is checked the same way from a zoo JSON
document (zoo_pages.py): its summary figures and row counts against the document, once
unfiltered and once per filter (?only=findings, failures, new), and a generated corpus of
1,600 architectures must load within the time limit.

usage: browser_check.py --cli GRAPHCHECK --browser CHROMIUM --data TESTS_DATA --out DIR
                        CASE...   (CASE: a file name in --data, demo, big, zoo/FILE (a zoo
                                   JSON document in --data) or zoo_big)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import check_pages
import page_checks
import watch_folder
import zoo_pages
from big_snapshot import write_big_snapshot

# A page that takes longer than this to load and draw is not "responsive".
LOAD_SECONDS_LIMIT = 60.0
# Rows of the generated zoo corpus: about the full transformers corpus (1,597 in 5.24.0).
ZOO_BIG_ROWS = 1600


class IdText(HTMLParser):
    """The text inside every element with an id (nested elements' text included), and the
    table rows with data cells (`rows`) and list items (`items`) inside each."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: dict[str, str] = {}
        self.classes: dict[str, str] = {}
        self.rows: Counter[str] = Counter()
        self.items: Counter[str] = Counter()
        self._open: list[tuple[str, str | None]] = []
        self._row_counted = True

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("br", "meta", "input", "img", "link"):
            return
        opened = [ident for _, ident in self._open if ident]
        if tag == "tr":
            self._row_counted = False
        elif tag == "td" and not self._row_counted:
            self._row_counted = True
            self.rows.update(opened)
        elif tag == "li":
            self.items.update(opened)
        ident = dict(attrs).get("id")
        self._open.append((tag, ident))
        if ident:
            self.texts.setdefault(ident, "")
            self.classes[ident] = dict(attrs).get("class") or ""

    def handle_endtag(self, tag: str) -> None:
        while self._open:
            if self._open.pop()[0] == tag:
                break

    def handle_data(self, data: str) -> None:
        for _, ident in self._open:
            if ident:
                self.texts[ident] += data


def run_cli(cli: str, snapshot: Path, fmt: str, output: Path, *extra: str) -> None:
    done = subprocess.run(
        [cli, "check", str(snapshot), "--format", fmt, "--output", str(output), *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise SystemExit(
            f"graphcheck check {snapshot} --format {fmt}: exit "
            f"{done.returncode}: {done.stderr.strip()}"
        )


def chromium(
    browser: str, page: Path, *extra: str, query: str = "", size: tuple[int, int] = (1280, 1000)
) -> str:
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                browser,
                "--headless",
                "--disable-gpu",
                "--no-sandbox",
                "--no-first-run",
                f"--user-data-dir={profile}",
                f"--window-size={size[0]},{size[1]}",
                "--hide-scrollbars",
                *extra,
                page.resolve().as_uri() + query,
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(
            f"{browser} failed on {page} (exit {done.returncode}): {done.stderr.strip()[-2000:]}"
        )
    return done.stdout


def load_page(
    browser: str, page: Path, expected: dict[str, str], query: str = ""
) -> tuple[IdText, float, list[str]]:
    """Loads ``page`` (with ``query``): what it rendered (the text of every element with an id,
    rows and list items), the seconds the load took, and the problems: page errors, no
    #page-ready, an id whose text is not the expected one, a load past the limit."""
    started = time.monotonic()
    dom = chromium(browser, page, "--dump-dom", query=query)
    seconds = time.monotonic() - started
    parser = IdText()
    parser.feed(dom)
    shown = parser.texts
    problems = []
    if shown.get("page-errors", "").strip():
        problems.append(f"page errors: {shown['page-errors'].strip()}")
    if shown.get("page-ready", "").strip() != "ready":
        problems.append("the page never marked #page-ready (its script did not finish)")
    for ident, want in expected.items():
        got = shown.get(ident, "<missing>").strip()
        if got != want:
            problems.append(f"#{ident}{query}: the page shows {got}, expected {want}")
    if seconds > LOAD_SECONDS_LIMIT:
        problems.append(f"loading took {seconds:.1f} s (limit {LOAD_SECONDS_LIMIT:.0f} s)")
    return parser, seconds, problems


def screenshot(args: argparse.Namespace, page: Path, name: str) -> None:
    chromium(args.browser, page, f"--screenshot={(args.out / f'{name}.png').resolve()}")


# Containers of the findings table and lists, and the count each one's rows must equal.
ROWS_OF = {"by-owner": "count-owner-groups"}
ITEMS_OF = {
    "todo": "count-fix-groups",
    "warnings": "count-warnings",
    "unattributed": "count-unattributed",
    "stale-allow": "count-stale-allow",
}


def check_case(args: argparse.Namespace, name: str, snapshot: Path) -> list[str]:
    report_path = args.out / f"{name}.json"
    page = args.out / f"{name}.html"
    run_cli(args.cli, snapshot, "json", report_path)
    run_cli(args.cli, snapshot, "html", page)
    report = json.loads(report_path.read_text(encoding="utf-8"))
    doc = json.loads(snapshot.read_text(encoding="utf-8"))
    data = check_pages.page_data(page)
    expected = check_pages.expected_counts(doc, report, data)
    dom, seconds, problems = load_page(args.browser, page, expected)
    problems += check_pages.expect_block_problems(doc, report, expected)
    for box, count in ROWS_OF.items():
        if str(dom.rows[box]) != expected[count]:
            problems.append(f"#{box} has {dom.rows[box]} rows, expected {expected[count]}")
    for box, count in ITEMS_OF.items():
        if str(dom.items[box]) != expected[count]:
            problems.append(f"#{box} lists {dom.items[box]} items, expected {expected[count]}")
    problems += page_checks.todo_problems(dom.texts, report)
    problems += page_checks.title_problems(dom.texts, report, snapshot.name)
    big = len(doc["graphs"][0]["nodes"]) > 2000 if doc["graphs"] else False
    if not big:
        problems += selection_problems(args, page, report)
        problems += epoch_problems(args, snapshot, page, doc, report, data)
    problems += probe_problems(args, page, doc, report, interact=not big)
    screenshot(args, page, name)
    print(
        f"{name}: {expected['count-references']} references, "
        f"{expected['count-findings']} findings in {expected['count-fix-groups']} fixes, "
        f"{expected['count-map-arrows']} moved owners "
        f"({expected['count-map-moved-references']} stale references) drawn as arrows; "
        f"loaded in {seconds:.1f} s; {'FAIL' if problems else 'ok'}"
    )
    return [f"{name}: {p}" for p in problems]


def selection_problems(args: argparse.Namespace, page: Path, report: dict[str, Any]) -> list[str]:
    """Each selection in the URL (verdict, search, owner) shows the rows it must."""
    problems = []
    for fragment, selection in page_checks.selections(report):
        problems += load_page(
            args.browser, page, page_checks.shown_counts(selection), query=fragment
        )[2]
    return problems


def epoch_problems(
    args: argparse.Namespace,
    snapshot: Path,
    page: Path,
    doc: dict[str, Any],
    report: dict[str, Any],
    data: dict[str, Any],
) -> list[str]:
    """Each other epoch's button shows that epoch's verdicts: what `graphcheck check --epoch`
    reports for it against the same baseline, recounted."""
    problems = []
    for epoch in doc["epochs"]:
        label = epoch["label"]
        if label == report["epoch"]:
            continue
        other_path = args.out / f"{page.stem}.{label}.json"
        extra = ["--epoch", label] + (
            ["--baseline", report["baseline"]] if report["baseline"] else []
        )
        run_cli(args.cli, snapshot, "json", other_path, *extra)
        other = json.loads(other_path.read_text(encoding="utf-8"))
        expected = check_pages.expected_counts(doc, other, data, checked=report)
        from urllib.parse import quote

        # The epoch's own counts, and compare mode against the checked epoch.
        expected.update(check_pages.expected_compare(other, report))
        fragment = f"#epoch={quote(label)}&compare={quote(report['epoch'])}"
        dom, _, found = load_page(args.browser, page, expected, query=fragment)
        found += page_checks.todo_problems(dom.texts, other)
        found += page_checks.title_problems(dom.texts, other, snapshot.name)
        problems += [f"epoch {label}: {p}" for p in found]
    return problems


def probe_problems(
    args: argparse.Namespace,
    page: Path,
    doc: dict[str, Any],
    report: dict[str, Any],
    interact: bool,
) -> list[str]:
    """Layout at a desktop and a phone width, names, the CSV export, and the links between
    the findings and the map (page_checks.py)."""
    problems = []
    for size in (page_checks.DESKTOP, page_checks.PHONE):
        probed = page_checks.probe_page(
            page,
            page.with_suffix(f".probe{size[0]}.html"),
            interact and size == page_checks.DESKTOP,
        )
        probe = page_checks.read_probe(chromium(args.browser, probed, "--dump-dom", size=size))
        problems += page_checks.layout_problems(probe, size[0], bool(report["findings"]))
        if size == page_checks.DESKTOP:
            problems += page_checks.name_problems(probe, doc, report)
            problems += page_checks.csv_problems(probe, report["findings"], report["epoch"])
            problems += page_checks.interaction_problems(probe, report)
    return problems


def check_zoo_case(args: argparse.Namespace, name: str, doc: dict[str, Any]) -> list[str]:
    page = args.out / f"{name}.html"
    zoo_pages.write_page(doc, page)
    expected = zoo_pages.expected_counts(doc)
    _, seconds, problems = load_page(args.browser, page, expected)
    screenshot(args, page, name)
    # Each filter once, through the query the page reads (a big corpus: the plain load only).
    if len(doc["architectures"]) < ZOO_BIG_ROWS:
        for only in zoo_pages.FILTERS:
            want = {"count-rows-shown": expected[f"count-rows-{only}"]}
            problems += load_page(args.browser, page, want, query=f"?only={only}")[2]
    print(
        f"{name}: {expected['count-rows']} architectures, "
        + ", ".join(f"{only} {expected[f'count-rows-{only}']}" for only in zoo_pages.FILTERS)
        + f"; loaded in {seconds:.1f} s; {'FAIL' if problems else 'ok'}"
    )
    return [f"{name}: {p}" for p in problems]


def check_watch_folder(args: argparse.Namespace) -> list[str]:
    """The server flag's folder: index.html and the pages' links (watch_folder.py)."""
    out = args.out / "watch"
    folder = watch_folder.make_folder(args.python, out)
    index = folder / "index.html"
    parser = IdText()
    parser.feed(chromium(args.browser, index, "--dump-dom"))
    problems = watch_folder.index_problems(folder, parser.texts, parser.classes)
    problems += watch_folder.link_problems(folder, out / "written")
    chain = watch_folder.expected_chain(folder)
    for entry in watch_folder.entries(folder):
        name = Path(entry["files"]["report_html"]).name
        dom = chromium(args.browser, folder / name, "--dump-dom")
        page = IdText()
        page.feed(dom)
        problems += watch_folder.nav_problems(name, dom, chain[name], folder)
        if page.texts.get("page-errors", "").strip() or page.texts.get("page-ready") != "ready":
            problems.append(f"{name}: page errors {page.texts.get('page-errors', '')[:300]!r}")
        report = json.loads((folder / Path(entry["files"]["report_json"]).name).read_text())
        problems += page_checks.title_problems(page.texts, report, watch_folder.page_subject(entry))
    probed = page_checks.probe_page(index, out / "index.probe.html", False)
    probe = page_checks.read_probe(
        chromium(args.browser, probed, "--dump-dom", size=page_checks.PHONE)
    )
    problems += page_checks.layout_problems(probe, page_checks.PHONE[0])
    screenshot(args, index, "watch_index")
    print(
        f"watch folder: {len(watch_folder.entries(folder))} check points of "
        f"{len(watch_folder.RANKS)} processes; {'FAIL' if problems else 'ok'}"
    )
    return [f"watch folder: {p}" for p in problems]


def zoo_document(args: argparse.Namespace, file: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((args.data / file).read_text(encoding="utf-8"))
    return doc


def zoo_cases(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for case in args.cases:
        if case.startswith("zoo/"):
            out.append((f"zoo_{Path(case).stem}", zoo_document(args, case)))
        elif case == "zoo_big":
            small = zoo_document(args, "zoo/transformers_small.json")
            out.append(("zoo_big", zoo_pages.big_corpus(small, ZOO_BIG_ROWS)))
    return out


def cases(args: argparse.Namespace) -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    for case in args.cases:
        if case.startswith("zoo/") or case in ("zoo_big", "watch_folder"):
            continue
        if case == "big":
            path = args.out / "big_10k.snapshot.json"
            write_big_snapshot(path)
            out.append(("big_10k", path))
        elif case == "demo":
            demo = args.out / "demo"
            subprocess.run([args.cli, "demo", "--out", str(demo)], check=True, capture_output=True)
            out += [(f"demo_{v}", demo / f"{v}.json") for v in ("legacy", "registered")]
        else:
            out.append((Path(case).stem, args.data / case))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", required=True)
    parser.add_argument("--browser", required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--python",
        default=sys.executable,
        help="an interpreter with graphcheck and torch (case watch_folder)",
    )
    parser.add_argument("cases", nargs="+")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    problems = [p for name, path in cases(args) for p in check_case(args, name, path)]
    problems += [p for name, doc in zoo_cases(args) for p in check_zoo_case(args, name, doc)]
    if "watch_folder" in args.cases:
        problems += check_watch_folder(args)
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
