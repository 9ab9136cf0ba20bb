// The HTML page's snapshot part (page_snapshot.h). The layout:
//   {"epochs": [...], "graphs": [...], "names": [...]}
// An epoch is {"label", "spans": [[begin, size, kind, name]], "allocations": [[begin, size,
// pool, generation, label]]}; a graph is {"id", "epoch", "nodes", "node_runs", "refs": [row]}
// with a row per reference the checker finds in the graph's capture epoch:
//   [node, name index, param or -1, offset or operand role, address, size, access, [findings]]
// where trailing members equal to their defaults (size 0, access "unknown", no finding) are
// left out, and kernel and op names are written once, in "names". `node_runs` numbers the
// graph's nodes for display (the page shows node 17179869195 as 1:11): [[first number,
// first id, count], ...], the nodes in depth-first order (a node, then its bodies' nodes) with
// consecutive ids in one run, so that a CUDA graph's ids take one run, whatever their size.
#include "graphcheck/detail/page_snapshot.h"

#include <graphcheck/address.h>
#include <graphcheck/address_index.h>
#include <graphcheck/error.h>
#include <graphcheck/pointer_scan.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace graphcheck::detail {
namespace {

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

// Runs of consecutive ids over the nodes in depth-first order (see the file comment).
class NodeRuns {
 public:
  void add(const NodeList& nodes) {
    for (const Node& node : nodes) {
      if (!runs_.empty() && runs_.back()[1] + runs_.back()[2] == node.id) {
        ++runs_.back()[2];
      } else {
        runs_.push_back({number_, node.id, 1});
      }
      ++number_;
      for (const NodeList& body : node.bodies) {
        add(body);
      }
    }
  }
  void write(PageStream& out) const {
    out.put('[');
    for (std::size_t i = 0; i < runs_.size(); ++i) {
      out.raw(i == 0 ? "[" : ",[");
      out.number(runs_[i][0]);
      out.put(',');
      out.number(runs_[i][1]);
      out.put(',');
      out.number(runs_[i][2]);
      out.put(']');
    }
    out.put(']');
  }

 private:
  std::vector<std::array<std::uint64_t, 3>> runs_;  // first number, first id, count
  std::uint64_t number_ = 0;
};

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
  out.raw(",\"node_runs\":");
  {
    NodeRuns runs;
    runs.add(graph.nodes);
    runs.write(out);
  }
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

}  // namespace

void require_capture_epochs(const Snapshot& snapshot) {
  for (const GraphRecord& graph : snapshot.graphs) {
    if (snapshot.find_epoch(graph.epoch) == nullptr) {
      throw Error("to_html: graph " + std::to_string(graph.id) + " names epoch '" +
                  printable(graph.epoch) +
                  "', which the snapshot lacks; pass the snapshot the report was checked from");
    }
  }
}

void write_page_snapshot(PageStream& out, const Snapshot& snapshot, const Report& report) {
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

}  // namespace graphcheck::detail
