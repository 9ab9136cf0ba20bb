// The check engine's fast path (detail/check_engine.cc): a batch of kernel argument words
// looked up in the capture's cells, those whose cell decides their verdict alone counted by
// class, the others handed back one by one (docs/verdicts.md, "Performance").
#ifndef GRAPHCHECK_DETAIL_CELL_COUNTS_H_
#define GRAPHCHECK_DETAIL_CELL_COUNTS_H_

#include <graphcheck/address.h>
#include <graphcheck/address_index.h>
#include <graphcheck/verdict.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "graphcheck/detail/allow_use.h"

namespace graphcheck::detail {

// Which cell classes decide a reference alone (bit per AddressIndex::CellClass): in an epoch that
// shares the capture's cells, a sole span that is not an input (stale needs another owner, lost no
// owner or an input one) and graph pool memory without a span (no rule judges it); an input too
// when all three epochs are one.
inline constexpr std::uint32_t kFixedClasses =
    (1U << static_cast<unsigned>(AddressIndex::CellClass::kSoleRegistered)) |
    (1U << static_cast<unsigned>(AddressIndex::CellClass::kSoleRuntime)) |
    (1U << static_cast<unsigned>(AddressIndex::CellClass::kSoleGraph)) |
    (1U << static_cast<unsigned>(AddressIndex::CellClass::kGraphPool));
inline constexpr std::uint32_t kInputClass =
    1U << static_cast<unsigned>(AddressIndex::CellClass::kSoleInput);
inline constexpr unsigned kFastClasses = 5;     // classes below this may be fast
inline constexpr unsigned kCountBits = 12;      // per class in a packed counter
inline constexpr std::size_t kProbeGroup = 16;  // words probed together (see count_batch)

inline constexpr std::array<Verdict, kFastClasses> kClassVerdict = {
    Verdict::kRegistered, Verdict::kRuntime, Verdict::kGraph, Verdict::kInput, Verdict::kGraph};

// What the fast path marks beside its counts: `fast`, the classes decided by the cell alone
// (bit per class); the allowlist's touched cells and recorded addresses; a session's table's
// graph pool cells (each table with a spare entry past the cells, which means nothing).
struct FastMarks {
  std::uint32_t fast = 0;
  AllowUse::CellMark* touched = nullptr;
  std::vector<std::pair<Address, Address>>* points = nullptr;
  AllowUse::CellMark* pool_cells = nullptr;
};

// The words in order: those in a cell whose class is in `marks.fast` are counted (packed,
// `kCountBits` per class, at most 4095 words); for the others `slow(i, cell)` is called
// (`cell` is AddressIndex::kNoCell outside the capture's memory). kTouch: the allowlist
// records the touched cells where it may name an owner (kPoints: and every address); kPool:
// a session's table records the graph pool cells touched. Returns the packed counts.
template <bool kTouch, bool kPoints, bool kPool, typename Slow>
std::uint64_t count_batch(const AddressIndex& capture, const Address* words, std::size_t n,
                          const FastMarks& marks, Slow&& slow) {
  const bool has_cells = capture.cell_count() != 0;
  const Address low = capture.low();
  const Address span = capture.high() - low;
  const std::uint32_t fast = marks.fast;
  const std::uint32_t spare = static_cast<std::uint32_t>(capture.cell_count());
  AllowUse::CellMark* const pool_cells = marks.pool_cells;
  AllowUse::CellMark* const touched = marks.touched;
  std::uint64_t packed = 0;
  // Words in groups: each group's probes are issued before any word is finished, so that
  // their table reads overlap (a word outside the capture's memory probes `low`).
  std::array<std::uint32_t, kProbeGroup> probes{};
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t slot = i % kProbeGroup;
    if (slot == 0 && has_cells) {
      for (std::size_t j = 0, count = std::min(kProbeGroup, n - i); j < count; ++j) {
        const Address word = words[i + j];
        probes[j] = capture.probe(word - low <= span ? word : low);
      }
    }
    const Address word = words[i];
    if (has_cells && word - low <= span) [[likely]] {
      AddressIndex::CellClass cell_class = AddressIndex::CellClass::kOther;
      const std::uint32_t cell = capture.classify_probed(word, probes[slot], &cell_class);
      const auto k = static_cast<unsigned>(cell_class);
      if (((fast >> k) & 1U) != 0) {
        packed += std::uint64_t{1} << (kCountBits * k);
        // Without a branch: cells that cannot matter mark the spare entry past the end.
        if constexpr (kTouch) {
          // Only inputs and graph pool memory can name an owner for the allowlist here.
          touched[k >= static_cast<unsigned>(AddressIndex::CellClass::kSoleInput) ? cell : spare]
              .set = true;
        }
        if constexpr (kPool) {
          pool_cells[cell_class == AddressIndex::CellClass::kGraphPool ? cell : spare].set = true;
        }
        if constexpr (kPoints) {
          touched[cell].set = true;
          marks.points->emplace_back(word, word);
        }
        continue;
      }
      slow(i, cell);
    } else {
      slow(i, AddressIndex::kNoCell);
    }
  }
  return packed;
}

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_CELL_COUNTS_H_
