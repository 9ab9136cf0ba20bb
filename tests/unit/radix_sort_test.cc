// detail::radix_sort: orders like std::stable_sort by the key, for any input order and key.
#include "graphcheck/detail/radix_sort.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace graphcheck {
namespace {

struct Item {
  std::uint64_t key = 0;
  int position = 0;  // input order, to check stability
  bool operator==(const Item&) const = default;
};

std::vector<Item> items_from(const std::vector<std::uint64_t>& keys) {
  std::vector<Item> items;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    items.push_back({keys[i], static_cast<int>(i)});
  }
  return items;
}

void expect_stable_sorted(const std::vector<std::uint64_t>& keys) {
  std::vector<Item> actual = items_from(keys);
  std::vector<Item> expected = actual;
  std::stable_sort(expected.begin(), expected.end(),
                   [](const Item& a, const Item& b) { return a.key < b.key; });
  detail::radix_sort(actual, [](const Item& item) { return item.key; });
  ASSERT_EQ(actual, expected);
}

std::vector<std::uint64_t> random_keys(std::size_t count, std::uint64_t mask, std::uint64_t base) {
  std::vector<std::uint64_t> keys;
  std::uint64_t state = count;
  for (std::size_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    keys.push_back(base + (state & mask));
  }
  return keys;
}

TEST(RadixSortTest, EmptyAndSingleInputsStayAsTheyAre) {
  expect_stable_sorted({});
  expect_stable_sorted({42});
}

TEST(RadixSortTest, SmallInputsSortStably) {
  expect_stable_sorted({5, 3, 5, 1, 3, 0, ~std::uint64_t{0}, 0});
}

TEST(RadixSortTest, SortedAndReversedLargeInputsSort) {
  std::vector<std::uint64_t> keys;
  for (std::uint64_t i = 0; i < 5000; ++i) {
    keys.push_back(0x7f0000000000 + i * 0x100);
  }
  expect_stable_sorted(keys);
  std::reverse(keys.begin(), keys.end());
  expect_stable_sorted(keys);
}

TEST(RadixSortTest, RandomLargeInputsWithDuplicatesSortStably) {
  expect_stable_sorted(random_keys(10000, 0xff, 0));                       // many duplicates
  expect_stable_sorted(random_keys(10000, 0xffffffffff, 0x7f0000000000));  // shared high bits
  expect_stable_sorted(random_keys(10000, ~std::uint64_t{0}, 0));          // every digit varies
}

TEST(RadixSortTest, ExtremeKeysSort) {
  std::vector<std::uint64_t> keys = random_keys(1000, ~std::uint64_t{0}, 0);
  keys.insert(keys.begin() + 500, {0, ~std::uint64_t{0}, 0, ~std::uint64_t{0}});
  expect_stable_sorted(keys);
}

}  // namespace
}  // namespace graphcheck
