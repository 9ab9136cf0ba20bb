// A sweep over span and allocation boundaries cuts the address space into cells in which
// the set of covering ranges is constant; each cell stores its winners, so a lookup is one
// search over the cell boundaries and never compares names.
#include <graphcheck/address_index.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <limits>
#include <tuple>
#include <utility>

namespace graphcheck {
namespace {

// Tie order among spans of the same size: parameter, buffer, runtime, input, graph. Spans
// the contract restores come first so that a registered tensor is named over memory that
// merely happens to contain it.
constexpr std::array<int, 5> kKindRank = {0, 1, 2, 4, 3};  // indexed by OwnerKind

int kind_rank(OwnerKind kind) { return kKindRank.at(static_cast<std::size_t>(kind)); }

struct Edge {
  Address position = 0;
  std::uint64_t size = 0;  // only for span starts: sorts duplicates together
  std::int32_t item = 0;
};

bool edge_less(const Edge& a, const Edge& b) {
  return a.position != b.position ? a.position < b.position : a.item < b.item;
}

// The end of [begin, begin + size), or nothing when it lies past the top of the address
// space (such a range is open to the top and never ends in the sweep).
bool has_end(Address begin, std::uint64_t size) {
  return size <= std::numeric_limits<Address>::max() - begin;
}

// A sorted small vector: the active ranges at the sweep position, best first. Overlaps are
// shallow in practice, so a vector beats a tree here and allocates only while growing.
template <typename Less>
class ActiveSet {
 public:
  explicit ActiveSet(Less less) : less_(less) {}
  void insert(std::int32_t item) {
    items_.insert(std::lower_bound(items_.begin(), items_.end(), item, less_), item);
  }
  void erase(std::int32_t item) {
    const auto it = std::find(items_.begin(), items_.end(), item);
    if (it != items_.end()) {
      items_.erase(it);
    }
  }
  [[nodiscard]] const std::vector<std::int32_t>& items() const { return items_; }

 private:
  Less less_;
  std::vector<std::int32_t> items_;
};

}  // namespace

AddressIndex::AddressIndex(const Epoch& epoch) : epoch_(&epoch) {
  const std::vector<Span>& spans = epoch.spans;
  const std::vector<Allocation>& allocations = epoch.allocations;

  // Spans: drop empty ones and identical duplicates (views of one storage).
  std::vector<Edge> span_starts;
  span_starts.reserve(spans.size());
  for (std::size_t i = 0; i < spans.size(); ++i) {
    if (spans[i].size != 0) {
      span_starts.push_back({spans[i].begin, spans[i].size, static_cast<std::int32_t>(i)});
    }
  }
  std::sort(span_starts.begin(), span_starts.end(), [](const Edge& a, const Edge& b) {
    return std::tie(a.position, a.size, a.item) < std::tie(b.position, b.size, b.item);
  });
  {
    // In place; spans are only dereferenced (names compared) within a run of equal
    // (begin, size), so distinct spans cost no random access into the epoch.
    std::size_t kept = 0;
    std::size_t run = 0;  // first kept edge with the current (begin, size)
    for (const Edge& edge : span_starts) {
      bool duplicate = false;
      if (kept != 0 && span_starts[kept - 1].position == edge.position &&
          span_starts[kept - 1].size == edge.size) {
        const Span& span = spans[static_cast<std::size_t>(edge.item)];
        for (std::size_t k = run; k < kept && !duplicate; ++k) {
          const Span& other = spans[static_cast<std::size_t>(span_starts[k].item)];
          duplicate = other.kind == span.kind && other.name == span.name;
        }
      } else {
        run = kept;
      }
      if (!duplicate) {
        span_starts[kept++] = edge;
      }
    }
    span_starts.resize(kept);
  }
  std::vector<Edge> span_ends;
  span_ends.reserve(span_starts.size());
  for (const Edge& edge : span_starts) {
    if (has_end(edge.position, edge.size)) {
      span_ends.push_back({edge.position + edge.size, 0, edge.item});
    }
  }
  std::sort(span_ends.begin(), span_ends.end(), edge_less);

  std::vector<char> graph_pool(allocations.size(), 0);
  std::vector<Edge> alloc_starts;
  std::vector<Edge> alloc_ends;
  alloc_starts.reserve(allocations.size());
  alloc_ends.reserve(allocations.size());
  for (std::size_t i = 0; i < allocations.size(); ++i) {
    const Allocation& allocation = allocations[i];
    if (allocation.size == 0) {
      continue;
    }
    graph_pool[i] = allocation.is_graph_pool() ? 1 : 0;
    alloc_starts.push_back({allocation.begin, 0, static_cast<std::int32_t>(i)});
    if (has_end(allocation.begin, allocation.size)) {
      alloc_ends.push_back({allocation.begin + allocation.size, 0, static_cast<std::int32_t>(i)});
    }
  }
  std::sort(alloc_starts.begin(), alloc_starts.end(), edge_less);
  std::sort(alloc_ends.begin(), alloc_ends.end(), edge_less);

  const auto span_less = [&](std::int32_t a, std::int32_t b) {
    const Span& x = spans[static_cast<std::size_t>(a)];
    const Span& y = spans[static_cast<std::size_t>(b)];
    const int x_rank = kind_rank(x.kind);
    const int y_rank = kind_rank(y.kind);
    return std::tie(x.size, x_rank, x.name, a) < std::tie(y.size, y_rank, y.name, b);
  };
  const auto alloc_less = [&](std::int32_t a, std::int32_t b) {
    const Allocation& x = allocations[static_cast<std::size_t>(a)];
    const Allocation& y = allocations[static_cast<std::size_t>(b)];
    return std::tie(x.size, x.begin, a) < std::tie(y.size, y.begin, b);
  };
  ActiveSet<decltype(span_less)> active_spans(span_less);
  ActiveSet<decltype(alloc_less)> active_allocs(alloc_less);

  const std::size_t edges =
      span_starts.size() + span_ends.size() + alloc_starts.size() + alloc_ends.size();
  cells_.reserve(edges);
  std::size_t ss = 0;
  std::size_t se = 0;
  std::size_t as = 0;
  std::size_t ae = 0;
  constexpr Address kDone = std::numeric_limits<Address>::max();
  const auto head = [](const std::vector<Edge>& list, std::size_t at) {
    return at < list.size() ? list[at].position : kDone;
  };
  while (ss < span_starts.size() || se < span_ends.size() || as < alloc_starts.size() ||
         ae < alloc_ends.size()) {
    const Address position = std::min(
        {head(span_starts, ss), head(span_ends, se), head(alloc_starts, as), head(alloc_ends, ae)});
    for (; se < span_ends.size() && span_ends[se].position == position; ++se) {
      active_spans.erase(span_ends[se].item);
    }
    for (; ss < span_starts.size() && span_starts[ss].position == position; ++ss) {
      active_spans.insert(span_starts[ss].item);
    }
    for (; ae < alloc_ends.size() && alloc_ends[ae].position == position; ++ae) {
      active_allocs.erase(alloc_ends[ae].item);
    }
    for (; as < alloc_starts.size() && alloc_starts[as].position == position; ++as) {
      active_allocs.insert(alloc_starts[as].item);
    }
    Cell cell;
    cell.begin = position;
    const std::vector<std::int32_t>& covering = active_spans.items();
    if (!covering.empty()) {
      cell.span = covering.front();
      const Span& winner = spans[static_cast<std::size_t>(cell.span)];
      cell.kind = winner.kind;
      const std::size_t count_at = rivals_.size();
      if (covering.size() > 1) {
        rivals_.push_back(0);
      }
      for (std::size_t k = 1; k < covering.size(); ++k) {
        const Span& other = spans[static_cast<std::size_t>(covering[k])];
        if (other.kind != winner.kind || other.name != winner.name) {
          rivals_.push_back(covering[k]);
        }
      }
      if (rivals_.size() == count_at + 1) {
        rivals_.pop_back();
      } else if (rivals_.size() > count_at) {
        rivals_[count_at] = static_cast<std::int32_t>(rivals_.size() - count_at - 1);
        cell.rivals = static_cast<std::uint32_t>(count_at);
        cell.flags |= kRivals;
      }
    }
    if (!active_allocs.items().empty()) {
      cell.allocation = active_allocs.items().front();
      if (graph_pool[static_cast<std::size_t>(cell.allocation)] != 0) {
        cell.flags |= kGraphPool;
      }
    }
    cells_.push_back(cell);
  }
  if (!cells_.empty()) {
    low_ = cells_.front().begin;
    const Cell& last = cells_.back();
    // The last cell is empty unless a range reaches the top of the address space.
    high_ = last.span == kNone && last.allocation == kNone ? last.begin - 1
                                                           : std::numeric_limits<Address>::max();
  }
  build_buckets();
}

void AddressIndex::build_buckets() {
  if (cells_.empty()) {
    return;
  }
  // Cut at the largest gaps between cell boundaries (at most kMaxRegions - 1 cuts).
  constexpr std::size_t kMaxRegions = 64;
  std::vector<std::uint32_t> cuts;  // a region starts at each of these cells
  if (cells_.size() > 1) {
    std::vector<std::pair<Address, std::uint32_t>> gaps;
    gaps.reserve(cells_.size() - 1);
    for (std::size_t i = 1; i < cells_.size(); ++i) {
      gaps.emplace_back(cells_[i].begin - cells_[i - 1].begin, static_cast<std::uint32_t>(i));
    }
    const std::size_t keep = std::min(kMaxRegions - 1, gaps.size());
    std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(keep), gaps.end(),
                     [](const auto& x, const auto& y) { return x.first > y.first; });
    for (std::size_t k = 0; k < keep; ++k) {
      cuts.push_back(gaps[k].second);
    }
    std::sort(cuts.begin(), cuts.end());
  }
  cuts.insert(cuts.begin(), 0);
  cuts.push_back(static_cast<std::uint32_t>(cells_.size()));

  for (std::size_t r = 0; r + 1 < cuts.size(); ++r) {
    const std::uint32_t first = cuts[r];
    const std::uint32_t end = cuts[r + 1];
    Region region;
    region.low = cells_[first].begin;
    region.last_cell = end - 1;
    region.last = cells_[region.last_cell].begin;
    region.buckets = static_cast<std::uint32_t>(buckets_.size());
    // About one bucket per cell: uniform spacing then gives one or two cells per bucket.
    const Address range = region.last - region.low;
    const std::uint64_t wanted = std::bit_ceil(static_cast<std::uint64_t>(end - first));
    while ((range >> region.shift) >= wanted) {
      ++region.shift;
    }
    const std::size_t count = static_cast<std::size_t>(range >> region.shift) + 1;
    std::uint32_t cell = first;
    for (std::size_t bucket = 0; bucket <= count; ++bucket) {
      while (cell < end &&
             static_cast<std::size_t>((cells_[cell].begin - region.low) >> region.shift) < bucket) {
        ++cell;
      }
      buckets_.push_back(cell);
    }
    region_lows_.push_back(region.low);
    regions_.push_back(region);
  }
  region_lows_.resize(std::bit_ceil(region_lows_.size()), std::numeric_limits<Address>::max());
}

std::uint32_t AddressIndex::cell_of(Address address) const {
  // Precondition: cells_ is non-empty and address >= cells_.front().begin.
  // Both searches are written so that the compiler emits conditional moves: the data
  // decides each step, and mispredicted branches cost more than the comparisons.
  const Address* low = region_lows_.data();
  for (std::size_t n = region_lows_.size(); n > 1;) {  // a power of two
    const std::size_t half = n / 2;
    low = low[half] <= address ? low + half : low;
    n -= half;
  }
  // Padding lows (the top address) can only be passed by the top address itself.
  const std::size_t r =
      std::min(static_cast<std::size_t>(low - region_lows_.data()), regions_.size() - 1);
  const Region& region = regions_[r];
  if (address >= region.last) {
    return region.last_cell;  // the region's last cell reaches up to the next region
  }
  const std::size_t bucket =
      region.buckets + static_cast<std::size_t>((address - region.low) >> region.shift);
  // The first cell starting above `address` lies in [first, first + count]; its
  // predecessor holds the address.
  std::uint32_t first = buckets_[bucket];
  std::uint32_t count = buckets_[bucket + 1] - first;
  while (count > 1) {
    const std::uint32_t half = count / 2;
    first = cells_[first + half].begin <= address ? first + half : first;
    count -= half;
  }
  if (count == 1 && cells_[first].begin <= address) {
    ++first;
  }
  return first - 1;
}

std::uint32_t AddressIndex::find_cell(Address address, Address* first, Address* last) const {
  if (address < low_) {
    *first = 0;
    *last = low_ - 1;  // low_ > address >= 0
    return kNoCell;
  }
  if (address > high_) {
    *first = high_ + 1;  // high_ < address <= top
    *last = std::numeric_limits<Address>::max();
    return kNoCell;
  }
  const std::uint32_t cell = cell_of(address);
  *first = cells_[cell].begin;
  *last =
      cell + 1 < cells_.size() ? cells_[cell + 1].begin - 1 : std::numeric_limits<Address>::max();
  return cell;
}

AddressHit AddressIndex::hit_of(std::uint32_t cell) const {
  const Cell& c = cells_[cell];
  AddressHit hit;
  hit.cell = cell;
  if (c.span != kNone) {
    hit.span = &epoch_->spans[static_cast<std::size_t>(c.span)];
    hit.kind = c.kind;
    hit.has_rivals = (c.flags & kRivals) != 0;
  }
  if (c.allocation != kNone) {
    hit.allocation = &epoch_->allocations[static_cast<std::size_t>(c.allocation)];
    hit.graph_pool = (c.flags & kGraphPool) != 0;
  }
  return hit;
}

std::vector<const Span*> AddressIndex::rivals(const AddressHit& hit) const {
  std::vector<const Span*> result;
  if (!hit.has_rivals) {
    return result;
  }
  const std::uint32_t at = cells_[hit.cell].rivals;
  const auto count = static_cast<std::uint32_t>(rivals_[at]);
  result.reserve(count);
  for (std::uint32_t k = 1; k <= count; ++k) {
    result.push_back(&epoch_->spans[static_cast<std::size_t>(rivals_[at + k])]);
  }
  return result;
}

}  // namespace graphcheck
