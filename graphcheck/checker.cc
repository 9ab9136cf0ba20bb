// The verdict engine: scans each graph against its capture epoch and decides each reference
// in the checked epoch against the baseline (docs/verdicts.md).
#include <graphcheck/address_index.h>
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/pointer_scan.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
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

namespace graphcheck {
namespace {

constexpr std::size_t kMaxWarningLines = 100;

constexpr std::string_view kFixUnregistered =
    "register it (set_derived_buffer for weight-derived tensors, register_constant_buffer for "
    "constants, persistent_tensors() for non-module holders) or declare it as runtime state";
constexpr std::string_view kFixLost =
    "register it as a buffer so sleep restores it, or declare it runtime state if the engine "
    "refills it before replay";
constexpr std::string_view kFixDangling =
    "keep the tensor alive (and registered) for the graph's lifetime, or recapture the graph "
    "after freeing it";
constexpr std::string_view kFixStaleMoved =
    "reload in place with copy_ rather than rebinding the tensor, or recapture the graph";
constexpr std::string_view kFixStaleOwner =
    "keep the original storage in place (reload with copy_ instead of rebinding), or recapture "
    "the graph";

std::string in_quotes(std::string_view text) {
  std::string result;
  result.reserve(text.size() + 2);
  result += '"';
  result += text;
  result += '"';
  return result;
}

std::string owner_text(const Span& span) {
  return std::string(to_string(span.kind)) + " " + in_quotes(span.name);
}

// The epochs one graph is checked with.
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

class Checker {
 public:
  Checker(const Snapshot& snapshot, const CheckOptions& options)
      : snapshot_(snapshot), options_(options), indexes_(snapshot), allowlist_(globs()) {}

  Report run() {
    checked_ = resolve_option(options_.epoch, "epoch");
    if (!options_.baseline.empty()) {
      baseline_ = resolve_option(options_.baseline, "baseline");
    }
    report_.epoch = checked_->label;
    report_.baseline = baseline_label();
    report_.summary.graphs = snapshot_.graphs.size();
    for (std::size_t g = 0; g < snapshot_.graphs.size(); ++g) {
      check_graph(g);
    }
    if (overlap_pairs_.size() > kMaxWarningLines) {
      report_.warnings.push_back("... and " +
                                 std::to_string(overlap_pairs_.size() - kMaxWarningLines) +
                                 " more overlapping pairs");
    }
    report_.stale_allow = allowlist_.unused();
    return std::move(report_);
  }

 private:
  [[nodiscard]] std::vector<std::string> globs() const {
    std::vector<std::string> all = snapshot_.allow;
    all.insert(all.end(), options_.allow.begin(), options_.allow.end());
    return all;
  }

  const Epoch* resolve_option(const std::string& label, std::string_view field) {
    if (label.empty()) {
      if (snapshot_.epochs.empty()) {
        throw Error("check: the snapshot has no epochs, so there is nothing to check " +
                    std::string(field == "epoch" ? "in" : "against") +
                    "; add at least one epoch to the snapshot");
      }
      return &snapshot_.epochs.back();
    }
    const Epoch* epoch = indexes_.find(label);
    if (epoch == nullptr) {
      throw Error("check: " + std::string(field) + " " + in_quotes(label) +
                  " is not an epoch of the snapshot (it has: " + indexes_.labels() +
                  "); pass one of those labels");
    }
    return epoch;
  }

  [[nodiscard]] std::string baseline_label() const {
    if (baseline_ != nullptr) {
      return baseline_->label;
    }
    if (snapshot_.graphs.empty()) {
      return "per-graph";
    }
    for (const GraphRecord& graph : snapshot_.graphs) {
      if (graph.epoch != snapshot_.graphs.front().epoch) {
        return "per-graph";
      }
    }
    return snapshot_.graphs.front().epoch;
  }

  void check_graph(std::size_t position) {
    const GraphRecord& graph = snapshot_.graphs[position];
    GraphEpochs epochs;
    epochs.capture = indexes_.find(graph.epoch);
    if (epochs.capture == nullptr) {
      throw Error("check: graphs[" + std::to_string(position) + "] (id " +
                  std::to_string(graph.id) + ") names epoch " + in_quotes(graph.epoch) +
                  ", which is not in the snapshot (it has: " + indexes_.labels() +
                  "); fix the graph's epoch label");
    }
    epochs.checked = checked_;
    epochs.baseline = baseline_ != nullptr ? baseline_ : epochs.capture;
    epochs.capture_index = &indexes_.index(*epochs.capture);
    epochs.checked_index = &indexes_.index(*epochs.checked);
    epochs.baseline_index = &indexes_.index(*epochs.baseline);
    epochs.compare = epochs.checked->label != epochs.baseline->label;
    epochs.checked_cells = epochs.checked_index->same_cells(*epochs.capture_index);
    epochs.baseline_cells = epochs.baseline_index->same_cells(*epochs.capture_index);
    report_.summary.nodes += count_nodes(graph.nodes);

    const GraphRanges ranges(graph);
    const AddressIndex& capture = *epochs.capture_index;
    // When the checked and baseline indexes share the capture's cells (all three epochs are
    // one, or the later ones list the same ranges: an epoch after sleep and wake), a
    // reference whose cell has a sole owning span is decided by that span's kind alone: the
    // span at the same position in each epoch has the same name and kind, so no stale;
    // lost needs no owner or an input owner (and one epoch has one allocation object);
    // there is no overlap to warn about. One in graph pool memory without a span is
    // graph-owned whatever the graph's ranges say (lost excludes graph pools; dangling
    // needs a missing allocation). The full rules only run for the rest.
    const bool one_epoch = epochs.checked == epochs.capture && epochs.baseline == epochs.capture;
    const bool aligned = epochs.checked_cells && epochs.baseline_cells;
    // Made on first use: the graphs of one capture epoch share it (checked and baseline
    // epochs are fixed per check).
    detail::DecisionMemo* memo = nullptr;
    // The predicate passes its lookup to the visitor as a cell number, not a whole hit.
    std::uint32_t capture_cell = AddressIndex::kNoCell;
    scan_graph(
        graph,
        [&](Address word) {
          capture_cell = capture.find_cell(word);
          return capture.holds(capture_cell) || ranges.contains(word);
        },
        [&](const Reference& reference) {
          if (reference.operand != nullptr) {
            capture_cell = capture.find_cell(reference.address);  // operands skip the predicate
          }
          ++report_.summary.references;
          if (aligned) {
            OwnerKind kind = OwnerKind::kParameter;
            if (capture.sole_owner(capture_cell, &kind) &&
                (one_epoch || kind != OwnerKind::kInput)) {
              count(ok_verdict(kind));
              return;
            }
            const AddressHit hit = capture.hit(capture_cell);
            if (hit.span == nullptr && hit.graph_pool) {
              count(Verdict::kGraph);
              return;
            }
          }
          judge(reference, capture_cell, epochs, ranges, memo);
        });
  }

  // One reference, decided once per memo key (its three cells and, where a rule asks,
  // whether the graph's ranges hold it): decide reads the address through nothing else.
  // Not inlined into the scan's visitor, so that the one-epoch path stays lean.
  [[gnu::noinline]] void judge(const Reference& reference, std::uint32_t capture_cell,
                               const GraphEpochs& epochs, const GraphRanges& ranges,
                               detail::DecisionMemo*& memo) {
    if (memo == nullptr) {
      memo = &memos_.try_emplace(epochs.capture, epochs.capture_index->cell_count()).first->second;
    }
    const Address address = reference.address;

    const std::uint32_t checked_cell =
        epochs.checked_cells ? capture_cell : epochs.checked_index->find_cell(address);
    const std::uint32_t baseline_cell =
        epochs.baseline_cells
            ? capture_cell
            : (epochs.baseline == epochs.checked ? checked_cell
                                                 : epochs.baseline_index->find_cell(address));
    detail::DecisionMemo::Entry& entry = memo->at(capture_cell, checked_cell, baseline_cell);
    detail::RangeQuestion in_graph(ranges, address);
    std::uint32_t decision = entry.decision[0];
    if (!entry.ranges_free()) {
      if (!entry.vacant()) {  // decided for one answer to the range question
        decision = entry.decision[in_graph.answer() ? 1 : 0];
      }
      if (decision == detail::DecisionMemo::kUnknown) {
        decision = decide(epochs.checked_index->hit(checked_cell),
                          epochs.baseline_index->hit(baseline_cell), epochs, in_graph);
        if (in_graph.asked()) {
          entry.decision[in_graph.answer() ? 1 : 0] = decision;
        } else {
          entry.decision = {decision, decision};
        }
      }
    }
    settle(reference, decision);
  }

  void settle(const Reference& reference, std::uint32_t decision) {
    if (decision < detail::kFindingBase) {
      count(static_cast<Verdict>(decision));
    } else {
      add(reference, decided_[decision - detail::kFindingBase]);
    }
  }

  // The rules of docs/verdicts.md, in precedence order, for an address that resolves to
  // `now` in the checked epoch and `then` in the baseline.
  std::uint32_t decide(const AddressHit& now, const AddressHit& then, const GraphEpochs& epochs,
                       detail::RangeQuestion& in_graph) {
    note_overlap(*epochs.checked_index, now);
    const Span* owner = now.span;
    const Span* owner_then = then.span;

    // 1. stale
    if (epochs.compare && owner_then != nullptr && then.kind != OwnerKind::kGraph) {
      note_overlap(*epochs.baseline_index, then);
      if (owner != nullptr &&
          (owner->name != owner_then->name || owner->kind != owner_then->kind)) {
        return finding(Verdict::kStale, owner_then->name, owner_then->kind,
                       "now inside " + owner_text(*owner), kFixStaleOwner);
      }
      if (owner == nullptr) {
        if (const Span* moved = indexes_.moved(*epochs.checked, *owner_then)) {
          return finding(
              Verdict::kStale, owner_then->name, owner_then->kind,
              "moved to " + format_address(moved->begin) + " after " + epochs.baseline->label,
              kFixStaleMoved);
        }
      }
    }
    const Allocation* alloc = now.allocation;
    const Allocation* alloc_then = then.allocation;
    const std::string* names[3] = {owner != nullptr ? &owner->name : nullptr,
                                   alloc != nullptr ? &alloc->label : nullptr,
                                   alloc_then != nullptr ? &alloc_then->label : nullptr};

    // 2. lost (the same allocation object in both epochs cannot have changed)
    if (alloc != alloc_then && alloc != nullptr && alloc_then != nullptr &&
        (owner == nullptr || now.kind == OwnerKind::kInput) && !now.graph_pool &&
        (alloc->begin != alloc_then->begin || alloc->generation != alloc_then->generation) &&
        !in_graph.answer()) {
      if (allowed(names)) {
        return static_cast<std::uint32_t>(Verdict::kAllowed);
      }
      std::string detail = alloc->generation != alloc_then->generation
                               ? "generation " + std::to_string(alloc_then->generation) + " -> " +
                                     std::to_string(alloc->generation)
                               : "allocation " + format_address(alloc_then->begin) +
                                     " replaced by " + format_address(alloc->begin);
      detail += " (bytes discarded after " + epochs.baseline->label + ")";
      const bool named = owner != nullptr;
      return finding(
          Verdict::kLost,
          named ? owner->name : (!alloc->label.empty() ? alloc->label : alloc_then->label),
          named ? std::optional<OwnerKind>(owner->kind) : std::nullopt, std::move(detail),
          kFixLost);
    }
    if (owner != nullptr) {
      return static_cast<std::uint32_t>(ok_verdict(now.kind));
    }
    if (in_graph.answer()) {
      return static_cast<std::uint32_t>(Verdict::kGraph);
    }
    // 3. dangling
    if (alloc == nullptr) {
      std::string detail = "no span or live allocation holds it in " + epochs.checked->label;
      if (alloc_then != nullptr) {
        detail = "allocation " + format_address(alloc_then->begin) + " was freed after " +
                 epochs.baseline->label + "; " + detail;
      }
      return finding(Verdict::kDangling, alloc_then != nullptr ? alloc_then->label : "",
                     std::nullopt, std::move(detail), kFixDangling);
    }
    if (now.graph_pool) {
      return static_cast<std::uint32_t>(Verdict::kGraph);
    }
    // 4. unregistered
    if (allowed(names)) {
      return static_cast<std::uint32_t>(Verdict::kAllowed);
    }
    // The detail depends on the allocation alone, and one workspace is often hit by many
    // references: built once per allocation.
    auto [detail, fresh] = unregistered_details_.try_emplace(alloc);
    if (fresh) {
      detail->second = "inside allocation " + format_address(alloc->begin) + " (" +
                       std::to_string(alloc->size) + " bytes, pool " + in_quotes(alloc->pool) +
                       ") that no span covers";
    }
    return finding(Verdict::kUnregistered, alloc->label, std::nullopt, detail->second,
                   kFixUnregistered);
  }

  std::uint32_t finding(Verdict verdict, const std::string& owner,
                        std::optional<OwnerKind> owner_kind, std::string detail,
                        std::string_view fix) {
    decided_.push_back({verdict, owner, owner_kind, std::move(detail), fix});
    return detail::kFindingBase + static_cast<std::uint32_t>(decided_.size() - 1);
  }

  // allowlist_.allows, remembered per set of names: the answer and the globs it marks as
  // used are the same each time, and fnmatch is costly next to a map lookup.
  bool allowed(const std::string* const (&names)[3]) {
    const std::array<const std::string*, 3> key = {names[0], names[1], names[2]};
    const auto [at, fresh] = allowed_.try_emplace(key, false);
    if (fresh) {
      at->second = allowlist_.allows(names, 3);
    }
    return at->second;
  }

  static Verdict ok_verdict(OwnerKind kind) {
    switch (kind) {
      case OwnerKind::kParameter:
      case OwnerKind::kBuffer:
        return Verdict::kRegistered;
      case OwnerKind::kRuntime:
        return Verdict::kRuntime;
      case OwnerKind::kGraph:
        return Verdict::kGraph;
      case OwnerKind::kInput:
        return Verdict::kInput;
    }
    return Verdict::kRegistered;
  }

  void count(Verdict verdict) { ++report_.summary.counts[static_cast<std::size_t>(verdict)]; }

  void add(const Reference& reference, const detail::Decided& decided) {
    count(decided.verdict);
    Finding finding;
    finding.graph = reference.graph;
    finding.node = reference.node->id;
    finding.node_type = reference.node->type;
    if (reference.operand == nullptr) {
      finding.kernel = reference.node->name;
      finding.param = reference.param;
      finding.offset = reference.offset;
    } else {
      // Op nodes, and kernel operands (TMA descriptor targets), name their op or kernel.
      if (reference.node->type == NodeType::kOp || reference.node->type == NodeType::kKernel) {
        finding.kernel = reference.node->name;
      }
      finding.operand = reference.operand->role;
    }
    finding.address = reference.address;
    finding.verdict = decided.verdict;
    finding.owner = decided.owner;
    finding.owner_kind = decided.owner_kind;
    finding.detail = decided.detail;
    finding.fix = std::string(decided.fix);
    report_.findings.push_back(std::move(finding));
  }

  // Records each pair of spans of different owners that a decided address falls in, once.
  void note_overlap(const AddressIndex& index, const AddressHit& hit) {
    if (!hit.has_rivals) {
      return;
    }
    const Span& winner = *hit.span;
    for (const Span* rival : index.rivals(hit)) {
      // Unordered: the same two spans may meet again with the roles swapped.
      const Span* first = std::min(&winner, rival, std::less<>());
      const Span* second = first == rival ? &winner : rival;
      const std::pair<const Span*, const Span*> key(first, second);
      if (!overlap_pairs_.insert(key).second || overlap_pairs_.size() > kMaxWarningLines) {
        continue;
      }
      const char* why = winner.size < rival->size    ? "innermost"
                        : winner.kind != rival->kind ? "same size; kind order"
                                                     : "same size; name order";
      report_.warnings.push_back("epoch " + index.epoch().label + ": " +
                                 format_address(std::max(winner.begin, rival->begin)) + ".." +
                                 format_address(std::min(winner.end(), rival->end())) +
                                 " is inside " + owner_text(winner) + " and " + owner_text(*rival) +
                                 "; resolved to " + in_quotes(winner.name) + " (" + why + ")");
    }
  }

  const Snapshot& snapshot_;
  const CheckOptions& options_;
  detail::EpochIndexes indexes_;
  detail::Allowlist allowlist_;
  const Epoch* checked_ = nullptr;
  const Epoch* baseline_ = nullptr;
  std::set<std::pair<const Span*, const Span*>> overlap_pairs_;
  // Keyed by the three name pointers, ordered by std::less (a total order on pointers).
  struct NamesLess {
    bool operator()(const std::array<const std::string*, 3>& a,
                    const std::array<const std::string*, 3>& b) const {
      return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                          std::less<const std::string*>());
    }
  };
  std::map<std::array<const std::string*, 3>, bool, NamesLess> allowed_;
  std::unordered_map<const Allocation*, std::string> unregistered_details_;
  std::unordered_map<const Epoch*, detail::DecisionMemo> memos_;  // by capture epoch
  std::vector<detail::Decided> decided_;
  Report report_;
};

}  // namespace

Report check(const Snapshot& snapshot, const CheckOptions& options) {
  return Checker(snapshot, options).run();
}

}  // namespace graphcheck
