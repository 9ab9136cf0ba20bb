// The top of the page: the verdict line and the tab title, the context (what was checked,
// the server flag's check point header, links to the folder's index and the neighbouring check
// points), the epoch buttons with each epoch's own verdicts, the count cards (which filter the
// findings) and the to-do list: one line per fix, with the owners it covers.

// Findings grouped by fix, most urgent first: by the worst verdict among a fix's findings
// (stale, lost, dangling, unregistered), then by references, then by first appearance.
function fixGroups(findings) {
  var groups = new Map();
  findings.forEach(function (f, i) {
    if (!groups.has(f.fix)) {
      groups.set(f.fix, {fix: f.fix, findings: [], owners: new Map(), first: i, worst: 99});
    }
    var group = groups.get(f.fix);
    group.findings.push(f);
    group.worst = Math.min(group.worst, precedence(f.verdict));
    var key = ownerKey(f);
    if (!group.owners.has(key)) { group.owners.set(key, {owner: f.owner, kind: f.owner_kind}); }
  });
  return Array.from(groups.values()).sort(function (a, b) {
    return a.worst - b.worst || b.findings.length - a.findings.length || a.first - b.first;
  });
}

function ownerKey(f) { return (f.owner_kind || "") + "\u0000" + f.owner; }
function ownerName(f) { return f.owner || "<no owner or label>"; }

// "7 parameters", "2 buffers", "3 owners" (kinds mixed).
function ownersNoun(owners) {
  var kinds = new Set(owners.map(function (o) { return o.kind || ""; }));
  var count = owners.length;
  if (kinds.size !== 1) { return plural(count, "owner"); }
  var nouns = KIND_NOUNS[Array.from(kinds)[0]] || ["owner", "owners"];
  return plural(count, nouns[0], nouns[1]);
}

// Owner names that differ only in numeric dotted parts, as one: "layers.{0-1,3}.mlp.scale".
function compactOwners(names) {
  var families = new Map();
  names.forEach(function (name) {
    var parts = name.split(".");
    var key = parts.map(function (p) { return /^\d{1,9}$/.test(p) ? "#" : p; }).join(".");
    if (!families.has(key)) { families.set(key, {parts: parts, values: parts.map(function () {
      return new Set();
    })}); }
    var family = families.get(key);
    parts.forEach(function (p, i) { if (/^\d{1,9}$/.test(p)) { family.values[i].add(Number(p)); } });
  });
  return Array.from(families.values()).map(function (family) {
    return family.parts.map(function (p, i) {
      var values = Array.from(family.values[i]).sort(function (a, b) { return a - b; });
      return values.length > 1 ? "{" + compactRuns(values) + "}" : p;
    }).join(".");
  });
}

function compactRuns(values) {
  var out = [];
  for (var i = 0; i < values.length;) {
    var j = i;
    while (j + 1 < values.length && values[j + 1] === values[j] + 1) { j += 1; }
    out.push(i === j ? String(values[i]) : values[i] + "-" + values[j]);
    i = j + 1;
  }
  return out.join(",");
}

// A list that shows its first `limit` items and a button for the rest.
function expandable(items, limit, render, separator) {
  var box = el("span", {class: "expandable"});
  var sep = separator === undefined ? ", " : separator;
  function show(all) {
    box.textContent = "";
    var shown = all ? items : items.slice(0, limit);
    shown.forEach(function (item, i) {
      if (i > 0 && sep) { box.appendChild(document.createTextNode(sep)); }
      box.appendChild(render(item));
    });
    if (items.length > limit) {
      box.appendChild(button(all ? "less" : "+" + (items.length - limit) + " more",
                             {class: "more", "aria-expanded": all ? "true" : "false"},
                             function (event) { event.stopPropagation(); show(!all); }));
    }
  }
  show(false);
  return box;
}

function renderHeader(state) {
  var report = state.report();
  var entry = state.entry();
  var context = state.data.context || {subject: "", header: []};
  var subject = context.subject || "graphcheck report";
  var epoch = state.selection.epoch;
  var line = document.getElementById("verdict-line");
  if (!report) {
    document.title = "? " + epoch + " \u2013 " + subject;
    fill(line, [el("span", {class: "status"}, "NOT CHECKED"),
                " epoch " + epoch + ": " + (entry.error || entry.skipped)]);
    line.className = "verdict-line unknown";
    return;
  }
  var fails = reportFails(report);
  var counts = FINDING_VERDICTS.filter(function (v) { return report.summary[v]; })
                               .map(function (v) { return v + " " + report.summary[v]; });
  var owners = new Set(report.findings.map(ownerKey)).size;
  document.title = (fails ? "FAIL " : "PASS ") + epoch + " \u2013 " + subject;
  setText("page-title", document.title);
  var says = report.findings.length ?
      plural(report.findings.length, "finding") + " (" + counts.join(", ") + ") in " +
      plural(owners, "owner") + ", " + plural(fixGroups(report.findings).length, "fix",
                                              "fixes") + " below" :
      "no findings in " + plural(report.summary.references, "reference");
  if (report.stale_allow.length) {
    says += "; " + plural(report.stale_allow.length, "stale allowlist entry",
                          "stale allowlist entries") +
            (report.stale_allow_policy === "keep" ? " (kept)" : "");
  }
  fill(line, [el("span", {class: "status", id: "status"}, fails ? "FAILS" : "PASSES"),
              " epoch " + epoch + ": " + says]);
  line.className = "verdict-line " + (fails ? "fail" : "pass");
  setText("subtitle", subject + " \u00b7 epoch " + epoch + " checked against " +
          (report.baseline || "each graph's capture epoch") + " \u00b7 " +
          plural(report.summary.graphs, "graph") + ", " + plural(report.summary.nodes, "node") +
          ", " + plural(report.summary.references, "reference"));
}

function renderContext(state) {
  var context = state.data.context || {header: []};
  fill(document.getElementById("context"), context.header.map(function (text) {
    return el("div", {class: "mono"}, text);
  }));
  var nav = readNavigation();
  var links = document.getElementById("page-nav");
  if (!nav) { links.hidden = true; return; }
  links.hidden = false;
  fill(links, [
    el("a", {href: nav.index, id: "nav-index"}, "\u2190 all check points"),
    nav.previous ? el("a", {href: nav.previous, id: "nav-previous"}, "\u2039 previous")
                 : el("span", {class: "muted"}, "\u2039 previous"),
    nav.next ? el("a", {href: nav.next, id: "nav-next"}, "next \u203a")
             : el("span", {class: "muted"}, "next \u203a")]);
}

function readNavigation() {
  var block = document.getElementById("graphcheck-nav");
  try { return block ? JSON.parse(block.textContent) : null; } catch (error) { return null; }
}

// One button per epoch, each with that epoch's own finding counts.
function renderEpochs(state) {
  var box = document.getElementById("epochs");
  box.hidden = state.epochs.length < 2;
  var baseline = state.data.report.baseline;
  fill(box, [el("span", {class: "muted"}, "epoch:")].concat(state.epochs.map(function (label, i) {
    var report = state.report(label);
    var tag = label === state.checked ? " (checked)" : label === baseline ? " (baseline)" : "";
    var badge = !report ? "not checked" :
        FINDING_VERDICTS.filter(function (v) { return report.summary[v]; })
                        .map(function (v) { return v + " " + report.summary[v]; }).join(", ") ||
        "no findings";
    var cls = "epoch" + (label === state.selection.epoch ? " current" : "") +
              (!report ? "" : reportFails(report) ? " fail" : " pass");
    return button([el("b", {}, label + tag), el("span", {class: "badge",
                                                         id: "epoch-badge-" + i}, badge)],
                  {class: cls, id: "epoch-button-" + i,
                   "aria-pressed": label === state.selection.epoch ? "true" : "false"},
                  function () { state.select({epoch: label}); });
  })));
}

// The count cards: graphs, nodes, references, then one per verdict; a verdict card toggles
// that verdict's filter.
function renderCards(state) {
  var report = state.report() || {summary: {}, findings: []};
  var summary = report.summary;
  var cards = [el("div", {class: "card"}, [el("div", {class: "n", id: "count-graphs"},
                                                   summary.graphs || 0), "graphs"]),
               el("div", {class: "card"}, [el("div", {class: "n", id: "count-nodes"},
                                                   summary.nodes || 0), "nodes"])];
  VERDICTS.forEach(function (v) {
    var on = state.selection.verdicts.indexOf(v) >= 0;
    var cls = "card verdict" + (isFinding(v) ? " finding" : "") + (summary[v] ? " nonzero" : "") +
              (on ? " on" : "");
    var card = button([el("div", {class: "n", id: "count-" + v}, summary[v] || 0),
                       swatch(VERDICT_COLORS[v]), v],
                      {class: cls, "aria-pressed": on ? "true" : "false", id: "card-" + v,
                       title: isFinding(v) ? "show only " + v + " findings (click again: all)" :
                                             "ok: not a finding"},
                      function () {
                        var verdicts = state.selection.verdicts.slice();
                        var at = verdicts.indexOf(v);
                        if (at >= 0) { verdicts.splice(at, 1); } else { verdicts.push(v); }
                        state.select({verdicts: verdicts});
                      });
    if (!isFinding(v)) { card.disabled = true; }
    cards.push(card);
  });
  fill(document.getElementById("verdict-cards"), cards);
  fill(document.getElementById("summary-line"), [
    "references: ", el("span", {id: "count-references"}, summary.references || 0),
    " (" + VERDICTS.map(function (v) { return v + " " + (summary[v] || 0); }).join(", ") +
    "); findings: ", el("span", {id: "count-findings"}, report.findings.length)]);
}

// One line per fix: the sentence, the owners it covers and how many references, linking to
// the fix's rows in the findings table.
function renderTodo(state) {
  var report = state.report();
  var groups = report ? fixGroups(report.findings) : [];
  setText("count-fix-groups", groups.length);
  var list = document.getElementById("todo");
  if (!groups.length) {
    fill(list, [el("p", {class: "muted"}, report ? "Nothing to fix." : "")]);
    return;
  }
  fill(list, [el("ol", {}, groups.map(function (group, i) {
    var owners = Array.from(group.owners.values());
    var names = compactOwners(owners.map(ownerName));
    return el("li", {id: "todo-" + (i + 1), class: "todo v-" + FINDING_VERDICTS[group.worst]}, [
      swatch(VERDICT_COLORS[FINDING_VERDICTS[group.worst]]),
      el("a", {href: "#", class: "fix", "data-fix": String(i + 1)}, group.fix || "(no fix given)"),
      el("div", {class: "covers"}, [
        el("span", {id: "todo-" + (i + 1) + "-owners", "data-count": owners.length},
           ownersNoun(owners)), ": ",
        expandable(names, 4, function (name) { return el("code", {}, breakable(name)); }),
        " (", el("span", {id: "todo-" + (i + 1) + "-references"},
                 plural(group.findings.length, "reference")), ")"])]);
  }))]);
  list.querySelectorAll("a.fix").forEach(function (link) {
    link.addEventListener("click", function (event) {
      event.preventDefault();
      var row = document.getElementById("fix-" + link.getAttribute("data-fix"));
      if (row) { row.scrollIntoView({block: "start"}); row.classList.add("flash"); }
    });
  });
}
