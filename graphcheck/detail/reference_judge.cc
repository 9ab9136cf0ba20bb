// Deciding references (memoized) and writing their findings.
#include "graphcheck/detail/reference_judge.h"

#include <graphcheck/address_index.h>

#include <algorithm>
#include <limits>
#include <string>

namespace graphcheck::detail {
namespace {

// The last address of the cell (or gap) holding `address` in `index`.
Address cell_last(const AddressIndex& index, Address address) {
  Address first = 0;
  Address last = 0;
  static_cast<void>(index.find_cell(address, &first, &last));
  return last;
}

// Read-write when the same node also uses the finding's bytes the other way (an in-place
// op reads and writes one storage).
Access access_of(const Node& node, const Operand& operand, Address first, Address last) {
  if (operand.access != Access::kRead && operand.access != Access::kWrite) {
    return operand.access;
  }
  for (const Operand& other : node.operands) {
    if (other.access != operand.access && other.access != Access::kUnknown && other.begin <= last &&
        first <= last_address(other)) {
      return Access::kReadWrite;
    }
  }
  return operand.access;
}

}  // namespace

Address last_address(const Operand& operand) {
  if (operand.size == 0) {
    return operand.begin;
  }
  const Address room = std::numeric_limits<Address>::max() - operand.begin;
  return operand.size - 1 <= room ? operand.begin + (operand.size - 1)
                                  : std::numeric_limits<Address>::max();
}

bool ReferenceJudge::uniform(Address first, Address last, const GraphEpochs& epochs,
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

std::uint32_t ReferenceJudge::judge(Address address, std::uint32_t capture_cell,
                                    const GraphEpochs& epochs, const GraphRanges& ranges,
                                    DecisionMemo*& memo) {
  const std::uint32_t checked_cell =
      epochs.checked_cells ? capture_cell : epochs.checked_index->find_cell(address);
  const std::uint32_t baseline_cell =
      epochs.baseline_cells
          ? capture_cell
          : (epochs.baseline == epochs.checked ? checked_cell
                                               : epochs.baseline_index->find_cell(address));
  return judge_cells(address, capture_cell, checked_cell, baseline_cell, epochs, ranges, memo);
}

std::uint32_t ReferenceJudge::judge_cells(Address address, std::uint32_t capture_cell,
                                          std::uint32_t checked_cell, std::uint32_t baseline_cell,
                                          const GraphEpochs& epochs, const GraphRanges& ranges,
                                          DecisionMemo*& memo) {
  if (memo == nullptr) {
    memo = &memos_.try_emplace(epochs.capture, epochs.capture_index->cell_count()).first->second;
  }
  DecisionMemo::Entry& entry = memo->at(capture_cell, checked_cell, baseline_cell);
  RangeQuestion in_graph(ranges, address);
  std::uint32_t decision = entry.decision[0];
  if (entry.ranges_free()) {
    return decision;
  }
  if (!entry.vacant()) {  // decided for one answer to the range question
    decision = entry.decision[in_graph.answer() ? 1 : 0];
  }
  if (decision == DecisionMemo::kUnknown) {
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

Judged ReferenceJudge::judge_range(Address first, Address last, const GraphEpochs& epochs,
                                   const GraphRanges& ranges, DecisionMemo*& memo) {
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
    const int rank = severity(rules_.verdict(decision));
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

void ReferenceJudge::finish() {
  std::vector<Finding>& findings = report_.findings;
  findings.reserve(noted_.size());  // exactly, where a recycled report has fewer
  findings.resize(noted_.size());
  // A finding's node was scanned long before (a check point's graphs are far larger than
  // the caches): its lines are asked for some findings ahead, so that the misses overlap.
  constexpr std::size_t kAhead = 16;
  for (std::size_t i = 0; i < noted_.size(); ++i) {
    if (i + kAhead < noted_.size()) {
      const auto* node = reinterpret_cast<const char*>(noted_[i + kAhead].reference.node);
      __builtin_prefetch(node);
      __builtin_prefetch(node + 64);
    }
    write(noted_[i], findings[i]);
  }
}

// Every field is written: a recycled finding holds another reference's values.
void ReferenceJudge::write(const Noted& noted, Finding& finding) {
  const Reference& reference = noted.reference;
  const Judged& judged = noted.judged;
  const Decided& decided = rules_.decided(judged.decision);
  finding.graph = reference.graph;
  finding.node = reference.node->id;
  finding.node_type = reference.node->type;
  finding.access = Access::kUnknown;
  finding.range_begin = 0;
  finding.range_size = 0;
  if (reference.operand == nullptr) {
    finding.kernel = reference.node->name;
    finding.param = reference.param;
    finding.offset = reference.offset;
    finding.operand.clear();
  } else {
    const Operand& operand = *reference.operand;
    // Op nodes, and kernel operands (TMA descriptor targets), name their op or kernel.
    if (reference.node->type == NodeType::kOp || reference.node->type == NodeType::kKernel) {
      finding.kernel = reference.node->name;
    } else {
      finding.kernel.clear();
    }
    finding.param.reset();
    finding.offset.reset();
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
  finding.fix = decided.fix;
}

}  // namespace graphcheck::detail
