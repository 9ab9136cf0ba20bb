// The map section: the graph selector, zoom buttons, mouse (wheel, drag, hover, click,
// double-click) and keyboard (+ - arrows 0) on the canvas, the details below it, and the links
// between the map and the findings table: a finding's "map" button zooms to its reference, a
// click on a reference opens its finding's row.
function describeRef(page, i) {
  var graph = page.graph, ref = graph.refs[i], verdicts = page.verdicts();
  var verdict = verdicts.verdicts[i];
  var place = ref.param >= 0 ? "param " + ref.param + " +" + ref.place : "operand " + ref.place;
  var range = ref.size ? ref.hex + " \u2013 " + hex(ref.address + ref.size) + " (" +
                         formatBytes(ref.size) + ")" : ref.hex;
  var lines = [el("div", {}, [swatch(VERDICT_COLORS[verdict]), el("b", {}, verdict), " node ",
                              nodeLabel(page.state, graph.id, ref.node), " ",
                              kernelLabel(ref.name), " \u00b7 " + place +
                              (ref.access !== "unknown" ? " \u00b7 " + ref.access : "")]),
               el("div", {class: "mono"}, range)];
  var findings = (verdicts.findings[i] || []).map(function (j) {
    return verdicts.report.findings[j];
  });
  findings.forEach(function (f) {
    lines.push(el("div", {}, "owner " + (f.owner || "(none)") + " (" +
                             (f.owner_kind || "allocation label") + "): " + f.detail));
  });
  // The fix once, however many findings share it.
  distinct(findings.map(function (f) { return f.fix; })).forEach(function (fix) {
    lines.push(el("div", {class: "muted"}, "fix: " + fix));
  });
  if (!findings.length) {
    var span = page.epoch() ? page.epoch().spanIndex.find(ref.address) : null;
    lines.push(el("div", {class: "muted"}, span ? "owner " + span.name + " (" + span.kind + ")"
                                                 : "no span"));
  }
  return el("div", {class: "ref"}, lines);
}

function describeHit(page, hit) {
  if (hit.refs) {
    var parts = hit.refs.map(function (i) { return describeRef(page, i); });
    if (hit.more) { parts.push(el("div", {class: "muted"}, "more references here: zoom in")); }
    return parts;
  }
  if (hit.gap) {
    return [el("div", {}, "squeezed: " + formatBytes(hit.gap.end - hit.gap.begin) +
                          " with nothing drawn in it"),
            el("div", {class: "mono"}, hex(hit.gap.begin) + " \u2013 " + hex(hit.gap.end))];
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

function MapPage(state) {
  var data = state.data;
  this.state = state;
  this.epochs = new Map();
  data.snapshot.epochs.forEach(function (raw) { this.epochs.set(raw.label, epochModel(raw)); },
                               this);
  this.graphs = data.snapshot.graphs.map(function (raw) {
    return graphModel(raw, data.snapshot.names);
  });
  this.view = new MapView(document.getElementById("map-canvas"),
                          new Axis(axisRanges(Array.from(this.epochs.values()), this.graphs)));
  // The first graph with findings in the checked epoch is shown first.
  var checked = this.epochs.get(state.checked);
  this.graph = this.graphs.filter(function (g) {
    return refVerdicts(g, checked, data.report).findingRefs > 0;
  })[0] || this.graphs[0];
  setText("count-map-graphs", this.graphs.length);
  setText("count-map-references", this.graphs.reduce(function (n, g) {
    return n + g.refs.length;
  }, 0));
  setText("count-map-breaks", this.view.axis.breaks().length);
  this.controls();
  this.show();
  this.view.whole();
}

MapPage.prototype.epoch = function () { return this.epochs.get(this.state.selection.epoch); };
MapPage.prototype.verdicts = function () {
  return refVerdicts(this.graph, this.epoch(), this.state.report());
};

// Redraws for the selection: the shown epoch's spans, allocations, freed ranges, verdicts
// and moved owners.
MapPage.prototype.show = function () {
  var state = this.state;
  var report = state.report();
  var epoch = this.epoch();
  var baseline = this.epochs.get(state.data.report.baseline || this.graph.epoch);
  var verdicts = this.verdicts();
  var moved = movedOwners(this.graph, baseline, epoch, verdicts);
  this.view.setScene({graph: this.graph, epoch: epoch, freed: freedRanges(baseline, epoch),
                      arrows: moved.arrows, verdicts: verdicts});
  setText("count-map-findings", this.graphs.reduce(function (n, g) {
    return n + refVerdicts(g, epoch, report).findingRefs;
  }, 0));
  setText("count-map-arrows", moved.arrows.length);
  setText("count-map-moved-references", moved.references);
  setText("map-epoch", state.selection.epoch);
  if (this.view.width) { this.view.draw(); }
};

// Shows finding `f` of the shown epoch on the map: its graph, zoomed to its bytes, marked.
MapPage.prototype.focusFinding = function (f) {
  var graph = this.graphs.filter(function (g) { return g.id === f.graph; })[0];
  if (!graph) { return false; }
  if (graph !== this.graph) {
    this.graph = graph;
    document.getElementById("map-graph").value = String(this.graphs.indexOf(graph));
    this.show();
  }
  var address = parseAddress(f.range_begin || f.address);
  var size = Math.max(f.range_size || 0, 1);
  var around = Math.max(size * 8, 4096);
  this.view.focus = address;
  this.view.zoomTo(Math.max(address - around, 0), address + size + around);
  document.getElementById("map-section").scrollIntoView({block: "nearest"});
  return true;
};

// A click on references: the details below the map, and the first one with a finding opens
// its row in the table.
MapPage.prototype.select = function (hit) {
  fill(document.getElementById("map-details"), hit ? describeHit(this, hit) : []);
  if (!hit || !hit.refs) { return; }
  var verdicts = this.verdicts();
  for (var k = 0; k < hit.refs.length; ++k) {
    var about = verdicts.findings[hit.refs[k]];
    if (about && this.state.table) {
      this.view.focus = this.graph.refs[hit.refs[k]].address;
      this.view.draw();
      this.state.table.reveal(about[0]);
      return;
    }
  }
};

MapPage.prototype.controls = function () {
  var page = this, view = this.view, canvas = view.canvas;
  var tooltip = document.getElementById("map-tooltip");
  var select = document.getElementById("map-graph");
  this.graphs.forEach(function (g, i) {
    var option = el("option", {value: String(i)}, "graph " + g.id + " (" + plural(g.nodes, "node") +
                                                  ", " + plural(g.refs.length, "reference") + ")");
    option.selected = g === page.graph;
    select.appendChild(option);
  });
  select.addEventListener("change", function () {
    page.graph = page.graphs[Number(select.value)];
    page.show();
  });
  document.getElementById("map-zoom-in").onclick = function () { view.zoom(0.5); };
  document.getElementById("map-zoom-out").onclick = function () { view.zoom(2); };
  document.getElementById("map-zoom-all").onclick = function () { view.whole(); };
  canvas.addEventListener("wheel", function (event) {
    event.preventDefault();
    view.zoom(Math.exp(Math.max(-3, Math.min(3, event.deltaY * 0.002))), event.offsetX);
  }, {passive: false});
  canvas.addEventListener("keydown", function (event) {
    var keys = {"+": function () { view.zoom(0.5); }, "=": function () { view.zoom(0.5); },
                "-": function () { view.zoom(2); }, "_": function () { view.zoom(2); },
                ArrowLeft: function () { view.pan(-0.2); },
                ArrowRight: function () { view.pan(0.2); },
                "0": function () { view.whole(); }, Home: function () { view.whole(); }};
    if (keys[event.key]) { event.preventDefault(); keys[event.key](); }
  });
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
      fill(tooltip, describeHit(page, hit));
      tooltip.style.left = Math.max(Math.min(event.offsetX + 14, view.width - 360), 0) + "px";
      tooltip.style.top = (event.offsetY + 14) + "px";
    }
  });
  canvas.addEventListener("mouseleave", function () { tooltip.style.display = "none"; });
  canvas.addEventListener("click", function (event) {
    if (drag && drag.moved) { return; }
    page.select(view.hit(event.offsetX, event.offsetY));
  });
  canvas.addEventListener("dblclick", function (event) {
    var hit = view.hit(event.offsetX, event.offsetY);
    var item = hit && (hit.span || hit.allocation || hit.freed || hit.gap);
    if (hit && hit.refs) { item = page.graph.refs[hit.refs[0]]; }
    if (item) { view.zoomTo(item.begin !== undefined ? item.begin : item.address, item.end); }
  });
  var legend = document.getElementById("map-legend");
  Object.keys(OWNER_COLORS).forEach(function (kind) {
    legend.appendChild(el("span", {"data-kind": kind},
                          [swatch(kind === "freed" ? null : OWNER_COLORS[kind],
                                  kind === "freed" ? "hatched" : null), kind]));
  });
  VERDICTS.forEach(function (v) {
    legend.appendChild(el("span", {"data-verdict": v, "data-color": VERDICT_COLORS[v]},
                          [swatch(VERDICT_COLORS[v]), "reference: " + v]));
  });
  window.addEventListener("resize", function () { view.draw(); });
};
