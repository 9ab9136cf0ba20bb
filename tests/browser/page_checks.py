"""What the check report's page does, beyond its counts: checked in headless Chromium.

The page under test is copied with a probe script appended (PROBE_JS, written here, not in the
page): after the page's own scripts ran, the probe measures the layout (the page's scroll
width against the window's, each findings row's height), reads what the page shows for names
(kernel labels with their whole name on hover, node labels with their id), takes the CSV export
of what is shown, and drives the page as a user would (a finding's "map" button, a click on a
reference of the map, the keyboard on the map, zooming in on a moved owner's arrow), then
writes all of it as JSON into <pre id="test-probe">, which --dump-dom shows.

The expectations come from elsewhere: the report JSON the CLI wrote in its own run
(`graphcheck check --format json`, per epoch with `--epoch`), the snapshot file, and the rules
of docs/report-format.md implemented in check_pages.py. The page's own embedded summary is
never the expected value.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

import check_pages
import colors
from check_pages import Doc

# At this width the longest findings row must stay under ROW_PIXELS; at PHONE_WIDTH the page
# must not scroll sideways.
DESKTOP = (1600, 1000)
PHONE = (390, 900)
ROW_PIXELS = 120
# The widest graph pool segment in the whole map's view, as a share of its width.
POOL_SHARE = 0.25

PROBE_JS = r"""
<script>
(function () {
  var out = {errors: []};
  function text(id) { var e = document.getElementById(id); return e ? e.textContent : null; }
  try {
    var root = document.documentElement;
    out.scrollWidth = Math.max(root.scrollWidth, document.body.scrollWidth);
    out.clientWidth = root.clientWidth;
    out.wide = Array.prototype.slice.call(document.querySelectorAll("body *")).filter(function (e) {
      var r = e.getBoundingClientRect();
      return r.width > 0 && r.right > root.clientWidth + 1;
    }).slice(0, 5).map(function (e) { return e.tagName + "#" + e.id + "." + e.className; });
    out.rows = Array.prototype.map.call(document.querySelectorAll("tr.owner-row"), function (tr) {
      return tr.getBoundingClientRect().height;
    });
    out.kernels = Array.prototype.map.call(document.querySelectorAll(".kernel"), function (k) {
      return [k.textContent, k.getAttribute("title") || "", k.getAttribute("data-node-type")];
    });
    out.nodes = Array.prototype.map.call(document.querySelectorAll(".node"), function (n) {
      return [n.textContent, n.getAttribute("title") || ""];
    });
    out.title = document.title;
    out.colors = {};
    document.querySelectorAll("#map-legend [data-verdict]").forEach(function (item) {
      out.colors[item.getAttribute("data-verdict")] = item.getAttribute("data-color");
    });
    var freed = document.querySelector('#map-legend [data-kind="freed"] .swatch');
    out.freedHatched = freed ? freed.classList.contains("hatched") : null;
    out.csv = window.graphcheckCsv ? window.graphcheckCsv() : null;
    var map = window.graphcheckMap, state = window.graphcheckState;
    var report = state && state.report();
    if (map && report && __INTERACT__) {
      var view = map.view, canvas = view.canvas;
      // Keyboard: + halves the window, 0 shows everything again.
      canvas.focus();
      var before = view.v1 - view.v0;
      canvas.dispatchEvent(new KeyboardEvent("keydown", {key: "+", bubbles: true}));
      out.keyZoom = (view.v1 - view.v0) / before;
      canvas.dispatchEvent(new KeyboardEvent("keydown", {key: "ArrowRight", bubbles: true}));
      out.keyPan = view.v0;
      canvas.dispatchEvent(new KeyboardEvent("keydown", {key: "0", bubbles: true}));
      out.keyWhole = (view.v1 - view.v0) / view.axis.total;
      // Arrows: labels in the whole view, then zoomed in on the first arrow.
      out.labelsWhole = Number(text("count-map-arrow-labels"));
      var arrows = view.scene.arrows;
      if (arrows.length) {
        var first = arrows[0];
        view.zoomTo(Math.min(first.from, first.to), Math.max(first.from, first.to) + 1);
        out.labelsZoomed = Number(text("count-map-arrow-labels"));
        out.arrowOwner = first.owner;
        view.whole();
      }
      // The widest graph pool segment in the whole view, as a share of the width.
      var allocations = view.scene.epoch ? view.scene.epoch.allocations : [];
      out.poolShare = Math.max.apply(null, [0].concat(allocations
        .filter(function (a) { return a.graphPool; })
        .map(function (a) { return (view.x(a.end) - view.x(a.begin)) / view.width; })));
      // The table to the map: the first finding of a graph on the map, by its "map" button.
      var index = report.findings.findIndex(function (f) {
        return map.graphs.some(function (g) { return g.id === f.graph; });
      });
      if (index >= 0) {
        state.table.reveal(index);
        var item = document.getElementById("finding-" + index);
        var button = item && item.querySelector("button.to-map");
        if (button) {
          button.click();
          out.toMap = {index: index, focus: view.focus, x: view.x(view.focus), width: view.width,
                       graph: map.graph.id};
        }
      }
      // The map to the table: a click on a reference with a finding selects its row.
      var verdicts = map.verdicts();
      var ref = verdicts.findings.findIndex(function (f) { return f && f.length; });
      if (ref >= 0) {
        var address = map.graph.refs[ref].address;
        view.zoomTo(address - 256, address + 256);
        var x = view.x(address), rect = canvas.getBoundingClientRect();
        document.querySelectorAll("li.finding.selected").forEach(function (li) {
          li.classList.remove("selected");
        });
        canvas.dispatchEvent(new MouseEvent("click", {bubbles: true,
          clientX: rect.left + x, clientY: rect.top + LANES.refs[1] - 3}));
        var selected = document.querySelector("li.finding.selected");
        var chosen = selected ? Number(selected.id.replace("finding-", "")) : -1;
        var found = chosen >= 0 ? report.findings[chosen] : null;
        var place = found ? view.x(parseAddress(found.range_begin || found.address)) : null;
        out.fromMap = {clicked: address, graph: map.graph.id, selected: chosen,
                       dx: found ? Math.abs(place - x) : null};
      }
    }
  } catch (error) {
    out.errors.push(String(error && error.stack ? error.stack : error));
  }
  var pre = document.createElement("pre");
  pre.id = "test-probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"""
PROBE_OUT = re.compile(r'<pre id="test-probe">(.*?)</pre>', re.DOTALL)


def probe_page(page: Path, out: Path, interact: bool) -> Path:
    """A copy of ``page`` with the probe appended after the page's scripts."""
    text = page.read_text(encoding="utf-8")
    at = text.rindex("</body>")
    script = PROBE_JS.replace("__INTERACT__", "true" if interact else "false")
    out.write_text(text[:at] + script + text[at:], encoding="utf-8")
    return out


def read_probe(dom: str) -> Doc:
    found = PROBE_OUT.search(dom)
    if found is None:
        raise SystemExit("the probe wrote nothing: the page or the probe failed to run")
    import html

    data: Doc = json.loads(html.unescape(found.group(1)))
    return data


def layout_problems(probe: Doc, width: int, rows_expected: bool = False) -> list[str]:
    """No sideways scrolling; at a desktop width, findings rows (there must be some when
    `rows_expected`) under ROW_PIXELS tall."""
    problems = [f"probe error: {e}" for e in probe["errors"]]
    if rows_expected and not probe["rows"]:
        problems.append("the page shows no findings rows (tr.owner-row)")
    if probe["scrollWidth"] > probe["clientWidth"]:
        problems.append(
            f"at {width} px the page scrolls sideways: {probe['scrollWidth']} px wide in a "
            f"{probe['clientWidth']} px window (sticking out: {probe['wide']})"
        )
    if width >= DESKTOP[0] and max(probe["rows"], default=0) >= ROW_PIXELS:
        problems.append(
            f"at {width} px the tallest findings row is {max(probe['rows']):.0f} px "
            f"(limit {ROW_PIXELS})"
        )
    return problems


def name_problems(probe: Doc, snapshot: Doc, report: Doc) -> list[str]:
    """Kernel labels: the short name of the whole name on hover; node labels: graph:number of
    the id on hover, numbered from the snapshot. Rows with findings show both."""
    problems = check_pages.short_name_problems()
    if report["findings"] and not probe["nodes"]:
        problems.append("the findings show no node labels")
    if any(f.get("kernel") for f in report["findings"]) and not probe["kernels"]:
        problems.append("the findings show no kernel labels")
    for shown, whole, node_type in probe["kernels"]:
        # Kernel names are shortened; an op's name ("aten::mm") is shown whole.
        want = check_pages.short_kernel(whole or shown) if node_type == "kernel" else whole or shown
        if shown != want or (whole and whole == shown):
            problems.append(f"kernel label {shown!r} (hover {whole[:60]!r}): expected {want!r}")
    numbers = check_pages.node_numbers(snapshot)
    for shown, hover in probe["nodes"]:
        found = re.fullmatch(r"graph (\d+), node id (\d+)", hover)
        if found is None:
            problems.append(f"node label {shown!r} has no id on hover ({hover!r})")
            continue
        graph, node = int(found.group(1)), int(found.group(2))
        want = f"{graph}:{numbers.get(graph, {}).get(node, node)}"
        if shown != want:
            problems.append(f"node {graph}/{node} shown as {shown!r}, expected {want!r}")
    return problems


def csv_problems(probe: Doc, shown: list[Doc], epoch: str) -> list[str]:
    """The CSV export: one line per finding the selection shows, in report order."""
    if probe["csv"] is None:
        return ["no CSV export (window.graphcheckCsv)"]
    rows = list(csv.DictReader(io.StringIO(probe["csv"])))
    if len(rows) != len(shown):
        return [f"the CSV has {len(rows)} findings, the selection shows {len(shown)}"]
    problems = []
    for row, finding in zip(rows, shown, strict=True):
        got = (row["epoch"], row["verdict"], row["address"], row["fix"])
        want = (epoch, finding["verdict"], finding["address"], finding["fix"])
        if got != want or row["owner"].lstrip("'") != finding["owner"]:
            problems.append(f"CSV line {got} differs from the finding {want}")
            break
    return problems


def interaction_problems(probe: Doc, report: Doc) -> list[str]:
    problems = []
    if probe["colors"]:
        finding_colors = {v: probe["colors"][v] for v in check_pages.FINDING_VERDICTS}
        problems += colors.color_problems(finding_colors)
        if not probe["freedHatched"]:
            problems.append("freed ranges are not hatched in the legend")
    if probe.get("poolShare", 0) > POOL_SHARE:
        problems.append(
            f"a graph pool segment takes {probe['poolShare']:.0%} of the whole map "
            f"(at most {POOL_SHARE:.0%}: its empty stretches are squeezed)"
        )
    if "keyZoom" in probe:
        if abs(probe["keyZoom"] - 0.5) > 0.01:
            problems.append(f"the + key zoomed by {probe['keyZoom']:.2f}, expected 0.5")
        if abs(probe["keyWhole"] - 1.02) > 0.01:
            problems.append("the 0 key did not show the whole map")
    if "labelsZoomed" in probe and probe["labelsZoomed"] < 1:
        problems.append(f"zoomed in on the arrow of {probe['arrowOwner']}, no arrow is labelled")
    to_map = probe.get("toMap")
    if to_map is not None:
        finding = report["findings"][to_map["index"]]
        want = int(finding.get("range_begin") or finding["address"], 16)
        if to_map["focus"] != want or to_map["graph"] != finding["graph"]:
            problems.append(f"the map button of finding {to_map['index']} marked {to_map['focus']}")
        elif not 0 <= to_map["x"] <= to_map["width"]:
            problems.append("the map button did not bring its reference into view")
    from_map = probe.get("fromMap")
    if from_map is not None:
        if from_map["selected"] < 0:
            problems.append("a click on a reference with a finding selected no row")
        elif from_map["dx"] is None or from_map["dx"] > 4:
            problems.append(f"the click selected finding {from_map['selected']}, not one there")
    return problems


def todo_problems(texts: dict[str, str], report: Doc) -> list[str]:
    """The to-do list: one line per fix, in order, with its owners and references."""
    problems = []
    fixes = check_pages.expected_fixes(report)
    for n, (fix, owners, references) in enumerate(fixes, 1):
        line = texts.get(f"todo-{n}", "")
        owners_shown = texts.get(f"todo-{n}-owners", "").split(" ")[0]
        refs_shown = texts.get(f"todo-{n}-references", "").split(" ")[0]
        if fix not in line or owners_shown != str(owners) or refs_shown != str(references):
            problems.append(
                f"to-do line {n}: shows {line[:80]!r} ({owners_shown} owners, {refs_shown} "
                f"references); expected {fix[:60]!r} ({owners} owners, {references} references)"
            )
    if f"todo-{len(fixes) + 1}" in texts:
        problems.append(f"the to-do list has more than the {len(fixes)} fixes")
    return problems


def title_problems(texts: dict[str, str], report: Doc, subject: str) -> list[str]:
    fails = bool(report["findings"]) or (
        bool(report["stale_allow"]) and report.get("stale_allow_policy") != "keep"
    )
    want = f"{'FAIL' if fails else 'PASS'} {report['epoch']} \u2013 {subject}"
    got = texts.get("page-title", "").strip()
    return [] if got == want else [f"tab title {got!r}, expected {want!r}"]


def selections(report: Doc) -> list[tuple[str, Doc]]:
    """URL fragments to try, with what each must show: one verdict; a search for part of an
    owner's name; that owner alone; an address inside a finding's bytes."""
    findings = report["findings"]
    if not findings:
        return [("#q=nothing-matches-this", check_pages.filtered(report, "nothing-matches-this"))]
    first = findings[0]
    verdict = first["verdict"]
    part = (first["owner"] or first["address"]).split(".")[-1]
    last = findings[-1]
    inside = hex(int(last.get("range_begin") or last["address"], 16) + 1)
    out = [
        (f"#verdict={verdict}", check_pages.filtered(report, verdicts=(verdict,))),
        (f"#q={part}", check_pages.filtered(report, part)),
        (f"#q={inside}", check_pages.filtered(report, inside)),
    ]
    if first["owner"]:
        from urllib.parse import quote

        out.append(
            (f"#owner={quote(first['owner'])}", check_pages.filtered(report, owner=first["owner"]))
        )
    return out


def shown_counts(selection: Doc) -> dict[str, str]:
    return {
        "count-rows-shown": str(len(selection["rows"])),
        "count-findings-shown": str(len(selection["findings"])),
    }


def load_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))
