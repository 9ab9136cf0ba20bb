// The zoo page's data model: the --json document (docs/zoo.md, "Output") read into one record
// per architecture with what the table and the details show, and a small DOM builder. The
// definitions of "with findings", "failure" and "fails the run" are here, once.

function el(tag, attrs, children) {
  var node = document.createElement(tag);
  Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
  [].concat(children === undefined ? [] : children).forEach(function (child) {
    if (child === null || child === undefined) { return; }
    node.appendChild(typeof child === "object" ? child : document.createTextNode(String(child)));
  });
  return node;
}

function setText(id, text) { document.getElementById(id).textContent = String(text); }

function list(value) { return Array.isArray(value) ? value : []; }

function pct(part, whole) { return whole ? (100 * part / whole).toFixed(1) + "%" : "-"; }

function secondsText(value) {
  return typeof value === "number" ? value.toFixed(1) + " s" : String(value);
}

// The id of an architecture's details section, and a link to it. Names are class names and
// Arch@variant; the fragment is percent-encoded so that any name still resolves.
function detailsId(name) { return "arch-" + name; }
function archLink(name) {
  return el("a", {href: "#" + encodeURIComponent(detailsId(name))}, breakable(name));
}

// A class name that may wrap between its words (LevitForImage|Classification) and after "@"
// or "_", so that a table of long names fits a window: text with <wbr> elements.
function breakable(name) {
  return String(name).split(/(?<=[a-z0-9])(?=[A-Z])|(?<=[@_])/).reduce(function (parts, piece, i) {
    return parts.concat(i ? [el("wbr", {}), piece] : [piece]);
  }, []);
}

// fnmatch.fnmatchcase, as report.evaluate matches an allowlist entry's architecture glob:
// "*" any run, "?" one character, "[...]" a set ("[!...]" its complement).
function globRegex(glob) {
  var out = "";
  for (var i = 0; i < glob.length; i += 1) {
    var c = glob[i];
    if (c === "*") { out += "[\\s\\S]*"; continue; }
    if (c === "?") { out += "[\\s\\S]"; continue; }
    if (c === "[") {
      var j = i + 1;
      if (glob[j] === "!") { j += 1; }
      if (glob[j] === "]") { j += 1; }
      j = glob.indexOf("]", j);
      if (j >= 0) {
        var body = glob.slice(i + 1, j).replace(/\\/g, "\\\\");
        out += "[" + (body[0] === "!" ? "^" + body.slice(1) : body) + "]";
        i = j;
        continue;
      }
    }
    out += c.replace(/[.*+?^${}()|[\]\\\/-]/g, "\\$&");
  }
  return new RegExp("^" + out + "$");
}

// An allowlist entry as str(AllowEntry) writes it, "Arch:path-glob" (Arch has no colon).
function allowEntry(text) {
  var colon = text.indexOf(":");
  var arch = colon >= 0 ? text.slice(0, colon) : text;
  return {text: text, arch: arch, regex: globRegex(arch)};
}

function stepOutcome(step) {
  if (String(step.replay === undefined ? "ran" : step.replay).indexOf("refused") === 0) {
    return "refused";
  }
  if (step.error) {
    return "not compared";
  }
  return step.outputs_equal ? "equal" : "different";
}

// One architecture of the document, with the figures of its row.
function archModel(name, a, stale, unverified) {
  var forward = a.forward || {};
  var capture = a.capture && typeof a.capture === "object" ? a.capture : null;
  var captureStatus = a.capture_status === null || a.capture_status === undefined ? "" :
                      String(a.capture_status);
  var built = a.status === "built";
  var steps = list(a.steps);
  var outcomes = {equal: 0, different: 0, refused: 0, "not compared": 0};
  steps.forEach(function (s) { outcomes[stepOutcome(s)] += 1; });
  var m = {
    name: name, a: a, built: built, findings: list(a.findings),
    owners: capture ? list(capture.unregistered) : [],
    allowlisted: list(a.allowlisted).length + list(a.capture_allowlisted).length,
    fresh: list(a.new_findings).length + list(a.capture_new_findings).length,
    stale: stale.filter(function (e) { return e.regex.test(name); }),
    unverified: unverified.filter(function (e) { return e.regex.test(name); }),
    steps: steps, outcomes: outcomes, captureStatus: captureStatus,
    forwardFailed: built && Boolean(forward.eligible) && !forward.ran,
    // "ran", "not run: ...", "not available in this build" are states; anything else
    // ("failed: ...", "Timeout: ...", "WorkerCrash: ...") is a failure of the capture phase.
    captureFailed: captureStatus !== "" && captureStatus !== "ran" &&
                   captureStatus.indexOf("not ") !== 0
  };
  m.statusText = built ? "built (" + a.level + ")" : String(a.status || "failed");
  m.forwardText = !built ? "-" : forward.ran ? "ran" : forward.eligible ? "failed" :
                  "not eligible";
  m.captureText = captureStatus === "ran" ? "ran" : m.captureFailed ? "failed" :
                  captureStatus.indexOf("not available") === 0 ? "n/a" :
                  captureStatus ? "not run" : "-";
  m.stepsText = steps.length ? outcomes.equal + " / " + outcomes.different +
                (outcomes.refused ? " / " + outcomes.refused + " refused" : "") +
                (outcomes["not compared"] ? " / " + outcomes["not compared"] + " not compared" :
                 "") : "-";
  m.hasFindings = m.findings.length > 0 || m.owners.length > 0;
  m.failure = !built || m.forwardFailed || m.captureFailed;
  // What makes the zoo exit 1: a finding or owner not on the allowlist, or a stale entry.
  m.failsRun = m.fresh > 0 || m.stale.length > 0;
  m.searchText = [name, a.class, a.model_type, a.variant, a.error, captureStatus,
                  forward.error].join(" ").toLowerCase();
  return m;
}

function readDocument() {
  var doc = JSON.parse(document.getElementById("zoo-data").textContent);
  var summary = doc.summary || {};
  var stale = list(summary.stale_allow).map(allowEntry);
  var unverified = list(summary.unverified_allow).map(allowEntry);
  var archs = doc.architectures || {};
  var models = Object.keys(archs).map(function (name) {
    return archModel(name, archs[name], stale, unverified);
  });
  return {doc: doc, summary: summary, models: models, stale: stale, unverified: unverified};
}
