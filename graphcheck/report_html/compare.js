// Compare mode: what changed between two epochs' reports, owner by owner: findings new in the
// shown epoch (an owner with a verdict it did not have in the other one: "new stale", "new
// lost") and findings fixed (an owner's verdict the other epoch had and the shown one does
// not). Chosen by the "compare with" selector; kept in the URL (#compare=capture).
function ownerVerdicts(report) {
  var out = new Map();
  report.findings.forEach(function (f) {
    var key = f.verdict + "\u0001" + ownerKey(f);
    if (!out.has(key)) { out.set(key, {verdict: f.verdict, owner: f.owner, kind: f.owner_kind,
                                      references: 0}); }
    out.get(key).references += 1;
  });
  return out;
}

// {added: [...], fixed: [...]}: owner verdicts of `shown` not in `other`, and the reverse.
function compareReports(shown, other) {
  var now = ownerVerdicts(shown), before = ownerVerdicts(other);
  var order = function (a, b) { return precedence(a.verdict) - precedence(b.verdict); };
  return {
    added: Array.from(now.keys()).filter(function (k) { return !before.has(k); })
                .map(function (k) { return now.get(k); }).sort(order),
    fixed: Array.from(before.keys()).filter(function (k) { return !now.has(k); })
                 .map(function (k) { return before.get(k); }).sort(order)};
}

function renderCompare(state) {
  var box = document.getElementById("compare");
  var select = document.getElementById("compare-with");
  var shown = state.report(), label = state.selection.compare;
  box.hidden = state.epochs.length < 2;
  if (!select.options.length) {
    select.appendChild(el("option", {value: ""}, "\u2013"));
    state.epochs.forEach(function (e) { select.appendChild(el("option", {value: e}, e)); });
    select.addEventListener("change", function () { state.select({compare: select.value}); });
  }
  select.value = label;
  var other = label ? state.report(label) : null;
  var out = document.getElementById("compare-result");
  if (!label || !shown || !other || label === state.selection.epoch) {
    setText("count-compare-added", 0);
    setText("count-compare-fixed", 0);
    fill(out, label && label !== state.selection.epoch && (!shown || !other) ?
         [el("span", {class: "muted"}, "no report of one of the two epochs in the page")] : []);
    return;
  }
  var changes = compareReports(shown, other);
  setText("count-compare-added", changes.added.length);
  setText("count-compare-fixed", changes.fixed.length);
  var line = function (word, items) {
    return el("div", {class: "compare-line"}, [el("b", {}, word + " (" + items.length + "): "),
      items.length ? expandable(items, 6, function (c) {
        return el("span", {class: "vcount"}, [swatch(VERDICT_COLORS[c.verdict]), c.verdict + " ",
                                              el("code", {}, breakable(ownerName(c)))]);
      }) : el("span", {class: "muted"}, "none")]);
  };
  fill(out, [line("new in " + state.selection.epoch + " since " + label, changes.added),
             line("fixed since " + label, changes.fixed)]);
}
