// The map's model: per epoch the spans and allocations, each graph's references, and per
// shown epoch each reference's verdict (from that epoch's report, embedded by the writer),
// the ranges freed since the baseline and the owners that moved.

// Sorted records of one epoch, for lookups by address.
function SortedRanges(records) {
  this.items = records.slice().sort(function (a, b) { return a.begin - b.begin; });
}
// Index of the last record beginning before `limit` (at or before it when `inclusive`).
SortedRanges.prototype.lastBefore = function (limit, inclusive) {
  var items = this.items, lo = 0, hi = items.length - 1, k = -1;
  while (lo <= hi) {
    var mid = (lo + hi) >> 1;
    var before = inclusive ? items[mid].begin <= limit : items[mid].begin < limit;
    if (before) { k = mid; lo = mid + 1; } else { hi = mid - 1; }
  }
  return k;
};
// The innermost (last-beginning) record holding `address`; nested spans are rare and shallow,
// so a short walk back from the last begin at or below the address finds it.
SortedRanges.prototype.find = function (address) {
  var k = this.lastBefore(address, true);
  for (var i = k; i >= 0 && i > k - 32; --i) {
    if (address < this.items[i].end) { return this.items[i]; }
  }
  return null;
};
// Whether any record overlaps [begin, end).
SortedRanges.prototype.overlaps = function (begin, end) {
  var k = this.lastBefore(end, false);
  for (var i = k; i >= 0 && i > k - 32; --i) {
    if (this.items[i].end > begin) { return true; }
  }
  return false;
};

function isGraphPool(pool) { return pool === "graph" || pool.indexOf("graph:") === 0; }

function epochModel(raw) {
  var spans = raw.spans.map(function (s) {
    var begin = parseAddress(s[0]);
    return {begin: begin, end: begin + s[1], size: s[1], kind: s[2], name: s[3], hex: s[0]};
  });
  var spanIndex = new SortedRanges(spans);
  var allocations = raw.allocations.map(function (a) {
    var begin = parseAddress(a[0]);
    return {begin: begin, end: begin + a[1], size: a[1], pool: a[2], generation: a[3],
            label: a[4], hex: a[0], graphPool: isGraphPool(a[2])};
  });
  // An allocation no span touches is drawn as unregistered memory (unless graph-owned).
  allocations.forEach(function (a) {
    a.kind = a.graphPool ? "graph" : spanIndex.overlaps(a.begin, a.end) ? "allocation"
                                                                         : "unregistered";
  });
  var byName = new Map();
  spans.forEach(function (s) { if (s.name) { byName.set(s.kind + "\u0000" + s.name, s); } });
  return {label: raw.label, spans: spans, spanIndex: spanIndex, allocations: allocations,
          allocationIndex: new SortedRanges(allocations), byName: byName};
}

// The key that names one use of memory by a reference and by a finding: graph, node, and
// the argument word (param, offset) or the operand role.
function findingKey(f) {
  return f.graph + "|" + f.node + "|" + (f.operand ? "o|" + f.operand : "p|" + f.param + "|" +
                                                                         f.offset);
}

// One graph's references (a row leaves out its trailing defaults: size 0, access "unknown").
function graphModel(raw, names) {
  var refs = raw.refs.map(function (row) {
    var address = parseAddress(row[4]);
    var size = row[5] || 0;
    return {node: row[0], name: names[row[1]], param: row[2], place: row[3], hex: row[4],
            address: address, size: size, access: row[6] || "unknown",
            end: address + Math.max(size, 1),
            key: raw.id + "|" + row[0] + "|" + (row[2] >= 0 ? "p|" + row[2] + "|" + row[3]
                                                            : "o|" + row[3])};
  });
  return {id: raw.id, epoch: raw.epoch, nodes: raw.nodes, refs: refs, verdicts: new Map()};
}

// Each reference's verdict in `epoch` and the findings about it: the worst of the epoch's
// report's findings with its key; otherwise the ok verdict of the span that covers it in that
// epoch (a report counts ok verdicts but does not list them): graph memory for a graph's own
// allocation or a graph pool, else allowed. Cached per graph and epoch.
function refVerdicts(graph, epoch, report) {
  var label = epoch ? epoch.label : "";
  if (graph.verdicts.has(label)) { return graph.verdicts.get(label); }
  var byKey = new Map();
  (report ? report.findings : []).forEach(function (f, i) {
    if (f.graph !== graph.id) { return; }
    var key = findingKey(f);
    if (!byKey.has(key)) { byKey.set(key, []); }
    byKey.get(key).push(i);
  });
  var verdicts = new Array(graph.refs.length);
  var findings = new Array(graph.refs.length);
  var findingRefs = 0;
  graph.refs.forEach(function (ref, i) {
    var about = byKey.get(ref.key);
    if (about) {
      findings[i] = about;
      findingRefs += 1;
      verdicts[i] = about.map(function (j) { return report.findings[j].verdict; })
                         .sort(function (a, b) { return precedence(a) - precedence(b); })[0];
      return;
    }
    var span = epoch ? epoch.spanIndex.find(ref.address) : null;
    var allocation = epoch ? epoch.allocationIndex.find(ref.address) : null;
    verdicts[i] = span ? OK_VERDICT_OF_KIND[span.kind] :
                  (ref.place === "alloc" || (allocation && allocation.graphPool)) ? "graph" :
                  "allowed";
  });
  var out = {verdicts: verdicts, findings: findings, findingRefs: findingRefs,
             report: report};
  graph.verdicts.set(label, out);
  return out;
}

// Allocations of `baseline` that `shown` no longer has (same begin and size) and no
// allocation of `shown` covers: memory freed (or unmapped) since.
function freedRanges(baseline, shown) {
  if (!baseline || !shown || baseline === shown) { return []; }
  var present = new Set(shown.allocations.map(function (a) { return a.hex + ":" + a.size; }));
  return baseline.allocations.filter(function (a) {
    return !present.has(a.hex + ":" + a.size) && !shown.allocationIndex.find(a.begin);
  });
}

// Where the stale references' owners went: an owner moved when its span (same kind and name)
// is in `baseline` and in `shown` at another begin. One arrow per moved owner, from its first
// stale reference to the same offset in the new span; `references` counts the stale
// references into moved owners (several per owner when a graph reads it in several places).
function movedOwners(graph, baseline, shown, verdicts) {
  var moved = {arrows: [], references: 0};
  if (!baseline || !shown || baseline === shown) { return moved; }
  var byOwner = new Map();
  graph.refs.forEach(function (ref, i) {
    if (verdicts.verdicts[i] !== "stale") { return; }
    var finding = verdicts.report.findings[verdicts.findings[i][0]];
    var key = (finding.owner_kind || "") + "\u0000" + finding.owner;
    var before = baseline.byName.get(key);
    var after = shown.byName.get(key);
    if (!before || !after || before.begin === after.begin) { return; }
    moved.references += 1;
    if (!byOwner.has(key)) {
      var arrow = {ref: ref, from: ref.address, to: after.begin + (ref.address - before.begin),
                   span: after, owner: finding.owner, references: 0};
      byOwner.set(key, arrow);
      moved.arrows.push(arrow);
    }
    byOwner.get(key).references += 1;
  });
  return moved;
}
