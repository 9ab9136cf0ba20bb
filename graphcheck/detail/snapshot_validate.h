// Snapshot invariants shared by the reader (after it has typed every field) and the writer
// (before it writes anything), so that what one accepts the other accepts too.
#ifndef GRAPHCHECK_DETAIL_SNAPSHOT_VALIDATE_H_
#define GRAPHCHECK_DETAIL_SNAPSHOT_VALIDATE_H_

#include <graphcheck/snapshot.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace graphcheck::detail {

/// @brief The deepest nesting of child graphs and conditional bodies a snapshot may hold
/// (top-level nodes are level 0). CUDA graphs nest a few levels; the bound keeps every
/// recursive walk over a hostile snapshot far from the stack limit.
inline constexpr std::size_t kMaxGraphNesting = 64;

/// @brief The snapshot spellings of `Producer::backend`.
inline constexpr std::array<std::string_view, 3> kBackends = {"cupti", "aten", "synthetic"};

/// @brief True when `[begin, begin + size)` ends at or below 2^64 - 1, so `end()` does not wrap.
[[nodiscard]] constexpr bool fits_in_address_space(Address begin, std::uint64_t size) {
  return size <= UINT64_MAX - begin;
}

/// @brief Checks the invariants of `Snapshot` (see snapshot.h and docs/snapshot-format.md):
/// unique non-empty epoch labels, unique graph ids, graphs naming existing epochs, positive
/// sizes that do not wrap past 2^64, node ids unique within a graph, each node in the form
/// the reader produces for its type, nesting within `kMaxGraphNesting`, a known backend.
/// @throws Error `<source>: <json path>: expected ..., found ...` for the first violation.
void validate_snapshot(const Snapshot& snapshot, std::string_view source);

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_SNAPSHOT_VALIDATE_H_
