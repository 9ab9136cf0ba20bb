// The summary (the figures of the zoo's text table, from the document's "summary", which
// report.summarize wrote) and the corpus table: a row per architecture, built once from the
// data, sorted by reordering the rows and filtered by hiding them.

function figure(summary, key) {
  var value = summary[key];
  return el("span", {id: "summary-" + key}, value === undefined ? "-" : value);
}

function countsText(counts) {
  return Object.keys(counts || {}).map(function (k) { return k + " (" + counts[k] + ")"; })
    .join(", ");
}

function captureRow(statuses) {
  statuses = statuses || {};
  var ran = statuses.ran || 0;
  var failed = 0;
  var total = 0;
  Object.keys(statuses).forEach(function (k) {
    total += statuses[k];
    if (k.indexOf("failed") === 0) { failed += statuses[k]; }
  });
  if (ran === 0 && failed === 0) { return countsText(statuses) || "-"; }
  return ran + " ran, " + failed + " failed, " + (total - ran - failed) + " not run";
}

function renderSummary(state) {
  var doc = state.doc;
  var s = state.summary;
  var sec = s.seconds || {};
  var engine = doc.engine || "transformers";
  var fig = function (key) { return figure(s, key); };
  var levels = Object.keys(s.levels || {}).sort().map(function (k) {
    return k + " " + s.levels[k];
  }).join(", ");
  var foreign = Object.keys(s.foreign || {}).sort().map(function (k) {
    return k + " " + s.foreign[k];
  }).join(", ");
  var rows = [
    [engine, String(doc[engine])],
    ["enumerated", [fig("enumerated"), " (", fig("classes"), " classes + ", fig("variants"),
                    " variants)"]],
    ["built", [fig("built"), " (" + pct(s.built, s.enumerated) + "); levels " + levels +
               "; failed ", fig("failed")]],
    ["warm-up forward", [fig("forward_ran"), " ran of ", fig("forward_eligible"), " eligible"]],
    ["census clean", [fig("census_clean"), " of " + s.built + " built"]],
    ["with findings", [fig("with_findings"), " architectures, ", fig("finding_sites"),
                       " distinct sites (not allowlisted)"]],
    ["allowlisted", [fig("allowlisted"), " architectures (all findings on the allowlist)"]],
    ["all findings", [fig("all_finding_architectures"), " architectures, ",
                      fig("all_finding_sites"), " distinct sites"]],
    ["stale allow entries", el("span", {id: "summary-stale_allow"}, list(s.stale_allow).length)],
    ["capture", captureRow(s.capture)],
    ["clean at capture", [fig("capture_clean"), " of ", fig("captured"), " captured; ",
                          fig("capture_with_findings"),
                          " with unregistered owners not allowlisted (" +
                          list(s.capture_finding_owners).length + " distinct), ",
                          fig("capture_owners"), " distinct owners in all"]],
    ["replay after steps", countsText(s.steps) || "no steps ran"],
    ["memory torch does not own", [fig("foreign_architectures"), " architectures" +
                                   (foreign ? ": " + foreign : "")]]
  ];
  if (Object.keys(s.reload || {}).length) { rows.push(["reload", countsText(s.reload)]); }
  rows.push(["wall time", secondsText(sec.wall) + " with " + sec.jobs + " jobs"]);
  rows.push(["time per phase", ["build", "census", "forward", "capture", "steps"].map(
    function (k) { return k + " " + secondsText(sec[k]); }).join(", ") +
    " (sum over workers: " + secondsText(sec.worker_total) + ")"]);
  rows.push(["census share", typeof sec.census_share === "number" ?
                             (100 * sec.census_share).toFixed(2) + "% of worker time" : "-"]);
  var body = document.getElementById("summary-body");
  rows.forEach(function (row) { body.appendChild(el("tr", {}, [el("th", {}, row[0]),
                                                               el("td", {}, row[1])])); });
  var fails = list(s.stale_allow).length > 0 ||
              state.models.some(function (m) { return m.fresh > 0; });
  var status = document.getElementById("zoo-status");
  status.textContent = fails ? "fails" : "passes";
  status.className = fails ? "status-fail" : "status-pass";
  setText("title", "graphcheck zoo: " + engine + " " + doc[engine]);
  document.title = "graphcheck zoo: " + engine + " " + doc[engine] +
                   (fails ? " (fails)" : " (passes)");
  var options = doc.options || {};
  setText("subtitle", [doc.torch ? "torch " + doc.torch : "",
                       doc.cpu_capability ? "CPU " + doc.cpu_capability : "",
                       options.jobs ? options.jobs + " jobs" : "",
                       list(options.allow).length ? "allowlists: " + options.allow.join(", ") :
                                                    "no allowlist"]
    .filter(Boolean).join("; "));
}

function numCell(value) { return el("td", {class: "num"}, value); }

// A short status word (never wrapped), red when bad, with the full text as its tooltip.
function markCell(text, bad, title) {
  var attrs = {class: bad ? "tag bad" : "tag"};
  if (title) { attrs.title = title; }
  return el("td", attrs, text);
}

var COLUMNS = [
  {title: "architecture", key: function (m) { return m.name; },
   cell: function (m) { return el("td", {}, archLink(m.name)); }},
  {title: "class", key: function (m) { return String(m.a.class || ""); },
   cell: function (m) { return el("td", {}, breakable(m.a.class || "")); }},
  {title: "variant", key: function (m) { return String(m.a.variant || ""); },
   cell: function (m) { return el("td", {}, breakable(m.a.variant || "")); }},
  {title: "status", key: function (m) { return m.statusText; },
   cell: function (m) { return markCell(m.statusText, !m.built, m.a.error); }},
  {title: "forward", key: function (m) { return m.forwardText; },
   cell: function (m) {
     return markCell(m.forwardText, m.forwardFailed, (m.a.forward || {}).error);
   }},
  {title: "census findings", num: true, key: function (m) { return m.findings.length; }},
  {title: "capture", key: function (m) { return m.captureText; },
   cell: function (m) { return markCell(m.captureText, m.captureFailed, m.captureStatus); }},
  {title: "owners at capture", num: true, key: function (m) { return m.owners.length; }},
  {title: "steps equal / different", key: function (m) { return m.outcomes.different; },
   cell: function (m) {
     return markCell(m.stepsText, false, m.steps.map(function (s) {
       return s.label + ": " + stepOutcome(s);
     }).join("; "));
   }},
  {title: "allowlisted", num: true,
   help: "census findings and unregistered owners at capture that the allowlist covers", key: function (m) { return m.allowlisted; }},
  {title: "new", num: true,
   help: "census findings and unregistered owners at capture that no allowlist entry covers", key: function (m) { return m.fresh; },
   cell: function (m) { return el("td", {class: "num" + (m.fresh ? " bad" : "")}, m.fresh); }},
  {title: "stale", num: true, help: "stale allowlist entries that name this architecture", key: function (m) { return m.stale.length; },
   cell: function (m) {
     return el("td", {class: "num" + (m.stale.length ? " bad" : "")}, m.stale.length);
   }}
];

function CorpusTable(models) {
  this.models = models;
  this.rows = models.map(function (m) {
    return el("tr", {}, COLUMNS.map(function (c) {
      return c.cell ? c.cell(m) : c.num ? numCell(c.key(m)) : el("td", {}, c.key(m));
    }));
  });
  this.order = models.map(function (_, i) { return i; });
  this.sortColumn = -1;
  this.descending = false;
  var head = document.getElementById("corpus-head");
  this.heads = COLUMNS.map(function (c, i) {
    var th = el("th", {class: c.num ? "num" : "", title: (c.help ? c.help + "; " : "") +
                                                         "click to sort"}, c.title);
    th.addEventListener("click", this.sortBy.bind(this, i));
    head.appendChild(th);
    return th;
  }, this);
  var body = document.getElementById("corpus-body");
  var fragment = document.createDocumentFragment();
  this.rows.forEach(function (row) { fragment.appendChild(row); });
  body.appendChild(fragment);
  setText("count-rows", models.length);
  setText("count-rows-findings", models.filter(function (m) { return m.hasFindings; }).length);
  setText("count-rows-failures", models.filter(function (m) { return m.failure; }).length);
  setText("count-rows-new", models.filter(function (m) { return m.failsRun; }).length);
}

CorpusTable.prototype.sortBy = function (index) {
  this.descending = this.sortColumn === index ? !this.descending : COLUMNS[index].num === true;
  this.sortColumn = index;
  var key = COLUMNS[index].key;
  var models = this.models;
  var sign = this.descending ? -1 : 1;
  this.order.sort(function (i, j) {
    var a = key(models[i]);
    var b = key(models[j]);
    var c = typeof a === "number" && typeof b === "number" ? a - b :
            String(a).localeCompare(String(b));
    return c ? sign * c : i - j;
  });
  this.heads.forEach(function (th, i) {
    th.className = (COLUMNS[i].num ? "num " : "") +
                   (i === index ? (this.descending ? "sorted-desc" : "sorted-asc") : "");
  }, this);
  var fragment = document.createDocumentFragment();
  this.order.forEach(function (i) { fragment.appendChild(this.rows[i]); }, this);
  document.getElementById("corpus-body").appendChild(fragment);
};

var ONLY = {
  all: function () { return true; },
  findings: function (m) { return m.hasFindings; },
  failures: function (m) { return m.failure; },
  "new": function (m) { return m.failsRun; }
};

CorpusTable.prototype.filter = function (text, only) {
  var words = text.toLowerCase().split(/\s+/).filter(Boolean);
  var keep = ONLY[only] || ONLY.all;
  var shown = 0;
  this.models.forEach(function (m, i) {
    var visible = keep(m) && words.every(function (w) { return m.searchText.indexOf(w) >= 0; });
    this.rows[i].hidden = !visible;
    shown += visible ? 1 : 0;
  }, this);
  setText("count-rows-shown", shown);
};
