// The map's canvas: lanes for allocations, spans and freed ranges, the references of one
// graph aggregated per pixel column (never one element per reference, so 10k-node graphs
// stay fast), and arrows from a stale reference to where its owner went.
var LANES = {axis: 12, alloc: [18, 40], spans: [46, 72], freed: [78, 88], arrows: 112,
             refs: [120, 222]};

function MapView(canvas, axis) {
  this.canvas = canvas;
  this.axis = axis;
  this.v0 = 0;
  this.v1 = axis.total;
  this.columns = [];  // per CSS pixel: indexes of the references drawn there (hover)
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

MapView.prototype.rects = function (ctx, items, top, bottom, colorOf, labelOf) {
  var width = this.width;
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
    if (label && x1 - x0 > 40) {
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

// Counts each verdict per pixel column over the references in view; a column's bar takes
// the color of its worst verdict and a height that grows with the log of its count.
MapView.prototype.drawRefs = function (ctx) {
  var refs = this.scene.graph.refs;
  var width = Math.ceil(this.width);
  var worst = new Int8Array(width).fill(-1);
  var counts = new Int32Array(width);
  this.columns = new Array(width);
  for (var i = 0; i < refs.length; ++i) {
    var x = Math.floor(this.x(refs[i].address));
    if (x < 0 || x >= width) { continue; }
    var rank = rankOf(refs[i].verdict);
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

MapView.prototype.drawArrows = function (ctx) {
  var seen = new Set();
  ctx.strokeStyle = VERDICT_COLORS.stale;
  ctx.fillStyle = VERDICT_COLORS.stale;
  ctx.lineWidth = 1.5;
  this.scene.arrows.forEach(function (arrow) {
    var x0 = Math.round(this.x(arrow.from)), x1 = Math.round(this.x(arrow.to));
    if (seen.has(x0 + ":" + x1) || (Math.max(x0, x1) < 0) || Math.min(x0, x1) > this.width) {
      return;
    }
    seen.add(x0 + ":" + x1);
    var y = LANES.arrows, lift = Math.min(30, 8 + Math.abs(x1 - x0) / 8);
    ctx.beginPath();
    ctx.moveTo(x0, y);
    ctx.quadraticCurveTo((x0 + x1) / 2, y - lift, x1, y);
    ctx.stroke();
    var dir = x1 >= x0 ? 1 : -1;
    ctx.beginPath();
    ctx.moveTo(x1, y);
    ctx.lineTo(x1 - 6 * dir, y - 5);
    ctx.lineTo(x1 - 2 * dir, y - 7);
    ctx.closePath();
    ctx.fill();
  }, this);
  ctx.lineWidth = 1;
};

MapView.prototype.draw = function () {
  var canvas = this.canvas, ratio = window.devicePixelRatio || 1;
  this.width = canvas.clientWidth || 800;
  var height = canvas.clientHeight || 230;
  canvas.width = Math.round(this.width * ratio);
  canvas.height = Math.round(height * ratio);
  var ctx = canvas.getContext("2d");
  ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  ctx.clearRect(0, 0, this.width, height);
  ctx.font = "11px system-ui, sans-serif";
  var scene = this.scene;
  this.rects(ctx, scene.epoch.allocations, LANES.alloc[0], LANES.alloc[1],
             function (a) { return OWNER_COLORS[a.kind]; },
             function (a) { return a.label || a.pool; });
  this.rects(ctx, scene.epoch.spans, LANES.spans[0], LANES.spans[1],
             function (s) { return OWNER_COLORS[s.kind] || OWNER_COLORS.allocation; },
             function (s) { return s.name; });
  this.rects(ctx, scene.freed, LANES.freed[0], LANES.freed[1],
             function () { return OWNER_COLORS.freed; }, function (a) { return a.label; });
  this.drawArrows(ctx);
  this.drawRefs(ctx);
  ctx.fillStyle = "#5f6b7a";
  ctx.fillText(hex(this.addressAt(0)), 4, LANES.axis - 2);
  var right = hex(this.addressAt(this.width));
  ctx.fillText(right, this.width - ctx.measureText(right).width - 4, LANES.axis - 2);
  ctx.fillText("references of graph " + scene.graph.id, 4, LANES.refs[1] + 4);
  setText("map-range", hex(this.addressAt(0)) + " \u2013 " + hex(this.addressAt(this.width)) +
          " (" + formatBytes(Math.max(this.addressAt(this.width) - this.addressAt(0), 0)) + ")");
};

// What is under (x, y): references near the column, else the span, allocation or freed
// range at that address.
MapView.prototype.hit = function (x, y) {
  var scene = this.scene, address = this.addressAt(x);
  if (y >= LANES.arrows - 20) {
    var refs = [];
    for (var c = Math.floor(x) - 3; c <= Math.floor(x) + 3; ++c) {
      (this.columns[c] || []).forEach(function (i) { refs.push(scene.graph.refs[i]); });
    }
    return refs.length ? {refs: refs.slice(0, 12), more: refs.length > 12} : null;
  }
  if (y >= LANES.spans[0] && y < LANES.spans[1]) {
    var span = scene.epoch.spanIndex.find(address);
    return span ? {span: span} : null;
  }
  if (y >= LANES.alloc[0] && y < LANES.alloc[1]) {
    var allocation = scene.epoch.allocationIndex.find(address);
    return allocation ? {allocation: allocation} : null;
  }
  var freed = scene.freed.filter(function (a) { return a.begin <= address && address < a.end; });
  return freed.length ? {freed: freed[0]} : null;
};
