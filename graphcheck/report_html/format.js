// Shared vocabulary and helpers of the report page: verdicts, owner kinds, their colors,
// address and size formatting, and a small DOM builder.
var VERDICTS = ["registered", "runtime", "graph", "input", "allowed",
                "unregistered", "dangling", "stale", "lost"];
var FINDING_VERDICTS = ["stale", "lost", "dangling", "unregistered"];  // precedence order
// Finding colors stay apart for common color blindness: blue, rose, near-black and olive
// yellow differ by at least 39 (CIELAB) under simulated protanopia, deuteranopia and
// tritanopia (the browser tier checks 30); dangling's near-black reads as "points at nothing".
// Freed ranges are hatched, not a fifth color. ok verdicts are quieter.
var VERDICT_COLORS = {
  registered: "#009e73", runtime: "#56b4e9", graph: "#9a9a9a", input: "#b39ddb",
  allowed: "#b7d7a8", unregistered: "#ccbb44", dangling: "#1d1d1d", stale: "#0072b2",
  lost: "#cc6677"
};
// Owner kinds of spans, and the kinds of memory no span covers.
var OWNER_COLORS = {
  parameter: "#a6dbc8", buffer: "#cde9dd", runtime: "#bfe1f5", graph: "#dcdcdc",
  input: "#ddd2f0", unregistered: "#ece3a0", allocation: "#eef1f4", freed: "#6b6b6b"
};
var OK_VERDICT_OF_KIND = {
  parameter: "registered", buffer: "registered", runtime: "runtime", graph: "graph",
  input: "input"
};
var KIND_NOUNS = {
  parameter: ["parameter", "parameters"], buffer: ["buffer", "buffers"],
  runtime: ["runtime span", "runtime spans"], graph: ["graph span", "graph spans"],
  // An owner with no kind is an allocation's label (a census path, a creation site), as the
  // text report says: one label may cover several tensors.
  input: ["input", "inputs"], "": ["allocation label", "allocation labels"]
};

function isFinding(verdict) { return FINDING_VERDICTS.indexOf(verdict) >= 0; }
function precedence(verdict) {
  var at = FINDING_VERDICTS.indexOf(verdict);
  return at < 0 ? FINDING_VERDICTS.length : at;
}

// Addresses arrive as "0x..." strings. Numbers are exact up to 2^53, far above any user-space
// address; drawing needs no more.
function parseAddress(text) { return parseInt(text.slice(2), 16); }
function hex(value) { return "0x" + Math.max(Math.round(value), 0).toString(16); }

function formatBytes(size) {
  var units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
  var unit = 0;
  while (size >= 1024 && unit < units.length - 1) { size /= 1024; unit += 1; }
  return (unit === 0 ? String(Math.round(size)) : size.toFixed(size < 10 ? 1 : 0)) + " " +
         units[unit];
}

function plural(count, word, many) {
  return count + " " + (count === 1 ? word : (many || word + "s"));
}

// el("td", {class: "num"}, "3") makes a td element with that class and text; children are
// nodes or text. An attribute whose value is null or undefined is left out.
function el(tag, attrs, children) {
  var node = document.createElement(tag);
  Object.keys(attrs || {}).forEach(function (key) {
    if (attrs[key] !== null && attrs[key] !== undefined) { node.setAttribute(key, attrs[key]); }
  });
  [].concat(children === undefined ? [] : children).forEach(function (child) {
    if (child === null || child === undefined) { return; }
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  });
  return node;
}

function setText(id, text) { document.getElementById(id).textContent = String(text); }

// Replaces the children of `node` with `children` (nodes or text; null is skipped).
function fill(node, children) {
  node.textContent = "";
  children.forEach(function (child) {
    if (child === null || child === undefined) { return; }
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  });
}

function swatch(color, extraClass) {
  return el("span", {class: "swatch" + (extraClass ? " " + extraClass : ""),
                     style: color ? "background:" + color : null});
}

function button(text, attrs, onClick) {
  var node = el("button", Object.assign({type: "button"}, attrs || {}), text);
  node.addEventListener("click", onClick);
  return node;
}

// Where a finding sits in its node: "param 2 +8" or "operand src".
function findingPlace(finding) {
  if (finding.operand) { return "operand " + finding.operand; }
  if (finding.param !== null && finding.param !== undefined) {
    return "param " + finding.param + " +" + finding.offset;
  }
  return "";
}
