// A stable sort by a 64-bit key for the address index build: sorted input (the common case:
// spans listed in address order) costs one pass; otherwise a least-significant-digit radix
// sort that skips the digits all keys share (the high bits of device addresses), so a sort
// of n addresses costs a few linear passes instead of n log n comparisons.
#ifndef GRAPHCHECK_DETAIL_RADIX_SORT_H_
#define GRAPHCHECK_DETAIL_RADIX_SORT_H_

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace graphcheck::detail {

/// @brief Sorts `items` by `key(item)` (a std::uint64_t), keeping the input order of items
/// with equal keys (stable).
/// Thread safety: touches only `items`. Allocates a scratch copy when the input is unsorted.
template <typename T, typename Key>
void radix_sort(std::vector<T>& items, Key key) {
  const auto less = [&](const T& a, const T& b) { return key(a) < key(b); };
  if (std::is_sorted(items.begin(), items.end(), less)) {
    return;
  }
  // Below this size the histograms cost more than comparisons.
  constexpr std::size_t kSmall = 256;
  if (items.size() < kSmall) {
    std::stable_sort(items.begin(), items.end(), less);
    return;
  }
  constexpr unsigned kBits = 11;
  constexpr std::size_t kBuckets = std::size_t{1} << kBits;
  constexpr unsigned kDigits = (64 + kBits - 1) / kBits;
  constexpr std::uint64_t kMask = kBuckets - 1;
  // One pass counts every digit at once.
  std::vector<std::array<std::uint32_t, kBuckets>> counts(kDigits);
  for (auto& count : counts) {
    count.fill(0);
  }
  for (const T& item : items) {
    const std::uint64_t k = key(item);
    for (unsigned d = 0; d < kDigits; ++d) {
      ++counts[d][(k >> (d * kBits)) & kMask];
    }
  }
  std::vector<T> scratch(items.size());
  const std::uint64_t first_key = key(items.front());
  for (unsigned d = 0; d < kDigits; ++d) {
    std::array<std::uint32_t, kBuckets>& count = counts[d];
    const unsigned shift = d * kBits;
    if (count[(first_key >> shift) & kMask] == items.size()) {
      continue;  // every key has this digit: the pass would not move anything
    }
    std::uint32_t total = 0;
    for (std::uint32_t& slot : count) {
      const std::uint32_t here = slot;
      slot = total;
      total += here;
    }
    for (T& item : items) {
      scratch[count[(key(item) >> shift) & kMask]++] = std::move(item);
    }
    items.swap(scratch);
  }
}

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_RADIX_SORT_H_
