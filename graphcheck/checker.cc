// The verdict engine: scans each graph against its capture epoch and decides each reference
// in the checked epoch against the baseline (docs/verdicts.md). The rules themselves are in
// detail/verdict_rules.cc; this file finds the references, judges operands part by part,
// memoizes decisions and builds the report.
#include <graphcheck/address_index.h>
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/pointer_scan.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graphcheck/detail/allow_use.h"
#include "graphcheck/detail/allowlist.h"
#include "graphcheck/detail/decision_memo.h"
#include "graphcheck/detail/epoch_indexes.h"
#include "graphcheck/detail/verdict_rules.h"

namespace graphcheck {
namespace {

using detail::GraphEpochs;

std::string in_quotes(std::string_view text) { return "\"" + std::string(text) + "\""; }

// The last address of an operand's extent (its begin for an operand without one).
Address last_address(const Operand& operand) {
  if (operand.size == 0) {
    return operand.begin;
  }
  const Address room = std::numeric_limits<Address>::max() - operand.begin;
  return operand.size - 1 <= room ? operand.begin + (operand.size - 1)
                                  : std::numeric_limits<Address>::max();
}

// The last address of the cell (or gap) holding `address` in `index`.
Address cell_last(const AddressIndex& index, Address address) {
  Address first = 0;
  Address last = 0;
  static_cast<void>(index.find_cell(address, &first, &last));
  return last;
}

// A decision and the part of the reference it was made for.
struct Judged {
  std::uint32_t decision = 0;
  Address first = 0;
  Address last = 0;
};

class Checker {
 public:
  Checker(const Snapshot& snapshot, const CheckOptions& options)
      : snapshot_(snapshot),
        options_(options),
        indexes_(snapshot),
        allowlist_(globs()),
        rules_(indexes_, allowlist_),
        allow_use_(snapshot, indexes_, allowlist_) {}

  Report run() {
    checked_ = resolve_option(options_.epoch, "epoch");
    if (!options_.baseline.empty()) {
      baseline_ = resolve_option(options_.baseline, "baseline");
    }
    report_.epoch = checked_->label;
    report_.baseline = baseline_label();
    report_.stale_allow_policy = options_.stale_allow;
    report_.summary.graphs = snapshot_.graphs.size();
    for (std::size_t g = 0; g < snapshot_.graphs.size(); ++g) {
      check_graph(g);
    }
    report_.warnings = rules_.warnings();
    if (allow_use_.active()) {
      allow_use_.finish();
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

  const Epoch& capture_epoch(std::size_t position) {
    const GraphRecord& graph = snapshot_.graphs[position];
    const Epoch* capture = indexes_.find(graph.epoch);
    if (capture == nullptr) {
      throw Error("check: graphs[" + std::to_string(position) + "] (id " +
                  std::to_string(graph.id) + ") names epoch " + in_quotes(graph.epoch) +
                  ", which is not in the snapshot (it has: " + indexes_.labels() +
                  "); fix the graph's epoch label");
    }
    return *capture;
  }

  void check_graph(std::size_t position) {
    const GraphRecord& graph = snapshot_.graphs[position];
    GraphEpochs epochs;
    epochs.capture = &capture_epoch(position);
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
    const bool record_use = allow_use_.active();
    if (record_use) {
      allow_use_.start_graph(*epochs.capture, capture);
    }
    // When the checked and baseline indexes share the capture's cells (all three epochs are
    // one, or the later ones list the same ranges: an epoch after sleep and wake), a
    // reference whose cell has a sole owning span is decided by that span's kind alone: the
    // span at the same position in each epoch has the same name and kind at the same begin,
    // so it neither moved nor gave way to another owner; lost needs no owner or an input
    // owner; there is no overlap to warn about. One in graph pool memory without a span is
    // graph-owned whatever the graph's ranges say (no rule judges graph pool memory). The
    // full rules only run for the rest.
    GraphScan scan{epochs,
                   ranges,
                   capture,
                   nullptr,
                   allow_use_.active(),
                   epochs.checked_cells && epochs.baseline_cells,
                   epochs.checked == epochs.capture && epochs.baseline == epochs.capture};
    // The predicate passes its lookup to the visitor.
    WordOwner word;
    scan_graph(
        graph,
        [&](Address address) {
          // Stored only for references: most words are scalars, and the store per word
          // showed in the instruction counts.
          const WordOwner owner = resolve_word(address, capture, ranges);
          if (owner.is_reference) {
            word = owner;
          }
          return owner.is_reference;
        },
        [&](const Reference& reference) {
          ++report_.summary.references;
          if (reference.operand != nullptr) {
            visit_operand(reference, scan);
          } else {
            visit_point(reference, word.lookup, word.lookup, word.cell, scan);
          }
        });
  }

  // What one graph's references are checked with.
  struct GraphScan {
    const GraphEpochs& epochs;
    const GraphRanges& ranges;
    const AddressIndex& capture;
    // Made on first use: the graphs of one capture epoch share it (checked and baseline
    // epochs are fixed per check).
    detail::DecisionMemo* memo;
    bool record_use;  // the allowlist has globs: references are recorded for AllowUse
    bool aligned;     // checked and baseline indexes share the capture's cells
    bool one_epoch;   // checked, baseline and capture are one epoch
  };

  // A reference decided at one address (a word, or an operand within one cell of each epoch).
  // When the checked and baseline indexes share the capture's cells (all three epochs are
  // one, or the later ones list the same ranges: an epoch after sleep and wake), a
  // reference whose cell has a sole owning span is decided by that span's kind alone: the
  // span at the same position in each epoch has the same name and kind at the same begin,
  // so it neither moved nor gave way to another owner; lost needs no owner or an input
  // owner; there is no overlap to warn about. One in graph pool memory without a span is
  // graph-owned whatever the graph's ranges say (no rule judges graph pool memory). The
  // full rules only run for the rest.
  void visit_point(const Reference& reference, Address first, Address last, std::uint32_t cell,
                   GraphScan& scan) {
    if (scan.record_use) {
      allow_use_.touch(cell, first, last);
    }
    if (scan.aligned) {
      OwnerKind kind = OwnerKind::kParameter;
      if (scan.capture.sole_owner(cell, &kind) && (scan.one_epoch || kind != OwnerKind::kInput)) {
        count(detail::ok_verdict(kind));
        return;
      }
      const AddressHit hit = scan.capture.hit(cell);
      if (hit.span == nullptr && hit.graph_pool) {
        count(Verdict::kGraph);
        return;
      }
    }
    const std::uint32_t decision = judge(first, cell, scan.epochs, scan.ranges, scan.memo);
    settle(reference, {decision, first, last});
  }

  // Operands skip the predicate; one whose extent crosses owners is judged part by part.
  [[gnu::noinline]] void visit_operand(const Reference& reference, GraphScan& scan) {
    const Address first = reference.operand->begin;
    const Address last = last_address(*reference.operand);
    Address cell_first = 0;
    Address cell_end = 0;
    const std::uint32_t cell = scan.capture.find_cell(first, &cell_first, &cell_end);
    if (last <= cell_end && (last == first || uniform(first, last, scan.epochs, scan.ranges))) {
      visit_point(reference, first, last, cell, scan);
      return;
    }
    if (scan.record_use) {
      allow_use_.touch(cell, first, last);
    }
    settle(reference, judge_range(first, last, scan.epochs, scan.ranges, scan.memo));
  }

  // True when [first, last], inside one capture cell, also lies in one cell of the checked
  // and baseline epochs (where they do not share the capture's cells) and on one side of the
  // graph's ranges: then its first address decides it.
  static bool uniform(Address first, Address last, const GraphEpochs& epochs,
                      const GraphRanges& ranges) {
    if (!epochs.checked_cells && last > cell_last(*epochs.checked_index, first)) {
      return false;
    }
    if (!epochs.baseline_cells && last > cell_last(*epochs.baseline_index, first)) {
      return false;
    }
    Address until = 0;
    return ranges.empty() || (ranges.run(first, &until), last <= until);
  }

  // The decision for one address, made once per memo key (its three cells and, where a rule
  // asks, whether the graph's ranges hold it): the rules read the address through nothing
  // else. Not inlined into the scan's visitor, so that the one-epoch path stays lean.
  [[gnu::noinline]] std::uint32_t judge(Address address, std::uint32_t capture_cell,
                                        const GraphEpochs& epochs, const GraphRanges& ranges,
                                        detail::DecisionMemo*& memo) {
    const std::uint32_t checked_cell =
        epochs.checked_cells ? capture_cell : epochs.checked_index->find_cell(address);
    const std::uint32_t baseline_cell =
        epochs.baseline_cells
            ? capture_cell
            : (epochs.baseline == epochs.checked ? checked_cell
                                                 : epochs.baseline_index->find_cell(address));
    return judge_cells(address, capture_cell, checked_cell, baseline_cell, epochs, ranges, memo);
  }

  std::uint32_t judge_cells(Address address, std::uint32_t capture_cell, std::uint32_t checked_cell,
                            std::uint32_t baseline_cell, const GraphEpochs& epochs,
                            const GraphRanges& ranges, detail::DecisionMemo*& memo) {
    if (memo == nullptr) {
      memo = &memos_.try_emplace(epochs.capture, epochs.capture_index->cell_count()).first->second;
    }
    detail::DecisionMemo::Entry& entry = memo->at(capture_cell, checked_cell, baseline_cell);
    detail::RangeQuestion in_graph(ranges, address);
    std::uint32_t decision = entry.decision[0];
    if (entry.ranges_free()) {
      return decision;
    }
    if (!entry.vacant()) {  // decided for one answer to the range question
      decision = entry.decision[in_graph.answer() ? 1 : 0];
    }
    if (decision == detail::DecisionMemo::kUnknown) {
      decision = rules_.decide(epochs.checked_index->hit(checked_cell),
                               epochs.baseline_index->hit(baseline_cell), epochs, in_graph);
      if (in_graph.asked()) {
        entry.decision[in_graph.answer() ? 1 : 0] = decision;
      } else {
        entry.decision = {decision, decision};
      }
    }
    return decision;
  }

  // An operand whose extent crosses cells: the extent is cut where any of the three epochs
  // or the graph's ranges change owner, each part is decided, and the worst decision
  // (`detail::severity`) wins, with the run of adjacent parts that share it.
  Judged judge_range(Address first, Address last, const GraphEpochs& epochs,
                     const GraphRanges& ranges, detail::DecisionMemo*& memo) {
    Judged worst;
    int worst_severity = -1;
    Address at = first;
    while (true) {
      Address ignored = 0;
      Address part_last = last;
      Address until = 0;
      const std::uint32_t capture_cell = epochs.capture_index->find_cell(at, &ignored, &until);
      part_last = std::min(part_last, until);
      std::uint32_t checked_cell = capture_cell;
      if (!epochs.checked_cells) {
        checked_cell = epochs.checked_index->find_cell(at, &ignored, &until);
        part_last = std::min(part_last, until);
      }
      std::uint32_t baseline_cell = capture_cell;
      if (!epochs.baseline_cells) {
        baseline_cell = epochs.baseline_index->find_cell(at, &ignored, &until);
        part_last = std::min(part_last, until);
      }
      if (!ranges.empty()) {
        ranges.run(at, &until);
        part_last = std::min(part_last, until);
      }
      const std::uint32_t decision =
          judge_cells(at, capture_cell, checked_cell, baseline_cell, epochs, ranges, memo);
      const int rank = detail::severity(rules_.verdict(decision));
      if (rank > worst_severity) {
        worst = {decision, at, part_last};
        worst_severity = rank;
      } else if (decision == worst.decision && worst.last + 1 == at) {
        worst.last = part_last;
      }
      if (part_last >= last) {
        return worst;
      }
      at = part_last + 1;
    }
  }

  void settle(const Reference& reference, const Judged& judged) {
    if (judged.decision < detail::kFindingBase) {
      count(static_cast<Verdict>(judged.decision));
    } else {
      add(reference, judged);
    }
  }

  void count(Verdict verdict) { ++report_.summary.counts[static_cast<std::size_t>(verdict)]; }

  // Read-write when the same node also uses the finding's bytes the other way (an in-place
  // op reads and writes one storage).
  static Access access_of(const Node& node, const Operand& operand, Address first, Address last) {
    if (operand.access != Access::kRead && operand.access != Access::kWrite) {
      return operand.access;
    }
    for (const Operand& other : node.operands) {
      if (other.access != operand.access && other.access != Access::kUnknown &&
          other.begin <= last && first <= last_address(other)) {
        return Access::kReadWrite;
      }
    }
    return operand.access;
  }

  void add(const Reference& reference, const Judged& judged) {
    const detail::Decided& decided = rules_.decided(judged.decision);
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
      const Operand& operand = *reference.operand;
      // Op nodes, and kernel operands (TMA descriptor targets), name their op or kernel.
      if (reference.node->type == NodeType::kOp || reference.node->type == NodeType::kKernel) {
        finding.kernel = reference.node->name;
      }
      finding.operand = operand.role;
      finding.access = access_of(*reference.node, operand, judged.first, judged.last);
      if (operand.size != 0) {
        finding.range_begin = judged.first;
        finding.range_size = judged.last - judged.first + 1;
      }
    }
    finding.address = reference.address;
    finding.verdict = decided.verdict;
    finding.owner = decided.owner;
    finding.owner_kind = decided.owner_kind;
    finding.detail = decided.detail;
    finding.fix = std::string(decided.fix);
    report_.findings.push_back(std::move(finding));
  }

  const Snapshot& snapshot_;
  const CheckOptions& options_;
  detail::EpochIndexes indexes_;
  detail::Allowlist allowlist_;
  detail::VerdictRules rules_;
  detail::AllowUse allow_use_;
  const Epoch* checked_ = nullptr;
  const Epoch* baseline_ = nullptr;
  std::unordered_map<const Epoch*, detail::DecisionMemo> memos_;  // by capture epoch
  Report report_;
};

}  // namespace

Report check(const Snapshot& snapshot, const CheckOptions& options) {
  return Checker(snapshot, options).run();
}

}  // namespace graphcheck
