// The page's entry: reads the embedded data, builds the state (selection in the URL), the
// findings table and the map, and redraws what follows the selection whenever it changes;
// marks #page-ready when everything was drawn once.
function renderLists(report) {
  var staleAllow = report ? report.stale_allow : [];
  setText("count-stale-allow", staleAllow.length);
  var stale = document.getElementById("stale-allow");
  if (staleAllow.length) {
    fill(stale, [el("p", {}, report.stale_allow_policy === "keep" ?
        "Kept on purpose (--keep-stale-allow): these globs match the owner of no reference." :
        "These globs match the owner of no reference in any epoch and fail the check: remove " +
        "them from the allowlist."),
                 el("ul", {}, staleAllow.map(function (glob) {
                   return el("li", {class: "mono"}, glob);
                 }))]);
  } else {
    fill(stale, [el("p", {class: "muted"}, "None.")]);
  }
  var warnings = report ? report.warnings || [] : [];
  setText("count-warnings", warnings.length);
  fill(document.getElementById("warnings"), [warnings.length ?
      el("ul", {}, warnings.map(function (w) { return el("li", {class: "mono"}, w); })) :
      el("p", {class: "muted"}, "None.")]);
  renderUnattributed(report ? report.unattributed || [] : []);
}

// Words that look like pointers into memory the epoch does not know: not findings, but what
// the check could not see (docs/report-format.md, "unattributed").
function renderUnattributed(nodes) {
  setText("count-unattributed", nodes.length);
  var words = nodes.reduce(function (n, u) { return n + u.words; }, 0);
  fill(document.getElementById("unattributed"), nodes.length ? [
    el("p", {}, plural(words, "word") + " in " + plural(nodes.length, "kernel node") +
       ": not judged and not findings; a library's own allocation or memory the capture " +
       "did not record (a tensor there is unchecked)."),
    el("ul", {}, nodes.map(function (u) {
      return el("li", {class: "mono"}, "graph " + u.graph + " node " + u.node + " (kernel " +
                (u.kernel || "?") + "): " + plural(u.words, "word") + ", first " + u.first);
    }))] : [el("p", {class: "muted"}, "None.")]);
}

(function main() {
  try {
    var data = JSON.parse(document.getElementById("graphcheck-data").textContent);
    var state = new PageState(data);
    window.graphcheckState = state;
    renderContext(state);
    state.table = new FindingsTable(state);
    setUpExport(state);
    if (data.snapshot) {
      document.getElementById("map-section").hidden = false;
      state.map = new MapPage(state);
      window.graphcheckMap = state.map;
    }
    var render = function (changes) {
      renderHeader(state);
      renderEpochs(state);
      renderCompare(state);
      renderCards(state);
      renderTodo(state);
      state.table.render();
      renderLists(state.report());
      if (state.map && (!changes || "epoch" in changes)) { state.map.show(); }
    };
    state.onChange(render);
    render();
    setText("page-ready", "ready");
  } catch (error) {
    graphcheckRecordError(error && error.stack ? error.stack : error);
  }
})();
