// The verdict engine: finds each graph's references (in batches of argument words, so that
// the lookups of unrelated words overlap), decides them by their capture cell where the
// cell alone decides, by the rules of detail/verdict_rules.cc (memoized) otherwise, and
// builds the report. Operands are judged part by part where their extent crosses owners.
#include "graphcheck/detail/check_engine.h"

#include <graphcheck/address_index.h>
#include <graphcheck/error.h>
#include <graphcheck/pointer_scan.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>

#include "graphcheck/detail/allow_use.h"
#include "graphcheck/detail/allowlist.h"
#include "graphcheck/detail/cell_counts.h"
#include "graphcheck/detail/decision_memo.h"
#include "graphcheck/detail/reference_judge.h"
#include "graphcheck/detail/unattributed.h"
#include "graphcheck/detail/verdict_rules.h"
#include "graphcheck/detail/word_batch.h"

namespace graphcheck::detail {
namespace {

using Class = AddressIndex::CellClass;

class Engine {
 public:
  Engine(const CheckInput& input, CheckStats* stats)
      : input_(input),
        options_(*input.options),
        indexes_(*input.indexes),
        allowlist_(input.globs),
        rules_(indexes_, allowlist_),
        allow_use_(indexes_, allowlist_),
        judge_(rules_, report_),
        stats_(stats) {
    if (input.recycle != nullptr) {
      // Its findings are overwritten in place (their strings' memory used again).
      report_.findings = std::move(input.recycle->findings);
    }
  }

  Report run() {
    checked_ = &indexes_.resolve(options_.epoch, "epoch");
    if (!options_.baseline.empty()) {
      baseline_ = &indexes_.resolve(options_.baseline, "baseline");
    }
    report_.epoch = checked_->label;
    report_.baseline = baseline_label();
    report_.stale_allow_policy = options_.stale_allow;
    report_.summary.graphs = input_.graphs.size();
    for (std::size_t g = 0; g < input_.graphs.size(); ++g) {
      check_graph(g);
    }
    judge_.finish();
    report_.warnings = rules_.warnings();
    if (allow_use_.active()) {
      allow_use_.finish();
    }
    report_.stale_allow = allowlist_.unused();
    return std::move(report_);
  }

 private:
  // What one graph's references are checked with.
  struct GraphScan {
    const GraphRecord* graph = nullptr;
    GraphEpochs epochs;
    const GraphRanges* ranges = nullptr;
    const AddressIndex* capture = nullptr;
    DecisionMemo* memo = nullptr;  // made on first use, per capture epoch
    bool record_use = false;       // the allowlist has globs: references are recorded
    bool keep_ranges = false;      // ... with their addresses (an epoch has other cells)
    bool aligned = false;          // checked and baseline indexes share the capture's cells
    std::uint32_t fast = 0;        // classes decided by the cell alone (bit per class)
    GraphTable* table = nullptr;   // a session's table being filled
    std::vector<AllowUse::CellMark>* pool_cells = nullptr;  // graph pool cells touched
    bool hold = false;        // the first pass: what the graph's ranges may change is held
    bool has_ranges = false;  // ... and it met a mem_alloc node with an extent
  };

  // What the fast path leaves to the rules, in reference order: a word that is a reference
  // (its node, argument, offset, lookup address and capture cell), a word in a gap that
  // looks like a pointer, or a node's operands. The first pass of a graph holds these back.
  struct Held {
    enum class Kind : std::uint8_t { kWord, kGap, kOperands };
    const Node* node = nullptr;
    Address word = 0;
    Address lookup = 0;
    std::uint32_t param = 0;
    std::uint32_t offset = 0;
    std::uint32_t cell = AddressIndex::kNoCell;
    Kind kind = Kind::kOperands;
  };

  [[nodiscard]] std::string baseline_label() const {
    if (baseline_ != nullptr) {
      return baseline_->label;
    }
    if (input_.graphs.empty()) {
      return "per-graph";
    }
    for (const GraphRecord* graph : input_.graphs) {
      if (graph->epoch != input_.graphs.front()->epoch) {
        return "per-graph";
      }
    }
    return input_.graphs.front()->epoch;
  }

  void check_graph(std::size_t position) {
    const GraphRecord& graph = *input_.graphs[position];
    GraphScan scan;
    scan.graph = &graph;
    GraphEpochs& epochs = scan.epochs;
    epochs.capture = &indexes_.capture_of(graph, position);
    epochs.checked = checked_;
    epochs.baseline = baseline_ != nullptr ? baseline_ : epochs.capture;
    epochs.capture_index = &indexes_.index(*epochs.capture);
    epochs.checked_index = &indexes_.index(*epochs.checked);
    epochs.baseline_index = &indexes_.index(*epochs.baseline);
    epochs.compare = epochs.checked->label != epochs.baseline->label;
    epochs.checked_cells = epochs.checked_index->same_cells(*epochs.capture_index);
    epochs.baseline_cells = epochs.baseline_index->same_cells(*epochs.capture_index);
    scan.capture = epochs.capture_index;
    scan.aligned = epochs.checked_cells && epochs.baseline_cells;
    scan.record_use = allow_use_.active();
    if (scan.record_use) {
      scan.keep_ranges = !allow_use_.start_graph(*epochs.capture, *scan.capture);
    }
    const bool one_epoch = epochs.checked == epochs.capture && epochs.baseline == epochs.capture;
    GraphTable* table = nullptr;
    if (input_.tables != nullptr && scan.aligned) {
      table = &(*input_.tables)[&graph];
      if (table->valid && table->capture_layout == scan.capture->layout_id() && !scan.keep_ranges) {
        replay(graph, *table, scan);
        return;
      }
    }
    if (stats_ != nullptr) {
      ++stats_->graphs_scanned;
    }
    // A session's table holds the references whose verdict a later epoch may change: an
    // input's may (it is not restored), so only a table-less check of one epoch counts them
    // by their cell.
    scan.fast =
        scan.aligned ? (kFixedClasses | (one_epoch && table == nullptr ? kInputClass : 0)) : 0;
    std::vector<AllowUse::CellMark> pool_cells;
    const std::uint64_t references_before = report_.summary.references;
    const std::size_t unattributed_before = report_.unattributed.size();
    // One pass over the nodes, not a pass for the graph's mem_alloc ranges first: the scan
    // takes the ranges to be empty (as they are in most graphs) and holds back what they
    // could change (`Held`), so that until it ends only counts and marks were made. A graph
    // with ranges is scanned again with them, from the counts it had before (the marks
    // the first pass made are a subset of the second pass's).
    const Summary before = report_.summary;
    const GraphRanges none;
    std::optional<GraphRanges> ranges;
    scan.hold = true;
    std::uint64_t nodes = scan_pass(graph, none, scan, table, pool_cells);
    scan.hold = false;
    if (!scan.has_ranges) {
      for (const Held& held : held_) {
        release(held, scan);
      }
    } else {
      report_.summary = before;
      ranges.emplace(graph);
      nodes = scan_pass(graph, *ranges, scan, table, pool_cells);
    }
    held_.clear();
    report_.summary.nodes += nodes;
    if (table != nullptr) {
      table->nodes = nodes;
      table->unattributed.assign(
          report_.unattributed.begin() + static_cast<std::ptrdiff_t>(unattributed_before),
          report_.unattributed.end());
      table->references = report_.summary.references - references_before;
      for (std::size_t cell = 0; cell < scan.capture->cell_count(); ++cell) {
        if (pool_cells[cell].set) {
          table->allow_cells.push_back(static_cast<std::uint32_t>(cell));
        }
      }
      table->ranges = *scan.ranges;
      table->valid = true;
    }
  }

  // One pass over the graph's nodes with `ranges`, a session's table (and its pool cell
  // marks) started afresh; returns the node count.
  std::uint64_t scan_pass(const GraphRecord& graph, const GraphRanges& ranges, GraphScan& scan,
                          GraphTable* table, std::vector<AllowUse::CellMark>& pool_cells) {
    if (table != nullptr) {
      // Graph pool cells are recorded whatever this check's allowlist: a later check may
      // have one.
      *table = GraphTable{};
      table->capture_layout = scan.capture->layout_id();
      pool_cells.assign(scan.capture->cell_count() + 1, {});  // and a spare entry
      scan.pool_cells = &pool_cells;
      scan.table = table;
    }
    scan.ranges = &ranges;
    batch_.set_window(*scan.capture, ranges);
    const std::uint64_t nodes = scan_nodes(graph.nodes, scan);
    flush(batch_, scan);
    return nodes;
  }

  // Nodes in order, bodies right after the node holding them; returns the node count.
  std::uint64_t scan_nodes(const NodeList& nodes, GraphScan& scan) {
    std::uint64_t count = nodes.size();
    for (const Node& node : nodes) {
      switch (node.type) {
        case NodeType::kKernel:
          batch_.add(node, [&](WordBatch& batch) { flush(batch, scan); });
          if (!node.operands.empty()) {
            flush(batch_, scan);
            emit({.node = &node}, scan);
          }
          break;
        case NodeType::kMemAlloc:
          // An extent makes the graph's ranges non-empty (GraphRanges): the first pass,
          // which took them to be empty, stops; its count is not used.
          scan.has_ranges =
              scan.has_ranges || std::ranges::any_of(node.operands, [](const Operand& operand) {
                return operand.size != 0;
              });
          if (scan.hold && scan.has_ranges) {
            return count;
          }
          [[fallthrough]];
        case NodeType::kMemcpy:
        case NodeType::kMemset:
        case NodeType::kMemFree:
        case NodeType::kOp:
        case NodeType::kBatchMemOp:
          flush(batch_, scan);
          emit({.node = &node}, scan);
          break;
        case NodeType::kChildGraph:
        case NodeType::kConditional:
          flush(batch_, scan);
          for (const NodeList& body : node.bodies) {
            count += scan_nodes(body, scan);
          }
          if (scan.hold && scan.has_ranges) {
            return count;
          }
          break;
        default:  // host, empty, event, external semaphore: no references
          break;
      }
    }
    return count;
  }

  void flush(WordBatch& batch, GraphScan& scan) {
    if (batch.size() != 0) {
      if (scan.pool_cells == nullptr) {
        flush_use<false>(batch, scan);
      } else {
        flush_use<true>(batch, scan);
      }
    }
    batch.clear();
  }

  template <bool kPool>
  void flush_use(WordBatch& batch, GraphScan& scan) {
    if (!scan.record_use) {
      flush_batch<false, false, kPool>(batch, scan);
    } else if (scan.keep_ranges) {
      flush_batch<true, true, kPool>(batch, scan);
    } else {
      flush_batch<true, false, kPool>(batch, scan);
    }
  }

  // The batch's words in order: those in a cell that decides alone are counted
  // (`count_batch`); the others go through `slow_word`.
  template <bool kTouch, bool kPoints, bool kPool>
  void flush_batch(WordBatch& batch, GraphScan& scan) {
    FastMarks marks;
    marks.fast = scan.fast;
    marks.pool_cells = scan.pool_cells != nullptr ? scan.pool_cells->data() : nullptr;
    if constexpr (kTouch) {
      marks.touched = allow_use_.cells();
      marks.points = &allow_use_.ranges();
    }
    const std::uint64_t packed = count_batch<kTouch, kPoints, kPool>(
        *scan.capture, batch.words(), batch.size(), marks,
        [&](std::size_t i, std::uint32_t cell) { slow_word(batch, i, cell, scan); });
    for (unsigned k = 0; k < kFastClasses; ++k) {
      const std::uint64_t count = (packed >> (kCountBits * k)) & ((1U << kCountBits) - 1);
      if (count != 0) {
        report_.summary.references += count;
        count_fixed(kClassVerdict[k], count, scan);
      }
    }
  }

  // References already counted, decided by their cell alone.
  void count_fixed(Verdict verdict, std::uint64_t count, GraphScan& scan) {
    report_.summary.counts[static_cast<std::size_t>(verdict)] += count;
    if (scan.table != nullptr) {
      scan.table->fixed[static_cast<std::size_t>(verdict)] += count;
    }
  }

  // A word the fast path did not decide: an end pointer, a word in a gap (a reference only
  // in the graph's ranges), or one whose cell does not decide alone.
  [[gnu::noinline]] void slow_word(WordBatch& batch, std::size_t i, std::uint32_t cell,
                                   GraphScan& scan) {
    const AddressIndex& capture = *scan.capture;
    const Address word = batch.words()[i];
    Address lookup = word;
    std::uint32_t at = cell;
    bool is_reference = false;
    // Only a word on a cell boundary (or just past the top range) can be an end pointer.
    if (capture.may_end_pointer(word, at)) {
      const std::uint32_t end = capture.end_pointer_cell(word, at);
      if (end != AddressIndex::kNoCell) {
        lookup = word - 1;
        at = end;
        is_reference = true;
      }
    }
    if (!is_reference) {
      is_reference = capture.holds(at) || scan.ranges->contains(word);
    }
    if (!is_reference) {
      if (pointer_like_gap(capture, word, at)) {
        emit({.node = batch.locate(i).node, .word = word, .kind = Held::Kind::kGap}, scan);
      }
      return;
    }
    const WordBatch::Location where = batch.locate(i);
    emit({where.node, word, lookup, where.param, where.offset, at, Held::Kind::kWord}, scan);
  }

  // Held back in the first pass of a graph, else settled now.
  void emit(const Held& held, GraphScan& scan) {
    if (scan.hold) {
      held_.push_back(held);
    } else {
      release(held, scan);
    }
  }

  void release(const Held& held, GraphScan& scan) {
    switch (held.kind) {
      case Held::Kind::kWord:
        ++report_.summary.references;
        visit_point({scan.graph->id, held.node, held.param, held.offset, nullptr, held.word},
                    held.lookup, held.lookup, held.cell, scan);
        break;
      case Held::Kind::kGap:
        add_unattributed(report_.unattributed, scan.graph->id, *held.node, held.word);
        break;
      case Held::Kind::kOperands:
        visit_operands(*held.node, scan);
        break;
    }
  }

  void visit_operands(const Node& node, GraphScan& scan) {
    Reference reference;
    reference.graph = scan.graph->id;
    reference.node = &node;
    for (const Operand& operand : node.operands) {
      reference.operand = &operand;
      reference.address = operand.begin;
      ++report_.summary.references;
      visit_operand(reference, scan);
    }
  }

  // A reference decided at one address (a word, or an operand within one cell of each
  // epoch): by its cell's class where that decides alone, else by the memoized rules.
  void visit_point(const Reference& reference, Address first, Address last, std::uint32_t cell,
                   GraphScan& scan) {
    if (scan.record_use) {
      allow_use_.touch(cell, first, last);
    }
    if (scan.aligned && cell != AddressIndex::kNoCell) {
      const auto k = static_cast<unsigned>(scan.capture->cell_class(cell));
      if (((scan.fast >> k) & 1U) != 0) {
        count_fixed(kClassVerdict[k], 1, scan);
        if (scan.pool_cells != nullptr && k == static_cast<unsigned>(Class::kGraphPool)) {
          (*scan.pool_cells)[cell].set = true;
        }
        return;
      }
    }
    const std::uint32_t decision = judge_.judge(first, cell, scan.epochs, *scan.ranges, scan.memo);
    if (scan.table != nullptr) {
      record(reference, first, last, cell, false, scan);
    }
    judge_.settle(reference, {decision, first, last});
  }

  void record(const Reference& reference, Address first, Address last, std::uint32_t cell,
              bool by_parts, GraphScan& scan) {
    scan.table->refs.push_back({reference.node, reference.operand, reference.address, first, last,
                                reference.param, reference.offset, cell, by_parts});
  }

  // Operands skip the word window; one whose extent crosses owners is judged part by part.
  void visit_operand(const Reference& reference, GraphScan& scan) {
    const Address first = reference.operand->begin;
    const Address last = last_address(*reference.operand);
    Address cell_first = 0;
    Address cell_end = 0;
    const std::uint32_t cell = scan.capture->find_cell(first, &cell_first, &cell_end);
    if (last <= cell_end &&
        (last == first || ReferenceJudge::uniform(first, last, scan.epochs, *scan.ranges))) {
      visit_point(reference, first, last, cell, scan);
      return;
    }
    if (scan.record_use) {
      allow_use_.touch(cell, first, last);
    }
    if (scan.table != nullptr) {
      record(reference, first, last, cell, true, scan);
    }
    judge_.settle(reference, judge_.judge_range(first, last, scan.epochs, *scan.ranges, scan.memo));
  }

  // A graph checked from its table: the fixed counts, then the recorded references in
  // order, decided as a scan would.
  void replay(const GraphRecord& graph, const GraphTable& table, GraphScan& scan) {
    if (stats_ != nullptr) {
      ++stats_->graphs_replayed;
      stats_->references_replayed += table.refs.size();
    }
    report_.summary.nodes += table.nodes;
    report_.summary.references += table.references;
    report_.unattributed.insert(report_.unattributed.end(), table.unattributed.begin(),
                                table.unattributed.end());
    for (std::size_t v = 0; v < kVerdictCount; ++v) {
      report_.summary.counts[v] += table.fixed[v];
    }
    if (scan.record_use) {
      for (const std::uint32_t cell : table.allow_cells) {
        allow_use_.touch_cell(cell);
      }
    }
    const GraphRanges& ranges = *table.ranges;
    Reference reference;
    reference.graph = graph.id;
    for (const RecordedRef& ref : table.refs) {
      reference.node = ref.node;
      reference.operand = ref.operand;
      reference.param = ref.param;
      reference.offset = ref.offset;
      reference.address = ref.address;
      if (scan.record_use) {
        allow_use_.touch(ref.cell, ref.first, ref.last);
      }
      if (ref.by_parts) {
        judge_.settle(reference,
                      judge_.judge_range(ref.first, ref.last, scan.epochs, ranges, scan.memo));
      } else {
        const std::uint32_t decision =
            judge_.judge(ref.first, ref.cell, scan.epochs, ranges, scan.memo);
        judge_.settle(reference, {decision, ref.first, ref.last});
      }
    }
  }

  const CheckInput& input_;
  const CheckOptions& options_;
  EpochIndexes& indexes_;
  Allowlist allowlist_;
  VerdictRules rules_;
  AllowUse allow_use_;
  Report report_;
  ReferenceJudge judge_;
  CheckStats* stats_;
  const Epoch* checked_ = nullptr;
  const Epoch* baseline_ = nullptr;
  WordBatch batch_;
  std::vector<Held> held_;  // the current graph's, in its first pass
};

}  // namespace

Report run_check(const CheckInput& input, CheckStats* stats) { return Engine(input, stats).run(); }

}  // namespace graphcheck::detail
