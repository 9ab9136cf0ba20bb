// Kernel argument words that look like pointers into memory the capture epoch does not know
// (`UnattributedWords`, include/graphcheck/report.h): the test a word in a gap takes, and the
// per-node counting, out of the check engine's hot path (only gap words reach them).
#ifndef GRAPHCHECK_DETAIL_UNATTRIBUTED_H_
#define GRAPHCHECK_DETAIL_UNATTRIBUTED_H_

#include <graphcheck/address.h>
#include <graphcheck/address_index.h>
#include <graphcheck/graph.h>
#include <graphcheck/report.h>

#include <cstdint>
#include <vector>

namespace graphcheck::detail {

/// How far a gap may extend on each side of a word that still looks like a pointer. Known
/// memory can span terabytes of address space (a CPU scalar of the capture below 4 GiB, the
/// device's allocations at 0x7f..), where packed 32-bit scalars make plausible words; one
/// allocator's memory lies in clusters, and a pointer into memory nothing listed falls into a
/// hole of a cluster, a few GiB at most from known memory on either side.
inline constexpr Address kPointerReach = Address{1} << 32;

/// True for a word that is no reference but lies inside the capture's known memory (`cell`
/// from `capture.find_cell(word)`, so not `kNoCell`), in a gap whose ranges below and above
/// are both within `kPointerReach` of it, at or above 4 GiB (below are small integers and
/// floats), and is not one past the end of the range below it (the end of an allocation is
/// no pointer to unknown memory).
inline bool pointer_like_gap(const AddressIndex& capture, Address word, std::uint32_t cell) {
  if (cell == AddressIndex::kNoCell || capture.holds(cell) || word < kPointerReach) {
    return false;
  }
  const Address below = capture.cell_begin(cell);  // where the range below ends
  if (cell == 0 || cell + 1 >= capture.cell_count() || (below == word && capture.holds(cell - 1))) {
    return false;
  }
  return word - below < kPointerReach && capture.cell_begin(cell + 1) - word <= kPointerReach;
}

/// Counts `word` for `node` of graph `graph`: the last entry when it is that node's (its words
/// come in argument order, one node after another), else a new entry.
inline void add_unattributed(std::vector<UnattributedWords>& out, std::uint64_t graph,
                             const Node& node, Address word) {
  if (!out.empty() && out.back().graph == graph && out.back().node == node.id) {
    ++out.back().words;
    return;
  }
  out.push_back(UnattributedWords{graph, node.id, node.name, 1, word});
}

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_UNATTRIBUTED_H_
