// `Report` (and optionally its snapshot) to one self-contained HTML page. The page itself
// (markup, CSS, scripts) lives in report_html/ and is embedded at build time
// (cmake/GraphcheckEmbedText.cmake); this file fills it with the data as JSON.
//
// The page is streamed: the data is written piece by piece (one span, allocation or
// reference at a time) through a buffered writer, never built as a JSON tree or as one
// string, so that memory stays the snapshot, the report and a buffer, whatever the size of the
// graph (docs/report-format.md, "HTML report": the figures). The data block's layout:
//   {"report": <the JSON report>, "snapshot": {"epochs": [...], "graphs": [...], "names": [...]}}
// An epoch is {"label", "spans": [[begin, size, kind, name]], "allocations": [[begin, size,
// pool, generation, label]]}; a graph is {"id", "epoch", "nodes", "refs": [row]} with a row per
// reference the checker finds in the graph's capture epoch:
//   [node, name index, param or -1, offset or operand role, address, size, access, [findings]]
// where trailing members equal to their defaults (size 0, access "unknown", no finding) are
// left out, and kernel and op names are written once, in "names".
#include <graphcheck/address.h>
#include <graphcheck/address_index.h>
#include <graphcheck/error.h>
#include <graphcheck/pointer_scan.h>
#include <graphcheck/report_html.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graphcheck/detail/page_stream.h"
#include "graphcheck/detail/report_stream.h"
#include "graphcheck/report_html_assets.h"

namespace graphcheck {
namespace {

namespace assets = detail::report_html_assets;
using detail::PageStream;

// Markers in page.html: the scripts go inside one <script>, the data inside a JSON <script>.
constexpr std::string_view kScriptsMarker = "/*@GRAPHCHECK_SCRIPTS@*/";
constexpr std::string_view kDataMarker = "@GRAPHCHECK_DATA@";

template <std::size_t N>
void write_chunks(PageStream& out, const std::array<std::string_view, N>& chunks) {
  for (std::string_view chunk : chunks) {
    out.raw(chunk);
  }
}

// A reference and a finding name the same use of memory by graph, node and argument word, or
// by graph, node and operand role. The role points into the report's finding.
using UseKey =
    std::tuple<std::uint64_t, std::uint64_t, bool, std::uint32_t, std::uint32_t, std::string_view>;

std::map<UseKey, std::vector<std::size_t>> findings_by_use(const Report& report) {
  std::map<UseKey, std::vector<std::size_t>> out;
  for (std::size_t i = 0; i < report.findings.size(); ++i) {
    const Finding& f = report.findings[i];
    const bool operand = !f.operand.empty();
    out[UseKey(f.graph, f.node, operand, operand ? 0 : f.param.value_or(0),
               operand ? 0 : f.offset.value_or(0), f.operand)]
        .push_back(i);
  }
  return out;
}

// Kernel and op names repeat over thousands of nodes: each is written once, in `names`.
class NameTable {
 public:
  std::size_t index(const std::string& name) {
    auto [it, added] = index_.try_emplace(name, names_.size());
    if (added) {
      names_.push_back(&it->first);
    }
    return it->second;
  }
  void write(PageStream& out) const {
    out.put('[');
    for (std::size_t i = 0; i < names_.size(); ++i) {
      if (i > 0) {
        out.put(',');
      }
      out.json_string(*names_[i]);
    }
    out.put(']');
  }

 private:
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<const std::string*> names_;  // keys of index_ (stable: node-based map)
};

void write_epoch(PageStream& out, const Epoch& epoch) {
  out.raw("{\"label\":");
  out.json_string(epoch.label);
  out.raw(",\"spans\":[");
  for (std::size_t i = 0; i < epoch.spans.size(); ++i) {
    const Span& span = epoch.spans[i];
    out.raw(i == 0 ? "[" : ",[");
    out.json_string(format_address(span.begin));
    out.put(',');
    out.number(span.size);
    out.put(',');
    out.json_string(to_string(span.kind));
    out.put(',');
    out.json_string(span.name);
    out.put(']');
  }
  out.raw("],\"allocations\":[");
  for (std::size_t i = 0; i < epoch.allocations.size(); ++i) {
    const Allocation& allocation = epoch.allocations[i];
    out.raw(i == 0 ? "[" : ",[");
    out.json_string(format_address(allocation.begin));
    out.put(',');
    out.number(allocation.size);
    out.put(',');
    out.json_string(allocation.pool);
    out.put(',');
    out.number(allocation.generation);
    out.put(',');
    out.json_string(allocation.label);
    out.put(']');
  }
  out.raw("]}");
}

// One reference row (see the file comment), trailing defaults left out.
void write_reference(PageStream& out, const Reference& reference, std::size_t name,
                     const std::vector<std::size_t>* findings) {
  const Node& node = *reference.node;
  out.put('[');
  out.number(node.id);
  out.put(',');
  out.number(std::uint64_t{name});
  out.put(',');
  const Operand* operand = reference.operand;
  if (operand != nullptr) {
    out.raw("-1,");
    out.json_string(operand->role);
  } else {
    out.number(std::uint64_t{reference.param});
    out.put(',');
    out.number(std::uint64_t{reference.offset});
  }
  out.put(',');
  out.json_string(format_address(operand != nullptr ? operand->begin : reference.address));
  const std::uint64_t size = operand != nullptr ? operand->size : 0;
  const Access access = operand != nullptr ? operand->access : Access::kUnknown;
  if (size != 0 || access != Access::kUnknown || findings != nullptr) {
    out.put(',');
    out.number(size);
  }
  if (access != Access::kUnknown || findings != nullptr) {
    out.put(',');
    out.json_string(to_string(access));
  }
  if (findings != nullptr) {
    out.raw(",[");
    for (std::size_t i = 0; i < findings->size(); ++i) {
      if (i > 0) {
        out.put(',');
      }
      out.number(std::uint64_t{(*findings)[i]});
    }
    out.put(']');
  }
  out.put(']');
}

// One graph's references, as the checker finds them in the graph's capture epoch, each with
// the indexes of the report's findings about it (none: an ok-class verdict).
void write_graph(PageStream& out, const GraphRecord& graph, const Epoch& capture,
                 const std::map<UseKey, std::vector<std::size_t>>& findings, NameTable& names) {
  out.raw("{\"id\":");
  out.number(graph.id);
  out.raw(",\"epoch\":");
  out.json_string(graph.epoch);
  out.raw(",\"nodes\":");
  out.number(count_nodes(graph.nodes));
  out.raw(",\"refs\":[");
  const AddressIndex index(capture);
  const GraphRanges ranges(graph);
  bool first = true;
  scan_graph(
      graph, [&](Address word) { return resolve_word(word, index, ranges).is_reference; },
      [&](const Reference& reference) {
        const Operand* operand = reference.operand;
        const UseKey key(graph.id, reference.node->id, operand != nullptr,
                         operand != nullptr ? 0 : reference.param,
                         operand != nullptr ? 0 : reference.offset,
                         operand != nullptr ? std::string_view(operand->role) : std::string_view());
        const auto found = findings.find(key);
        if (!first) {
          out.put(',');
        }
        first = false;
        write_reference(out, reference, names.index(reference.node->name),
                        found == findings.end() ? nullptr : &found->second);
      });
  out.raw("]}");
}

// Before any of the page is written: a failed page leaves no half-written file behind.
void require_capture_epochs(const Snapshot& snapshot) {
  for (const GraphRecord& graph : snapshot.graphs) {
    if (snapshot.find_epoch(graph.epoch) == nullptr) {
      throw Error("to_html: graph " + std::to_string(graph.id) + " names epoch '" +
                  printable(graph.epoch) +
                  "', which the snapshot lacks; pass the snapshot the report was checked from");
    }
  }
}

void write_snapshot(PageStream& out, const Snapshot& snapshot, const Report& report) {
  const std::map<UseKey, std::vector<std::size_t>> findings = findings_by_use(report);
  out.raw("{\"epochs\":[");
  for (std::size_t i = 0; i < snapshot.epochs.size(); ++i) {
    if (i > 0) {
      out.put(',');
    }
    write_epoch(out, snapshot.epochs[i]);
  }
  out.raw("],\"graphs\":[");
  NameTable names;
  for (std::size_t i = 0; i < snapshot.graphs.size(); ++i) {
    const GraphRecord& graph = snapshot.graphs[i];
    if (i > 0) {
      out.put(',');
    }
    write_graph(out, graph, *snapshot.find_epoch(graph.epoch), findings, names);
  }
  out.raw("],\"names\":");
  names.write(out);
  out.put('}');
}

// page.html cut at its two markers: before the data, between data and scripts, after.
struct Template {
  std::string text;
  std::size_t data_at = 0;
  std::size_t scripts_at = 0;
};

Template page_template() {
  Template page;
  for (std::string_view chunk : assets::kPage) {
    page.text += chunk;
  }
  page.data_at = page.text.find(kDataMarker);
  page.scripts_at = page.text.find(kScriptsMarker);
  if (page.data_at == std::string::npos || page.scripts_at == std::string::npos ||
      page.scripts_at < page.data_at) {
    throw Error("to_html: the embedded page template lacks its markers; rebuild graphcheck");
  }
  return page;
}

}  // namespace

void write_html(std::ostream& out, const Report& report, const Snapshot* snapshot) {
  if (snapshot != nullptr) {
    require_capture_epochs(*snapshot);
  }
  const Template page = page_template();
  const std::string_view text(page.text);
  PageStream stream(out);
  stream.raw(text.substr(0, page.data_at));
  stream.raw("{\"report\":");
  // Names may hold any bytes: bad UTF-8 is U+FFFD in the JSON report, as in the snapshot.
  detail::stream_report_json(report,
                             [&stream](std::string_view piece) { stream.script_json(piece); });
  stream.raw(",\"snapshot\":");
  if (snapshot != nullptr) {
    write_snapshot(stream, *snapshot, report);
  } else {
    stream.raw("null");
  }
  stream.put('}');
  const std::size_t middle = page.data_at + kDataMarker.size();
  stream.raw(text.substr(middle, page.scripts_at - middle));
  write_chunks(stream, assets::kFormatJs);
  write_chunks(stream, assets::kTablesJs);
  write_chunks(stream, assets::kMapLayoutJs);
  write_chunks(stream, assets::kMapDrawJs);
  write_chunks(stream, assets::kMainJs);
  stream.raw(text.substr(page.scripts_at + kScriptsMarker.size()));
  stream.finish();
}

std::string to_html(const Report& report, const Snapshot* snapshot) {
  std::ostringstream out;
  write_html(out, report, snapshot);
  return std::move(out).str();
}

}  // namespace graphcheck
