// The address space is cut into cells in which the set of covering ranges is constant; each
// cell stores its winners, so a lookup is one probe of a two-level table over the cell
// boundaries and never compares names. Spans and allocations are swept apart (each in one
// pass when listed in address order without overlaps) and their boundaries merged.
#include <graphcheck/address_index.h>
#include <graphcheck/error.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "graphcheck/detail/index_layers.h"

namespace graphcheck {

struct AddressIndex::Tables {
  std::uint64_t layout = 0;
  Address low = ~Address{0};
  Address high = 0;
  unsigned page_shift = 0;
  std::vector<Address> begins;  // cell boundaries, then two ~0 sentinels
  std::vector<CellInfo> info;
  std::vector<std::uint8_t> classes;  // CellClass by cell, then 4 bytes of padding
  std::vector<std::uint64_t> pages;   // see AddressIndex::first_candidate
  std::vector<std::uint32_t> buckets;
  // The cells with rivals, in cell order, each with where its list starts in `rivals` (a
  // count, then that many span indices).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> rival_lists;
  std::vector<std::int32_t> rivals;

  void merge(const std::vector<detail::SpanSeg>& spans, const std::vector<detail::AllocSeg>& allocs,
             const std::vector<std::uint32_t>& rival_offsets);
  void build_pages();
  [[nodiscard]] std::size_t bytes() const {
    return begins.capacity() * sizeof(Address) + info.capacity() * sizeof(CellInfo) +
           classes.capacity() + pages.capacity() * sizeof(std::uint64_t) +
           buckets.capacity() * sizeof(std::uint32_t) +
           rival_lists.capacity() * sizeof(std::pair<std::uint32_t, std::uint32_t>) +
           rivals.capacity() * sizeof(std::int32_t);
  }
  // Empties the tables for another build, keeping their memory.
  void clear() {
    layout = 0;
    low = ~Address{0};
    high = 0;
    page_shift = 0;
    begins.clear();
    info.clear();
    classes.clear();
    pages.clear();
    buckets.clear();
    rival_lists.clear();
    rivals.clear();
  }
};

namespace {

// Buckets per cell boundary inside a page: 2 << kFinerBits at most, (1 << kFinerBits) at
// least. With two boundary comparisons per probe one finer step made buckets of three or
// more boundaries rare in the benchmark's worlds, and the tables stay small.
constexpr unsigned kFinerBits = 1;

// AddressIndex::kMulti.
constexpr std::uint32_t kMultiFlag = 0x80000000U;
// Cell numbers stay below kMulti (and so below kNoCell).
constexpr std::size_t kMaxCells = 0x7ffffff0U;

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

using Class = AddressIndex::CellClass;
using Tables = AddressIndex::Tables;

// What a thread keeps between builds: the tables of destroyed indexes (their memory is
// faulted in already; fresh pages cost more than the build itself on some machines) and the
// layers' scratch.
constexpr std::size_t kKeptTables = 2;
constexpr std::size_t kKeptBytes = std::size_t{64} << 20;

// The layers' scratch of one build.
struct Scratch {
  std::vector<detail::SpanSeg> spans;
  std::vector<detail::AllocSeg> allocs;
  std::vector<std::uint32_t> rival_offsets;
  detail::LayerScratch layers;
};

struct ThreadCache {
  std::vector<std::unique_ptr<Tables>> tables;
  Scratch scratch;
  ThreadCache();
  ThreadCache(const ThreadCache&) = delete;
  ThreadCache& operator=(const ThreadCache&) = delete;
  ~ThreadCache();
};

// Whether this thread's cache is yet to be made, alive, or destroyed. A trivially destructible
// thread_local: it outlives the cache. A thread may build an index after its cache is gone:
// glibc's exit() destroys the exiting thread's thread_locals before it runs the atexit
// handlers (the CUPTI injection's exit check builds indexes there), and a later thread_local's
// destructor may build one too. Touching the destroyed cache there was a use after free (the
// exit check of a process whose main thread had checked a destroyed graph crashed 5 in 5).
enum class CacheState : std::uint8_t { kUnborn, kAlive, kGone };
thread_local CacheState cache_state = CacheState::kUnborn;

ThreadCache::ThreadCache() { cache_state = CacheState::kAlive; }
ThreadCache::~ThreadCache() { cache_state = CacheState::kGone; }

// The thread's cache, or null once it is destroyed (builds then go without it).
ThreadCache* thread_cache() {
  if (cache_state == CacheState::kGone) {
    return nullptr;
  }
  thread_local ThreadCache cache;
  return &cache;
}

void release_tables(Tables* tables) {
  if (cache_state == CacheState::kAlive && tables->bytes() <= kKeptBytes) {
    ThreadCache* cache = thread_cache();
    if (cache->tables.size() < kKeptTables) {
      tables->clear();
      cache->tables.emplace_back(tables);
      return;
    }
  }
  delete tables;  // NOLINT(cppcoreguidelines-owning-memory): the deleter of a shared_ptr
}

std::shared_ptr<Tables> acquire_tables() {
  ThreadCache* cache = thread_cache();
  std::unique_ptr<Tables> tables;
  if (cache != nullptr && !cache->tables.empty()) {
    tables = std::move(cache->tables.back());
    cache->tables.pop_back();
  } else {
    tables = std::make_unique<Tables>();
  }
  return {tables.release(), release_tables};
}

// The class of a cell without rivals and not an end cell, by winning span kind (indexed by
// OwnerKind; kinds vary from cell to cell, so a table rather than a branch).
constexpr std::array<std::uint8_t, 8> kKindClass = {
    static_cast<std::uint8_t>(Class::kSoleRegistered),  // kParameter
    static_cast<std::uint8_t>(Class::kSoleRegistered),  // kBuffer
    static_cast<std::uint8_t>(Class::kSoleRuntime),     // kRuntime
    static_cast<std::uint8_t>(Class::kSoleGraph),       // kGraph
    static_cast<std::uint8_t>(Class::kSoleInput),       // kInput
    static_cast<std::uint8_t>(Class::kOther),          static_cast<std::uint8_t>(Class::kOther),
    static_cast<std::uint8_t>(Class::kOther),
};
constexpr auto kOtherClass = static_cast<std::uint8_t>(Class::kOther);
constexpr auto kEndClass = static_cast<std::uint8_t>(Class::kEndCell);
constexpr auto kPoolClass = static_cast<std::uint8_t>(Class::kGraphPool);

}  // namespace

// One cell per boundary of either layer. The span layer has most boundaries in practice:
// its segments are copied in a tight loop up to the next allocation boundary.
void AddressIndex::Tables::merge(const std::vector<detail::SpanSeg>& spans,
                                 const std::vector<detail::AllocSeg>& allocs,
                                 const std::vector<std::uint32_t>& rival_offsets) {
  constexpr Address kDone = std::numeric_limits<Address>::max();
  const std::size_t total = spans.size() + allocs.size();  // at most: shared begins merge
  begins.resize(total + 2);
  info.resize(total);
  classes.resize(total + 4);
  Address* const out_begin = begins.data();
  CellInfo* const out_info = info.data();
  std::uint8_t* const out_class = classes.data();
  std::size_t cell = 0;
  const detail::SpanSeg* span = spans.data();
  const detail::SpanSeg* const spans_end = span + spans.size();
  const detail::AllocSeg* alloc = allocs.data();
  const detail::AllocSeg* const allocs_end = alloc + allocs.size();
  const std::uint32_t* rival_offset = rival_offsets.data();
  // The current span segment (none before the first) and allocation state.
  detail::SpanSeg current{0, kNone, 0, false, false};
  std::uint32_t alloc_bits = kNoAllocation;  // allocation and kGraphPool
  std::uint8_t no_span_class = kOtherClass;  // kPoolClass in a graph pool
  // A cell's class and info from the span segment covering it.
  const auto class_of = [&](const detail::SpanSeg& seg, bool end_cell) {
    std::uint8_t result = seg.span == kNone ? no_span_class : kKindClass[seg.kind & 7U];
    result = seg.rivals ? kOtherClass : result;
    return end_cell ? kEndClass : result;
  };
  const auto bits_of = [&](const detail::SpanSeg& seg) {
    return (static_cast<std::uint32_t>(seg.kind) << kKindShift) | (seg.rivals ? kRivals : 0U) |
           alloc_bits;
  };
  while (span != spans_end || alloc != allocs_end) {
    const Address next_alloc = alloc != allocs_end ? alloc->begin : kDone;
    // Span boundaries before the next allocation boundary: the allocation is unchanged.
    for (; span != spans_end && span->begin < next_alloc; ++span) {
      const detail::SpanSeg& seg = *span;
      out_begin[cell] = seg.begin;
      out_info[cell] = {seg.span, bits_of(seg)};
      out_class[cell] = class_of(seg, seg.ends);
      if (seg.rivals) [[unlikely]] {
        rival_lists.emplace_back(static_cast<std::uint32_t>(cell), *rival_offset++);
      }
      ++cell;
    }
    if (span != spans.data()) {
      current = span[-1];
    }
    if (alloc == allocs_end) {
      break;
    }
    // An allocation boundary, perhaps with a span boundary at the same address.
    bool span_ends = false;
    if (span != spans_end && span->begin == next_alloc) {
      current = *span++;
      span_ends = current.ends;
      if (current.rivals) {
        rival_lists.emplace_back(static_cast<std::uint32_t>(cell), *rival_offset++);
      }
    } else if (current.rivals) {
      rival_lists.emplace_back(static_cast<std::uint32_t>(cell), rival_lists.back().second);
    }
    alloc_bits = (alloc->allocation & kAllocationMask) | (alloc->graph_pool ? kGraphPool : 0U);
    no_span_class = alloc->graph_pool ? kPoolClass : kOtherClass;
    const bool alloc_starts = alloc->starts;
    ++alloc;
    out_begin[cell] = next_alloc;
    out_info[cell] = {current.span, bits_of(current)};
    out_class[cell] = class_of(current, span_ends && !alloc_starts);
    ++cell;
  }
  begins.resize(cell + 2);
  begins[cell] = ~Address{0};
  begins[cell + 1] = ~Address{0};
  info.resize(cell);
  classes.resize(cell + 4);
  std::fill(classes.begin() + static_cast<std::ptrdiff_t>(cell), classes.end(),
            static_cast<std::uint8_t>(Class::kOther));
  if (cell != 0) {
    low = begins.front();
    const CellInfo& last = info.back();
    // The last cell is empty unless a range reaches the top of the address space.
    high = last.span == kNone && (last.packed & kAllocationMask) == kNoAllocation
               ? begins[cell - 1] - 1
               : std::numeric_limits<Address>::max();
  }
}

// The two-level table over [low, high]: the address's offset from low, shifted right by
// page_shift, picks a page; each page splits itself into uniform buckets (two to four per
// cell boundary it holds, up to its last boundary), so that a lookup is two table reads and
// mostly two comparisons with a cell boundary, and far-apart clusters cost nothing in
// between.
void AddressIndex::Tables::build_pages() {
  const auto cells = static_cast<std::uint32_t>(info.size());
  if (cells == 0) {
    return;
  }
  const Address* const b = begins.data();
  // About one page per eight cells (at least 64): pages are one word each.
  const std::uint64_t wanted = std::max<std::uint64_t>(64, std::bit_ceil(std::uint64_t{cells}) / 8);
  const Address range = high - low;
  while (page_shift < 63 && (range >> page_shift) >= wanted) {
    ++page_shift;
  }
  const std::size_t page_count = static_cast<std::size_t>(range >> page_shift) + 1;
  pages.resize(page_count);
  const Address page_mask = (Address{1} << page_shift) - 1;
  // First pass: each page's last cell and bucket count, so that the buckets are one
  // allocation, each entry written once.
  std::vector<std::uint32_t> last_cells(page_count);
  std::uint32_t cursor = 0;  // b[0] is low, the first page's start
  std::size_t total = 0;
  for (std::size_t p = 0; p < page_count; ++p) {
    const Address start = low + (static_cast<Address>(p) << page_shift);
    // The page's last address (the last page may stop short: high may be the top).
    const Address end = std::min(high - start, page_mask) + start;
    std::uint32_t last = cursor;
    while (last + 1 < cells && b[last + 1] <= end) {
      ++last;
    }
    last_cells[p] = last;
    unsigned width = page_shift;  // one bucket
    Address last_bucket = 0;
    if (last != cursor) {
      // The smallest width giving fewer than `wanted` buckets up to the page's last
      // boundary (and at most kLastBucketMask + 1 of them).
      const Address extent = b[last] - start;
      const int wanted_bits =
          static_cast<int>(std::bit_width(std::bit_ceil(std::uint64_t{last - cursor}))) - 1 +
          static_cast<int>(kFinerBits);
      const int extent_bits = static_cast<int>(std::bit_width(extent));
      width = static_cast<unsigned>(std::max({0, extent_bits - wanted_bits, extent_bits - 26}));
      last_bucket = extent >> width;
    }
    pages[p] = (static_cast<std::uint64_t>(total) << 32) | (last_bucket << kWidthBits) | width;
    total += static_cast<std::size_t>(last_bucket) + 2;  // and an entry past the last
    cursor = last;
  }
  buckets.assign(total, 0);
  std::uint32_t* const out = buckets.data();
  cursor = 0;
  for (std::size_t p = 0; p < page_count; ++p) {
    const Address start = low + (static_cast<Address>(p) << page_shift);
    const std::uint64_t page = pages[p];
    const unsigned width = static_cast<unsigned>(page & 63U);
    const auto count = static_cast<std::size_t>((page >> kWidthBits) & kLastBucketMask) + 1;
    std::uint32_t* const bucket = out + (page >> 32);
    const std::uint32_t last = last_cells[p];
    // Bucket k holds the cell holding its first address: the last cell whose begin rounds
    // up to k or below. Each boundary marks the bucket its begin rounds up to (a later cell
    // overwrites an earlier one; past the last bucket, the entry after it), and a running
    // maximum spreads the marks without a data-dependent branch; the entry after the last
    // bucket ends up holding `last`, an upper end for a search in the last bucket.
    const Address round_up = (Address{1} << width) - 1;
    for (std::uint32_t c = cursor + 1; c <= last; ++c) {
      const Address from_start = b[c] - start;
      const Address k = (from_start >> width) + ((from_start & round_up) != 0 ? 1 : 0);
      bucket[k < count ? k : count] = c;
    }
    // Three or more boundaries from one bucket's first cell to the next's: searched (the
    // flag goes on once the next entry is known).
    std::uint32_t holder = std::max(cursor, bucket[0]);
    for (std::size_t k = 1; k <= count; ++k) {
      const std::uint32_t next = std::max(holder, bucket[k]);
      bucket[k - 1] = holder | (next - holder > 2 ? kMultiFlag : 0U);
      holder = next;
    }
    bucket[count] = holder;
    cursor = last;
  }
  // An address at the very top would compare equal to the ~0 sentinels: search instead.
  if (high == ~Address{0}) {
    const std::uint64_t page = pages.back();
    buckets[static_cast<std::size_t>((page >> 32) + ((page >> kWidthBits) & kLastBucketMask))] |=
        kMultiFlag;
  }
}

AddressIndex::AddressIndex(const Epoch& epoch) : epoch_(&epoch) {
  if (epoch.allocations.size() > kMaxAllocations || epoch.spans.size() > detail::kMaxSpans) {
    throw Error("address index: epoch \"" + epoch.label + "\" has " +
                std::to_string(epoch.spans.size()) + " spans and " +
                std::to_string(epoch.allocations.size()) + " allocations, more than the " +
                std::to_string(detail::kMaxSpans) + " spans and " +
                std::to_string(kMaxAllocations) + " allocations one index holds; split the epoch");
  }
  std::shared_ptr<Tables> tables = acquire_tables();
  tables->layout = next_layout.fetch_add(1, std::memory_order_relaxed);
  ThreadCache* cache = thread_cache();
  Scratch own;  // only where the thread's cache is gone
  Scratch& scratch = cache != nullptr ? cache->scratch : own;
  detail::span_layer(epoch.spans, scratch.spans, tables->rivals, scratch.rival_offsets,
                     scratch.layers);
  detail::allocation_layer(epoch.allocations, scratch.allocs, scratch.layers);
  if (scratch.spans.size() + scratch.allocs.size() > kMaxCells) {
    throw Error("address index: epoch \"" + epoch.label + "\" cuts memory into more than " +
                std::to_string(kMaxCells) + " cells; split the epoch");
  }
  tables->merge(scratch.spans, scratch.allocs, scratch.rival_offsets);
  tables->build_pages();
  adopt(std::move(tables));
}

AddressIndex::AddressIndex(const Epoch& epoch, const AddressIndex& like) : epoch_(&epoch) {
  if (!same_ranges(epoch, like.epoch())) {
    *this = AddressIndex(epoch);
    return;
  }
  adopt(like.tables_);  // the tables hold positions in the epoch, which mean the same here
}

void AddressIndex::adopt(std::shared_ptr<const Tables> tables) {
  tables_ = std::move(tables);
  layout_ = tables_->layout;
  low_ = tables_->low;
  high_ = tables_->high;
  page_shift_ = tables_->page_shift;
  page_mask_ = (Address{1} << page_shift_) - 1;
  cell_count_ = static_cast<std::uint32_t>(tables_->info.size());
  begins_ = tables_->begins.data();
  info_ = tables_->info.data();
  classes_ = tables_->classes.data();
  pages_ = tables_->pages.data();
  buckets_ = tables_->buckets.data();
}

std::uint32_t AddressIndex::search(Address address, std::uint32_t entry) const {
  // The boundaries after `first` are searched by doubling steps, then halving: a bucket
  // holds few of them.
  const std::uint32_t first = entry & ~kMulti;
  const std::uint32_t last = cell_count_ - 1;  // never past the final cell (the sentinels)
  std::uint32_t low = first;                   // begins_[low] <= address
  std::uint32_t step = 1;
  while (low + step <= last && begins_[low + step] <= address) {
    low += step;
    step *= 2;
  }
  const std::uint32_t high = std::min(low + step, last + 1);  // begins_[high] > address
  return static_cast<std::uint32_t>(std::upper_bound(begins_ + low, begins_ + high, address) -
                                    begins_) -
         1;
}

std::size_t AddressIndex::table_bytes() const { return tables_ ? tables_->bytes() : 0; }

std::vector<const Span*> AddressIndex::rivals(const AddressHit& hit) const {
  std::vector<const Span*> result;
  if (!hit.has_rivals) {
    return result;
  }
  const std::vector<std::pair<std::uint32_t, std::uint32_t>>& lists = tables_->rival_lists;
  const auto list =
      std::lower_bound(lists.begin(), lists.end(), std::make_pair(hit.cell, std::uint32_t{0}));
  const std::vector<std::int32_t>& rivals = tables_->rivals;
  const std::uint32_t at = list->second;
  const auto count = static_cast<std::uint32_t>(rivals[at]);
  result.reserve(count);
  for (std::uint32_t k = 1; k <= count; ++k) {
    result.push_back(&epoch_->spans[static_cast<std::size_t>(rivals[at + k])]);
  }
  return result;
}

}  // namespace graphcheck
