// CSV export of the findings shown (the shown epoch's findings that pass the filters), one
// line per finding, for a spreadsheet or a bug tracker. window.graphcheckCsv() returns the text.
var CSV_COLUMNS = ["epoch", "verdict", "owner", "owner_kind", "fix", "graph", "node",
                   "node_number", "node_type", "kernel", "kernel_short", "param", "offset",
                   "operand", "address", "access", "range_begin", "range_size", "detail"];

function csvField(value) {
  var text = value === null || value === undefined ? "" : String(value);
  // A leading = + - @ would be a formula in a spreadsheet: quote it as text.
  if (/^[=+\-@]/.test(text)) { text = "'" + text; }
  return /[",\r\n]/.test(text) ? "\"" + text.replace(/"/g, "\"\"") + "\"" : text;
}

function findingsCsv(state) {
  var epoch = state.selection.epoch;
  var lines = [CSV_COLUMNS.join(",")];
  state.shownFindings().forEach(function (f) {
    var row = {epoch: epoch, node_number: state.nodeLabel(f.graph, f.node),
               kernel_short: f.kernel ? displayName(f.kernel, f.node_type) : ""};
    lines.push(CSV_COLUMNS.map(function (column) {
      return csvField(column in row ? row[column] : f[column]);
    }).join(","));
  });
  return lines.join("\r\n") + "\r\n";
}

function setUpExport(state) {
  window.graphcheckCsv = function () { return findingsCsv(state); };
  document.getElementById("export-csv").addEventListener("click", function () {
    var blob = new Blob([findingsCsv(state)], {type: "text/csv"});
    var link = el("a", {href: URL.createObjectURL(blob),
                        download: "graphcheck-" + state.selection.epoch.replace(/[^\w.-]+/g, "-") +
                                  "-findings.csv"});
    document.body.appendChild(link);
    link.click();
    setTimeout(function () { URL.revokeObjectURL(link.href); link.remove(); }, 0);
  });
}
