// Memo of verdict decisions by the cells a reference's address falls in, for checks that
// consult more than one epoch (docs/verdicts.md, "Cost").
#ifndef GRAPHCHECK_DETAIL_DECISION_MEMO_H_
#define GRAPHCHECK_DETAIL_DECISION_MEMO_H_

#include <graphcheck/address.h>
#include <graphcheck/epoch.h>
#include <graphcheck/pointer_scan.h>
#include <graphcheck/verdict.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace graphcheck::detail {

/// Whether a reference's address lies in its graph's ranges (mem_alloc nodes), asked only
/// where a rule needs it: a decision that never asked holds for every address of its cells.
/// Lifetime: `ranges` must outlive it.
class RangeQuestion {
 public:
  RangeQuestion(const GraphRanges& ranges, Address address) : ranges_(ranges), address_(address) {}
  bool answer() {
    if (state_ == State::kUnasked) {
      state_ = ranges_.contains(address_) ? State::kInside : State::kOutside;
    }
    return state_ == State::kInside;
  }
  [[nodiscard]] bool asked() const { return state_ != State::kUnasked; }

 private:
  enum class State : std::uint8_t { kUnasked, kOutside, kInside };
  const GraphRanges& ranges_;
  Address address_;
  State state_ = State::kUnasked;
};

/// A finding's fields that depend on the epochs and the cells, not on the reference.
/// `fix` views a string constant.
struct Decided {
  Verdict verdict = Verdict::kRegistered;
  std::string owner;
  std::optional<OwnerKind> owner_kind;
  std::string detail;
  std::string_view fix;
};

/// Decisions as memo numbers: a verdict to count (below kFindingBase), or a finding to add
/// (kFindingBase + its position in the checker's list of them).
constexpr std::uint32_t kFindingBase = 256;
static_assert(kVerdictCount < kFindingBase, "verdict numbers stay below finding numbers");

/// A direct-mapped table from a capture cell to the decision the rules made for an address
/// in that cell and in given checked and baseline cells: once for an address outside the
/// graph's ranges (`decision[0]`) and once for one inside (`decision[1]`). A decision that
/// never asked about the ranges is stored in both. Decisions are opaque numbers to the
/// memo, `kUnknown` for none yet.
///
/// The rules read an address only through its three cells and the graph-range question, so
/// every address with the same cells and answer gets the same decision. One entry per
/// capture cell: when the checked and baseline indexes share the capture's cell numbers
/// (an epoch after sleep and wake) every lookup after the first hits; otherwise an entry
/// keeps the last checked and baseline cells seen and starts over when they change.
/// Thread safety: none. References from `at` are valid until the next `at`.
class DecisionMemo {
 public:
  static constexpr std::uint32_t kUnknown = 0xffffffffU;

  struct Entry {
    std::uint32_t checked = kUnknown;
    std::uint32_t baseline = kUnknown;
    std::array<std::uint32_t, 2> decision = {kUnknown, kUnknown};
    /// True when one decision serves both graph-range answers.
    [[nodiscard]] bool ranges_free() const {
      return decision[0] == decision[1] && decision[0] != kUnknown;
    }
    /// True when nothing is stored for these cells yet.
    [[nodiscard]] bool vacant() const { return decision[0] == kUnknown && decision[1] == kUnknown; }
  };

  /// A memo for capture cells `[0, capture_cells)`; any larger number (an address outside
  /// the capture's known memory, `AddressIndex::kNoCell`) shares one more entry.
  explicit DecisionMemo(std::size_t capture_cells)
      : last_(capture_cells), blocks_((capture_cells >> kBlockBits) + 1) {}

  /// The entry for the three cells: the stored one when it was made for the same checked
  /// and baseline cells, else a vacant one that replaces it.
  Entry& at(std::uint32_t capture, std::uint32_t checked, std::uint32_t baseline) {
    const std::size_t slot = std::min<std::size_t>(capture, last_);
    std::unique_ptr<Entry[]>& block = blocks_[slot >> kBlockBits];
    if (!block) {
      block = std::make_unique<Entry[]>(kBlockSize);
    }
    Entry& entry = block[slot & (kBlockSize - 1)];
    if (entry.checked != checked || entry.baseline != baseline) {
      entry = Entry{checked, baseline, {kUnknown, kUnknown}};
    }
    return entry;
  }

 private:
  // Entries come in blocks made on first use, so that a check whose few references need
  // the memo does not pay for one entry per cell of a large epoch.
  static constexpr unsigned kBlockBits = 10;
  static constexpr std::size_t kBlockSize = std::size_t{1} << kBlockBits;

  std::size_t last_;  // the entry shared by cell numbers past the capture's cells
  std::vector<std::unique_ptr<Entry[]>> blocks_;
};

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_DECISION_MEMO_H_
