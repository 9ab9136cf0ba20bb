// One pass over a graph's nodes (detail/graph_scan.h): argument words in batches, so that the
// lookups of unrelated words overlap; the cells that decide alone counted (detail/
// cell_counts.h); the rest held in reference order.
#include "graphcheck/detail/graph_scan.h"

#include <algorithm>
#include <cstddef>

#include "graphcheck/detail/cell_counts.h"
#include "graphcheck/detail/unattributed.h"

namespace graphcheck::detail {

void GraphScanner::scan(const ScanSetup& setup, const GraphRanges& ranges, bool stop_at_ranges,
                        ScanPass& out) {
  out = ScanPass{};
  const std::size_t marks = setup.capture->cell_count() + 1;  // and a spare entry
  if (setup.record_use) {
    out.touched.assign(marks, {});
  }
  if (setup.pool) {
    out.pool_cells.assign(marks, {});
  }
  setup_ = &setup;
  ranges_ = &ranges;
  out_ = &out;
  stop_at_ranges_ = stop_at_ranges;
  batch_.clear();
  batch_.set_window(*setup.capture, ranges);
  out.nodes = scan_nodes(setup.graph->nodes);
  flush();
  out_ = nullptr;
}

// Nodes in order, bodies right after the node holding them; returns the node count.
std::uint64_t GraphScanner::scan_nodes(const NodeList& nodes) {
  std::uint64_t count = nodes.size();
  for (const Node& node : nodes) {
    switch (node.type) {
      case NodeType::kKernel:
        batch_.add(node, [&](WordBatch& /*batch*/) { flush(); });
        if (!node.operands.empty()) {
          flush();
          out_->held.push_back({.node = &node});
        }
        break;
      case NodeType::kMemAlloc:
        // An extent makes the graph's ranges non-empty (GraphRanges): a pass that took
        // them to be empty stops; its result is not used.
        out_->has_ranges =
            out_->has_ranges || std::ranges::any_of(node.operands, [](const Operand& operand) {
              return operand.size != 0;
            });
        if (stop_at_ranges_ && out_->has_ranges) {
          return count;
        }
        [[fallthrough]];
      case NodeType::kMemcpy:
      case NodeType::kMemset:
      case NodeType::kMemFree:
      case NodeType::kOp:
      case NodeType::kBatchMemOp:
        flush();
        out_->held.push_back({.node = &node});
        break;
      case NodeType::kChildGraph:
      case NodeType::kConditional:
        flush();
        for (const NodeList& body : node.bodies) {
          count += scan_nodes(body);
        }
        if (stop_at_ranges_ && out_->has_ranges) {
          return count;
        }
        break;
      default:  // host, empty, event, external semaphore: no references
        break;
    }
  }
  return count;
}

void GraphScanner::flush() {
  if (batch_.size() != 0) {
    const ScanSetup& setup = *setup_;
    if (!setup.record_use) {
      setup.pool ? flush_batch<false, false, true>() : flush_batch<false, false, false>();
    } else if (setup.keep_ranges) {
      setup.pool ? flush_batch<true, true, true>() : flush_batch<true, true, false>();
    } else {
      setup.pool ? flush_batch<true, false, true>() : flush_batch<true, false, false>();
    }
  }
  batch_.clear();
}

// The batch's words in order: those in a cell that decides alone are counted
// (`count_batch`); the others go through `slow_word`.
template <bool kTouch, bool kPoints, bool kPool>
void GraphScanner::flush_batch() {
  FastMarks marks;
  marks.fast = setup_->fast;
  marks.pool_cells = kPool ? out_->pool_cells.data() : nullptr;
  if constexpr (kTouch) {
    marks.touched = out_->touched.data();
    marks.points = &out_->points;
  }
  const std::uint64_t packed = count_batch<kTouch, kPoints, kPool>(
      *setup_->capture, batch_.words(), batch_.size(), marks,
      [&](std::size_t i, std::uint32_t cell) { slow_word(i, cell); });
  for (unsigned k = 0; k < kFastClasses; ++k) {
    const std::uint64_t count = (packed >> (kCountBits * k)) & ((1U << kCountBits) - 1);
    if (count != 0) {
      out_->references += count;
      out_->fixed[static_cast<std::size_t>(kClassVerdict[k])] += count;
    }
  }
}

// A word the fast path did not decide: an end pointer, a word in a gap (a reference only in
// the graph's ranges), or one whose cell does not decide alone.
[[gnu::noinline]] void GraphScanner::slow_word(std::size_t i, std::uint32_t cell) {
  const AddressIndex& capture = *setup_->capture;
  const Address word = batch_.words()[i];
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
    is_reference = capture.holds(at) || ranges_->contains(word);
  }
  if (!is_reference) {
    if (pointer_like_gap(capture, word, at)) {
      out_->held.push_back({.node = batch_.locate(i).node, .word = word, .kind = Held::Kind::kGap});
    }
    return;
  }
  const WordBatch::Location where = batch_.locate(i);
  out_->held.push_back(
      {where.node, word, lookup, where.param, where.offset, at, Held::Kind::kWord});
}

}  // namespace graphcheck::detail
