// detail::PointerTable: behaves as a map from non-zero keys, through growth and erasure, for
// keys that collide in the table (aligned, clustered addresses) as for random ones.
#include "graphcheck/detail/pointer_table.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

namespace graphcheck {
namespace {

using Table = detail::PointerTable<std::uint64_t>;

// The table's entries, sorted, against the reference map.
void expect_same(const Table& table, const std::map<std::uintptr_t, std::uint64_t>& reference) {
  std::map<std::uintptr_t, std::uint64_t> entries;
  table.for_each([&entries](std::uintptr_t key, std::uint64_t value) { entries[key] = value; });
  ASSERT_EQ(entries, reference);
  ASSERT_EQ(table.size(), reference.size());
  for (const auto& [key, value] : reference) {
    const std::uint64_t* found = table.find(key);
    ASSERT_NE(found, nullptr) << key;
    ASSERT_EQ(*found, value) << key;
  }
}

TEST(PointerTableTest, InsertFindAssignAndEraseAsAMap) {
  Table table;
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.find(0x1000), nullptr);
  EXPECT_EQ(table.find(0), nullptr);  // 0 is never a key
  EXPECT_FALSE(table.erase(0));

  auto [first, inserted] = table.insert(0x1000, 7);
  EXPECT_TRUE(inserted);
  EXPECT_EQ(*first, 7U);
  auto [again, inserted_again] = table.insert(0x1000, 9);  // insert keeps the value there
  EXPECT_FALSE(inserted_again);
  EXPECT_EQ(*again, 7U);
  table.assign(0x1000, 9);  // assign replaces it
  EXPECT_EQ(*table.find(0x1000), 9U);
  EXPECT_TRUE(table.contains(0x1000));
  EXPECT_FALSE(table.contains(0x2000));

  EXPECT_TRUE(table.erase(0x1000));
  EXPECT_FALSE(table.erase(0x1000));
  EXPECT_TRUE(table.empty());
  EXPECT_EQ(table.find(0x1000), nullptr);
}

// Allocator-like keys (64-byte aligned, back to back) and scattered ones, inserted past
// several growths, then erased in an interleaved order with re-inserts: every step compared
// with std::map, so a broken backward shift (an entry lost behind a hole) shows.
TEST(PointerTableTest, MatchesAMapThroughGrowthAndErasure) {
  for (const std::uintptr_t stride :
       {std::uintptr_t{64}, std::uintptr_t{4096}, std::uintptr_t{0}}) {
    Table table;
    std::map<std::uintptr_t, std::uint64_t> reference;
    std::uint64_t state = 12345;
    std::vector<std::uintptr_t> keys;
    for (std::uint64_t i = 0; i < 3000; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const std::uintptr_t key =
          stride != 0 ? 0x7f0000000000U + i * stride : static_cast<std::uintptr_t>(state | 1U);
      keys.push_back(key);
      table.insert(key, i);
      reference[key] = i;
    }
    expect_same(table, reference);
    for (std::size_t i = 0; i < keys.size(); i += 3) {
      ASSERT_TRUE(table.erase(keys[i]));
      reference.erase(keys[i]);
      if (i % 2 == 0) {
        const std::uintptr_t back = keys[i / 2];  // erased or present: insert keeps a value
        table.insert(back, 1);
        reference.emplace(back, 1);
      }
    }
    expect_same(table, reference);
    table.clear();
    EXPECT_TRUE(table.empty());
    EXPECT_EQ(table.find(keys[1]), nullptr);
  }
}

}  // namespace
}  // namespace graphcheck
