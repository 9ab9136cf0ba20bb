// The map's model: an address axis with the empty gaps between clusters of memory squeezed
// (so a 512-byte workspace and a 1 GiB embedding are both visible in the whole view), each
// graph's references with their verdicts, and per epoch the spans, allocations, freed ranges
// and moved owners. Positions on the axis are "virtual" numbers; the view is a window on them.

// Axis over the sorted, merged union of `ranges` ([begin, end) in bytes).
function Axis(ranges) {
  ranges.sort(function (a, b) { return a[0] - b[0]; });
  var clusters = [];
  ranges.forEach(function (r) {
    var last = clusters[clusters.length - 1];
    // Neighbours closer than 1 MiB or 5% of the cluster read as one block of memory.
    if (last && r[0] <= last.end + Math.max(1048576, 0.05 * (last.end - last.begin))) {
      last.end = Math.max(last.end, r[1]);
    } else {
      clusters.push({begin: r[0], end: Math.max(r[1], r[0] + 1)});
    }
  });
  var total = clusters.reduce(function (sum, c) { return sum + (c.end - c.begin); }, 0) || 1;
  var n = Math.max(clusters.length, 1);
  var minWidth = total / (4 * n);
  this.gap = total / (30 * n);
  var at = 0;
  clusters.forEach(function (c) {
    c.v = at;
    c.width = Math.max(c.end - c.begin, minWidth);
    c.scale = c.width / (c.end - c.begin);
    at += c.width + this.gap;
  }, this);
  this.clusters = clusters;
  this.total = Math.max(at - this.gap, 1);
}

// Index of the last cluster that begins at or before `address` (-1 when none).
Axis.prototype.clusterAt = function (address) {
  var lo = 0, hi = this.clusters.length - 1, found = -1;
  while (lo <= hi) {
    var mid = (lo + hi) >> 1;
    if (this.clusters[mid].begin <= address) { found = mid; lo = mid + 1; } else { hi = mid - 1; }
  }
  return found;
};

Axis.prototype.toVirtual = function (address) {
  var k = this.clusterAt(address);
  if (k < 0) { return 0; }
  var c = this.clusters[k];
  if (address < c.end) { return c.v + (address - c.begin) * c.scale; }
  var next = this.clusters[k + 1];
  if (!next) { return c.v + c.width; }
  return c.v + c.width + this.gap * (address - c.end) / (next.begin - c.end);
};

Axis.prototype.toAddress = function (v) {
  var lo = 0, hi = this.clusters.length - 1, k = 0;
  while (lo <= hi) {
    var mid = (lo + hi) >> 1;
    if (this.clusters[mid].v <= v) { k = mid; lo = mid + 1; } else { hi = mid - 1; }
  }
  var c = this.clusters[k];
  if (!c) { return 0; }
  if (v < c.v + c.width) { return c.begin + Math.max(v - c.v, 0) / c.scale; }
  var next = this.clusters[k + 1];
  if (!next) { return c.end; }
  return c.end + (next.begin - c.end) * (v - c.v - c.width) / this.gap;
};

// Sorted [begin, end, record] triples of one epoch, for lookups by address.
function SortedRanges(records) {
  this.items = records.slice().sort(function (a, b) { return a.begin - b.begin; });
}
// The innermost (last-beginning) record holding `address`; nested spans are rare and shallow,
// so a short walk back from the last begin at or below the address finds it.
SortedRanges.prototype.find = function (address) {
  var items = this.items, lo = 0, hi = items.length - 1, k = -1;
  while (lo <= hi) {
    var mid = (lo + hi) >> 1;
    if (items[mid].begin <= address) { k = mid; lo = mid + 1; } else { hi = mid - 1; }
  }
  for (var i = k; i >= 0 && i > k - 32; --i) {
    if (address < items[i].end) { return items[i]; }
  }
  return null;
};

// Whether any record overlaps [begin, end): the last record beginning before `end` does, or
// one of the few before it that reach past `begin`.
SortedRanges.prototype.overlaps = function (begin, end) {
  var items = this.items, lo = 0, hi = items.length - 1, k = -1;
  while (lo <= hi) {
    var mid = (lo + hi) >> 1;
    if (items[mid].begin < end) { k = mid; lo = mid + 1; } else { hi = mid - 1; }
  }
  for (var i = k; i >= 0 && i > k - 32; --i) {
    if (items[i].end > begin) { return true; }
  }
  return false;
};

function epochModel(raw) {
  var spans = raw.spans.map(function (s) {
    var begin = parseAddress(s[0]);
    return {begin: begin, end: begin + s[1], size: s[1], kind: s[2], name: s[3], hex: s[0]};
  });
  var spanIndex = new SortedRanges(spans);
  var allocations = raw.allocations.map(function (a) {
    var begin = parseAddress(a[0]);
    var graphPool = a[2] === "graph" || a[2].indexOf("graph:") === 0;
    return {begin: begin, end: begin + a[1], size: a[1], pool: a[2], generation: a[3],
            label: a[4], hex: a[0], graphPool: graphPool};
  });
  // An allocation no span touches is drawn as unregistered memory (unless graph-owned).
  allocations.forEach(function (a) {
    a.kind = a.graphPool ? "graph" : spanIndex.overlaps(a.begin, a.end) ? "allocation"
                                                                         : "unregistered";
  });
  return {label: raw.label, spans: spans, spanIndex: spanIndex, allocations: allocations,
          allocationIndex: new SortedRanges(allocations), byName: spanNames(spans)};
}

function spanNames(spans) {
  var names = new Map();
  spans.forEach(function (s) { if (s.name) { names.set(s.kind + "\u0000" + s.name, s); } });
  return names;
}

// One graph's references: address, extent, node, place in the node, and verdict (the worst
// of the report's findings about it; otherwise the ok-class verdict of the span that covers
// it in the checked epoch: the report counts ok verdicts but does not list them).
function graphModel(raw, data, checked) {
  var names = data.snapshot.names;
  var findings = data.report.findings;
  // A row leaves out its trailing defaults: size 0, access "unknown", no finding.
  var refs = raw.refs.map(function (row) {
    var address = parseAddress(row[4]);
    var ref = {node: row[0], name: names[row[1]], param: row[2], place: row[3], hex: row[4],
               address: address, size: row[5] || 0, access: row[6] || "unknown",
               findings: (row[7] || []).map(function (i) { return findings[i]; })};
    ref.end = address + Math.max(ref.size, 1);
    if (ref.findings.length) {
      ref.verdict = FINDING_VERDICTS.filter(function (v) {
        return ref.findings.some(function (f) { return f.verdict === v; });
      })[0];
    } else {
      var span = checked ? checked.spanIndex.find(address) : null;
      var allocation = checked ? checked.allocationIndex.find(address) : null;
      ref.span = span;
      ref.verdict = span ? OK_VERDICT_OF_KIND[span.kind] :
                    (ref.place === "alloc" || (allocation && allocation.graphPool)) ? "graph" :
                    "allowed";
    }
    return ref;
  });
  return {id: raw.id, epoch: raw.epoch, nodes: raw.nodes, refs: refs,
          findingRefs: refs.filter(function (r) { return r.findings.length > 0; }).length};
}

// Allocations of `baseline` that `shown` no longer has (same begin and size) and no
// allocation of `shown` covers: memory freed (or unmapped) since.
function freedRanges(baseline, shown) {
  if (!baseline || baseline === shown) { return []; }
  var present = new Set(shown.allocations.map(function (a) { return a.hex + ":" + a.size; }));
  return baseline.allocations.filter(function (a) {
    return !present.has(a.hex + ":" + a.size) && !shown.allocationIndex.find(a.begin);
  });
}

// Where the stale references' owners went: an owner moved when its span (same kind and name)
// is in `baseline` and in `shown` at another begin. One arrow per moved owner, from its first
// stale reference to the same offset in the new span; `references` counts the stale
// references into moved owners (several per owner when a graph reads it in several places).
function movedOwners(graph, baseline, shown) {
  var moved = {arrows: [], references: 0};
  if (!baseline || baseline === shown) { return moved; }
  var owners = new Set();
  graph.refs.forEach(function (ref) {
    if (ref.verdict !== "stale") { return; }
    var finding = ref.findings[0];
    var key = (finding.owner_kind || "") + "\u0000" + finding.owner;
    var before = baseline.byName.get(key);
    var after = shown.byName.get(key);
    if (!before || !after || before.begin === after.begin) { return; }
    moved.references += 1;
    if (!owners.has(key)) {
      owners.add(key);
      var to = after.begin + (ref.address - before.begin);
      moved.arrows.push({ref: ref, from: ref.address, to: to, owner: finding.owner});
    }
  });
  return moved;
}
