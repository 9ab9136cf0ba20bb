// `Report` (and optionally its snapshot) to one self-contained HTML page. The page itself
// (markup, CSS, scripts) lives in report_html/ and is embedded at build time
// (cmake/GraphcheckEmbedText.cmake); this file fills it with the data as JSON.
#include <graphcheck/address.h>
#include <graphcheck/address_index.h>
#include <graphcheck/error.h>
#include <graphcheck/pointer_scan.h>
#include <graphcheck/report_html.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graphcheck/report_html_assets.h"

namespace graphcheck {
namespace {

using Json = nlohmann::json;
namespace assets = detail::report_html_assets;

// Markers in page.html: the scripts go inside one <script>, the data inside a JSON <script>.
constexpr std::string_view kScriptsMarker = "/*@GRAPHCHECK_SCRIPTS@*/";
constexpr std::string_view kDataMarker = "@GRAPHCHECK_DATA@";

template <std::size_t N>
void append_chunks(std::string& out, const std::array<std::string_view, N>& chunks) {
  for (std::string_view chunk : chunks) {
    out += chunk;
  }
}

// A reference and a finding name the same use of memory by node and argument word, or by
// node and operand role.
std::string word_key(std::uint64_t node, std::uint32_t param, std::uint32_t offset) {
  return "p" + std::to_string(node) + ":" + std::to_string(param) + ":" + std::to_string(offset);
}
std::string operand_key(std::uint64_t node, std::string_view role) {
  return "o" + std::to_string(node) + ":" + std::string(role);
}
std::string finding_key(const Finding& finding) {
  if (!finding.operand.empty()) {
    return operand_key(finding.node, finding.operand);
  }
  return word_key(finding.node, finding.param.value_or(0), finding.offset.value_or(0));
}

Json epoch_json(const Epoch& epoch) {
  Json spans = Json::array();
  for (const Span& span : epoch.spans) {
    spans.push_back(
        {format_address(span.begin), span.size, std::string(to_string(span.kind)), span.name});
  }
  Json allocations = Json::array();
  for (const Allocation& allocation : epoch.allocations) {
    allocations.push_back({format_address(allocation.begin), allocation.size, allocation.pool,
                           allocation.generation, allocation.label});
  }
  return {{"label", epoch.label}, {"spans", spans}, {"allocations", allocations}};
}

// Kernel and op names repeat over thousands of nodes: each is written once, in `names`.
class NameTable {
 public:
  std::size_t index(const std::string& name) {
    auto [it, added] = index_.try_emplace(name, names_.size());
    if (added) {
      names_.push_back(name);
    }
    return it->second;
  }
  [[nodiscard]] Json json() const { return names_; }

 private:
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<std::string> names_;
};

// One graph's references, as the checker finds them in the graph's capture epoch, each
// with the indexes of the report's findings about it (empty: an ok-class verdict).
// Row: [node, name index, param or -1, offset or operand role, address, size, access,
// [finding indexes]].
Json graph_json(const GraphRecord& graph, const Epoch& capture, const Report& report,
                NameTable& names) {
  std::map<std::string, std::vector<std::size_t>> findings;
  for (std::size_t i = 0; i < report.findings.size(); ++i) {
    if (report.findings[i].graph == graph.id) {
      findings[finding_key(report.findings[i])].push_back(i);
    }
  }
  const AddressIndex index(capture);
  const GraphRanges ranges(graph);
  Json refs = Json::array();
  for (const Reference& reference : find_references(graph, index, ranges)) {
    const Node& node = *reference.node;
    const std::size_t name = names.index(node.name);
    std::string key;
    Json row;
    if (reference.operand != nullptr) {
      const Operand& operand = *reference.operand;
      key = operand_key(node.id, operand.role);
      row = {node.id,
             name,
             -1,
             operand.role,
             format_address(operand.begin),
             operand.size,
             std::string(to_string(operand.access))};
    } else {
      key = word_key(node.id, reference.param, reference.offset);
      row = {
          node.id, name,     reference.param, reference.offset, format_address(reference.address),
          0,       "unknown"};
    }
    auto found = findings.find(key);
    row.push_back(found == findings.end() ? Json::array() : Json(found->second));
    refs.push_back(std::move(row));
  }
  return {{"id", graph.id},
          {"epoch", graph.epoch},
          {"nodes", count_nodes(graph.nodes)},
          {"refs", std::move(refs)}};
}

Json snapshot_json(const Snapshot& snapshot, const Report& report) {
  Json epochs = Json::array();
  for (const Epoch& epoch : snapshot.epochs) {
    epochs.push_back(epoch_json(epoch));
  }
  NameTable names;
  Json graphs = Json::array();
  for (const GraphRecord& graph : snapshot.graphs) {
    const Epoch* capture = snapshot.find_epoch(graph.epoch);
    if (capture == nullptr) {
      throw Error("to_html: graph " + std::to_string(graph.id) + " names epoch '" + graph.epoch +
                  "', which the snapshot lacks; pass the snapshot the report was checked from");
    }
    graphs.push_back(graph_json(graph, *capture, report, names));
  }
  return {{"epochs", std::move(epochs)}, {"graphs", std::move(graphs)}, {"names", names.json()}};
}

// JSON puts `<` only inside strings, where \u003c means the same: no `</script>` or `<!--`
// in a name can end or hide the data block.
std::string escape_for_script(std::string_view json) {
  std::string out;
  out.reserve(json.size() + json.size() / 64);
  for (char c : json) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string to_html(const Report& report, const Snapshot* snapshot) {
  std::string data = "{\"report\":" + to_json(report, -1) + ",\"snapshot\":";
  if (snapshot != nullptr) {
    // Names may hold any bytes: bad UTF-8 becomes U+FFFD, as in the JSON report.
    data += snapshot_json(*snapshot, report).dump(-1, ' ', false, Json::error_handler_t::replace);
  } else {
    data += "null";
  }
  data += "}";
  data = escape_for_script(data);

  std::string scripts;
  append_chunks(scripts, assets::kFormatJs);
  append_chunks(scripts, assets::kTablesJs);
  append_chunks(scripts, assets::kMapLayoutJs);
  append_chunks(scripts, assets::kMapDrawJs);
  append_chunks(scripts, assets::kMainJs);

  std::string page;
  append_chunks(page, assets::kPage);
  // The later marker (the scripts') is replaced first, so the earlier one's position holds
  // and no inserted text is searched for a marker again.
  const std::size_t data_at = page.find(kDataMarker);
  const std::size_t scripts_at = page.find(kScriptsMarker);
  if (data_at == std::string::npos || scripts_at == std::string::npos || scripts_at < data_at) {
    throw Error("to_html: the embedded page template lacks its markers; rebuild graphcheck");
  }
  page.replace(scripts_at, kScriptsMarker.size(), scripts);
  page.replace(data_at, kDataMarker.size(), data);
  return page;
}

}  // namespace graphcheck
