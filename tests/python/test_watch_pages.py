"""The folder's index.html and the links between check point pages (issue 33):
graphcheck._watch.index_page and what ReportWriter writes with it, on the CPU twin."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import torch

import graphcheck
from graphcheck._watch.index_page import NAV_BYTES, changes, index_html, set_navigation
from graphcheck.reference import ReferenceConfig, build_reference_model, reference_inputs

NAV = re.compile(r'<script type="application/json" id="graphcheck-nav">(.*?)</script>', re.S)


@pytest.fixture(autouse=True)
def no_watch_left(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GRAPHCHECK", "GRAPHCHECK_MODE", "GRAPHCHECK_DIR", "GRAPHCHECK_ALLOW"):
        monkeypatch.delenv(name, raising=False)


def navigation(page: Path) -> dict[str, str]:
    found = NAV.search(page.read_text(encoding="utf-8"))
    assert found is not None and len(found.group(1)) == NAV_BYTES
    links: dict[str, str] = json.loads(found.group(1))
    return links


def run_story(out: Path, role: str = "") -> list[graphcheck.CheckResult]:
    """Capture, sleep level 2 and wake, rebind the parameters: three check points."""
    watch = graphcheck.watch(out_dir=out, allocator_history=False)
    watch.role = role
    try:
        arena = graphcheck.WeightsArena(1 << 30)
        model = build_reference_model(ReferenceConfig(variant="legacy"), 0, arena)
        watch.capture(model, **reference_inputs(model))
        arena.sleep(2, model)
        arena.wake_up()
        graphcheck.checkpoint("after_wake")
        with arena.loading(), torch.no_grad():
            for parameter in model.parameters():
                parameter.data = parameter.data.clone()
        graphcheck.checkpoint("after_reload")
        return list(watch.results)
    finally:
        watch.close()


def test_pages_link_the_index_and_their_neighbours_in_place(tmp_path: Path) -> None:
    results = run_story(tmp_path)
    pages = [Path(r.files["report_html"]) for r in results]
    names = [p.name for p in pages]
    assert navigation(pages[0]) == {"index": "index.html", "previous": "", "next": names[1]}
    assert navigation(pages[1]) == {"index": "index.html", "previous": names[0], "next": names[2]}
    assert navigation(pages[2]) == {"index": "index.html", "previous": names[1], "next": ""}
    # Each page still holds its whole report after the rewrite of its navigation block.
    for page, result in zip(pages, results, strict=True):
        text = page.read_text(encoding="utf-8")
        assert text.rstrip().endswith("</html>")
        assert f'"references":{result.report.summary["references"]}' in text
        assert str(tmp_path) not in text


def test_a_page_carries_the_check_point_header_and_every_epochs_report(tmp_path: Path) -> None:
    last = run_story(tmp_path, role="worker rank 0")[-1]
    text = Path(last.files["report_html"]).read_text(encoding="utf-8")
    data = json.loads(
        re.search(r'id="graphcheck-data">(.*?)</script>', text, re.S).group(1)  # type: ignore[union-attr]
    )
    assert data["context"]["subject"] == f"{last.model} \u00b7 worker rank 0 #3"
    assert data["context"]["header"] == last.header().splitlines()
    epochs = {e["epoch"]: e["report"] for e in data["epochs"]}
    assert sorted(epochs) == ["after_wake", "capture"]
    snapshot = graphcheck.read_snapshot(last.files["snapshot:1"])
    for label, report in epochs.items():
        again = graphcheck.check(snapshot, epoch=label, baseline="capture")
        assert graphcheck.parse_report(json.dumps(report)) == again


def test_a_page_over_many_graphs_says_how_to_draw_one_graphs_map(tmp_path: Path, cli: Path) -> None:
    # A page draws one graph's map; over two graphs it had none and did not say why.
    watch = graphcheck.Watch(out_dir=tmp_path)
    model = torch.nn.Linear(4, 4)
    model.scale = torch.ones(4)  # type: ignore[assignment]  # read by no op: no finding
    for rows in (1, 2):
        watch.capture(model, torch.ones(rows, 4))
    watch.checkpoint("after_wake")
    last = watch.checkpoint("after_wake")  # each graph's second: epoch after_wake-2
    watch.close()
    assert last is not None
    assert last.epochs == {1: "after_wake-2", 2: "after_wake-2"}
    text = Path(last.files["report_html"]).read_text(encoding="utf-8")
    data = json.loads(
        re.search(r'id="graphcheck-data">(.*?)</script>', text, re.S).group(1)  # type: ignore[union-attr]
    )
    assert data["snapshot"] is None
    line = data["context"]["header"][-1]
    assert line.startswith("address-space map: a page draws one graph's, and this check point ")
    command = line.partition("in this folder: ")[2].split()
    assert command[:2] == ["graphcheck", "check"]
    done = subprocess.run(
        [str(cli), *command[1:]], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert '"snapshot":{' in (tmp_path / "graph1.html").read_text(encoding="utf-8")
    assert line not in last.header()  # the page's, not the text report's


def test_index_lists_every_check_point_with_what_changed_and_no_folder_path(
    tmp_path: Path,
) -> None:
    run_story(tmp_path)
    listing = (tmp_path / "index.html").read_text(encoding="utf-8")
    assert str(tmp_path) not in listing
    rows = re.findall(r'<tr id="checkpoint-(\d+)" class="(pass|fail)">(.*?)</tr>', listing)
    assert [(n, c) for n, c, _ in rows] == [("1", "fail"), ("2", "fail"), ("3", "fail")]
    assert "first check point of this process" in rows[0][2]
    assert "lost +26, unregistered -26" in rows[1][2]
    # Links are names in the folder: they work wherever the folder is.
    hrefs = re.findall(r'href="([^"]+)"', listing)
    assert len(hrefs) >= 9  # a page, a text and a JSON report per check point
    for href in hrefs:
        assert "/" not in href and (tmp_path / href).is_file()


def test_changes_say_what_moved_and_when_a_process_starts_failing_or_passing() -> None:
    def entry(ok: bool, **counts: int) -> dict[str, object]:
        summary = {"graphs": 1, "references": 10, "registered": 10, **counts}
        return {"ok": ok, "summary": summary}

    assert changes(entry(True), None) == "first check point of this process"
    assert changes(entry(True), entry(True)) == "no change"
    assert changes(entry(False, stale=7, registered=3), entry(True)) == (
        "now fails, stale +7, registered -7"
    )
    assert changes(entry(True), entry(False, lost=2)) == "now passes, lost -2"
    # Over other graphs the counts are not compared (a check point of ten graphs after the
    # check of one at its capture).
    many = {**entry(False, stale=60, registered=400), "graphs": [*range(1, 11), 12]}
    assert changes(many, {**entry(True), "graphs": [10]}) == (
        "now fails, graphs 1-10, 12 (before: 10): counts not compared"
    )
    assert changes({**entry(True), "graphs": [3]}, {**entry(True), "graphs": [3]}) == "no change"


def test_set_navigation_refuses_a_page_without_its_block(tmp_path: Path) -> None:
    page = tmp_path / "plain.html"
    report = graphcheck.check(
        graphcheck.read_snapshot(Path(__file__).parents[1] / "data" / "verdict_stale.json")
    )
    page.write_text(report.to_html(), encoding="utf-8")  # no navigation: the block is null
    before = page.read_bytes()
    assert not set_navigation(page, {"index": "index.html", "next": "b.html"})
    assert page.read_bytes() == before
    page.write_text(report.to_html(navigation={"index": "index.html"}), encoding="utf-8")
    assert set_navigation(page, {"index": "index.html", "next": "b</script>.html"})
    assert navigation(page)["next"] == "b</script>.html"
    assert not set_navigation(page, {"index": "x" * NAV_BYTES})


def test_index_of_an_empty_or_torn_index_jsonl(tmp_path: Path) -> None:
    (tmp_path / "index.jsonl").write_text('{"seq": 1, "label": "capture", "time": 1, "pid": 7')
    listing = index_html(tmp_path)
    assert "0 check points" in listing and "<tr id=" not in listing
