// detail::add_allocator_memory: PyTorch's caching allocator as epoch allocations, the rule the
// watch applies at every epoch of a CUDA graph (python/graphcheck/_watch/graph_pools.py;
// tests/python/test_watch_graph_pools.py drives it through real checks). Pool names, graph
// pools, blocks before their segment, labels and what an epoch already holds.
#include "graphcheck/detail/allocator_memory.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace graphcheck::detail {
namespace {

constexpr Address kSegment = 0x7f0000000000;

AllocatorSegment segment(Address begin, std::uint64_t size, TorchPoolId pool,
                         std::vector<std::pair<Address, std::uint64_t>> live = {}) {
  return AllocatorSegment{begin, size, pool, false, "0", std::move(live)};
}

TEST(AllocatorMemoryTest, PoolNamesFollowTheTorchRule) {
  EXPECT_EQ(torch_pool_name({0, 0}, false), "default");
  EXPECT_EQ(torch_pool_name({0, 0}, true), "default");     // the default pool is never a graph's
  EXPECT_EQ(torch_pool_name({5, 0}, false), "graph:5,0");  // a graph's private pool
  EXPECT_EQ(torch_pool_name({0, 77}, false), "mempool:0,77");  // a user MemPool ...
  EXPECT_EQ(torch_pool_name({0, 77}, true), "graph:0,77");     // ... unless a graph used it
  EXPECT_EQ(torch_pool_name({-1, 3}, false), "mempool:-1,3");
  EXPECT_TRUE(is_graph_pool({5, 0}, false));
  EXPECT_FALSE(is_graph_pool({0, 77}, false));
  EXPECT_FALSE(is_graph_pool({0, 0}, true));
}

TEST(AllocatorMemoryTest, BlocksComeBeforeTheirSegmentAndGraphPoolsKeepTheirBlocksOut) {
  const std::vector<AllocatorSegment> segments = {
      segment(kSegment + 0x10000, 0x1000, {3, 0}, {{kSegment + 0x10000, 0x100}}),
      segment(kSegment, 0x2000, {0, 0}, {{kSegment, 0x2000}}),
      segment(0, 0x1000, {0, 0}),              // no address: left out
      segment(kSegment + 0x20000, 0, {0, 0}),  // no size: left out
  };
  const std::vector<Allocation> memory = allocator_allocations(segments);
  const std::vector<Allocation> expected = {
      {kSegment, 0x2000, "default", 1, ""},  // a block as large as its segment, before it
      {kSegment, 0x2000, "default", 1, "torch segment dev0"},
      {kSegment + 0x10000, 0x1000, "graph:3,0", 1, "torch segment dev0"},
  };
  EXPECT_EQ(memory, expected);
}

TEST(AllocatorMemoryTest, BlocksTakeTheFirstLabelOverThemAndTheEpochKeepsItsOwn) {
  std::vector<Allocation> allocations = {
      // The dispatcher's storage where a block begins: the block is not added.
      {kSegment + 0x400, 0x100, "default", 1, "aten:mm"},
      // A storage another graph of the shared pool produced: it takes that pool.
      {kSegment + 0x10100, 0x100, "default", 1, "aten:add"},
  };
  AllocatorSegment shared = segment(kSegment + 0x10000, 0x1000, {0, 77});
  shared.listed = true;
  const std::vector<AllocatorSegment> segments = {
      segment(kSegment, 0x1000, {0, 0},
              {{kSegment, 0x200},
               {kSegment + 0x200, 0x200},
               {kSegment + 0x400, 0x100},
               {kSegment + 0x800, 0x100}}),
      shared,
  };
  const std::vector<LabelRange> labels = {
      {kSegment + 0x300, kSegment + 0x380, "model.packed"},  // starts inside the 2nd block
      {kSegment + 0x100, kSegment + 0x1c0, "model.scale"},   // starts inside the 1st block
      {kSegment + 0x780, kSegment + 0x900, "model.table"},   // starts below the 4th, reaches in
  };
  add_allocator_memory(allocations, segments, labels);
  const std::vector<Allocation> expected = {
      {kSegment + 0x400, 0x100, "default", 1, "aten:mm"},
      {kSegment + 0x10100, 0x100, "graph:0,77", 1, "aten:add"},
      {kSegment, 0x200, "default", 1, "model.scale"},  // in address order, blocks first on a tie
      {kSegment, 0x1000, "default", 1, "torch segment dev0"},
      {kSegment + 0x200, 0x200, "default", 1, "model.packed"},
      {kSegment + 0x800, 0x100, "default", 1, "model.table"},
      {kSegment + 0x10000, 0x1000, "graph:0,77", 1, "torch segment dev0"},
  };
  EXPECT_EQ(allocations, expected);
}

TEST(AllocatorMemoryTest, ASegmentTheEpochAlreadyHasIsNotAddedTwice) {
  std::vector<Allocation> allocations = {{kSegment, 0x1000, "default", 1, "torch segment dev0"}};
  add_allocator_memory(allocations, {segment(kSegment, 0x1000, {0, 0}, {{kSegment, 0x800}})}, {});
  const std::vector<Allocation> expected = {
      {kSegment, 0x1000, "default", 1, "torch segment dev0"},
  };
  EXPECT_EQ(allocations, expected);  // the block begins where an allocation of the epoch does
}

TEST(AllocatorMemoryTest, NoSegmentsLeaveTheEpochAsItWas) {
  std::vector<Allocation> allocations = {{kSegment, 0x100, "default", 1, "aten:mm"}};
  const std::vector<Allocation> before = allocations;
  add_allocator_memory(allocations, {}, {{kSegment, kSegment + 0x100, "model.w"}});
  EXPECT_EQ(allocations, before);
}

}  // namespace
}  // namespace graphcheck::detail
