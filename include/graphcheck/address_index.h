// The lookup structure of one epoch: which span owns an address, and which allocation
// holds it, in O(1) per address in practice, O(log n) at worst (docs/verdicts.md, "Lookup").
#ifndef GRAPHCHECK_ADDRESS_INDEX_H_
#define GRAPHCHECK_ADDRESS_INDEX_H_

#include <graphcheck/address.h>
#include <graphcheck/epoch.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
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
/// Built once per epoch (a few linear passes when the epoch lists its spans and its
/// allocations in address order without overlaps, O(n log n) at worst in the number of
/// spans and allocations); each lookup is a page and a bucket probe plus one or two
/// comparisons with a cell boundary (a search over the boundaries of one bucket at worst,
/// O(log n)), no allocation.
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
/// Copies share the lookup tables (they are immutable), so a copy costs a reference count.
/// A thread keeps the tables of up to two destroyed indexes (of at most 64 MiB each) and
/// builds its next indexes into them, so that a check does not fault in fresh memory for
/// its tables each time.
/// Lifetime: the index points into `epoch`, which must outlive it and not be modified.
/// Thread safety: immutable after construction; concurrent lookups are safe, and so are
/// concurrent copies.
class AddressIndex {
 public:
  /// @brief Builds the index of `epoch`'s spans and allocations.
  /// @throws Error when the epoch holds more than `kMaxAllocations` allocations or more than
  /// INT32_MAX spans.
  explicit AddressIndex(const Epoch& epoch);

  /// @brief Builds the index of `epoch` by sharing `like`'s tables when `epoch` lists the
  /// same ranges as `like.epoch()`, position by position (spans: begin, size, kind and name;
  /// allocations: begin, size and whether the pool is a graph pool), as an epoch after a
  /// sleep and wake often does; then the two indexes share cell numbers (`same_cells`).
  /// Otherwise builds from scratch, like the one-argument constructor. The comparison costs
  /// a fraction of a build, and sharing costs no copy of the tables.
  /// Lifetime: `epoch` must outlive the index; `like` need not (the tables are reference
  /// counted). Thread safety: only reads `like`, so it may run beside lookups on `like` in
  /// other threads.
  /// @throws Error as the one-argument constructor.
  AddressIndex(const Epoch& epoch, const AddressIndex& like);

  /// The most allocations one epoch's index holds; the constructor throws `Error` beyond it.
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
    *first = begins_[cell];
    *last = cell + 1 < cell_count_ ? begins_[cell + 1] - 1 : ~Address{0};
    return cell;
  }
  /// @brief True when a cell number from this index's `find_cell` denotes the same addresses
  /// in `other`'s (built alike, see the two-argument constructor, or a copy): then
  /// `other.hit(find_cell(a))` resolves `a` in `other`'s epoch without a lookup. Not
  /// meaningful for a moved-from index.
  [[nodiscard]] bool same_cells(const AddressIndex& other) const {
    return layout_ == other.layout_;
  }
  /// @brief A number equal for exactly the indexes that share cells (`same_cells`), unique
  /// in the process, so that a cell number can be kept with the layout it belongs to.
  [[nodiscard]] std::uint64_t layout_id() const { return layout_; }
  /// @brief The number of cells: cell numbers from `find_cell` are below it (or `kNoCell`).
  [[nodiscard]] std::size_t cell_count() const { return cell_count_; }
  /// @brief The first address of cell `cell` (below `cell_count()`).
  [[nodiscard]] Address cell_begin(std::uint32_t cell) const { return begins_[cell]; }
  /// @brief A cheap pre-test for `end_pointer_cell`: false when `address` cannot be an end
  /// pointer (it lies inside a cell, not on its first address, or below or far above all
  /// known memory).
  [[nodiscard]] bool may_end_pointer(Address address, std::uint32_t cell) const {
    return cell == kNoCell ? address == high_ + 1 : begins_[cell] == address;
  }
  /// @brief The end-pointer rule (docs/verdicts.md, "Pointer scan"): when `address` is one
  /// past the end of a span and no span or allocation begins at `address`, the cell holding
  /// `address - 1` (the span's last byte), else `kNoCell`. `cell` is `find_cell(address)`.
  /// Costs one comparison and one flag test.
  [[nodiscard]] std::uint32_t end_pointer_cell(Address address, std::uint32_t cell) const {
    if (cell == kNoCell) {
      // One past the topmost range lies past high_, in the final (empty) cell.
      if (address != high_ + 1 || high_ == ~Address{0} || cell_count_ == 0) {
        return kNoCell;
      }
      cell = cell_count_ - 1;
    }
    if (begins_[cell] != address ||
        classes_[cell] != static_cast<std::uint8_t>(CellClass::kEndCell)) {
      return kNoCell;
    }
    return cell - 1;
  }
  /// @brief True if a span or an allocation covers cell `cell` (from `find_cell`).
  [[nodiscard]] bool holds(std::uint32_t cell) const {
    return cell != kNoCell &&
           (info_[cell].span != kNone || (info_[cell].packed & kAllocationMask) != kNoAllocation);
  }
  /// @brief True when cell `cell` (below `cell_count()`) begins where a span ends and no
  /// span or allocation begins: a word equal to its first address is an end pointer.
  [[nodiscard]] bool is_end_cell(std::uint32_t cell) const {
    return classes_[cell] == static_cast<std::uint8_t>(CellClass::kEndCell);
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
    const CellInfo& info = info_[cell];
    *kind = static_cast<OwnerKind>((info.packed >> kKindShift) & 7U);
    return info.span != kNone && (info.packed & kRivals) == 0;
  }
  /// @brief True when cell `cell` (below `cell_count()`) has no span and its innermost
  /// allocation is a graph pool.
  [[nodiscard]] bool graph_pool_only(std::uint32_t cell) const {
    const CellInfo& info = info_[cell];
    return info.span == kNone && (info.packed & kGraphPool) != 0;
  }

  /// @brief What a cell alone says about a reference inside it, for a check whose epochs
  /// share this index's cells (docs/verdicts.md, "Cost"): a sole owning span of one kind, or
  /// graph pool memory without a span; `kOther` where the rules must look further (no span,
  /// rival owners, or an end cell, where the word at its first address is an end pointer).
  enum class CellClass : std::uint8_t {
    kSoleRegistered = 0,  ///< one owner, a parameter or a buffer
    kSoleRuntime = 1,     ///< one owner, runtime state
    kSoleGraph = 2,       ///< one owner, a graph span
    kSoleInput = 3,       ///< one owner, an input
    kGraphPool = 4,       ///< no span; the innermost allocation is a graph pool
    kOther = 5,           ///< no span and no graph pool, or rival owners
    kEndCell = 6,         ///< begins where a span ends and no span or allocation begins
  };
  /// @brief The class of cell `cell` (below `cell_count()`).
  [[nodiscard]] CellClass cell_class(std::uint32_t cell) const {
    return static_cast<CellClass>(classes_[cell]);
  }
  /// @brief The scan's lookup: the cell holding `address` and its class in one probe.
  /// Precondition: `contains(address)`.
  [[nodiscard]] std::uint32_t classify(Address address, CellClass* cell_class) const {
    return classify_probed(address, probe(address), cell_class);
  }
  /// @brief The first half of `classify`: the bucket entry of `address` (two table reads).
  /// A caller looking up a group of addresses probes them all before finishing any, so
  /// that the reads of the group overlap instead of waiting for each other. The value is
  /// opaque, meaningful only to this index's `classify_probed` for the same address.
  /// Precondition: `contains(address)`.
  [[nodiscard]] std::uint32_t probe(Address address) const { return first_candidate(address); }
  /// @brief The second half: `classify(address, cell_class)` from `probe(address)`.
  [[nodiscard]] std::uint32_t classify_probed(Address address, std::uint32_t probe,
                                              CellClass* cell_class) const {
    if ((probe & kMulti) != 0) [[unlikely]] {
      const std::uint32_t cell = search(address, probe);
      *cell_class = static_cast<CellClass>(classes_[cell]);
      return cell;
    }
    // The three candidate classes load beside the boundaries (one unaligned word), so the
    // class does not wait for the comparisons.
    std::uint32_t classes = 0;
    std::memcpy(&classes, classes_ + probe, sizeof(classes));
    const std::uint32_t step =
        (begins_[probe + 1] <= address ? 1U : 0U) + (begins_[probe + 2] <= address ? 1U : 0U);
    *cell_class = static_cast<CellClass>((classes >> (8 * step)) & 0xffU);
    return probe + step;
  }
  /// @brief True when `address` lies in `[low, high]`, the addresses some cell holds (a
  /// cell may still be a gap): `find_cell` returns `kNoCell` exactly outside.
  [[nodiscard]] bool contains(Address address) const {
    return address - low_ <= high_ - low_ && low_ <= high_;
  }
  /// @brief The lowest address `contains` accepts (~0 for an empty index).
  [[nodiscard]] Address low() const { return low_; }
  /// @brief The highest address `contains` accepts (0 for an empty index).
  [[nodiscard]] Address high() const { return high_; }

  /// @brief The winning span containing `address`, or nullptr.
  [[nodiscard]] const Span* find_span(Address address) const { return find(address).span; }
  /// @brief The innermost allocation containing `address`, or nullptr.
  [[nodiscard]] const Allocation* find_allocation(Address address) const {
    return find(address).allocation;
  }

  /// @brief The spans containing the address of `hit` whose owner (kind and name) differs
  /// from the winner's, innermost first, at most 16 of them (the index keeps no more: a
  /// snapshot of nested spans made it quadratic). Empty unless `hit.has_rivals`.
  [[nodiscard]] std::vector<const Span*> rivals(const AddressHit& hit) const;

  /// @brief The epoch this index was built from.
  [[nodiscard]] const Epoch& epoch() const { return *epoch_; }

  /// @brief Bytes the lookup tables take (shared by indexes that share cells).
  [[nodiscard]] std::size_t table_bytes() const;

  /// The tables of an index: defined in address_index.cc, shared by copies.
  struct Tables;

 private:
  static constexpr std::int32_t kNone = -1;
  // CellInfo::packed: the allocation (27 bits; kNoAllocation for none), the winning
  // span's OwnerKind (3 bits), whether the allocation is a graph pool, whether the span has
  // rivals.
  static constexpr std::uint32_t kAllocationMask = (1U << 27) - 1;
  static constexpr std::uint32_t kNoAllocation = kAllocationMask;
  static constexpr unsigned kKindShift = 27;
  static constexpr std::uint32_t kGraphPool = 1U << 30;
  static constexpr std::uint32_t kRivals = 1U << 31;
  // A bucket entry with this bit set holds more than two boundaries: search them.
  static constexpr std::uint32_t kMulti = 0x80000000U;

  // What a cell resolves to (the boundaries are kept apart, in `begins_`, so that a lookup
  // reads 8 bytes per probe; the class, in `classes_`).
  struct CellInfo {
    std::int32_t span;     // index into the epoch's spans, or kNone
    std::uint32_t packed;  // allocation, kind and flags (see kAllocationMask)
  };

  // A page of the two-level table is one word: its first bucket (high 32 bits), its last
  // bucket's number (26 bits) and the bucket width's log2 (low 6 bits). Buckets split the
  // page from its first address uniformly; addresses past the last bucket (past the page's
  // last boundary) go to the last one.
  static constexpr unsigned kWidthBits = 6;
  static constexpr std::uint64_t kLastBucketMask = (std::uint64_t{1} << 26) - 1;

  // The bucket of `address`: the cell holding the bucket's first address, flagged kMulti
  // when the bucket holds more than two cell boundaries. Precondition: low_ <= address <=
  // high_ (so the index has cells). Without data-dependent branches: lookups of unrelated
  // addresses follow each other, and a mispredicted branch costs more than the reads.
  [[nodiscard]] std::uint32_t first_candidate(Address address) const {
    const Address offset = address - low_;
    const std::uint64_t page = pages_[static_cast<std::size_t>(offset >> page_shift_)];
    const Address bucket = (offset & page_mask_) >> (page & 63U);
    const Address last = (page >> kWidthBits) & kLastBucketMask;
    return buckets_[static_cast<std::size_t>((page >> 32) + (bucket < last ? bucket : last))];
  }
  // Precondition: low_ <= address <= high_.
  [[nodiscard]] std::uint32_t cell_of(Address address) const {
    const std::uint32_t first = first_candidate(address);
    if ((first & kMulti) != 0) [[unlikely]] {
      return search(address, first);
    }
    return first + (begins_[first + 1] <= address ? 1U : 0U) +
           (begins_[first + 2] <= address ? 1U : 0U);
  }
  // The last cell that begins at or below `address`, from a kMulti bucket entry.
  [[nodiscard]] std::uint32_t search(Address address, std::uint32_t entry) const;
  [[nodiscard]] AddressHit hit_of(std::uint32_t cell) const {
    const CellInfo& info = info_[cell];
    AddressHit hit;
    hit.cell = cell;
    if (info.span != kNone) {
      hit.span = &epoch_->spans[static_cast<std::size_t>(info.span)];
      hit.kind = static_cast<OwnerKind>((info.packed >> kKindShift) & 7U);
      hit.has_rivals = (info.packed & kRivals) != 0;
    }
    const std::uint32_t allocation = info.packed & kAllocationMask;
    if (allocation != kNoAllocation) {
      hit.allocation = &epoch_->allocations[allocation];
      hit.graph_pool = (info.packed & kGraphPool) != 0;
    }
    return hit;
  }
  void adopt(std::shared_ptr<const Tables> tables);

  const Epoch* epoch_;
  std::shared_ptr<const Tables> tables_;
  // Copied from *tables_ so that a lookup does not load the tables' address first.
  // Equal for indexes that share tables; each build takes a fresh number.
  std::uint64_t layout_ = 0;
  // Addresses outside [low_, high_] resolve to nothing: low_ is the first boundary, high_ the
  // last address before the final (empty) cell, or the top when a range reaches it.
  Address low_ = ~Address{0};
  Address high_ = 0;
  unsigned page_shift_ = 0;
  Address page_mask_ = 0;
  std::uint32_t cell_count_ = 0;
  const Address* begins_ = nullptr;  // cell boundaries, then two ~0 sentinels
  const CellInfo* info_ = nullptr;
  const std::uint8_t* classes_ = nullptr;  // CellClass by cell, then padding
  const std::uint64_t* pages_ = nullptr;
  const std::uint32_t* buckets_ = nullptr;
};

}  // namespace graphcheck

#endif  // GRAPHCHECK_ADDRESS_INDEX_H_
