// Deciding references by the rules, memoized per capture cell, and writing the report's
// counts and findings (docs/verdicts.md, "Verdicts").
#ifndef GRAPHCHECK_DETAIL_REFERENCE_JUDGE_H_
#define GRAPHCHECK_DETAIL_REFERENCE_JUDGE_H_

#include <graphcheck/address.h>
#include <graphcheck/epoch.h>
#include <graphcheck/pointer_scan.h>
#include <graphcheck/report.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "graphcheck/detail/decision_memo.h"
#include "graphcheck/detail/verdict_rules.h"

namespace graphcheck::detail {

/// A decision and the part of the reference it was made for.
struct Judged {
  std::uint32_t decision = 0;
  Address first = 0;
  Address last = 0;
};

/// The last address of an operand's extent (its begin for an operand without one).
[[nodiscard]] Address last_address(const Operand& operand);

/// Decides addresses through the memo of their capture epoch and the rules, and settles
/// references into `report` (a count, or a finding).
/// A report handed over with findings in it (a session's previous report that nobody else
/// holds) has them overwritten in place, so that their strings' memory is used again.
/// Lifetime: the rules and the report must outlive it. Thread safety: none (one per check).
class ReferenceJudge {
 public:
  ReferenceJudge(VerdictRules& rules, Report& report) : rules_(rules), report_(report) {}

  /// The decision for one address, made once per memo key (its three cells and, where a
  /// rule asks, whether the graph's ranges hold it): the rules read the address through
  /// nothing else. `memo` is the graph's capture epoch's, made on first use.
  std::uint32_t judge(Address address, std::uint32_t capture_cell, const GraphEpochs& epochs,
                      const GraphRanges& ranges, DecisionMemo*& memo);

  /// An operand whose extent crosses cells: the extent is cut where any of the three epochs
  /// or the graph's ranges change owner, each part is decided, and the worst decision
  /// (`severity`) wins, with the run of adjacent parts that share it.
  Judged judge_range(Address first, Address last, const GraphEpochs& epochs,
                     const GraphRanges& ranges, DecisionMemo*& memo);

  /// True when [first, last], inside one capture cell, also lies in one cell of the
  /// checked and baseline epochs (where they do not share the capture's cells) and on one
  /// side of the graph's ranges: then its first address decides it.
  static bool uniform(Address first, Address last, const GraphEpochs& epochs,
                      const GraphRanges& ranges);

  /// Counts the verdict; a finding is also noted, and written by `finish`.
  void settle(const Reference& reference, const Judged& judged) {
    if (judged.decision < kFindingBase) {
      ++report_.summary.counts[judged.decision];
    } else {
      ++report_.summary.counts[static_cast<std::size_t>(rules_.decided(judged.decision).verdict)];
      noted_.push_back({reference, judged});
    }
  }

  /// Writes the findings noted, in order, into the report: its vector grown once to their
  /// number (the findings of a recycled report overwritten, those left over dropped).
  void finish();

 private:
  std::uint32_t judge_cells(Address address, std::uint32_t capture_cell, std::uint32_t checked_cell,
                            std::uint32_t baseline_cell, const GraphEpochs& epochs,
                            const GraphRanges& ranges, DecisionMemo*& memo);
  // A finding noted: a few words, where a `Finding` holds five strings; the findings are
  // written once their number is known.
  struct Noted {
    Reference reference;
    Judged judged;
  };
  void write(const Noted& noted, Finding& finding);

  VerdictRules& rules_;
  Report& report_;
  std::vector<Noted> noted_;
  std::unordered_map<const Epoch*, DecisionMemo> memos_;  // by capture epoch
};

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_REFERENCE_JUDGE_H_
