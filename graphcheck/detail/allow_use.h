// Which allowlist globs are in use: those matching an owner that some reference has in some
// epoch of the snapshot, whatever the epoch checked (docs/verdicts.md, "Allowlist").
#ifndef GRAPHCHECK_DETAIL_ALLOW_USE_H_
#define GRAPHCHECK_DETAIL_ALLOW_USE_H_

#include <graphcheck/address.h>
#include <graphcheck/address_index.h>
#include <graphcheck/epoch.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "graphcheck/detail/allowlist.h"
#include "graphcheck/detail/epoch_indexes.h"

namespace graphcheck::detail {

/// Collects what the references of a check touch, then marks the allowlist's globs that
/// match an owner there. Costs nothing without globs. A reference's capture cells are
/// recorded (one byte per cell): an epoch that shares the capture's cells resolves them
/// without a lookup; for any other epoch the reference's addresses are kept and looked up
/// once each.
/// Lifetime: the indexes (and their epochs) and the allowlist must outlive it. Thread
/// safety: none (one per check).
class AllowUse {
 public:
  /// A mark per cell. Not a char: stores through a char pointer may alias anything, and
  /// the scan's loop would reload its lookup tables after each one.
  struct CellMark {
    bool set = false;
  };

  AllowUse(EpochIndexes& indexes, Allowlist& allowlist)
      : indexes_(indexes), allowlist_(allowlist) {}

  /// True when there are globs, so that references must be recorded.
  [[nodiscard]] bool active() const { return !allowlist_.empty(); }

  /// Starts recording the references of a graph captured in `capture` (indexed as
  /// `capture_index`). @return true when every epoch shares the capture's cells, so that
  /// touched cells (and the ranges that cross cells) are all that is recorded.
  bool start_graph(const Epoch& capture, const AddressIndex& capture_index);

  /// The current capture epoch's touched-cell table (one byte per capture cell, and a
  /// spare one past them that means nothing), for the scan's fast path to mark; and its
  /// list of recorded ranges.
  [[nodiscard]] CellMark* cells() { return current_->cells.data(); }
  [[nodiscard]] std::vector<std::pair<Address, Address>>& ranges() { return current_->ranges; }

  /// Records a reference's capture cell alone (its range lies in that cell).
  void touch_cell(std::uint32_t cell) { current_->cells[cell].set = true; }

  /// Records a reference resolved at `[first, last]` (one address, or an operand's range),
  /// whose first address lies in capture cell `cell`.
  void touch(std::uint32_t cell, Address first, Address last) {
    CaptureTouches& touches = *current_;
    if (cell != AddressIndex::kNoCell) {
      touches.cells[cell].set = true;
    }
    if (touches.keep_ranges || (last != first && last > touches.cell_last(first))) {
      touches.ranges.emplace_back(first, last);
    }
  }

  /// Records what a graph's pass marked on its own (detail/graph_scan.h): `cells`, one mark
  /// per cell of the current capture epoch (and a spare one), and `ranges`.
  void merge(const std::vector<CellMark>& cells,
             const std::vector<std::pair<Address, Address>>& ranges);

  /// Marks every glob matching an owner the recorded references have in some epoch.
  void finish();

 private:
  struct CaptureTouches {
    const AddressIndex* index = nullptr;
    std::vector<CellMark> cells;  // by capture cell: touched (and a spare entry)
    // Ranges to resolve by address: all of them when some epoch does not share the
    // capture's cells, else only those that cross capture cells.
    std::vector<std::pair<Address, Address>> ranges;
    bool keep_ranges = false;
    [[nodiscard]] Address cell_last(Address address) const;
  };
  void note_cell(const AddressIndex& index, std::uint32_t cell);
  void note(const std::string& name);

  EpochIndexes& indexes_;
  Allowlist& allowlist_;
  std::unordered_map<const Epoch*, CaptureTouches> by_capture_;
  CaptureTouches* current_ = nullptr;
  std::unordered_set<std::string_view> noted_;
};

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_ALLOW_USE_H_
