// The page's entry: reads the embedded data, fills the tables, builds the map with its
// controls (graph, epoch steps, zoom, hover and click), and marks #page-ready when done.
function describeRef(ref) {
  var place = ref.param >= 0 ? "param " + ref.param + " +" + ref.place : "operand " + ref.place;
  var range = ref.size ? ref.hex + " \u2013 " + hex(ref.address + ref.size) + " (" +
                         formatBytes(ref.size) + ")" : ref.hex;
  var lines = [el("div", {}, [swatch(VERDICT_COLORS[ref.verdict]),
                              el("b", {}, ref.verdict), " node " + ref.node + " " +
                              (ref.name || "") + " \u00b7 " + place +
                              (ref.access !== "unknown" ? " \u00b7 " + ref.access : "")]),
               el("div", {class: "mono"}, range)];
  ref.findings.slice(0, 3).forEach(function (f) {
    lines.push(el("div", {}, "owner " + (f.owner || "(none)") + " (" + (f.owner_kind || "no span") +
                             "): " + f.detail));
    lines.push(el("div", {class: "muted"}, "fix: " + f.fix));
  });
  if (!ref.findings.length) {
    lines.push(el("div", {class: "muted"}, ref.span ? "owner " + ref.span.name + " (" +
                                                      ref.span.kind + ")" : "no span"));
  }
  return el("div", {style: "margin-bottom:4px"}, lines);
}

function describeHit(hit) {
  if (hit.refs) {
    var parts = hit.refs.map(describeRef);
    if (hit.more) { parts.push(el("div", {class: "muted"}, "more references here: zoom in")); }
    return parts;
  }
  var item = hit.span || hit.allocation || hit.freed;
  var what = hit.span ? hit.span.kind + " " + hit.span.name :
             hit.allocation ? (hit.allocation.kind === "unregistered" ? "unregistered " : "") +
                              "allocation, pool " + item.pool + ", generation " +
                              item.generation + (item.label ? ", " + item.label : "") :
             "freed since the baseline: " + (item.label || item.pool);
  return [el("div", {}, what),
          el("div", {class: "mono"}, item.hex + " \u2013 " + hex(item.end) + " (" +
                                     formatBytes(item.size) + ")"),
          el("div", {class: "muted"}, "double-click to zoom to it")];
}

function fill(node, children) {
  node.textContent = "";
  children.forEach(function (child) { node.appendChild(child); });
}

function MapPage(data) {
  var report = data.report;
  this.epochs = new Map();
  data.snapshot.epochs.forEach(function (raw) { this.epochs.set(raw.label, epochModel(raw)); },
                               this);
  var checked = this.epochs.get(report.epoch);
  this.graphs = data.snapshot.graphs.map(function (raw) {
    return graphModel(raw, data, checked);
  });
  var ranges = [];
  this.epochs.forEach(function (e) {
    e.spans.concat(e.allocations).forEach(function (r) { ranges.push([r.begin, r.end]); });
  });
  this.graphs.forEach(function (g) {
    g.refs.forEach(function (r) { ranges.push([r.address, r.end]); });
  });
  this.report = report;
  this.view = new MapView(document.getElementById("map-canvas"), new Axis(ranges));
  // The first graph with findings is shown first, in the checked epoch.
  this.graph = this.graphs.filter(function (g) { return g.findingRefs > 0; })[0] ||
               this.graphs[0];
  this.epochLabel = report.epoch;
  setText("count-map-graphs", this.graphs.length);
  setText("count-map-references", this.graphs.reduce(function (n, g) {
    return n + g.refs.length;
  }, 0));
  setText("count-map-findings", this.graphs.reduce(function (n, g) {
    return n + g.findingRefs;
  }, 0));
  this.controls();
  this.show();
  this.view.whole();
}

MapPage.prototype.show = function () {
  var epoch = this.epochs.get(this.epochLabel);
  var baseline = this.epochs.get(this.report.baseline || this.graph.epoch);
  var moved = movedOwners(this.graph, baseline, epoch);
  this.view.setScene({graph: this.graph, epoch: epoch, freed: freedRanges(baseline, epoch),
                      arrows: moved.arrows});
  setText("count-map-arrows", moved.arrows.length);
  setText("count-map-moved-references", moved.references);
  var steps = document.getElementById("map-steps");
  fill(steps, Array.from(this.epochs.keys()).map(function (label) {
    var tag = label === this.report.epoch ? " (checked)" :
              baseline && label === baseline.label ? " (baseline)" : "";
    var button = el("button", {type: "button", class: label === this.epochLabel ? "current" : ""},
                    label + tag);
    button.addEventListener("click", function () {
      this.epochLabel = label;
      this.show();
      this.view.draw();
    }.bind(this));
    return button;
  }, this));
};

MapPage.prototype.controls = function () {
  var page = this, view = this.view, canvas = view.canvas;
  var tooltip = document.getElementById("map-tooltip");
  var select = document.getElementById("map-graph");
  this.graphs.forEach(function (g, i) {
    var option = el("option", {value: String(i)}, "graph " + g.id + " (" + plural(g.nodes, "node") +
                                                  ", " + plural(g.refs.length, "reference") +
                                                  ", " + g.findingRefs + " with findings)");
    option.selected = g === page.graph;
    select.appendChild(option);
  });
  select.addEventListener("change", function () {
    page.graph = page.graphs[Number(select.value)];
    page.show();
    view.draw();
  });
  document.getElementById("map-zoom-in").onclick = function () { view.zoom(0.5); };
  document.getElementById("map-zoom-out").onclick = function () { view.zoom(2); };
  document.getElementById("map-zoom-all").onclick = function () { view.whole(); };
  canvas.addEventListener("wheel", function (event) {
    event.preventDefault();
    view.zoom(Math.exp(Math.max(-3, Math.min(3, event.deltaY * 0.002))), event.offsetX);
  }, {passive: false});
  var drag = null;
  canvas.addEventListener("mousedown", function (event) {
    drag = {x: event.offsetX, v0: view.v0, v1: view.v1, moved: false};
  });
  window.addEventListener("mouseup", function () { setTimeout(function () { drag = null; }, 0); });
  canvas.addEventListener("mousemove", function (event) {
    if (drag && event.buttons) {
      var shift = (event.offsetX - drag.x) / view.width * (drag.v1 - drag.v0);
      drag.moved = drag.moved || Math.abs(event.offsetX - drag.x) > 2;
      view.v0 = drag.v0 - shift;
      view.v1 = drag.v1 - shift;
      view.draw();
      return;
    }
    var hit = view.hit(event.offsetX, event.offsetY);
    tooltip.style.display = hit ? "block" : "none";
    if (hit) {
      fill(tooltip, describeHit(hit));
      tooltip.style.left = Math.min(event.offsetX + 14, view.width - 360) + "px";
      tooltip.style.top = (event.offsetY + 14) + "px";
    }
  });
  canvas.addEventListener("mouseleave", function () { tooltip.style.display = "none"; });
  canvas.addEventListener("click", function (event) {
    if (drag && drag.moved) { return; }
    var hit = view.hit(event.offsetX, event.offsetY);
    fill(document.getElementById("map-details"), hit ? describeHit(hit) : []);
  });
  canvas.addEventListener("dblclick", function (event) {
    var hit = view.hit(event.offsetX, event.offsetY);
    var item = hit && (hit.span || hit.allocation || hit.freed || hit.refs[0]);
    if (item) { view.zoomTo(item.begin !== undefined ? item.begin : item.address, item.end); }
  });
  var legend = document.getElementById("map-legend");
  Object.keys(OWNER_COLORS).forEach(function (kind) {
    legend.appendChild(el("span", {}, [swatch(OWNER_COLORS[kind]), kind]));
  });
  VERDICTS.forEach(function (v) {
    legend.appendChild(el("span", {}, [swatch(VERDICT_COLORS[v]), "reference: " + v]));
  });
  window.addEventListener("resize", function () { view.draw(); });
};

(function main() {
  try {
    var data = JSON.parse(document.getElementById("graphcheck-data").textContent);
    renderSummary(data.report);
    renderGroups(data.report);
    renderLists(data.report);
    if (data.snapshot) {
      document.getElementById("map-section").hidden = false;
      window.graphcheckMap = new MapPage(data);
    }
    setText("page-ready", "ready");
  } catch (error) {
    graphcheckRecordError(error && error.stack ? error.stack : error);
  }
})();
