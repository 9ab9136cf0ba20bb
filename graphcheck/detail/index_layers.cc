// The span and allocation layers of an address index. In address order without overlaps
// (the common case: a registry listed by address, an allocation table) each layer costs one
// pass over its ranges; otherwise a stable radix sort by begin and a sweep over the
// boundaries keep the active ranges best first.
#include "graphcheck/detail/index_layers.h"

#include <algorithm>
#include <array>
#include <tuple>

#include "graphcheck/detail/radix_sort.h"

namespace graphcheck::detail {
namespace {

// Tie order among spans of the same size: parameter, buffer, runtime, input, graph. Spans
// the contract restores come first so that a registered tensor is named over memory that
// merely happens to contain it.
constexpr std::array<int, 5> kKindRank = {0, 1, 2, 4, 3};  // indexed by OwnerKind

int kind_rank(OwnerKind kind) { return kKindRank.at(static_cast<std::size_t>(kind)); }

using Edge = LayerScratch::Edge;

constexpr auto kEdgePosition = [](const Edge& edge) { return edge.position; };
constexpr Address kDone = std::numeric_limits<Address>::max();

// The end of [begin, begin + size), or nothing when it lies past the top of the address
// space (such a range is open to the top and never ends in the sweep).
bool has_end(Address begin, std::uint64_t size) {
  return size <= std::numeric_limits<Address>::max() - begin;
}

Address head(const std::vector<Edge>& list, std::size_t at) {
  return at < list.size() ? list[at].position : kDone;
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

// Walks sorted start and end edges position by position: the ranges that end at a position
// leave `active`, those that start there enter it, then `visit(position, ended, started)`
// sees the new covering set (`ended`, `started`: whether any range ended or started there).
template <typename Active, typename Visit>
void sweep(const std::vector<Edge>& starts, const std::vector<Edge>& ends, Active& active,
           const Visit& visit) {
  std::size_t s = 0;
  std::size_t e = 0;
  while (s < starts.size() || e < ends.size()) {
    const Address position = std::min(head(starts, s), head(ends, e));
    const std::size_t ends_before = e;
    for (; e < ends.size() && ends[e].position == position; ++e) {
      active.erase(ends[e].item);
    }
    const std::size_t starts_before = s;
    for (; s < starts.size() && starts[s].position == position; ++s) {
      active.insert(starts[s].item);
    }
    visit(position, e != ends_before, s != starts_before);
  }
}

// Ranges listed by strictly increasing begin, each ending at or before the next begins
// (empty ones skipped): segments straight from the list. False, with `segs` cleared, when
// the list is not so.
template <typename Range, typename Seg, typename MakeRange, typename MakeGap>
bool ordered_layer(const std::vector<Range>& ranges, std::vector<Seg>& segs, MakeRange make_range,
                   MakeGap make_gap) {
  segs.clear();
  segs.reserve(2 * ranges.size() + 1);
  bool any = false;
  Address last_begin = 0;
  Address end = 0;
  bool open = false;  // the previous range reaches the top of the address space
  for (std::size_t i = 0; i < ranges.size(); ++i) {
    const Range& range = ranges[i];
    if (range.size == 0) {
      continue;
    }
    if (any) {
      if (open || range.begin <= last_begin || range.begin < end) {
        segs.clear();
        return false;
      }
      if (end < range.begin) {
        segs.push_back(make_gap(end));
      }
    }
    segs.push_back(make_range(range, i));
    any = true;
    last_begin = range.begin;
    open = !has_end(range.begin, range.size);
    end = open ? 0 : range.begin + range.size;
  }
  if (any && !open) {
    segs.push_back(make_gap(end));
  }
  return true;
}

void swept_spans(const std::vector<Span>& spans, std::vector<SpanSeg>& segs,
                 std::vector<std::int32_t>& rivals, std::vector<std::uint32_t>& rival_offsets,
                 LayerScratch& scratch) {
  // Drop empty spans and identical duplicates (views of one storage).
  std::vector<Edge>& starts = scratch.starts;
  std::vector<Edge>& ends = scratch.ends;  // duplicates' ends too: erasing what is not active
                                           // is a no-op
  starts.clear();
  ends.clear();
  starts.reserve(spans.size());
  ends.reserve(spans.size());
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const Span& span = spans[i];
    if (span.size != 0) {
      const auto item = static_cast<std::int32_t>(i);
      starts.push_back({span.begin, item});
      if (has_end(span.begin, span.size)) {
        ends.push_back({span.begin + span.size, item});
      }
    }
  }
  const auto size_of = [&](const Edge& edge) {
    return spans[static_cast<std::size_t>(edge.item)].size;
  };
  // By begin, then size, then position in the epoch: radix by begin keeps the epoch order
  // (stable), and runs of one begin (rare: nested spans) are then sorted by size.
  radix_sort(starts, kEdgePosition);
  for (auto run = starts.begin(); run != starts.end();) {
    const auto next = std::find_if(
        run, starts.end(), [&](const Edge& edge) { return edge.position != run->position; });
    if (next - run > 1) {
      std::stable_sort(run, next,
                       [&](const Edge& a, const Edge& b) { return size_of(a) < size_of(b); });
    }
    run = next;
  }
  {
    std::size_t kept = 0;
    std::size_t run = 0;  // first kept edge with the current (begin, size)
    for (const Edge& edge : starts) {
      bool duplicate = false;
      if (kept != 0 && starts[kept - 1].position == edge.position &&
          size_of(starts[kept - 1]) == size_of(edge)) {
        const Span& span = spans[static_cast<std::size_t>(edge.item)];
        for (std::size_t k = run; k < kept && !duplicate; ++k) {
          const Span& other = spans[static_cast<std::size_t>(starts[k].item)];
          duplicate = other.kind == span.kind && other.name == span.name;
        }
      } else {
        run = kept;
      }
      if (!duplicate) {
        starts[kept++] = edge;
      }
    }
    starts.resize(kept);
  }
  radix_sort(ends, kEdgePosition);  // the order of edges at one position does not matter

  const auto less = [&](std::int32_t a, std::int32_t b) {
    const Span& x = spans[static_cast<std::size_t>(a)];
    const Span& y = spans[static_cast<std::size_t>(b)];
    const int x_rank = kind_rank(x.kind);
    const int y_rank = kind_rank(y.kind);
    return std::tie(x.size, x_rank, x.name, a) < std::tie(y.size, y_rank, y.name, b);
  };
  ActiveSet<decltype(less)> active(less);
  segs.clear();
  segs.reserve(starts.size() + ends.size());
  sweep(starts, ends, active, [&](Address position, bool ended, bool started) {
    SpanSeg seg{position, -1, 0, ended && !started, false};
    const std::vector<std::int32_t>& covering = active.items();
    if (!covering.empty()) {
      seg.span = covering.front();
      const Span& winner = spans[static_cast<std::size_t>(seg.span)];
      seg.kind = static_cast<std::uint8_t>(winner.kind);
      const std::size_t count_at = rivals.size();
      if (covering.size() > 1) {
        rivals.push_back(0);
        for (std::size_t k = 1; k < covering.size() && rivals.size() - count_at <= kMaxRivals;
             ++k) {
          const Span& other = spans[static_cast<std::size_t>(covering[k])];
          if (other.kind != winner.kind || other.name != winner.name) {
            rivals.push_back(covering[k]);
          }
        }
        if (rivals.size() == count_at + 1) {
          rivals.pop_back();
        } else {
          rivals[count_at] = static_cast<std::int32_t>(rivals.size() - count_at - 1);
          rival_offsets.push_back(static_cast<std::uint32_t>(count_at));
          seg.rivals = true;
        }
      }
    }
    segs.push_back(seg);
  });
}

void swept_allocations(const std::vector<Allocation>& allocations, std::vector<AllocSeg>& segs,
                       LayerScratch& scratch) {
  std::vector<Edge>& starts = scratch.starts;
  std::vector<Edge>& ends = scratch.ends;
  starts.clear();
  ends.clear();
  starts.reserve(allocations.size());
  ends.reserve(allocations.size());
  for (std::size_t i = 0; i < allocations.size(); ++i) {
    const Allocation& allocation = allocations[i];
    if (allocation.size == 0) {
      continue;
    }
    starts.push_back({allocation.begin, static_cast<std::int32_t>(i)});
    if (has_end(allocation.begin, allocation.size)) {
      ends.push_back({allocation.begin + allocation.size, static_cast<std::int32_t>(i)});
    }
  }
  radix_sort(starts, kEdgePosition);
  radix_sort(ends, kEdgePosition);
  const auto less = [&](std::int32_t a, std::int32_t b) {
    const Allocation& x = allocations[static_cast<std::size_t>(a)];
    const Allocation& y = allocations[static_cast<std::size_t>(b)];
    return std::tie(x.size, x.begin, a) < std::tie(y.size, y.begin, b);
  };
  ActiveSet<decltype(less)> active(less);
  segs.clear();
  segs.reserve(starts.size() + ends.size());
  sweep(starts, ends, active, [&](Address position, bool /*ended*/, bool started) {
    AllocSeg seg{position, 0xffffffffU, false, started};
    if (!active.items().empty()) {
      seg.allocation = static_cast<std::uint32_t>(active.items().front());
      seg.graph_pool = allocations[seg.allocation].is_graph_pool();
    }
    segs.push_back(seg);
  });
}

}  // namespace

void span_layer(const std::vector<Span>& spans, std::vector<SpanSeg>& segs,
                std::vector<std::int32_t>& rivals, std::vector<std::uint32_t>& rival_offsets,
                LayerScratch& scratch) {
  rival_offsets.clear();
  const bool ordered = ordered_layer(
      spans, segs,
      [](const Span& span, std::size_t i) {
        return SpanSeg{span.begin, static_cast<std::int32_t>(i),
                       static_cast<std::uint8_t>(span.kind), false, false};
      },
      [](Address end) {
        return SpanSeg{end, -1, 0, true, false};
      });
  if (!ordered) {
    swept_spans(spans, segs, rivals, rival_offsets, scratch);
  }
}

void allocation_layer(const std::vector<Allocation>& allocations, std::vector<AllocSeg>& segs,
                      LayerScratch& scratch) {
  const bool ordered = ordered_layer(
      allocations, segs,
      [](const Allocation& allocation, std::size_t i) {
        return AllocSeg{allocation.begin, static_cast<std::uint32_t>(i), allocation.is_graph_pool(),
                        true};
      },
      [](Address end) {
        return AllocSeg{end, 0xffffffffU, false, false};
      });
  if (!ordered) {
    swept_allocations(allocations, segs, scratch);
  }
}

}  // namespace graphcheck::detail
