// The verdict engine behind `check()` and `CheckSession::check()`: scans each graph against
// its capture epoch and decides each reference in the checked epoch against the baseline
// (docs/verdicts.md). A session keeps, per graph, what a later check with the same ranges
// needs (`GraphTable`), and replays that instead of scanning again.
#ifndef GRAPHCHECK_DETAIL_CHECK_ENGINE_H_
#define GRAPHCHECK_DETAIL_CHECK_ENGINE_H_

#include <graphcheck/address.h>
#include <graphcheck/checker.h>
#include <graphcheck/graph.h>
#include <graphcheck/pointer_scan.h>
#include <graphcheck/report.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graphcheck/detail/epoch_indexes.h"

namespace graphcheck::detail {

/// A reference whose verdict a later epoch with the capture's ranges may change: one in a
/// cell that no sole span owns (nor graph pool memory), an end pointer, an input, or an
/// operand judged part by part.
struct RecordedRef {
  const Node* node = nullptr;
  const Operand* operand = nullptr;  // nullptr for a kernel argument word
  Address address = 0;               // the word, or the operand's begin
  Address first = 0;                 // the addresses judged (a word: its lookup address)
  Address last = 0;
  std::uint32_t param = 0;
  std::uint32_t offset = 0;
  std::uint32_t cell = 0;  // the capture cell of `first` (AddressIndex::kNoCell outside)
  bool by_parts = false;   // an operand whose extent crosses cells or graph ranges
};

/// What one scan of a graph leaves for repeated checks in epochs that share the capture
/// epoch's cells: the references decided by their cell alone are only counted.
struct GraphTable {
  std::uint64_t capture_layout = 0;  // the capture index whose cells `refs` name
  bool valid = false;
  std::optional<GraphRanges> ranges;  // the graph's mem_alloc ranges
  std::uint64_t nodes = 0;
  std::uint64_t references = 0;
  std::array<std::uint64_t, kVerdictCount> fixed{};  // by verdict, in any such epoch
  std::vector<RecordedRef> refs;                     // the others, in reference order
  std::vector<UnattributedWords> unattributed;       // its nodes' unattributed words
  // Touched capture cells where an allowlist may name an owner (no span, or an input span),
  // sorted; ranges crossing capture cells are in `refs` (by_parts, or first != last).
  std::vector<std::uint32_t> allow_cells;
  [[nodiscard]] std::size_t bytes() const {
    return refs.capacity() * sizeof(RecordedRef) + allow_cells.capacity() * sizeof(std::uint32_t) +
           unattributed.capacity() * sizeof(UnattributedWords);
  }
};

/// Per-graph tables of a session, by graph.
using GraphTables = std::unordered_map<const GraphRecord*, GraphTable>;

/// What one check reads: the epochs (through `indexes`), the graphs in order, the globs and
/// the options; `tables` (a session's, or nullptr) is read and filled.
struct CheckInput {
  EpochIndexes* indexes = nullptr;
  std::vector<const GraphRecord*> graphs;
  std::vector<std::string> globs;  // snapshot allow, then options allow
  const CheckOptions* options = nullptr;
  GraphTables* tables = nullptr;
  /// A report nobody needs any more whose findings' memory the new report may use.
  Report* recycle = nullptr;
};

/// How a check went, for benchmarks and the session's statistics.
struct CheckStats {
  std::uint64_t graphs_scanned = 0;   // graphs whose argument words were read
  std::uint64_t graphs_replayed = 0;  // graphs checked from their table
  std::uint64_t references_replayed = 0;
};

/// Runs one check. @throws Error as `check()`.
[[nodiscard]] Report run_check(const CheckInput& input, CheckStats* stats = nullptr);

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_CHECK_ENGINE_H_
