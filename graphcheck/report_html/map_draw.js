// The map's canvas: an axis with ticks and break marks, lanes for allocations, spans and
// freed ranges, the references of one graph aggregated per pixel column (never one element
// per reference, so 10k-node graphs stay fast), and arrows from a stale reference up to where
// its owner went, labelled with the owner where there is room.
// The axis lane has two rows of labels: the gaps' sizes above, the addresses and offsets below.
var LANES = {axis: [0, 36], alloc: [40, 62], spans: [66, 92], freed: [96, 106],
             arrows: [110, 144], refs: [148, 248]};
var LANE_NAMES = {alloc: "allocations", spans: "spans", freed: "freed", refs: "references"};
var MAP_HEIGHT = 256;

function MapView(canvas, axis) {
  this.canvas = canvas;
  this.axis = axis;
  this.v0 = 0;
  this.v1 = axis.total;
  this.columns = [];  // per CSS pixel: indexes of the references drawn there (hover)
  this.focus = null;  // an address marked on the map (a finding shown from the table)
  this.labels = 0;    // arrows labelled in the last drawing
}

MapView.prototype.setScene = function (scene) { this.scene = scene; };

MapView.prototype.x = function (address) {
  return (this.axis.toVirtual(address) - this.v0) / (this.v1 - this.v0) * this.width;
};

MapView.prototype.addressAt = function (x) {
  return this.axis.toAddress(this.v0 + x / this.width * (this.v1 - this.v0));
};

MapView.prototype.zoom = function (factor, atX) {
  var at = this.v0 + (atX === undefined ? 0.5 : atX / this.width) * (this.v1 - this.v0);
  var width = Math.min(Math.max((this.v1 - this.v0) * factor, 8), this.axis.total * 1.1);
  var left = (at - this.v0) / (this.v1 - this.v0);
  this.v0 = at - left * width;
  this.v1 = this.v0 + width;
  this.draw();
};

MapView.prototype.pan = function (fraction) {
  var shift = (this.v1 - this.v0) * fraction;
  this.v0 += shift;
  this.v1 += shift;
  this.draw();
};

MapView.prototype.zoomTo = function (begin, end) {
  var a = this.axis.toVirtual(begin), b = this.axis.toVirtual(end);
  var margin = Math.max((b - a) * 0.1, 4);
  this.v0 = a - margin;
  this.v1 = b + margin;
  this.draw();
};

MapView.prototype.whole = function () {
  var pad = this.axis.total * 0.01;
  this.v0 = -pad;
  this.v1 = this.axis.total + pad;
  this.draw();
};

MapView.prototype.rects = function (ctx, items, lane, colorOf, labelOf) {
  var width = this.width, top = lane[0], bottom = lane[1];
  items.forEach(function (item) {
    var x0 = this.x(item.begin), x1 = this.x(item.end);
    if (x1 < 0 || x0 > width) { return; }
    x0 = Math.max(x0, -1);
    x1 = Math.min(x1, width + 1);
    ctx.fillStyle = colorOf(item);
    ctx.fillRect(x0, top, Math.max(x1 - x0, 1), bottom - top);
    if (x1 - x0 > 5) {
      ctx.strokeStyle = "rgba(0,0,0,0.25)";
      ctx.strokeRect(x0 + 0.5, top + 0.5, x1 - x0 - 1, bottom - top - 1);
    }
    var label = labelOf(item);
    if (label && x1 - x0 > 40 && bottom - top > 14) {
      ctx.save();
      ctx.beginPath();
      ctx.rect(x0 + 2, top, x1 - x0 - 4, bottom - top);
      ctx.clip();
      ctx.fillStyle = "#1d232b";
      ctx.fillText(label, Math.max(x0, 0) + 3, bottom - 7);
      ctx.restore();
    }
  }, this);
};

// Hatching for freed ranges: told apart by pattern, not only by color.
MapView.prototype.hatch = function (ctx) {
  var tile = document.createElement("canvas");
  tile.width = tile.height = 6;
  var t = tile.getContext("2d");
  t.fillStyle = "#ffffff";
  t.fillRect(0, 0, 6, 6);
  t.strokeStyle = OWNER_COLORS.freed;
  t.lineWidth = 1.5;
  t.beginPath();
  t.moveTo(0, 6);
  t.lineTo(6, 0);
  t.stroke();
  return ctx.createPattern(tile, "repeat");
};

// Counts each verdict per pixel column over the references in view; a column's bar takes
// the color of its worst verdict and a height that grows with the log of its count.
MapView.prototype.drawRefs = function (ctx) {
  var refs = this.scene.graph.refs, verdicts = this.scene.verdicts.verdicts;
  var width = Math.ceil(this.width);
  var worst = new Int8Array(width).fill(-1);
  var counts = new Int32Array(width);
  this.columns = new Array(width);
  for (var i = 0; i < refs.length; ++i) {
    var x = Math.floor(this.x(refs[i].address));
    if (x < 0 || x >= width) { continue; }
    var rank = rankOf(verdicts[i]);
    if (rank > worst[x]) { worst[x] = rank; }
    counts[x] += 1;
    if (!this.columns[x]) { this.columns[x] = []; }
    if (this.columns[x].length < 12) { this.columns[x].push(i); }
  }
  var base = LANES.refs[1], room = LANES.refs[1] - LANES.refs[0];
  for (var c = 0; c < width; ++c) {
    if (!counts[c]) { continue; }
    var verdict = RANKED_VERDICTS[worst[c]];
    var height = Math.min(room, 10 + 12 * Math.log2(counts[c]));
    ctx.fillStyle = VERDICT_COLORS[verdict];
    // Findings get 3 pixels so that one among thousands of ok references shows.
    var w = isFinding(verdict) ? 3 : 1;
    ctx.fillRect(c - (w >> 1), base - height, w, height);
  }
};

// ok verdicts rank below findings; findings in reverse precedence, so that the max wins.
var RANKED_VERDICTS = ["allowed", "input", "graph", "runtime", "registered",
                       "unregistered", "dangling", "lost", "stale"];
function rankOf(verdict) { return RANKED_VERDICTS.indexOf(verdict); }

// Arrows from each moved owner's stale reference (the top of its bar) up to the same offset
// in the owner's new span. Arrows that land on the same pixels are drawn once, with their
// count; labels go where they do not overlap (zoomed out: few or none; zoomed in: each).
MapView.prototype.drawArrows = function (ctx) {
  var merged = new Map();
  this.scene.arrows.forEach(function (arrow) {
    var x0 = Math.round(this.x(arrow.from)), x1 = Math.round(this.x(arrow.to));
    if (Math.max(x0, x1) < 0 || Math.min(x0, x1) > this.width) { return; }
    var key = x0 + ":" + x1;
    if (!merged.has(key)) { merged.set(key, {x0: x0, x1: x1, owners: []}); }
    merged.get(key).owners.push(arrow.owner);
  }, this);
  var drawn = Array.from(merged.values()).sort(function (a, b) { return a.x1 - b.x1; });
  ctx.strokeStyle = VERDICT_COLORS.stale;
  ctx.fillStyle = VERDICT_COLORS.stale;
  ctx.lineWidth = 1.5;
  var top = LANES.spans[1] + 1, bottom = LANES.refs[0];
  drawn.forEach(function (a) {
    ctx.beginPath();
    ctx.moveTo(a.x0, bottom);
    ctx.bezierCurveTo(a.x0, bottom - 18, a.x1, top + 18, a.x1, top + 6);
    ctx.stroke();
    ctx.beginPath();
    ctx.moveTo(a.x1, top);
    ctx.lineTo(a.x1 - 4, top + 7);
    ctx.lineTo(a.x1 + 4, top + 7);
    ctx.closePath();
    ctx.fill();
  });
  ctx.lineWidth = 1;
  var taken = -Infinity;
  this.labels = 0;
  ctx.font = "11px system-ui, sans-serif";
  drawn.forEach(function (a) {
    var text = a.owners.length > 1 ? a.owners.length + " owners" : a.owners[0];
    var w = ctx.measureText(text).width + 6;
    var left = Math.min(Math.max(a.x1 + 6, 0), this.width - w);
    if (left <= taken) { return; }
    ctx.fillStyle = "rgba(255,255,255,0.85)";
    ctx.fillRect(left, LANES.arrows[0] + 3, w, 14);
    ctx.fillStyle = VERDICT_COLORS.stale;
    ctx.fillText(text, left + 3, LANES.arrows[0] + 14);
    taken = left + w + 4;
    this.labels += 1;
  }, this);
};

// The axis: a tick with its address at each cluster's start, offsets inside wide clusters,
// and a break mark (two slashes) at each squeezed gap, labelled with the bytes it leaves out.
// Labels are placed left to right where they do not overlap the one before.
MapView.prototype.drawAxis = function (ctx) {
  var y = LANES.axis[1] - 2, width = this.width, axis = this.axis;
  ctx.strokeStyle = "#8a949e";
  ctx.font = "10.5px ui-monospace, Menlo, Consolas, monospace";
  ctx.beginPath();
  ctx.moveTo(0, y);
  ctx.lineTo(width, y);
  ctx.stroke();
  var labels = [];
  axis.clusters.forEach(function (c) {
    var x0 = this.x(c.begin), x1 = this.x(c.end);
    if (x1 < 0 || x0 > width) { return; }
    clusterTicks(c, x0, x1, 120).forEach(function (tick) {
      if (tick.x < -1 || tick.x > width) { return; }
      ctx.beginPath();
      ctx.moveTo(tick.x + 0.5, y - (tick.major ? 7 : 4));
      ctx.lineTo(tick.x + 0.5, y);
      ctx.stroke();
      labels.push({x: tick.x + 2, text: tick.label, color: "#4b5561", rank: tick.major ? 0 : 1,
                   y: y - 9});
    });
  }, this);
  var gapLabels = [];
  axis.breaks().forEach(function (gap) {
    var xm = (this.x(gap.begin) + this.x(gap.end)) / 2;
    if (xm < 0 || xm > width) { return; }
    ctx.save();
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(xm - 4, y - 5, 8, 10);
    ctx.strokeStyle = "#4b5561";
    ctx.beginPath();
    ctx.moveTo(xm - 5, y + 4);
    ctx.lineTo(xm - 1, y - 4);
    ctx.moveTo(xm + 1, y + 4);
    ctx.lineTo(xm + 5, y - 4);
    ctx.stroke();
    ctx.restore();
    var text = "// " + formatBytes(gap.end - gap.begin);
    gapLabels.push({x: xm - ctx.measureText(text).width / 2, text: text, color: "#8a5a00",
                    rank: 0, y: 11});
  }, this);
  placeLabels(ctx, gapLabels, width);
  placeLabels(ctx, labels, width);
};

// Draws `labels` ({x, y, text, color, rank}) by rank, then left to right, each where it
// overlaps none placed before: cluster starts before offsets.
function placeLabels(ctx, labels, width) {
  labels.sort(function (a, b) { return a.rank - b.rank || a.x - b.x; });
  var placed = [];
  labels.forEach(function (label) {
    var w = ctx.measureText(label.text).width;
    var left = Math.min(Math.max(label.x, 0), width - w - 2);
    if (placed.some(function (p) { return left < p[1] + 6 && p[0] < left + w + 6; })) { return; }
    placed.push([left, left + w]);
    ctx.fillStyle = label.color;
    ctx.fillText(label.text, left, label.y);
  });
}

MapView.prototype.drawFocus = function (ctx) {
  if (this.focus === null) { return; }
  var x = Math.round(this.x(this.focus)) + 0.5;
  if (x < 0 || x > this.width) { return; }
  ctx.save();
  ctx.strokeStyle = "#1d232b";
  ctx.setLineDash([3, 3]);
  ctx.beginPath();
  ctx.moveTo(x, LANES.alloc[0]);
  ctx.lineTo(x, LANES.refs[1]);
  ctx.stroke();
  ctx.setLineDash([]);
  ctx.fillStyle = "#1d232b";
  ctx.beginPath();
  ctx.moveTo(x - 6, LANES.refs[1] + 8);
  ctx.lineTo(x + 6, LANES.refs[1] + 8);
  ctx.lineTo(x, LANES.refs[1] + 1);
  ctx.fill();
  ctx.restore();
};

MapView.prototype.drawLaneNames = function (ctx) {
  ctx.font = "600 10.5px system-ui, sans-serif";
  Object.keys(LANE_NAMES).forEach(function (lane) {
    var text = LANE_NAMES[lane];
    var w = ctx.measureText(text).width + 6;
    ctx.fillStyle = "rgba(255,255,255,0.8)";
    ctx.fillRect(0, LANES[lane][0], w, 13);
    ctx.fillStyle = "#4b5561";
    ctx.fillText(text, 3, LANES[lane][0] + 10);
  });
};

MapView.prototype.draw = function () {
  var canvas = this.canvas, ratio = window.devicePixelRatio || 1;
  this.width = canvas.clientWidth || 800;
  var height = canvas.clientHeight || MAP_HEIGHT;
  canvas.width = Math.round(this.width * ratio);
  canvas.height = Math.round(height * ratio);
  var ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, this.width, height);
  ctx.font = "11px system-ui, sans-serif";
  var scene = this.scene;
  this.rects(ctx, scene.epoch ? scene.epoch.allocations : [], LANES.alloc,
             function (a) { return OWNER_COLORS[a.kind]; },
             function (a) { return a.label || a.pool; });
  this.rects(ctx, scene.epoch ? scene.epoch.spans : [], LANES.spans,
             function (s) { return OWNER_COLORS[s.kind] || OWNER_COLORS.allocation; },
             function (s) { return s.name; });
  var pattern = this.hatch(ctx);
  this.rects(ctx, scene.freed, LANES.freed, function () { return pattern; },
             function () { return ""; });
  this.drawRefs(ctx);
  this.drawArrows(ctx);
  this.drawAxis(ctx);
  this.drawFocus(ctx);
  this.drawLaneNames(ctx);
  setText("count-map-arrow-labels", this.labels);
  setText("map-range", hex(this.addressAt(0)) + " \u2013 " + hex(this.addressAt(this.width)) +
          " (" + formatBytes(Math.max(this.addressAt(this.width) - this.addressAt(0), 0)) + ")");
};

// What is under (x, y): references near the column, else the span, allocation or freed
// range at that address.
MapView.prototype.hit = function (x, y) {
  var scene = this.scene, address = this.addressAt(x);
  if (y < LANES.axis[1]) {
    var gaps = this.axis.breaks().filter(function (gap) {
      return Math.abs((this.x(gap.begin) + this.x(gap.end)) / 2 - x) <= 6;
    }, this);
    return gaps.length ? {gap: gaps[0]} : null;
  }
  if (y >= LANES.arrows[0]) {
    var refs = [];
    for (var c = Math.floor(x) - 3; c <= Math.floor(x) + 3; ++c) {
      (this.columns[c] || []).forEach(function (i) { refs.push(i); });
    }
    return refs.length ? {refs: refs.slice(0, 12), more: refs.length > 12} : null;
  }
  var epoch = scene.epoch;
  if (epoch && y >= LANES.spans[0] && y < LANES.spans[1]) {
    var span = epoch.spanIndex.find(address);
    return span ? {span: span} : null;
  }
  if (epoch && y >= LANES.alloc[0] && y < LANES.alloc[1]) {
    var allocation = epoch.allocationIndex.find(address);
    return allocation ? {allocation: allocation} : null;
  }
  var freed = scene.freed.filter(function (a) { return a.begin <= address && address < a.end; });
  return freed.length ? {freed: freed[0]} : null;
};
