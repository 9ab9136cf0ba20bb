// The findings table: one section per fix (its sentence once, numbered as in the to-do list),
// one row per owner under it (kind, verdicts, references, kernels, nodes), and a row's
// findings one by one when it is opened, each with a button that shows it on the map. The
// search box and the filters (count cards, an owner) narrow it; the counts of what is shown are
// written into #count-rows-shown and #count-findings-shown.
var ROWS_AT_ONCE = 400;  // owner rows drawn before a "show all" button (a huge report)

function FindingsTable(state) {
  this.state = state;
  this.box = document.getElementById("by-owner");
  this.limit = ROWS_AT_ONCE;
  var search = document.getElementById("search");
  search.value = state.selection.q;
  var timer = null;
  search.addEventListener("input", function () {
    clearTimeout(timer);
    timer = setTimeout(function () { state.select({q: search.value}); }, 150);
  });
  document.getElementById("clear-filters").addEventListener("click", function () {
    search.value = "";
    state.select({q: "", verdicts: [], owner: ""});
  });
}

// Owner rows of the shown epoch: [{fixNumber, fix, owner, kind, findings: [[finding, index]]}],
// in to-do order, then first appearance.
FindingsTable.prototype.rows = function (report) {
  var numbers = new Map();
  fixGroups(report.findings).forEach(function (g, i) { numbers.set(g.fix, i + 1); });
  var rows = new Map();
  report.findings.forEach(function (f, i) {
    var key = f.fix + "\u0001" + ownerKey(f);
    if (!rows.has(key)) {
      rows.set(key, {fixNumber: numbers.get(f.fix), fix: f.fix, owner: f.owner,
                     kind: f.owner_kind, findings: [], first: i});
    }
    rows.get(key).findings.push([f, i]);
  });
  return Array.from(rows.values()).sort(function (a, b) {
    return a.fixNumber - b.fixNumber || a.first - b.first;
  });
};

FindingsTable.prototype.render = function () {
  var state = this.state;
  var report = state.report();
  var all = report ? this.rows(report) : [];
  setText("count-owner-groups", all.length);
  var shown = [];
  var findingsShown = 0;
  all.forEach(function (row) {
    var kept = row.findings.filter(function (pair) { return state.matches(pair[0]); });
    if (kept.length) {
      shown.push(Object.assign({}, row, {shown: kept}));
      findingsShown += kept.length;
    }
  });
  setText("count-rows-shown", shown.length);
  setText("count-findings-shown", findingsShown);
  this.renderFilters();
  if (!report) {
    fill(this.box, [el("p", {class: "muted"}, "No report of this epoch in the page.")]);
    return;
  }
  if (!all.length) {
    fill(this.box, [el("p", {class: "muted"}, "No findings.")]);
    return;
  }
  if (!shown.length) {
    fill(this.box, [el("p", {class: "muted"}, "No finding matches the filters.")]);
    return;
  }
  var table = el("table", {class: "findings"}, el("thead", {}, el("tr", {}, [
    "owner", "kind", "verdicts", "refs", "kernels", "nodes"].map(function (h) {
      return el("th", {}, h);
    }))));
  var body = null, lastFix = null;
  shown.slice(0, this.limit).forEach(function (row) {
    if (row.fixNumber !== lastFix) {
      lastFix = row.fixNumber;
      var sameFix = shown.filter(function (r) { return r.fixNumber === row.fixNumber; });
      body = el("tbody", {class: "fix-group", id: "fix-" + row.fixNumber}, el("tr", {
        class: "fix-row"}, el("th", {colspan: "6"}, [
          el("span", {class: "fix-number"}, row.fixNumber + "."), " ", row.fix || "(no fix)",
          el("span", {class: "muted"}, " \u2013 " + plural(sameFix.length, "owner") + ", " +
                                       plural(sameFix.reduce(function (n, r) {
                                         return n + r.shown.length;
                                       }, 0), "reference"))])));
      table.appendChild(body);
    }
    body.appendChild(this.ownerRow(row));
  }, this);
  var parts = [table];
  if (shown.length > this.limit) {
    parts.push(button("show all " + shown.length + " owner rows", {class: "more"}, function () {
      this.limit = Infinity;
      this.render();
    }.bind(this)));
  }
  fill(this.box, parts);
};

FindingsTable.prototype.renderFilters = function () {
  var state = this.state, s = state.selection;
  var chips = [];
  s.verdicts.forEach(function (v) {
    chips.push(button([swatch(VERDICT_COLORS[v]), v, " \u00d7"], {class: "chip"}, function () {
      state.select({verdicts: s.verdicts.filter(function (x) { return x !== v; })});
    }));
  });
  if (s.owner) {
    chips.push(button(["owner ", el("code", {}, s.owner), " \u00d7"], {class: "chip",
                                                                     id: "owner-chip"},
                      function () { state.select({owner: ""}); }));
  }
  fill(document.getElementById("filters"), chips);
  document.getElementById("clear-filters").hidden = !(chips.length || s.q);
};

function verdictBadges(findings) {
  var counts = {};
  findings.forEach(function (f) { counts[f.verdict] = (counts[f.verdict] || 0) + 1; });
  return FINDING_VERDICTS.filter(function (v) { return counts[v]; }).map(function (v) {
    return el("span", {class: "vcount"}, [swatch(VERDICT_COLORS[v]), v + " " + counts[v]]);
  });
}

function distinct(values) { return Array.from(new Set(values)); }

FindingsTable.prototype.ownerRow = function (row) {
  var state = this.state;
  var findings = row.shown.map(function (pair) { return pair[0]; });
  var kernels = distinct(findings.map(function (f) { return f.kernel + "\u0000" + f.node_type; }));
  var nodes = distinct(findings.map(function (f) { return f.graph + ":" + f.node; }));
  var tr = el("tr", {class: "owner-row", tabindex: "0", "data-finding": String(row.shown[0][1]),
                     "aria-expanded": "false"}, [
    el("td", {class: "owner", "data-label": "owner"}, [
      el("code", {}, breakable(ownerName(row.shown[0][0]))),
      row.owner ? button("\u2261", {class: "icon", title: "show only this owner"},
                         function (event) {
                           event.stopPropagation();
                           state.select({owner: row.owner});
                         }) : null]),
    el("td", {"data-label": "kind"}, row.kind || "allocation label"),
    el("td", {"data-label": "verdicts"}, verdictBadges(findings)),
    el("td", {class: "num", "data-label": "refs"}, findings.length),
    el("td", {class: "kernels", "data-label": "kernels"}, expandable(kernels, 2, function (k) {
      var parts = k.split("\u0000");
      return kernelLabel(parts[0], parts[1]);
    })),
    el("td", {class: "nodes", "data-label": "nodes"}, expandable(nodes, 4, function (n) {
      var parts = n.split(":");
      return nodeLabel(state, Number(parts[0]), Number(parts[1]));
    }))]);
  var detail = null;
  var toggle = function () {
    if (detail) {
      detail.remove();
      detail = null;
      tr.setAttribute("aria-expanded", "false");
      return;
    }
    detail = el("tr", {class: "detail-row"}, el("td", {colspan: "6"}, this.details(row)));
    tr.after(detail);
    tr.setAttribute("aria-expanded", "true");
  }.bind(this);
  tr.addEventListener("click", function (event) {
    if (event.target.closest("button, a")) { return; }
    toggle();
  });
  tr.addEventListener("keydown", function (event) {
    if (event.key === "Enter" || event.key === " ") { event.preventDefault(); toggle(); }
  });
  tr.toggleDetails = toggle;
  return tr;
};

// The row's findings, one line each, with the whole kernel name and a button to the map.
FindingsTable.prototype.details = function (row) {
  var state = this.state;
  return el("ul", {class: "finding-list"}, row.shown.map(function (pair) {
    var f = pair[0];
    var place = findingPlace(f);
    var range = f.range_size ? " bytes " + f.range_begin + " (" + formatBytes(f.range_size) + ")"
                             : "";
    return el("li", {id: "finding-" + pair[1], class: "finding"}, [
      swatch(VERDICT_COLORS[f.verdict]), el("b", {}, f.verdict), " node ",
      nodeLabel(state, f.graph, f.node), " ", kernelLabel(f.kernel, f.node_type),
      place ? " \u00b7 " + place : "", f.access ? " \u00b7 " + f.access : "", " \u00b7 ",
      el("code", {}, f.address), range, ": ", f.detail,
      state.map ? button("map", {class: "to-map", title: "show this reference on the map"},
                         function () { state.map.focusFinding(f); }) : null,
      f.kernel && displayName(f.kernel, f.node_type) !== f.kernel ?
          el("div", {class: "full-name mono"}, f.kernel) : null]);
  }));
};

// Opens the owner row of finding `index` (clearing filters that hide it), marks the finding
// and scrolls to it: what a click on the map selects.
FindingsTable.prototype.reveal = function (index) {
  var report = this.state.report();
  var finding = report && report.findings[index];
  if (!finding) { return false; }
  var item = document.getElementById("finding-" + index);
  if (!item) {
    if (!this.state.matches(finding)) { this.state.select({q: "", verdicts: [], owner: ""}); }
    if (this.limit !== Infinity) { this.limit = Infinity; this.render(); }
    var rows = this.box.querySelectorAll("tr.owner-row");
    for (var i = 0; i < rows.length && !item; ++i) {
      var f = report.findings[Number(rows[i].getAttribute("data-finding"))];
      if (f.fix === finding.fix && ownerKey(f) === ownerKey(finding)) {
        rows[i].toggleDetails();
        item = document.getElementById("finding-" + index);
      }
    }
  }
  if (!item) { return false; }
  this.box.querySelectorAll("li.finding.selected").forEach(function (li) {
    li.classList.remove("selected");
  });
  item.classList.add("selected");
  item.scrollIntoView({block: "nearest"});
  return true;
};
