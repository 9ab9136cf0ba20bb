// The non-template half of the pointer scan: graph-owned ranges, node counts, and the
// reference list for callers that want one (the checker scans in place instead).
#include <graphcheck/pointer_scan.h>

#include <algorithm>
#include <limits>

namespace graphcheck {
namespace {

// Reads each node's kind only (and the bodies of the kinds that hold some, as the scan
// recurses): a kernel's other members stay out of the cache until the scan reads them.
template <typename Range>
void collect_mem_alloc(const NodeList& nodes, std::vector<Range>& out) {
  for (const Node& node : nodes) {
    switch (node.type) {
      case NodeType::kMemAlloc:
        for (const Operand& operand : node.operands) {
          if (operand.size != 0) {
            out.push_back({operand.begin, operand.size});
          }
        }
        break;
      case NodeType::kChildGraph:
      case NodeType::kConditional:
        for (const NodeList& body : node.bodies) {
          collect_mem_alloc(body, out);
        }
        break;
      default:
        break;
    }
  }
}

}  // namespace

GraphRanges::GraphRanges(const GraphRecord& graph) {
  struct Range {
    Address begin;
    std::uint64_t size;
  };
  std::vector<Range> ranges;
  collect_mem_alloc(graph.nodes, ranges);
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (const Range& range : ranges) {
    const std::uint64_t room = std::numeric_limits<Address>::max() - range.begin;
    const Address last = range.size - 1 <= room ? range.begin + (range.size - 1)
                                                : std::numeric_limits<Address>::max();
    // Overlapping or touching ranges merge into one run.
    if (!merged_.empty() && (merged_.back().last == std::numeric_limits<Address>::max() ||
                             range.begin <= merged_.back().last + 1)) {
      merged_.back().last = std::max(merged_.back().last, last);
    } else {
      merged_.push_back({range.begin, last});
    }
  }
  if (!merged_.empty()) {
    low_ = merged_.front().first;
    high_ = merged_.back().last;
  }
}

bool GraphRanges::run(Address address, Address* last) const {
  // The first run ending at or after the address either holds it or starts after it.
  const auto it = std::lower_bound(merged_.begin(), merged_.end(), address,
                                   [](const Run& run, Address a) { return run.last < a; });
  if (it == merged_.end()) {
    *last = std::numeric_limits<Address>::max();
    return false;
  }
  if (it->first <= address) {
    *last = it->last;
    return true;
  }
  *last = it->first - 1;
  return false;
}

std::uint64_t count_nodes(const NodeList& nodes) {
  std::uint64_t count = nodes.size();
  for (const Node& node : nodes) {
    for (const NodeList& body : node.bodies) {
      count += count_nodes(body);
    }
  }
  return count;
}

std::vector<Reference> find_references(const GraphRecord& graph, const AddressIndex& capture,
                                       const GraphRanges& ranges) {
  std::vector<Reference> references;
  scan_graph(
      graph, [&](Address word) { return resolve_word(word, capture, ranges).is_reference; },
      [&](const Reference& reference) { references.push_back(reference); });
  return references;
}

}  // namespace graphcheck
