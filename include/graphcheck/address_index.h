// The lookup structure of one epoch: which span owns an address, and which allocation
// holds it, in O(log n) per address (docs/verdicts.md, "Lookup").
#ifndef GRAPHCHECK_ADDRESS_INDEX_H_
#define GRAPHCHECK_ADDRESS_INDEX_H_

#include <graphcheck/address.h>
#include <graphcheck/epoch.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace graphcheck {

/// @brief What one address resolves to in one epoch.
struct AddressHit {
  /// The winning span containing the address (innermost, see `AddressIndex`), or nullptr.
  const Span* span = nullptr;
  /// The innermost allocation containing the address, or nullptr.
  const Allocation* allocation = nullptr;
  /// `span->kind`, copied so that deciding a verdict does not touch the span.
  OwnerKind kind = OwnerKind::kParameter;
  /// True when `allocation` is a graph pool (`Allocation::is_graph_pool`), precomputed.
  bool graph_pool = false;
  /// True when spans of other owners (kind and name) also contain the address.
  bool has_rivals = false;
  /// Opaque cell id for `AddressIndex::rivals`; only meaningful for the index that made it.
  std::uint32_t cell = 0;
};

/// @brief Resolves addresses to the spans and allocations of one epoch.
///
/// Built once per epoch (a few linear passes when the epoch lists its ranges in address
/// order, O(n log n) at worst in the number of spans and allocations); each lookup is
/// a page and a bucket probe plus a search over the few cells of one bucket (O(log n) at
/// worst), no allocation.
///
/// Resolution rules (documented in docs/verdicts.md):
/// - Ranges are half-open: an address equal to a span's `end()` is not inside it.
/// - Spans may overlap: the innermost (smallest) span wins; ties by kind order (parameter,
///   buffer, runtime, input, graph), then by name, then by position in the epoch.
///   Identical spans (same begin, size, kind and name) count once. Empty spans contain
///   nothing.
/// - Allocations may overlap (segment vs block): the innermost wins; ties by begin, then
///   position in the epoch.
///
/// Lifetime: the index points into `epoch`, which must outlive it and not be modified.
/// Thread safety: immutable after construction; concurrent lookups are safe.
class AddressIndex {
 public:
  /// @brief Builds the index of `epoch`'s spans and allocations.
  /// @throws Error when the epoch holds more than `kMaxAllocations` allocations or more than
  /// INT32_MAX spans.
  explicit AddressIndex(const Epoch& epoch);

  /// @brief Builds the index of `epoch` by copying `like`'s tables when `epoch` lists the
  /// same ranges as `like.epoch()`, position by position (spans: begin, size, kind and name;
  /// allocations: begin, size and whether the pool is a graph pool), as an epoch after a
  /// sleep and wake often does; then the two indexes share cell numbers (`same_cells`).
  /// Otherwise builds from scratch, like the one-argument constructor. The comparison costs
  /// a fraction of a build.
  /// Lifetime: `epoch` must outlive the index; `like` need not. Thread safety: only reads
  /// `like`, so it may run beside lookups on `like` in other threads.
  /// @throws Error as the one-argument constructor.
  AddressIndex(const Epoch& epoch, const AddressIndex& like);

  /// The most allocations one epoch's index holds (a cell stores an allocation index in
  /// 27 bits so that a cell fits in 16 bytes); the constructor throws `Error` beyond it.
  static constexpr std::size_t kMaxAllocations = (std::size_t{1} << 27) - 1;

  /// A `find_cell` result for addresses that nothing covers.
  static constexpr std::uint32_t kNoCell = 0xffffffffU;

  /// @brief The span and allocation that `address` resolves to.
  [[nodiscard]] AddressHit find(Address address) const {
    const std::uint32_t cell = find_cell(address);
    return cell == kNoCell ? AddressHit{} : hit_of(cell);
  }

  /// @brief The cell holding `address`, or `kNoCell` when the address lies below or above
  /// all known memory (two comparisons: most scalar words end here). A cell may still be
  /// empty (a gap between ranges); see `holds`.
  [[nodiscard]] std::uint32_t find_cell(Address address) const {
    if (address < low_ || address > high_) {
      return kNoCell;
    }
    return cell_of(address);
  }
  /// @brief `find_cell`, also giving the addresses `[*first, *last]` that resolve alike
  /// (the cell's extent, or the whole gap below or above known memory), so that a caller
  /// may skip the lookup of the next address in the same range.
  [[nodiscard]] std::uint32_t find_cell(Address address, Address* first, Address* last) const {
    if (address < low_) {
      *first = 0;
      *last = low_ - 1;  // low_ > address >= 0
      return kNoCell;
    }
    if (address > high_) {
      *first = high_ + 1;  // high_ < address <= top
      *last = ~Address{0};
      return kNoCell;
    }
    const std::uint32_t cell = cell_of(address);
    *first = cells_[cell].begin;
    *last = cell + 1 < cells_.size() ? cells_[cell + 1].begin - 1 : ~Address{0};
    return cell;
  }
  /// @brief True when a cell number from this index's `find_cell` denotes the same addresses
  /// in `other`'s (built alike, see the two-argument constructor, or a copy): then
  /// `other.hit(find_cell(a))` resolves `a` in `other`'s epoch without a lookup. Not
  /// meaningful for a moved-from index.
  [[nodiscard]] bool same_cells(const AddressIndex& other) const {
    return layout_ == other.layout_;
  }
  /// @brief The number of cells: cell numbers from `find_cell` are below it (or `kNoCell`).
  [[nodiscard]] std::size_t cell_count() const { return cells_.size(); }
  /// @brief A cheap pre-test for `end_pointer_cell`: false when `address` cannot be an end
  /// pointer (it lies inside a cell, not on its first address, or below or far above all
  /// known memory).
  [[nodiscard]] bool may_end_pointer(Address address, std::uint32_t cell) const {
    return cell == kNoCell ? address == high_ + 1 : cells_[cell].begin == address;
  }
  /// @brief The end-pointer rule (docs/verdicts.md, "Pointer scan"): when `address` is one
  /// past the end of a span and no span or allocation begins at `address`, the cell holding
  /// `address - 1`
  /// (the span's last byte), else `kNoCell`. `cell` is `find_cell(address)`. Costs one
  /// comparison unless a cell begins exactly at `address`.
  [[nodiscard]] std::uint32_t end_pointer_cell(Address address, std::uint32_t cell) const {
    if (cell == kNoCell) {
      // One past the topmost range lies past high_, in the final (empty) cell.
      if (address != high_ + 1 || high_ == ~Address{0} || cells_.empty()) {
        return kNoCell;
      }
      cell = static_cast<std::uint32_t>(cells_.size() - 1);
    }
    if (cells_[cell].begin != address || end_cells_.empty()) {
      return kNoCell;
    }
    return std::binary_search(end_cells_.begin(), end_cells_.end(), cell) ? cell - 1 : kNoCell;
  }
  /// @brief True if a span or an allocation covers cell `cell` (from `find_cell`).
  [[nodiscard]] bool holds(std::uint32_t cell) const {
    return cell != kNoCell &&
           (cells_[cell].span != kNone || cells_[cell].allocation != kNoAllocation);
  }
  /// @brief What cell `cell` (from `find_cell`, possibly `kNoCell`) resolves to.
  [[nodiscard]] AddressHit hit(std::uint32_t cell) const {
    return cell == kNoCell ? AddressHit{} : hit_of(cell);
  }
  /// @brief True, with `*kind` set, when cell `cell` has a winning span and no rival owner:
  /// the case where the span alone decides a verdict.
  [[nodiscard]] bool sole_owner(std::uint32_t cell, OwnerKind* kind) const {
    if (cell == kNoCell) {
      return false;
    }
    const Cell& c = cells_[cell];
    *kind = static_cast<OwnerKind>(c.kind);
    return c.span != kNone && (c.flags & kRivals) == 0;
  }

  /// @brief The winning span containing `address`, or nullptr.
  [[nodiscard]] const Span* find_span(Address address) const { return find(address).span; }
  /// @brief The innermost allocation containing `address`, or nullptr.
  [[nodiscard]] const Allocation* find_allocation(Address address) const {
    return find(address).allocation;
  }

  /// @brief The spans containing the address of `hit` whose owner (kind and name) differs
  /// from the winner's, innermost first. Empty unless `hit.has_rivals`.
  [[nodiscard]] std::vector<const Span*> rivals(const AddressHit& hit) const;

  /// @brief The epoch this index was built from.
  [[nodiscard]] const Epoch& epoch() const { return *epoch_; }

 private:
  static constexpr std::int32_t kNone = -1;
  static constexpr std::uint32_t kNoAllocation = (1U << 27) - 1;
  static constexpr std::uint32_t kGraphPool = 1;
  static constexpr std::uint32_t kRivals = 2;

  // Cell i covers [cells_[i].begin, cells_[i + 1].begin); the last one is open to the top.
  // The boundary and the payload share 16 bytes, so a lookup's last probe brings in
  // everything a verdict needs, and four cells share a cache line.
  struct Cell {
    Address begin = 0;
    std::int32_t span = kNone;                      // index into epoch_->spans
    std::uint32_t allocation : 27 = kNoAllocation;  // index into epoch_->allocations
    std::uint32_t kind : 3 = 0;                     // the winning span's OwnerKind
    std::uint32_t flags : 2 = 0;                    // kGraphPool, kRivals
  };
  static_assert(sizeof(Cell) == 16, "a cell is a boundary and two packed indexes");

  // Precondition: cells_ is non-empty and low_ <= address <= high_.
  [[nodiscard]] std::uint32_t cell_of(Address address) const {
    // Written without data-dependent branches (conditional moves): lookups of unrelated
    // addresses follow each other, and a mispredicted branch costs more than the reads.
    const Page& page = pages_[static_cast<std::size_t>((address - low_) >> page_shift_)];
    const Address above = address > page.base ? address - page.base : 0;
    const Address offset = std::min(above, page.extent);
    const std::size_t bucket = page.buckets + static_cast<std::size_t>(offset >> page.shift);
    // The answer is the last cell in [first, first + count] that starts at or below the
    // address; `first` always does. Buckets are fine enough that count is mostly 0 or 1.
    std::uint32_t first = buckets_[bucket];
    std::uint32_t count = buckets_[bucket + 1] - first;
    while (count > 1) {
      const std::uint32_t half = count / 2;
      first = cells_[first + half].begin <= address ? first + half : first;
      count -= half;
    }
    const std::uint32_t next = first + count;
    return cells_[next].begin <= address ? next : first;
  }
  [[nodiscard]] AddressHit hit_of(std::uint32_t cell) const {
    const Cell& c = cells_[cell];
    AddressHit hit;
    hit.cell = cell;
    if (c.span != kNone) {
      hit.span = &epoch_->spans[static_cast<std::size_t>(c.span)];
      hit.kind = static_cast<OwnerKind>(c.kind);
      hit.has_rivals = (c.flags & kRivals) != 0;
    }
    if (c.allocation != kNoAllocation) {
      hit.allocation = &epoch_->allocations[static_cast<std::size_t>(c.allocation)];
      hit.graph_pool = (c.flags & kGraphPool) != 0;
    }
    return hit;
  }
  void build();
  void build_pages();

  const Epoch* epoch_;
  // Equal for indexes with identical tables (one built, the others copied from it); each
  // build takes a fresh number.
  std::uint64_t layout_ = 0;
  // Addresses outside [low_, high_] resolve to nothing: low_ is the first boundary, high_ the
  // last address before the final (empty) cell, or the top when a range reaches it.
  Address low_ = ~Address{0};
  Address high_ = 0;
  std::vector<Cell> cells_;
  // The cells with rivals, in cell order, each with where its list starts in rivals_ (a
  // count, then that many span indices).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> rival_lists_;
  std::vector<std::int32_t> rivals_;
  // The cells that begin where a span ends and no span or allocation begins, in cell order:
  // a kernel word
  // equal to such a cell's begin is that span's end pointer.
  std::vector<std::uint32_t> end_cells_;
  // A two-level table over [low_, high_]: the address's offset from low_, shifted right by
  // page_shift_, picks a page. Pages are coarse, so that the page table stays small; each
  // splits the extent of the cell boundaries it holds into uniform buckets (one to four
  // per boundary), so that a lookup is two table reads and mostly one comparison with a
  // cell boundary, and far-apart clusters cost nothing in between.
  struct Page {
    // Bucket b covers offsets [b << shift, (b + 1) << shift) from base; addresses below
    // base go to bucket 0 and those above base + extent (the page's last boundary) to the
    // last bucket. A page inside one cell has extent 0 and one bucket.
    Address base = 0;
    Address extent = 0;
    std::uint32_t buckets = 0;  // index of its first bucket in buckets_
    std::uint32_t shift = 0;
  };
  unsigned page_shift_ = 0;
  std::vector<Page> pages_;
  // buckets_[page.buckets + b] is the cell holding base + (b << shift), and one entry past
  // the page's last bucket is the cell holding the page's last address: a bucket's
  // addresses resolve to cells between its entry and the next one.
  std::vector<std::uint32_t> buckets_;
};

}  // namespace graphcheck

#endif  // GRAPHCHECK_ADDRESS_INDEX_H_
