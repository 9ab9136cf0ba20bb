// The lookup structure of one epoch: which span owns an address, and which allocation
// holds it, in O(log n) per address (docs/verdicts.md, "Lookup").
#ifndef GRAPHCHECK_ADDRESS_INDEX_H_
#define GRAPHCHECK_ADDRESS_INDEX_H_

#include <graphcheck/address.h>
#include <graphcheck/epoch.h>

#include <cstdint>
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
/// Built once per epoch (O(n log n) in the number of spans and allocations); each lookup is
/// a bucket probe plus a binary search over the cell boundaries, O(log n), no allocation.
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
  explicit AddressIndex(const Epoch& epoch);

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
  [[nodiscard]] std::uint32_t find_cell(Address address, Address* first, Address* last) const;
  /// @brief True if a span or an allocation covers cell `cell` (from `find_cell`).
  [[nodiscard]] bool holds(std::uint32_t cell) const {
    return cell != kNoCell && (cells_[cell].span != kNone || cells_[cell].allocation != kNone);
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
    *kind = c.kind;
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
  static constexpr std::uint8_t kGraphPool = 1;
  static constexpr std::uint8_t kRivals = 2;
  // Cell i covers [cells_[i].begin, cells_[i + 1].begin); the last one is open to the top.
  // The boundary and the payload share a cache line, so a lookup's last probe brings in
  // everything a verdict needs.
  struct Cell {
    Address begin = 0;
    std::int32_t span = kNone;        // index into epoch_->spans
    std::int32_t allocation = kNone;  // index into epoch_->allocations
    std::uint32_t rivals = 0;         // into rivals_: a count, then that many span indices
    OwnerKind kind = OwnerKind::kParameter;
    std::uint8_t flags = 0;  // kGraphPool, kRivals
  };

  [[nodiscard]] std::uint32_t cell_of(Address address) const;
  [[nodiscard]] AddressHit hit_of(std::uint32_t cell) const;
  void build_buckets();

  const Epoch* epoch_;
  // Addresses outside [low_, high_] resolve to nothing: low_ is the first boundary, high_ the
  // last address before the final (empty) cell, or the top when a range reaches it.
  Address low_ = ~Address{0};
  Address high_ = 0;
  std::vector<Cell> cells_;
  std::vector<std::int32_t> rivals_;
  // Device addresses come in clusters (weights, graph pool, KV cache) far apart, so the
  // cells are cut at their largest gaps into regions, each with its own uniform buckets:
  // bucket b of region r holds the cells c with ((c.begin - r.low) >> r.shift) == b, from
  // buckets_[r.buckets + b] to buckets_[r.buckets + b + 1]. A lookup finds its region
  // among a few dozen, then binary-searches one short bucket.
  struct Region {
    Address low = 0;   // begin of the region's first cell
    Address last = 0;  // begin of its last cell
    std::uint32_t last_cell = 0;
    std::uint32_t buckets = 0;  // index of its first bucket in buckets_
    unsigned shift = 0;
  };
  // region_lows_[r] == regions_[r].low, padded with the top address to a power of two.
  std::vector<Address> region_lows_;
  std::vector<Region> regions_;
  std::vector<std::uint32_t> buckets_;
};

}  // namespace graphcheck

#endif  // GRAPHCHECK_ADDRESS_INDEX_H_
