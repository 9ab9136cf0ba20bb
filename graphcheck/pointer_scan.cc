// The non-template half of the pointer scan: graph-owned ranges, node counts, and the
// reference list for callers that want one (the checker scans in place instead).
#include <graphcheck/pointer_scan.h>

#include <algorithm>
#include <limits>

namespace graphcheck {
namespace {

template <typename Range>
void collect_mem_alloc(const NodeList& nodes, std::vector<Range>& out) {
  for (const Node& node : nodes) {
    if (node.type == NodeType::kMemAlloc) {
      for (const Operand& operand : node.operands) {
        if (operand.size != 0) {
          out.push_back({operand.begin, operand.size});
        }
      }
    }
    for (const NodeList& body : node.bodies) {
      collect_mem_alloc(body, out);
    }
  }
}

}  // namespace

GraphRanges::GraphRanges(const GraphRecord& graph) {
  collect_mem_alloc(graph.nodes, ranges_);
  std::sort(ranges_.begin(), ranges_.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  if (ranges_.empty()) {
    return;
  }
  low_ = ranges_.front().begin;
  for (const Range& range : ranges_) {
    max_size_ = std::max(max_size_, range.size);
    const std::uint64_t room = std::numeric_limits<Address>::max() - range.begin;
    high_ = std::max(
        high_, range.size <= room ? range.begin + range.size : std::numeric_limits<Address>::max());
  }
}

bool GraphRanges::contains_slow(Address address) const {
  // Ranges may overlap, so walk back from the last range starting at or below `address`
  // as long as a range that long could still reach it.
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), address,
                             [](Address a, const Range& range) { return a < range.begin; });
  while (it != ranges_.begin()) {
    --it;
    const std::uint64_t distance = address - it->begin;
    if (distance < it->size) {
      return true;
    }
    if (distance >= max_size_) {
      return false;
    }
  }
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
      graph,
      [&](Address word) {
        const AddressHit hit = capture.find(word);
        return hit.span != nullptr || hit.allocation != nullptr || ranges.contains(word);
      },
      [&](const Reference& reference) { references.push_back(reference); });
  return references;
}

}  // namespace graphcheck
