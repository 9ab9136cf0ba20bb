// The sections below the table: the sites and build failures of the summary, the stale and
// unverified allowlist entries, and one details section per architecture (its errors, census
// findings with their sites, unregistered owners at capture, memory torch does not own, the
// steps), then the page's entry, which builds everything and marks #page-ready.

function linkList(names, limit) {
  var parts = [];
  names.slice(0, limit).forEach(function (name, i) {
    if (i) { parts.push(", "); }
    parts.push(archLink(name));
  });
  if (names.length > limit) { parts.push(", ... (" + names.length + ")"); }
  return parts;
}

function renderSites(summary) {
  var sites = summary.sites || {};
  var fresh = summary.new_sites || {};
  var body = document.getElementById("sites-body");
  setText("count-sites", Object.keys(sites).length);
  if (!Object.keys(sites).length) { return; }
  body.appendChild(el("tr", {}, [el("th", {}, "site (file)"), el("th", {}, "allowlisted"),
                                 el("th", {}, "architectures")]));
  Object.keys(sites).forEach(function (site) {
    body.appendChild(el("tr", {}, [el("td", {class: "mono"}, site),
                                   markCell(fresh[site] ? "not in " + fresh[site].length :
                                                          "yes", Boolean(fresh[site])),
                                   el("td", {}, linkList(list(sites[site]), 12))]));
  });
}

function renderFailures(summary) {
  var groups = list(summary.failures_by_reason);
  var body = document.getElementById("failures-body");
  setText("count-failure-reasons", groups.length);
  if (!groups.length) { return; }
  body.appendChild(el("tr", {}, [el("th", {class: "num"}, "count"), el("th", {}, "reason"),
                                 el("th", {}, "examples")]));
  groups.forEach(function (g) {
    body.appendChild(el("tr", {}, [numCell(g.count), el("td", {class: "mono"}, g.reason),
                                   el("td", {}, linkList(list(g.examples), 4))]));
  });
}

function renderEntries(id, entries) {
  var box = document.getElementById(id);
  entries.forEach(function (e) { box.appendChild(el("li", {class: "mono"}, e.text)); });
  setText("count-" + id, entries.length);
}

function kv(label, value, cls) {
  return el("div", {class: "kv"}, [el("b", {}, label), el("span", {class: cls || ""}, value)]);
}

function shapeText(f) {
  return "[" + list(f.shape).join(", ") + "] " + (f.dtype || "") +
         (typeof f.nbytes === "number" ? ", " + f.nbytes + " B" : "");
}

function findingsTable(findings, allowed, columns) {
  var head = el("tr", {}, ["path", "phase", "shape", "owner class", "attribute", "file"]
    .concat(columns).map(function (t) { return el("th", {}, t); }));
  var rows = findings.map(function (f) {
    var site = f.site || {};
    var owner = String(site.owner || "?");
    var cells = [el("td", {class: "mono"}, f.path), el("td", {class: "tag"}, f.phase || ""),
                 el("td", {class: "mono"}, shapeText(f)),
                 el("td", {class: "mono", title: owner}, owner.split(".").pop()),
                 el("td", {class: "mono"}, site.attribute || ""),
                 el("td", {class: "mono"}, site.file || "?")];
    if (allowed) {
      var ok = allowed.indexOf(f.path) >= 0;
      cells.push(markCell(ok ? "allowlisted" : "new", !ok));
    } else {
      cells.push(el("td", {}, f.kind || ""));
      cells.push(el("td", {}, f.what || ""));
    }
    return el("tr", {}, cells);
  });
  return el("table", {}, [el("tbody", {}, [head].concat(rows))]);
}

function ownersTable(owners, allowed) {
  return el("table", {}, [el("tbody", {}, [el("tr", {}, [el("th", {}, "owner"),
                                                         el("th", {}, "allowlist")])]
    .concat(owners.map(function (o) {
      var ok = allowed.indexOf(o) >= 0;
      return el("tr", {}, [el("td", {class: "mono"}, o),
                           markCell(ok ? "allowlisted" : "new", !ok)]);
    })))]);
}

function stepsTable(steps) {
  var head = el("tr", {}, ["step", "replay", "max abs diff", "findings of its check"]
    .map(function (t) { return el("th", {}, t); }));
  return el("table", {}, [el("tbody", {}, [head].concat(steps.map(function (s) {
    var summary = s.summary || {};
    var found = ["unregistered", "dangling", "stale", "lost"].filter(function (v) {
      return summary[v];
    }).map(function (v) { return v + " " + summary[v]; }).join(", ");
    var outcome = stepOutcome(s);
    return el("tr", {}, [el("td", {class: "mono"}, s.label),
                         markCell(s.error ? outcome + ": " + s.error : outcome,
                                  outcome === "refused" || outcome === "not compared"),
                         el("td", {class: "num"}, s.max_abs_diff === undefined ? "" :
                                                  s.max_abs_diff),
                         el("td", {}, found || "none")]);
  })))]);
}

function detailsSection(m) {
  var a = m.a;
  var forward = a.forward || {};
  var about = [a.class === m.name ? "" : a.class, a.model_type].filter(Boolean).join(", ");
  var parts = [el("h3", {}, [m.name, el("span", {class: "muted"}, about ? "  " + about : "")])];
  parts.push(kv("status", m.statusText + (m.built ? ", " + a.parameters + " parameters" : ""),
                m.built ? "" : "bad"));
  if (a.error) { parts.push(kv("error", a.error, "error")); }
  list(a.attempts).forEach(function (t) {
    if (t.error || t.forward_error) {
      parts.push(kv("attempt " + t.level, t.error || "forward: " + t.forward_error, "error"));
    }
  });
  if (m.built) {
    parts.push(kv("warm-up forward", m.forwardText + (list(forward.inputs).length ?
                                                      " (" + forward.inputs.join(", ") + ")" :
                                                      ""), m.forwardFailed ? "bad" : ""));
    if (forward.error) { parts.push(kv("forward error", forward.error, "error")); }
  }
  if (m.captureStatus) {
    parts.push(kv("capture", m.captureStatus, m.captureFailed ? "error" : ""));
  }
  if (a.reload) { parts.push(kv("reload", String(a.reload.status))); }
  if (m.findings.length) {
    parts.push(el("div", {}, m.findings.length + " census findings (" +
                             list(a.allowlisted).length + " allowlisted, " +
                             list(a.new_findings).length + " new):"));
    parts.push(findingsTable(m.findings, list(a.allowlisted), ["allowlist"]));
  }
  if (m.owners.length) {
    parts.push(el("div", {}, m.owners.length + " unregistered owners at capture:"));
    parts.push(ownersTable(m.owners, list(a.capture_allowlisted)));
  }
  if (list(a.foreign).length) {
    parts.push(el("div", {}, a.foreign.length + " tensors pointing at memory torch does not " +
                             "own:"));
    parts.push(findingsTable(a.foreign, null, ["kind", "what"]));
  }
  if (m.steps.length) { parts.push(stepsTable(m.steps)); }
  m.stale.forEach(function (e) { parts.push(kv("stale allow entry", e.text, "bad")); });
  m.unverified.forEach(function (e) { parts.push(kv("unverified allow entry", e.text)); });
  return el("section", {class: "arch", id: detailsId(m.name)}, parts);
}

function renderDetails(models) {
  var fragment = document.createDocumentFragment();
  models.forEach(function (m) { fragment.appendChild(detailsSection(m)); });
  document.getElementById("details").appendChild(fragment);
  setText("count-details", models.length);
}

// Rows whose link leads to an element of the page (the browser tests compare it with the row
// count: every row reaches its details).
function countLinkedRows() {
  var linked = 0;
  document.querySelectorAll("#corpus-body tr td:first-child a").forEach(function (a) {
    var id = decodeURIComponent(a.getAttribute("href").slice(1));
    linked += document.getElementById(id) ? 1 : 0;
  });
  return linked;
}

function main() {
  var state = readDocument();
  renderSummary(state);
  var table = new CorpusTable(state.models);
  var text = document.getElementById("filter-text");
  var only = document.getElementById("filter-only");
  // ?q=...&only=findings|failures|new preset the filter, so a link (or a test) can open the
  // page filtered.
  var query = new URLSearchParams(window.location.search);
  text.value = query.get("q") || "";
  if (Object.prototype.hasOwnProperty.call(ONLY, query.get("only"))) {
    only.value = query.get("only");
  }
  var apply = function () { table.filter(text.value, only.value); };
  text.addEventListener("input", apply);
  only.addEventListener("change", apply);
  apply();
  renderSites(state.summary);
  renderFailures(state.summary);
  renderEntries("stale-allow", state.stale);
  renderEntries("unverified-allow", state.unverified);
  renderDetails(state.models);
  setText("count-rows-linked", countLinkedRows());
  // The details exist only now: follow a #arch-... the page was opened with.
  if (window.location.hash) {
    var target = document.getElementById(decodeURIComponent(window.location.hash.slice(1)));
    if (target) { target.scrollIntoView(); }
  }
  setText("page-ready", "ready");
}

main();
