// The report's tables: summary counts, findings grouped by owner and by fix, stale allowlist
// entries and warnings. Every count shown is also written into an element with a stable id
// (count-<verdict>, count-references, ...) that the browser tests read.
function renderSummary(report) {
  var summary = report.summary;
  var findings = report.findings.length;
  var failed = findings > 0 || (report.stale_allow.length > 0 &&
                                report.stale_allow_policy !== "keep");
  setText("title", "graphcheck report: epoch " + report.epoch);
  document.title = "graphcheck: " + report.epoch + (failed ? " (fails)" : " (passes)");
  setText("subtitle", "checked in epoch " + report.epoch + " against baseline " +
          (report.baseline || "each graph's capture epoch") + "; " +
          plural(summary.graphs, "graph") + ", " + plural(summary.nodes, "node"));
  var status = document.getElementById("status");
  status.textContent = failed ? "fails" : "passes";
  status.className = failed ? "status-fail" : "status-pass";
  // The text report's `references:` line, number for number.
  var parts = VERDICTS.map(function (v) { return v + " " + summary[v]; });
  var line = el("span", {}, ["references: ",
                             el("span", {id: "count-references"}, summary.references),
                             " (" + parts.join(", ") + "); findings: ",
                             el("span", {id: "count-findings"}, findings)]);
  document.getElementById("summary-line").appendChild(line);
  var cards = document.getElementById("verdict-cards");
  cards.appendChild(el("div", {class: "verdict-card"},
                       [el("div", {class: "n", id: "count-graphs"}, summary.graphs), "graphs"]));
  cards.appendChild(el("div", {class: "verdict-card"},
                       [el("div", {class: "n", id: "count-nodes"}, summary.nodes), "nodes"]));
  VERDICTS.forEach(function (v) {
    var cls = "verdict-card" + (isFinding(v) ? " finding" : "") + (summary[v] ? " nonzero" : "");
    cards.appendChild(el("div", {class: cls, style: isFinding(v) && summary[v] ?
                                                      "color:" + VERDICT_COLORS[v] : ""},
                         [el("div", {class: "n", id: "count-" + v}, summary[v]),
                          swatch(VERDICT_COLORS[v]), v]));
  });
}

// Groups findings by `keyOf`, keeping first-seen order (the report's graph, node order).
function groupFindings(findings, keyOf) {
  var groups = new Map();
  findings.forEach(function (finding) {
    var key = keyOf(finding);
    if (!groups.has(key)) { groups.set(key, []); }
    groups.get(key).push(finding);
  });
  return Array.from(groups.entries());
}

function verdictCounts(findings) {
  var counts = {};
  findings.forEach(function (f) { counts[f.verdict] = (counts[f.verdict] || 0) + 1; });
  return FINDING_VERDICTS.filter(function (v) { return counts[v]; }).map(function (v) {
    return el("span", {style: "margin-right:8px"}, [swatch(VERDICT_COLORS[v]), v + " " + counts[v]]);
  });
}

function kernelsOf(findings) {
  var names = Array.from(new Set(findings.map(function (f) {
    return f.kernel || f.node_type;
  })));
  return names.slice(0, 4).join(", ") + (names.length > 4 ? ", +" + (names.length - 4) : "");
}

function renderGroups(report) {
  var byOwner = groupFindings(report.findings, function (f) {
    return (f.owner_kind || "") + "\u0000" + f.owner;
  });
  var ownerTable = el("table", {}, el("tr", {}, ["owner", "kind", "verdicts", "references",
                                                 "kernels", "fix"].map(function (h) {
    return el("th", {}, h);
  })));
  byOwner.forEach(function (entry) {
    var list = entry[1];
    var first = list[0];
    ownerTable.appendChild(el("tr", {}, [
      el("td", {class: "mono"}, first.owner || "(no owner: " + first.address + ")"),
      el("td", {}, first.owner_kind || "none"),
      el("td", {}, verdictCounts(list)),
      el("td", {class: "num"}, list.length),
      el("td", {class: "mono"}, kernelsOf(list)),
      el("td", {}, first.fix)]));
  });
  setText("count-owner-groups", byOwner.length);
  document.getElementById("by-owner").appendChild(
      byOwner.length ? ownerTable : el("p", {class: "muted"}, "No findings."));

  var byFix = groupFindings(report.findings, function (f) { return f.fix; });
  var fixTable = el("table", {}, el("tr", {}, ["fix", "references", "verdicts", "owners"].map(
      function (h) { return el("th", {}, h); })));
  byFix.forEach(function (entry) {
    var owners = Array.from(new Set(entry[1].map(function (f) { return f.owner || f.address; })));
    fixTable.appendChild(el("tr", {}, [
      el("td", {}, entry[0]),
      el("td", {class: "num"}, entry[1].length),
      el("td", {}, verdictCounts(entry[1])),
      el("td", {class: "mono"}, owners.slice(0, 6).join(", ") +
                                   (owners.length > 6 ? " and " + (owners.length - 6) + " more" : ""))]));
  });
  setText("count-fix-groups", byFix.length);
  document.getElementById("by-fix").appendChild(
      byFix.length ? fixTable : el("p", {class: "muted"}, "No findings."));
}

function renderLists(report) {
  setText("count-stale-allow", report.stale_allow.length);
  var stale = document.getElementById("stale-allow");
  if (report.stale_allow.length) {
    stale.appendChild(el("p", {}, report.stale_allow_policy === "keep" ?
        "Kept on purpose (--keep-stale-allow): these globs match the owner of no reference." :
        "These globs match the owner of no reference in any epoch and fail the check: remove " +
        "them from the allowlist."));
    stale.appendChild(el("ul", {}, report.stale_allow.map(function (glob) {
      return el("li", {class: "mono"}, glob);
    })));
  } else {
    stale.appendChild(el("p", {class: "muted"}, "None."));
  }
  var warnings = report.warnings || [];
  setText("count-warnings", warnings.length);
  document.getElementById("warnings").appendChild(warnings.length ?
      el("ul", {}, warnings.map(function (w) { return el("li", {class: "mono"}, w); })) :
      el("p", {class: "muted"}, "None."));
}
