// The verdict rules of docs/verdicts.md for one address: what it resolves to in the checked
// epoch and in the baseline, turned into a verdict to count or a finding to report.
#ifndef GRAPHCHECK_DETAIL_VERDICT_RULES_H_
#define GRAPHCHECK_DETAIL_VERDICT_RULES_H_

#include <graphcheck/address_index.h>
#include <graphcheck/epoch.h>
#include <graphcheck/verdict.h>

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graphcheck/detail/allowlist.h"
#include "graphcheck/detail/decision_memo.h"
#include "graphcheck/detail/epoch_indexes.h"

namespace graphcheck::detail {

/// The epochs one graph is checked with, and how their indexes relate.
struct GraphEpochs {
  const Epoch* capture = nullptr;
  const Epoch* checked = nullptr;
  const Epoch* baseline = nullptr;
  const AddressIndex* capture_index = nullptr;
  const AddressIndex* checked_index = nullptr;
  const AddressIndex* baseline_index = nullptr;
  bool compare = false;  // checked and baseline labels differ: stale is possible
  // The checked (baseline) index shares the capture's cell numbers: no second lookup.
  bool checked_cells = false;
  bool baseline_cells = false;
};

/// The ok verdict of an address owned by a span of `kind`.
[[nodiscard]] Verdict ok_verdict(OwnerKind kind);

/// Rank of a decided verdict for judging a range part by part: the worst part wins. Ok
/// verdicts rank 0, `allowed` 1 (it would be a finding), then unregistered, dangling, lost
/// and stale (DESIGN.md precedence).
[[nodiscard]] int severity(Verdict verdict);

/// Decides addresses by the rules, numbering each distinct finding so that the checker's
/// memo can store it (`DecisionMemo`). Overlap warnings are collected as decisions consult
/// the indexes.
/// Lifetime: the indexes, the allowlist and the epochs must outlive it. Thread safety: none
/// (one per check).
class VerdictRules {
 public:
  VerdictRules(EpochIndexes& indexes, const Allowlist& allowlist)
      : indexes_(indexes), allowlist_(allowlist) {}

  /// The decision for an address that resolves to `now` in the checked epoch and to `then`
  /// in the baseline: a verdict number below `kFindingBase`, or a finding number.
  std::uint32_t decide(const AddressHit& now, const AddressHit& then, const GraphEpochs& epochs,
                       RangeQuestion& in_graph);

  /// The finding behind a decision at or above `kFindingBase`.
  [[nodiscard]] const Decided& decided(std::uint32_t decision) const {
    return decided_[decision - kFindingBase];
  }
  /// The verdict of any decision.
  [[nodiscard]] Verdict verdict(std::uint32_t decision) const {
    return decision < kFindingBase ? static_cast<Verdict>(decision) : decided(decision).verdict;
  }

  /// The overlap warning lines collected so far, with the "... and N more" line last.
  [[nodiscard]] std::vector<std::string> warnings() const;

 private:
  std::uint32_t stale_span(const AddressHit& now, const AddressHit& then,
                           const GraphEpochs& epochs);
  std::uint32_t stale_allocation(const AddressHit& now, const AddressHit& then,
                                 const GraphEpochs& epochs);
  std::uint32_t finding(Verdict verdict, const std::string& owner,
                        std::optional<OwnerKind> owner_kind, std::string detail,
                        std::string_view fix);
  bool allowed(const std::string* const (&names)[3]);
  const std::string& unregistered_detail(const Allocation& allocation);
  void note_overlap(const AddressIndex& index, const AddressHit& hit);

  EpochIndexes& indexes_;
  const Allowlist& allowlist_;
  std::vector<Decided> decided_;
  std::set<std::pair<const Span*, const Span*>> overlap_pairs_;
  std::vector<std::string> warnings_;
  // Keyed by the three name pointers, ordered by std::less (a total order on pointers).
  struct NamesLess {
    bool operator()(const std::array<const std::string*, 3>& a,
                    const std::array<const std::string*, 3>& b) const;
  };
  std::map<std::array<const std::string*, 3>, bool, NamesLess> allowed_;
  std::unordered_map<const Allocation*, std::string> unregistered_details_;
};

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_VERDICT_RULES_H_
