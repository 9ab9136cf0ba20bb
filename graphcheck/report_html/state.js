// The page's state: the reports it carries (the checked epoch's, and each other epoch's as the
// checker found it against the same baseline, embedded when the page was written) and the
// selection (epoch, search text, verdict and owner filters), kept in the URL's fragment so
// that a link or a reload shows the same view: #epoch=after_wake&verdict=stale,lost&q=embed.
function PageState(data) {
  this.data = data;
  this.checked = data.report.epoch;
  this.reports = new Map();
  this.reports.set(data.report.epoch, {epoch: data.report.epoch, report: data.report});
  (data.epochs || []).forEach(function (entry) { this.reports.set(entry.epoch, entry); }, this);
  this.epochs = data.snapshot ? data.snapshot.epochs.map(function (e) { return e.label; })
                              : [data.report.epoch];
  if (this.epochs.indexOf(this.checked) < 0) { this.epochs.push(this.checked); }
  this.nodeLabel = nodeNumbering(data.snapshot);
  this.selection = {epoch: this.checked, q: "", verdicts: [], owner: "", compare: ""};
  this.listeners = [];
  this.readUrl();
}

// Findings and counts of the shown epoch: {report} or, for an epoch the page has no report
// of, {error} or {skipped} with why.
PageState.prototype.entry = function (label) {
  return this.reports.get(label === undefined ? this.selection.epoch : label) ||
         {epoch: label, skipped: "the page carries no report of this epoch"};
};
PageState.prototype.report = function (label) { return this.entry(label).report || null; };

PageState.prototype.onChange = function (listener) { this.listeners.push(listener); };

// Changes the selection (any of its keys), writes the URL and redraws what follows it.
PageState.prototype.select = function (changes) {
  Object.keys(changes).forEach(function (key) { this.selection[key] = changes[key]; }, this);
  this.writeUrl();
  this.listeners.forEach(function (listener) { listener(changes); });
};

PageState.prototype.readUrl = function () {
  var text = (location.search || "").replace(/^\?/, "") + "&" +
             (location.hash || "").replace(/^#/, "");
  var params = new URLSearchParams(text);
  var epoch = params.get("epoch");
  if (epoch !== null && this.epochs.indexOf(epoch) >= 0) { this.selection.epoch = epoch; }
  this.selection.q = params.get("q") || "";
  var compare = params.get("compare");
  this.selection.compare = compare !== null && this.epochs.indexOf(compare) >= 0 ? compare : "";
  this.selection.owner = params.get("owner") || "";
  this.selection.verdicts = (params.get("verdict") || "").split(",").filter(function (v) {
    return VERDICTS.indexOf(v) >= 0;
  });
};

PageState.prototype.writeUrl = function () {
  var params = new URLSearchParams();
  var s = this.selection;
  if (s.epoch !== this.checked) { params.set("epoch", s.epoch); }
  if (s.compare) { params.set("compare", s.compare); }
  if (s.verdicts.length) { params.set("verdict", s.verdicts.join(",")); }
  if (s.owner) { params.set("owner", s.owner); }
  if (s.q) { params.set("q", s.q); }
  var text = params.toString();
  try {
    history.replaceState(null, "", text ? "#" + text : location.pathname + location.search);
  } catch (error) {
    // Some browsers refuse history changes on file:// pages; the view still follows.
  }
};

// Whether a finding passes the filters: its verdict among those selected (all when none),
// its owner the selected one, and the search text (case-insensitive) in its owner, kernel
// name or address, or, for a hexadecimal search, an address inside the bytes it names.
PageState.prototype.matches = function (finding) {
  var s = this.selection;
  if (s.verdicts.length && s.verdicts.indexOf(finding.verdict) < 0) { return false; }
  if (s.owner && finding.owner !== s.owner) { return false; }
  return !s.q || searchMatches(finding, s.q);
};

function searchMatches(finding, query) {
  var q = query.trim().toLowerCase();
  if (!q) { return true; }
  var fields = [finding.owner || "", finding.kernel || "", finding.address || "",
                finding.range_begin || ""];
  if (fields.some(function (f) { return f.toLowerCase().indexOf(q) >= 0; })) { return true; }
  if (!/^0x[0-9a-f]+$/.test(q)) { return false; }
  var value = parseAddress(q);
  var begin = parseAddress(finding.range_begin || finding.address);
  var size = finding.range_size || 8;
  return begin <= value && value < begin + size;
}

// The findings of the shown epoch that pass the filters.
PageState.prototype.shownFindings = function () {
  var report = this.report();
  return report ? report.findings.filter(this.matches, this) : [];
};

// Whether a report fails: findings, or stale allowlist globs it does not keep.
function reportFails(report) {
  return report.findings.length > 0 ||
         (report.stale_allow.length > 0 && report.stale_allow_policy !== "keep");
}
