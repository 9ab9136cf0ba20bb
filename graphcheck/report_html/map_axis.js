// The map's address axis: the sorted union of the memory drawn, in clusters, with the empty
// gaps between clusters squeezed (so that a 512-byte workspace and a 1 GiB embedding both show
// in the whole view) and drawn as break marks labelled with the bytes they stand for.
// Positions on the axis are "virtual" numbers; the view is a window on them.

// Neighbours closer than this, or than 5% of the cluster so far, read as one block of memory.
var AXIS_MERGE_BYTES = 1048576;

// Axis over `ranges` ([begin, end) in bytes).
function Axis(ranges) {
  ranges.sort(function (a, b) { return a[0] - b[0]; });
  var clusters = [];
  ranges.forEach(function (r) {
    var last = clusters[clusters.length - 1];
    if (last && r[0] <= last.end + Math.max(AXIS_MERGE_BYTES, 0.05 * (last.end - last.begin))) {
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

// The squeezed gaps: {after: cluster index, begin, end} between consecutive clusters.
Axis.prototype.breaks = function () {
  var out = [];
  for (var k = 0; k + 1 < this.clusters.length; ++k) {
    out.push({after: k, begin: this.clusters[k].end, end: this.clusters[k + 1].begin});
  }
  return out;
};

// Ticks for one cluster on screen from x0 to x1 (pixels): its first address, then offsets
// from it at a power-of-two step that leaves at least `spacing` pixels between labels.
function clusterTicks(cluster, x0, x1, spacing) {
  var ticks = [{x: x0, label: hex(cluster.begin), major: true}];
  var bytes = cluster.end - cluster.begin;
  var pixels = x1 - x0;
  if (pixels < 2 * spacing || bytes < 2) { return ticks; }
  var step = Math.pow(2, Math.ceil(Math.log2(bytes * spacing / pixels)));
  for (var offset = step; offset < bytes && ticks.length < 64; offset += step) {
    ticks.push({x: x0 + offset / bytes * pixels, label: "+" + formatBytes(offset), major: false});
  }
  return ticks;
}

// The ranges the axis is built over: every span, allocation and reference of every epoch and
// graph, except that a graph pool's segment adds only its two ends: what lies inside it (the
// graph's references, its spans) makes its clusters, and its empty stretches are squeezed like
// gaps, where a 2 GiB pool would otherwise take most of the width.
function axisRanges(epochs, graphs) {
  var ranges = [];
  epochs.forEach(function (e) {
    e.spans.forEach(function (r) { ranges.push([r.begin, r.end]); });
    e.allocations.forEach(function (r) {
      if (r.graphPool) {
        ranges.push([r.begin, r.begin + 1]);
        ranges.push([r.end - 1, r.end]);
      } else {
        ranges.push([r.begin, r.end]);
      }
    });
  });
  graphs.forEach(function (g) {
    g.refs.forEach(function (r) { ranges.push([r.address, r.end]); });
  });
  return ranges;
}
