// How names are shown: kernel names shortened to the function's own name (the whole
// demangled name, templates and arguments included, on hover and in a row's details), long
// identifiers broken only at their separators, and node ids as "graph:number".

// "void at::native::(anonymous namespace)::indexSelectSmallIndex<float, long>(TensorInfo<..>)"
// -> "indexSelectSmallIndex": what is inside <...> and (...) goes (templates, arguments,
// lambdas in template arguments), then the return type and the trailing qualifiers, then the
// namespaces and classes. A name the rule would empty is kept whole.
var QUALIFIERS = {"const": 1, "volatile": 1, "&": 1, "&&": 1, "noexcept": 1};
function shortKernel(name) {
  if (!name || !/[<(:]/.test(name)) { return name; }
  var text = name.split("(anonymous namespace)").join("anonymous_namespace");
  var kept = "", depth = 0;
  for (var i = 0; i < text.length; ++i) {
    var c = text[i];
    if (c === "<" || c === "(") {
      depth += 1;
    } else if ((c === ">" || c === ")") && depth > 0) {
      depth -= 1;
    } else if (depth === 0) {
      kept += c;
    }
  }
  var tokens = kept.trim().split(/\s+/);
  while (tokens.length > 1 && QUALIFIERS[tokens[tokens.length - 1]]) { tokens.pop(); }
  var parts = tokens[tokens.length - 1].split("::").filter(function (p) { return p; });
  var short = parts.length ? parts[parts.length - 1] : "";
  return /^[A-Za-z_$~][\w$~]*$/.test(short) ? short : name;
}

// The name a finding or reference is listed under: a kernel's short name, an op's name as it
// is ("aten::mm"), else the node type.
function displayName(name, nodeType) {
  if (!name) { return (nodeType || "node") + " node"; }
  return nodeType === "kernel" || nodeType === undefined ? shortKernel(name) : name;
}

// A span of `name` (hover: the whole name) for tables.
function kernelLabel(name, nodeType) {
  var short = displayName(name, nodeType);
  return el("span", {class: "kernel", title: name && short !== name ? name : null,
                     "data-node-type": nodeType || "kernel"}, breakable(short));
}

// Text with a line-break opportunity after each separator of an identifier (. :: / _ , and
// spaces), so that long owner or kernel names wrap between their parts, never inside a word.
function breakable(text) {
  var span = el("span", {class: "name"});
  var pieces = String(text).split(/(::|[._\/,])/);
  pieces.forEach(function (piece, i) {
    if (!piece) { return; }
    span.appendChild(document.createTextNode(piece));
    if (i % 2 === 1) { span.appendChild(document.createElement("wbr")); }
  });
  return span;
}

// Node ids of one graph as "graph:number": the node's position in the graph, depth-first (a
// node, then its bodies' nodes), from the writer's runs [[first number, first id, count]].
// CUDA numbers a graph's nodes with its own id in the high bits (17179869195): 1:11 reads
// better. An id two nodes share (a body's node and its parent's) names the first.
function NodeNumbers(graph) {
  this.graph = graph.id;
  this.runs = (graph.node_runs || []).slice().sort(function (a, b) { return a[1] - b[1]; });
}
NodeNumbers.prototype.number = function (id) {
  var runs = this.runs, lo = 0, hi = runs.length - 1, found = -1;
  while (lo <= hi) {
    var mid = (lo + hi) >> 1;
    if (runs[mid][1] <= id) { found = mid; lo = mid + 1; } else { hi = mid - 1; }
  }
  if (found >= 0 && id < runs[found][1] + runs[found][2]) {
    return runs[found][0] + (id - runs[found][1]);
  }
  return null;
};
NodeNumbers.prototype.label = function (id) {
  var number = this.number(id);
  return this.graph + ":" + (number === null ? id : number);
};

// Every graph's numbering, by graph id; a graph the page has no runs for shows raw ids.
function nodeNumbering(snapshot) {
  var byGraph = new Map();
  (snapshot ? snapshot.graphs : []).forEach(function (g) {
    byGraph.set(g.id, new NodeNumbers(g));
  });
  return function (graph, node) {
    var numbers = byGraph.get(graph);
    return numbers ? numbers.label(node) : graph + ":" + node;
  };
}

// A node's label with its raw id on hover: <span title="graph 1, node id 17179869195">1:11</span>.
function nodeLabel(page, graph, node) {
  return el("span", {class: "node", title: "graph " + graph + ", node id " + node},
            page.nodeLabel(graph, node));
}
