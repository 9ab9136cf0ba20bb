#include "graphcheck/detail/allocator_memory.h"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

namespace graphcheck::detail {
namespace {

struct RangeHash {
  std::size_t operator()(const std::pair<Address, std::uint64_t>& range) const {
    return std::hash<Address>()(range.first) ^ (std::hash<std::uint64_t>()(range.second) << 1);
  }
};

// The label of [begin, end): the first range (sorted) starting inside it, else the one
// starting just below it that reaches into it (the native census's `census_label` rule).
const std::string* label_over(const std::vector<LabelRange>& labels, Address begin, Address end) {
  const auto at =
      std::lower_bound(labels.begin(), labels.end(), begin,
                       [](const LabelRange& range, Address value) { return range.begin < value; });
  if (at != labels.end() && at->begin < end) {
    return &at->label;
  }
  if (at != labels.begin() && std::prev(at)->end > begin) {
    return &std::prev(at)->label;
  }
  return nullptr;
}

}  // namespace

bool is_graph_pool(TorchPoolId pool, bool listed) {
  if (pool.first == 0 && pool.second == 0) {
    return false;  // the default pool, whatever was listed
  }
  return pool.second == 0 || listed;
}

std::string torch_pool_name(TorchPoolId pool, bool listed) {
  if (pool.first == 0 && pool.second == 0) {
    return "default";
  }
  const std::string id = std::to_string(pool.first) + "," + std::to_string(pool.second);
  return (is_graph_pool(pool, listed) ? "graph:" : "mempool:") + id;
}

std::vector<Allocation> allocator_allocations(const std::vector<AllocatorSegment>& segments) {
  std::vector<Allocation> memory;
  for (const AllocatorSegment& segment : segments) {
    if (segment.begin == 0 || segment.size == 0) {
      continue;
    }
    const bool graph = is_graph_pool(segment.pool, segment.listed);
    std::string pool = torch_pool_name(segment.pool, segment.listed);
    if (!graph) {
      for (const auto& [begin, size] : segment.live) {
        memory.push_back(Allocation{begin, size, pool, 1, ""});
      }
    }
    // After its blocks: a block as large as its segment (a big tensor's own) ties with it,
    // and ties go by position in the epoch.
    memory.push_back(Allocation{segment.begin, segment.size, std::move(pool), 1,
                                "torch segment dev" + segment.device});
  }
  std::stable_sort(memory.begin(), memory.end(),
                   [](const Allocation& a, const Allocation& b) { return a.begin < b.begin; });
  return memory;
}

void add_allocator_memory(std::vector<Allocation>& allocations,
                          const std::vector<AllocatorSegment>& segments,
                          std::vector<LabelRange> labels) {
  std::vector<Allocation> memory = allocator_allocations(segments);
  if (memory.empty()) {
    return;
  }
  // Graph pool segments never overlap: the one starting last at or below an address is the
  // only one that can hold it.
  std::vector<const Allocation*> graph_segments;
  for (const Allocation& entry : memory) {
    if (entry.pool.starts_with("graph:")) {
      graph_segments.push_back(&entry);
    }
  }
  std::unordered_set<Address> starts;
  std::unordered_set<std::pair<Address, std::uint64_t>, RangeHash> ranges;
  for (Allocation& allocation : allocations) {
    const auto after = std::upper_bound(
        graph_segments.begin(), graph_segments.end(), allocation.begin,
        [](Address value, const Allocation* segment) { return value < segment->begin; });
    if (after != graph_segments.begin() && allocation.end() <= (*std::prev(after))->end()) {
      allocation.pool = (*std::prev(after))->pool;
    }
    starts.insert(allocation.begin);
    ranges.emplace(allocation.begin, allocation.size);
  }
  // As Python sorts (begin, end, label) tuples.
  std::sort(labels.begin(), labels.end(), [](const LabelRange& a, const LabelRange& b) {
    return std::tie(a.begin, a.end, a.label) < std::tie(b.begin, b.end, b.label);
  });
  allocations.reserve(allocations.size() + memory.size());
  for (Allocation& entry : memory) {
    const bool segment = !entry.label.empty();  // blocks are unlabelled until here
    if (ranges.contains({entry.begin, entry.size}) || (!segment && starts.contains(entry.begin))) {
      continue;
    }
    if (!segment) {
      if (const std::string* label = label_over(labels, entry.begin, entry.end())) {
        entry.label = *label;
      }
    }
    allocations.push_back(std::move(entry));
  }
}

}  // namespace graphcheck::detail
