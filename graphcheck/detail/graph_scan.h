// One pass over a graph's nodes, the check engine's first stage (detail/check_engine.cc):
// kernel argument words looked up in batches, those whose capture cell decides alone
// counted, everything else held in reference order for the engine to decide. A pass writes
// only its own result, so that the passes of a check point's graphs run on several threads.
#ifndef GRAPHCHECK_DETAIL_GRAPH_SCAN_H_
#define GRAPHCHECK_DETAIL_GRAPH_SCAN_H_

#include <graphcheck/address.h>
#include <graphcheck/address_index.h>
#include <graphcheck/graph.h>
#include <graphcheck/pointer_scan.h>
#include <graphcheck/verdict.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "graphcheck/detail/allow_use.h"
#include "graphcheck/detail/word_batch.h"

namespace graphcheck::detail {

/// What the fast path leaves to the rules, in reference order: a word that is a reference
/// (its node, argument, offset, lookup address and capture cell), a word in a gap that looks
/// like a pointer, or a node's operands.
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

/// How a graph is scanned; read only during its passes.
struct ScanSetup {
  const GraphRecord* graph = nullptr;
  const AddressIndex* capture = nullptr;
  std::uint32_t fast = 0;    // classes decided by the cell alone (bit per class)
  bool record_use = false;   // the allowlist has globs: touched cells are marked
  bool keep_ranges = false;  // ... and every address kept (an epoch has other cells)
  // A session's table marks the graph pool cells touched, whatever this check's allowlist: a
  // later check may have one.
  bool pool = false;
};

/// What one pass found. The marks have one entry per capture cell and a spare one past
/// them (which means nothing), or none when the setup does not ask for them.
struct ScanPass {
  std::vector<Held> held;  // what the fast path did not decide, in reference order
  std::uint64_t nodes = 0;
  std::uint64_t references = 0;                      // decided by their cell alone ...
  std::array<std::uint64_t, kVerdictCount> fixed{};  // ... by verdict
  bool has_ranges = false;                           // met a mem_alloc node with an extent
  std::vector<AllowUse::CellMark> touched;           // record_use: capture cells touched
  std::vector<std::pair<Address, Address>> points;   // keep_ranges: the addresses
  std::vector<AllowUse::CellMark> pool_cells;        // pool: graph pool cells touched
};

/// Scans graphs one pass at a time, keeping its word batch between passes.
/// Thread safety: none; one scanner per thread. Passes of one scanner or of several may
/// read the same graphs and indexes at once. Lifetime: a pass's result points into the
/// graph scanned.
class GraphScanner {
 public:
  /// Scans `setup.graph` with its mem_alloc ranges `ranges` into `out` (emptied first).
  /// With `stop_at_ranges` (the pass assumed the graph has none), it stops at the first
  /// mem_alloc node with an extent: `out.has_ranges` says so, and the rest of `out` is to
  /// be thrown away.
  void scan(const ScanSetup& setup, const GraphRanges& ranges, bool stop_at_ranges, ScanPass& out);

 private:
  std::uint64_t scan_nodes(const NodeList& nodes);
  void flush();
  template <bool kTouch, bool kPoints, bool kPool>
  void flush_batch();
  void slow_word(std::size_t i, std::uint32_t cell);

  const ScanSetup* setup_ = nullptr;
  const GraphRanges* ranges_ = nullptr;
  ScanPass* out_ = nullptr;
  bool stop_at_ranges_ = false;
  WordBatch batch_;
};

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_GRAPH_SCAN_H_
