// Caching-allocator segments as allocations (label torch: needs LibTorch with CUDA headers;
// runs on the CPU, where the allocator holds no segments).
#include "cupti/torch_allocator_snapshot.h"

#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace graphcheck::cupti {
namespace {

TEST(TorchAllocatorSnapshotTest, PoolIdsMapToDefaultGraphAndMempoolNames) {
  EXPECT_EQ(torch_pool_name({0, 0}), "default");
  EXPECT_EQ(torch_pool_name({3, 0}), "graph:3,0") << "a graph's own private pool";
  EXPECT_EQ(torch_pool_name({0, 7}), "mempool:0,7") << "a user MemPool is not graph-owned";
  TorchSnapshotOptions options;
  options.graph_pools = {{0, 7}};
  EXPECT_EQ(torch_pool_name({0, 7}, options), "graph:0,7") << "a declared graph_pool_handle()";
}

TEST(TorchAllocatorSnapshotTest, SegmentsAndAllocatedBlocksBecomeAllocations) {
  detail::TorchSegment segment;
  segment.address = 0x7f0000000000;
  segment.total_size = 2 << 20;
  segment.pool = {2, 0};
  segment.device = 1;
  segment.blocks = {{4096, true}, {8192, false}, {512, true}};
  const auto allocations = detail::torch_allocations({segment}, {});
  ASSERT_EQ(allocations.size(), 3u);
  EXPECT_EQ(allocations[0].begin, 0x7f0000000000u);
  EXPECT_EQ(allocations[0].size, 4096u);
  EXPECT_EQ(allocations[1].begin, 0x7f0000000000u + 4096 + 8192) << "free blocks are skipped";
  EXPECT_EQ(allocations[1].pool, "graph:2,0");
  EXPECT_EQ(allocations[1].label, "torch block dev1");
  EXPECT_EQ(allocations[2].size, 2u << 20);
  EXPECT_EQ(allocations[2].label, "torch segment dev1");
  EXPECT_TRUE(allocations[2].is_graph_pool());
}

TEST(TorchAllocatorSnapshotTest, ABlockAsLargeAsItsSegmentIsTheBlock) {
  detail::TorchSegment segment;
  segment.address = 0x7f0000000000;
  segment.total_size = 2 << 20;
  segment.blocks = {{2 << 20, true}};
  Snapshot snapshot;
  snapshot.epochs.push_back(Epoch{"capture", {}, detail::torch_allocations({segment}, {})});
  GraphRecord graph;
  graph.epoch = "capture";
  Node node;
  node.type = NodeType::kKernel;
  node.name = "triton_poi";
  node.params.push_back(KernelParam{0, {0x40, 0, 0, 0, 0, 0x7f, 0, 0}});
  graph.nodes.push_back(node);
  snapshot.graphs.push_back(graph);
  const Report report = check(snapshot);
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].owner, "torch block dev0");
}

TEST(TorchAllocatorSnapshotTest, LiveSnapshotWithoutAGpuHoldsNoSegments) {
  // Nothing in this process initialises CUDA (on a GPU machine too), so torch's caching
  // allocator has no device state: the live snapshot succeeds and lists nothing. On a GPU
  // with CUDA initialised it lists the process's segments instead (the gpu tier).
  std::vector<Allocation> allocations;
  ASSERT_NO_THROW(allocations = torch_allocator_allocations());
  EXPECT_TRUE(allocations.empty()) << allocations.size() << " allocations, the first at "
                                   << (allocations.empty() ? 0 : allocations[0].begin);
}

}  // namespace
}  // namespace graphcheck::cupti
