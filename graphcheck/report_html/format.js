// Shared vocabulary and helpers of the report page: verdicts, owner kinds, their colors,
// address and size formatting, and a small DOM builder.
var VERDICTS = ["registered", "runtime", "graph", "input", "allowed",
                "unregistered", "dangling", "stale", "lost"];
var FINDING_VERDICTS = ["stale", "lost", "dangling", "unregistered"];  // precedence order
var VERDICT_COLORS = {
  registered: "#43a047", runtime: "#26a69a", graph: "#7e57c2", input: "#1e88e5",
  allowed: "#9e9d24", unregistered: "#ef6c00", dangling: "#c62828", stale: "#d81b60",
  lost: "#6d4c41"
};
// Owner kinds of spans, and the two kinds of memory no span covers.
var OWNER_COLORS = {
  parameter: "#a5d6a7", buffer: "#c5e1a5", runtime: "#80cbc4", graph: "#b39ddb",
  input: "#90caf9", unregistered: "#ffcc80", allocation: "#e3e7ec", freed: "#ef9a9a"
};
var OK_VERDICT_OF_KIND = {
  parameter: "registered", buffer: "registered", runtime: "runtime", graph: "graph",
  input: "input"
};

function isFinding(verdict) { return FINDING_VERDICTS.indexOf(verdict) >= 0; }

// Addresses arrive as "0x..." strings. Numbers are exact up to 2^53, far above any user-space
// address; drawing needs no more.
function parseAddress(text) { return parseInt(text.slice(2), 16); }
function hex(value) { return "0x" + Math.round(value).toString(16); }

function formatBytes(size) {
  var units = ["B", "KiB", "MiB", "GiB", "TiB"];
  var unit = 0;
  while (size >= 1024 && unit < units.length - 1) { size /= 1024; unit += 1; }
  return (unit === 0 ? String(size) : size.toFixed(size < 10 ? 1 : 0)) + " " + units[unit];
}

function plural(count, word) { return count + " " + word + (count === 1 ? "" : "s"); }

// el("td", {class: "num"}, "3") makes a td element with that class and text; children are
// nodes or text.
function el(tag, attrs, children) {
  var node = document.createElement(tag);
  Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
  [].concat(children === undefined ? [] : children).forEach(function (child) {
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  });
  return node;
}

function setText(id, text) { document.getElementById(id).textContent = String(text); }

function swatch(color) { return el("span", {class: "swatch", style: "background:" + color}); }

// Where a finding or reference sits in its node: "param 2 +8" or "operand src".
function findingPlace(finding) {
  if (finding.operand) { return "operand " + finding.operand; }
  if (finding.param !== null && finding.param !== undefined) {
    return "param " + finding.param + " +" + finding.offset;
  }
  return "";
}
