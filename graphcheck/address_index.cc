// A sweep over span and allocation boundaries cuts the address space into cells in which
// the set of covering ranges is constant; each cell stores its winners, so a lookup is one
// search over the cell boundaries and never compares names.
#include <graphcheck/address_index.h>
#include <graphcheck/error.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <limits>
#include <string>
#include <tuple>
#include <utility>

#include "graphcheck/detail/radix_sort.h"

namespace graphcheck {
namespace {

using detail::radix_sort;

// Tie order among spans of the same size: parameter, buffer, runtime, input, graph. Spans
// the contract restores come first so that a registered tensor is named over memory that
// merely happens to contain it.
constexpr std::array<int, 5> kKindRank = {0, 1, 2, 4, 3};  // indexed by OwnerKind

int kind_rank(OwnerKind kind) { return kKindRank.at(static_cast<std::size_t>(kind)); }

struct Edge {
  Address position = 0;
  std::int32_t item = 0;  // index into the epoch's spans or allocations
};

// Buckets per cell boundary inside a page: 2 << kFinerBits at most, (1 << kFinerBits) at
// least. One finer step than one per boundary measured fastest: most buckets then hold at
// most one boundary, and the tables stay small.
constexpr unsigned kFinerBits = 1;

// Span indexes are int32 in cells (kNone = -1) and in edges.
constexpr std::size_t kMaxSpans = std::numeric_limits<std::int32_t>::max();

constexpr auto kEdgePosition = [](const Edge& edge) { return edge.position; };

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
    if (items_.empty()) {  // the common case: ranges that do not overlap
      items_.push_back(item);
      return;
    }
    items_.insert(std::lower_bound(items_.begin(), items_.end(), item, less_), item);
  }
  void erase(std::int32_t item) {
    if (items_.size() == 1 && items_.front() == item) {
      items_.pop_back();
      return;
    }
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

// Layout numbers for `same_cells`: unique per build in the process, so that indexes of
// different checks (or threads) never compare equal by accident.
std::atomic<std::uint64_t> next_layout{1};

// True when a build from `a` would produce the same tables as one from `b`: the sweep reads
// spans' begin, size, kind and name and allocations' begin, size and graph-pool status, by
// position; nothing else (reasons, labels, generations) reaches a cell.
bool same_ranges(const Epoch& a, const Epoch& b) {
  if (a.spans.size() != b.spans.size() || a.allocations.size() != b.allocations.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.spans.size(); ++i) {
    const Span& x = a.spans[i];
    const Span& y = b.spans[i];
    if (x.begin != y.begin || x.size != y.size || x.kind != y.kind || x.name != y.name) {
      return false;
    }
  }
  for (std::size_t i = 0; i < a.allocations.size(); ++i) {
    const Allocation& x = a.allocations[i];
    const Allocation& y = b.allocations[i];
    if (x.begin != y.begin || x.size != y.size ||
        (x.pool != y.pool && x.is_graph_pool() != y.is_graph_pool())) {
      return false;
    }
  }
  return true;
}

}  // namespace

AddressIndex::AddressIndex(const Epoch& epoch) : epoch_(&epoch) { build(); }

AddressIndex::AddressIndex(const Epoch& epoch, const AddressIndex& like) : epoch_(&epoch) {
  if (!same_ranges(epoch, like.epoch())) {
    build();
    return;
  }
  *this = like;  // the tables hold positions in the epoch, which mean the same ranges here
  epoch_ = &epoch;
}

void AddressIndex::build() {
  layout_ = next_layout.fetch_add(1, std::memory_order_relaxed);
  const Epoch& epoch = *epoch_;
  const std::vector<Span>& spans = epoch.spans;
  const std::vector<Allocation>& allocations = epoch.allocations;
  if (allocations.size() > kMaxAllocations || spans.size() > kMaxSpans) {
    throw Error("address index: epoch \"" + epoch.label + "\" has " + std::to_string(spans.size()) +
                " spans and " + std::to_string(allocations.size()) +
                " allocations, more than the " + std::to_string(kMaxSpans) + " spans and " +
                std::to_string(kMaxAllocations) + " allocations one index holds; split the epoch");
  }

  // Spans: drop empty ones and identical duplicates (views of one storage). One pass reads
  // the epoch's spans; the sweep then reads only these arrays (and the spans' names and
  // sizes where ranges meet), so the epoch is not streamed through the cache again.
  std::vector<Edge> span_starts;
  std::vector<Edge> span_ends;  // duplicates' ends too: erasing what is not active is a no-op
  std::vector<OwnerKind> kinds(spans.size());
  span_starts.reserve(spans.size());
  span_ends.reserve(spans.size());
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const Span& span = spans[i];
    kinds[i] = span.kind;
    if (span.size != 0) {
      const auto item = static_cast<std::int32_t>(i);
      span_starts.push_back({span.begin, item});
      if (has_end(span.begin, span.size)) {
        span_ends.push_back({span.begin + span.size, item});
      }
    }
  }
  const auto size_of = [&](const Edge& edge) {
    return spans[static_cast<std::size_t>(edge.item)].size;
  };
  // By begin, then size, then position in the epoch: radix by begin keeps the epoch order
  // (stable), and runs of one begin (rare: nested spans) are then sorted by size.
  radix_sort(span_starts, kEdgePosition);
  for (auto run = span_starts.begin(); run != span_starts.end();) {
    const auto next = std::find_if(
        run, span_starts.end(), [&](const Edge& edge) { return edge.position != run->position; });
    if (next - run > 1) {
      std::stable_sort(run, next,
                       [&](const Edge& a, const Edge& b) { return size_of(a) < size_of(b); });
    }
    run = next;
  }
  {
    // In place; spans are only dereferenced within a run of equal begins, so distinct
    // spans cost no random access into the epoch.
    std::size_t kept = 0;
    std::size_t run = 0;  // first kept edge with the current (begin, size)
    for (const Edge& edge : span_starts) {
      bool duplicate = false;
      if (kept != 0 && span_starts[kept - 1].position == edge.position &&
          size_of(span_starts[kept - 1]) == size_of(edge)) {
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
  // The order of edges at one position does not matter to the sweep.
  radix_sort(span_ends, kEdgePosition);

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
    alloc_starts.push_back({allocation.begin, static_cast<std::int32_t>(i)});
    if (has_end(allocation.begin, allocation.size)) {
      alloc_ends.push_back({allocation.begin + allocation.size, static_cast<std::int32_t>(i)});
    }
  }
  radix_sort(alloc_starts, kEdgePosition);
  radix_sort(alloc_ends, kEdgePosition);

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
    const std::size_t ends_before = se;
    for (; se < span_ends.size() && span_ends[se].position == position; ++se) {
      active_spans.erase(span_ends[se].item);
    }
    const std::size_t starts_before = ss;
    for (; ss < span_starts.size() && span_starts[ss].position == position; ++ss) {
      active_spans.insert(span_starts[ss].item);
    }
    // A span ends here and neither a span nor an allocation begins: a word equal to this
    // address is the span's end pointer (an allocation beginning here is a tensor of its
    // own, such as the next block of the segment).
    if (se != ends_before && ss == starts_before && head(alloc_starts, as) != position) {
      end_cells_.push_back(static_cast<std::uint32_t>(cells_.size()));
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
      cell.kind = static_cast<std::uint32_t>(kinds[static_cast<std::size_t>(cell.span)]) & 7U;
      const std::size_t count_at = rivals_.size();
      if (covering.size() > 1) {
        rivals_.push_back(0);
      }
      const Span& winner = spans[static_cast<std::size_t>(cell.span)];
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
        rival_lists_.emplace_back(static_cast<std::uint32_t>(cells_.size()),
                                  static_cast<std::uint32_t>(count_at));
        cell.flags |= kRivals;
      }
    }
    if (!active_allocs.items().empty()) {
      cell.allocation = static_cast<std::uint32_t>(active_allocs.items().front()) & kNoAllocation;
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
    high_ = last.span == kNone && last.allocation == kNoAllocation
                ? last.begin - 1
                : std::numeric_limits<Address>::max();
  }
  build_pages();
}

void AddressIndex::build_pages() {
  if (cells_.empty()) {
    return;
  }
  // Coarse pages, about one per 16 cells (at least 64), so that the page table stays small
  // and cheap to build; the buckets of each page then follow its own boundaries.
  const std::uint64_t wanted = std::max<std::uint64_t>(64, std::bit_ceil(cells_.size()) / 16);
  const Address range = high_ - low_;
  while (page_shift_ < 63 && (range >> page_shift_) >= wanted) {
    ++page_shift_;
  }
  const std::size_t page_count = static_cast<std::size_t>(range >> page_shift_) + 1;
  pages_.resize(page_count);
  // Two entries per page at least, and fewer than 2 << kFinerBits per boundary (bit_ceil
  // rounding): one allocation, of which only the part written is touched.
  buckets_.reserve(2 * page_count + (std::size_t{2} << kFinerBits) * cells_.size());
  std::uint32_t cursor = 0;  // cells_[0] holds low_, the first page's start
  const Address page_mask = (Address{1} << page_shift_) - 1;
  const Cell* const cells = cells_.data();
  const auto cell_count = static_cast<std::uint32_t>(cells_.size());
  for (std::size_t p = 0; p < page_count; ++p) {
    Page& page = pages_[p];
    const Address start = low_ + (static_cast<Address>(p) << page_shift_);
    // The last page may stop short of a whole page (high_ may even be the top).
    const Address end = std::min(high_ - start, page_mask) + start;  // its last address
    // `first` holds the previous page's last address (or low_); a cell may begin right at
    // `start`, and the bucket fill below hands bucket 0 over to it.
    const std::uint32_t first = cursor;
    std::uint32_t last = first;  // the cell holding `end`
    while (last + 1 < cell_count && cells[last + 1].begin <= end) {
      ++last;
    }
    cursor = last;
    page.buckets = static_cast<std::uint32_t>(buckets_.size());
    if (last == first) {
      page.base = start;  // extent 0, shift 0: one bucket
      buckets_.push_back(first);
      buckets_.push_back(last);
      continue;
    }
    // Buckets span the page's boundaries only: from just below the first (so that bucket 0
    // starts in `first`) to the last.
    page.base = cells[first + 1].begin - 1;
    page.extent = cells[last].begin - page.base;
    const std::uint64_t wanted_buckets = std::bit_ceil(std::uint64_t{last - first}) << kFinerBits;
    while ((page.extent >> page.shift) >= wanted_buckets) {
      ++page.shift;
    }
    const auto bucket_count = static_cast<std::size_t>(page.extent >> page.shift) + 1;
    buckets_.resize(page.buckets + bucket_count + 1);
    std::uint32_t* const out = buckets_.data() + page.buckets;
    // Bucket b holds the cell holding its first address: the last cell whose begin rounds
    // up to b or below. Written without data-dependent branches: each boundary marks the
    // bucket its begin rounds up to (a later cell overwrites an earlier one), and a running
    // maximum spreads the marks over the buckets without one (resize zeroed them).
    const Address round_up = (Address{1} << page.shift) - 1;
    for (std::uint32_t c = first + 1; c <= last; ++c) {
      const Address from_base = cells[c].begin - page.base;
      out[(from_base >> page.shift) + ((from_base & round_up) != 0 ? 1 : 0)] = c;
    }
    std::uint32_t holder = first;
    for (std::size_t b = 0; b <= bucket_count; ++b) {
      holder = std::max(holder, out[b]);
      out[b] = holder;
    }
  }
}

std::vector<const Span*> AddressIndex::rivals(const AddressHit& hit) const {
  std::vector<const Span*> result;
  if (!hit.has_rivals) {
    return result;
  }
  const auto list = std::lower_bound(rival_lists_.begin(), rival_lists_.end(),
                                     std::make_pair(hit.cell, std::uint32_t{0}));
  const std::uint32_t at = list->second;
  const auto count = static_cast<std::uint32_t>(rivals_[at]);
  result.reserve(count);
  for (std::uint32_t k = 1; k <= count; ++k) {
    result.push_back(&epoch_->spans[static_cast<std::size_t>(rivals_[at + k])]);
  }
  return result;
}

}  // namespace graphcheck
