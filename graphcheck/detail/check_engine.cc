// The verdict engine: finds each graph's references (detail/graph_scan.h: batches of
// argument words, the cells that decide alone counted; the graphs of a check point read on
// several threads), decides the rest by the rules of detail/verdict_rules.cc (memoized) on
// the caller's thread, graph after graph, and builds the report. Operands are judged part
// by part where their extent crosses owners.
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
#include <vector>

#include "graphcheck/detail/allow_use.h"
#include "graphcheck/detail/allowlist.h"
#include "graphcheck/detail/cell_counts.h"
#include "graphcheck/detail/decision_memo.h"
#include "graphcheck/detail/graph_scan.h"
#include "graphcheck/detail/ordered_work.h"
#include "graphcheck/detail/reference_judge.h"
#include "graphcheck/detail/unattributed.h"
#include "graphcheck/detail/verdict_rules.h"

namespace graphcheck::detail {
namespace {

using Class = AddressIndex::CellClass;

// Threads a check uses unasked: at most this many, each with this many nodes to read at
// least (a thread costs tens of microseconds to start; 16k nodes take about a millisecond).
constexpr std::uint64_t kMaxAutoThreads = 8;
constexpr std::uint64_t kNodesPerThread = 16384;
// Graphs whose first passes may be done ahead of the graph being decided, per thread.
constexpr std::size_t kPassesAhead = 4;

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
    const std::size_t count = input_.graphs.size();
    std::vector<GraphScan> scans(count);
    for (std::size_t g = 0; g < count; ++g) {
      prepare(g, scans[g]);
    }
    // The graphs' first passes on several threads, each graph decided in order on this one
    // once its pass is done; a few passes ahead at most (each holds what it left undecided).
    const std::size_t threads = thread_count(scans);
    std::vector<GraphScanner> scanners(threads);
    std::vector<ScanPass> passes(count);
    run_ordered(
        count, threads, kPassesAhead * threads,
        [&](std::size_t g, std::size_t slot) { first_pass(scans[g], scanners[slot], passes[g]); },
        [&](std::size_t g) {
          finish_graph(scans[g], passes[g], scanners[0]);
          passes[g] = ScanPass{};  // its memory back
        });
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
    bool replay = false;  // checked from its session table, not scanned
    ScanSetup setup;      // how its passes scan it
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

  // What a graph is checked with, decided before any graph is read: replayed from its
  // table, or scanned (its first pass may run on another thread).
  void prepare(std::size_t position, GraphScan& scan) {
    const GraphRecord& graph = *input_.graphs[position];
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
    if (input_.tables != nullptr && scan.aligned) {
      scan.table = &(*input_.tables)[&graph];
      if (scan.table->valid && scan.table->capture_layout == scan.capture->layout_id() &&
          !scan.keep_ranges) {
        scan.replay = true;
        return;
      }
    }
    // A session's table holds the references whose verdict a later epoch may change: an
    // input's may (it is not restored), so only a table-less check of one epoch counts them
    // by their cell.
    scan.fast =
        scan.aligned ? (kFixedClasses | (one_epoch && scan.table == nullptr ? kInputClass : 0)) : 0;
    scan.setup = {&graph,          scan.capture,     scan.fast,
                  scan.record_use, scan.keep_ranges, scan.table != nullptr};
  }

  // How many threads read the graphs: as asked, or one per core while each has at least
  // kNodesPerThread nodes to read; never more than the graphs to scan.
  [[nodiscard]] std::size_t thread_count(const std::vector<GraphScan>& scans) const {
    std::size_t graphs = 0;
    std::uint64_t nodes = 0;
    for (const GraphScan& scan : scans) {
      if (!scan.replay) {
        ++graphs;
        nodes += scan.graph->nodes.size();
      }
    }
    std::uint64_t wanted = options_.threads;
    if (wanted == 0) {
      const std::uint64_t cores = usable_cores();
      wanted =
          std::min({cores, kMaxAutoThreads, std::max<std::uint64_t>(1, nodes / kNodesPerThread)});
    }
    return static_cast<std::size_t>(
        std::max<std::uint64_t>(1, std::min<std::uint64_t>(wanted, graphs)));
  }

  // A graph's first pass, on any thread: it takes the graph's ranges to be empty (as they are
  // in most graphs) and stops where they are not (`finish_graph` scans again with them).
  void first_pass(const GraphScan& scan, GraphScanner& scanner, ScanPass& pass) const {
    if (!scan.replay) {
      scanner.scan(scan.setup, no_ranges_, /*stop_at_ranges=*/true, pass);
    }
  }

  // Decides a graph's references on the caller's thread, graphs in order: what its pass
  // held, or its table's.
  void finish_graph(GraphScan& scan, ScanPass& pass, GraphScanner& scanner) {
    const GraphRecord& graph = *scan.graph;
    if (scan.record_use) {
      allow_use_.start_graph(*scan.epochs.capture, *scan.capture);  // this graph's marks
    }
    if (scan.replay) {
      replay(graph, *scan.table, scan);
      return;
    }
    if (stats_ != nullptr) {
      ++stats_->graphs_scanned;
    }
    std::optional<GraphRanges> ranges;
    scan.ranges = &no_ranges_;
    if (pass.has_ranges) {
      ranges.emplace(graph);
      scan.ranges = &*ranges;
      scanner.scan(scan.setup, *ranges, /*stop_at_ranges=*/false, pass);
    }
    GraphTable* table = scan.table;
    if (table != nullptr) {
      *table = GraphTable{};
      table->capture_layout = scan.capture->layout_id();
      scan.pool_cells = &pass.pool_cells;
    }
    const std::uint64_t references_before = report_.summary.references;
    const std::size_t unattributed_before = report_.unattributed.size();
    report_.summary.references += pass.references;
    for (std::size_t v = 0; v < kVerdictCount; ++v) {
      count_fixed(static_cast<Verdict>(v), pass.fixed[v], scan);
    }
    if (scan.record_use) {
      allow_use_.merge(pass.touched, pass.points);
    }
    for (const Held& held : pass.held) {
      release(held, scan);
    }
    report_.summary.nodes += pass.nodes;
    if (table != nullptr) {
      table->nodes = pass.nodes;
      table->unattributed.assign(
          report_.unattributed.begin() + static_cast<std::ptrdiff_t>(unattributed_before),
          report_.unattributed.end());
      table->references = report_.summary.references - references_before;
      for (std::size_t cell = 0; cell < scan.capture->cell_count(); ++cell) {
        if (pass.pool_cells[cell].set) {
          table->allow_cells.push_back(static_cast<std::uint32_t>(cell));
        }
      }
      table->ranges = *scan.ranges;
      table->valid = true;
    }
  }

  // A reference decided by its cell alone, counted.
  void count_fixed(Verdict verdict, std::uint64_t count, GraphScan& scan) {
    report_.summary.counts[static_cast<std::size_t>(verdict)] += count;
    if (scan.table != nullptr) {
      scan.table->fixed[static_cast<std::size_t>(verdict)] += count;
    }
  }

  // A reference (or a node's operands, or a gap word) a graph's pass left undecided.
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
  const GraphRanges no_ranges_;  // what a first pass takes a graph's ranges to be
};

}  // namespace

Report run_check(const CheckInput& input, CheckStats* stats) { return Engine(input, stats).run(); }

}  // namespace graphcheck::detail
