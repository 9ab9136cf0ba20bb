// What the first GPU run (an H200, driver 580, CUDA 13.0, 2026-12-04) found, reproduced on the
// fake driver with the values it recorded: the snapshot writer refused two nodes the reader
// had made (a pinned-host memcpy with one device side, an alloc node's access), a
// __grid_constant__ CUtensorMap at packed offset 112 was not found, and a tensor packed
// right after a registered one read as that tensor's end pointer (tests/gpu, docs/cupti.md).
#include <gmock/gmock.h>
#include <graphcheck/checker.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/pointer_param.h"
#include "cupti/checker_session.h"
#include "cupti_fake/capture_fixture.h"

namespace graphcheck::cupti {
namespace {

using testing::CaptureTest;
using ::testing::ElementsAre;
using testing::FakeNode;

// The bytes of a hex string in memory order ("0a1b" is {0x0a, 0x1b}).
std::vector<std::uint8_t> from_hex(const std::string& hex) {
  std::vector<std::uint8_t> bytes;
  for (std::size_t at = 0; at + 1 < hex.size(); at += 2) {
    bytes.push_back(static_cast<std::uint8_t>(std::stoul(hex.substr(at, 2), nullptr, 16)));
  }
  return bytes;
}

class GpuRunTest : public CaptureTest {
 protected:
  // A snapshot of the graph the capture read, in one epoch, through the writer and back.
  Snapshot round_trip() {
    Snapshot snapshot;
    snapshot.epochs.push_back(Epoch{"capture", {}, {}});
    GraphRecord graph = *capture_.captured_graphs().at(0);
    graph.epoch = "capture";
    snapshot.graphs.push_back(graph);
    EXPECT_EQ(parse_snapshot(to_json(snapshot)), snapshot);
    return snapshot;
  }
};

// GpuNodeTypesTest.PinnedHostSidesOfMemcpyNodesAreNotReferences and
// .StreamOrderedAllocationInACaptureIsGraphMemory: "cannot write snapshot" for a memcpy with
// one operand and for an alloc operand of unknown access.
TEST_F(GpuRunTest, EveryNodeTheReaderMakesIsOneTheSnapshotWriterTakes) {
  constexpr CUdeviceptr kDevice = 0x7f4242800000;
  constexpr CUdeviceptr kPinned = 0x7f4250000000;
  api_.memory_types[kPinned] = CU_MEMORYTYPE_HOST;
  CUgraph graph = api_.add_graph(1);
  FakeNode to_host;  // cudaMemcpyDeviceToHost: the node says the destination is host memory
  to_host.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  to_host.id = 1;
  to_host.memcpy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  to_host.memcpy.srcDevice = kDevice;
  to_host.memcpy.dstMemoryType = CU_MEMORYTYPE_HOST;
  to_host.memcpy.WidthInBytes = 4096;
  to_host.memcpy.Height = 1;
  to_host.memcpy.Depth = 1;
  FakeNode from_host = to_host;  // cudaMemcpyDefault: unified, the pointer attribute says host
  from_host.id = 2;
  from_host.memcpy.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  from_host.memcpy.srcDevice = kPinned;
  from_host.memcpy.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  from_host.memcpy.dstDevice = kDevice + 0x2000;
  FakeNode alloc;
  alloc.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  alloc.id = 3;
  alloc.alloc.dptr = 0x7f4260000000;
  alloc.alloc.bytesize = 4096;
  FakeNode free;
  free.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  free.id = 4;
  free.freed = alloc.alloc.dptr;
  for (const FakeNode& node : {to_host, from_host, alloc, free}) {
    api_.add_node(graph, node);
  }
  end_capture(graph);
  ASSERT_EQ(callback_error(), "");
  const Snapshot snapshot = round_trip();
  const NodeList& nodes = snapshot.graphs[0].nodes;
  EXPECT_THAT(nodes[0].operands, ElementsAre(Operand{"src", kDevice, 4096, Access::kRead}));
  EXPECT_THAT(nodes[1].operands,
              ElementsAre(Operand{"dst", kDevice + 0x2000, 4096, Access::kWrite}));
  EXPECT_THAT(nodes[2].operands,
              ElementsAre(Operand{"alloc", 0x7f4260000000, 4096, Access::kWrite}));
  // Judged like any operand: the device sides read unregistered memory (no span), the alloc
  // range is the graph's.
  Snapshot with_memory = snapshot;
  with_memory.epochs[0].allocations = {Allocation{kDevice, 0x4000, "default", 1, "segment"}};
  const Report report = check(with_memory);
  EXPECT_EQ(report.summary.count(Verdict::kUnregistered), 2U);
  EXPECT_EQ(report.summary.count(Verdict::kGraph), 2U);
}

// A desk check before the second GPU run: a 2D copy between different pitches
// (cudaMemcpy2DAsync from a cudaMallocPitch buffer into a dense one) covers a different
// extent on each side, which the writer refused ("one size for src and dst") as it refused the
// pinned-host copies above. Each side keeps its own size, through the writer and back.
TEST_F(GpuRunTest, APitchedCopyBetweenDifferentPitchesKeepsEachSidesExtent) {
  constexpr CUdeviceptr kPitched = 0x7f4242800000;
  constexpr CUdeviceptr kDense = 0x7f4242900000;
  CUgraph graph = api_.add_graph(1);
  FakeNode copy;
  copy.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  copy.id = 1;
  copy.memcpy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.memcpy.srcDevice = kPitched;
  copy.memcpy.srcPitch = 512;
  copy.memcpy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.memcpy.dstDevice = kDense;
  copy.memcpy.dstPitch = 100;
  copy.memcpy.WidthInBytes = 100;
  copy.memcpy.Height = 4;
  copy.memcpy.Depth = 1;
  api_.add_node(graph, copy);
  end_capture(graph);
  ASSERT_EQ(callback_error(), "");
  const Snapshot snapshot = round_trip();
  // (Height - 1) * pitch + width on each side.
  EXPECT_THAT(snapshot.graphs[0].nodes[0].operands,
              ElementsAre(Operand{"src", kPitched, 3 * 512 + 100, Access::kRead},
                          Operand{"dst", kDense, 3 * 100 + 100, Access::kWrite}));
  EXPECT_THAT(to_json(snapshot), ::testing::HasSubstr(R"("src_size": 1636, "dst_size": 400)"));
  // Each side is judged over its own extent: the destination ends where its tensor does, and
  // the unregistered neighbour after it (which the source's 1636 bytes would reach) is not read.
  Snapshot with_memory = snapshot;
  with_memory.epochs[0].spans = {Span{kPitched, 2048, OwnerKind::kBuffer, "pitched", ""},
                                 Span{kDense, 400, OwnerKind::kBuffer, "dense", ""}};
  with_memory.epochs[0].allocations = {Allocation{kDense + 400, 4096, "default", 1, "neighbour"}};
  const Report report = check(with_memory);
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 2U);
  EXPECT_TRUE(report.findings.empty());
}

// GpuLaunchStylesTest.AGridConstantTmaDescriptorIsAttributedToItsGlobalAddress: the kernel
// `tma_kernel(CUtensorMap, float*)` as the H200 laid it out (cuFuncGetParamInfo: offsets 112
// and 240), with the descriptor bytes recorded there. The operand was missing: the reader
// looked for descriptors at 64-byte multiples of the packed offset.
TEST_F(GpuRunTest, AGridConstantDescriptorAtTheOffsetTheH200GaveIsFound) {
  constexpr Address kWeight = 0x7f4242800000;
  constexpr Address kOut = 0x7f4242802000;
  const std::vector<std::uint8_t> descriptor = from_hex(
      "00008042427f00009003000008000000000000000000000000000000000000001f0000001f00000000000000"
      "00000000000000000000000f0f00000000000000000400000000000010000000000000000000000000000000"
      "00000000000000000000000000000000000000000000000000000000000000000000000000000000");
  ASSERT_EQ(descriptor.size(), sizeof(CUtensorMap));
  CUtensorMap map{};
  std::memcpy(&map, descriptor.data(), sizeof(map));
  cuTensorMapEncodeTiled_params encode{};
  encode.tensorMap = &map;
  encode.globalAddress = reinterpret_cast<void*>(kWeight);
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeTiled, &encode);

  CUfunction tma = api_.add_function("tma_kernel", {{112, 128}, {240, 8}});
  Address out = kOut;
  std::array<void*, 2> args{&map, &out};
  CUgraph graph = api_.add_graph(1);
  api_.add_node(graph, kernel_node(1, tma, args.data()));
  end_capture(graph);
  ASSERT_EQ(callback_error(), "");
  const Snapshot snapshot = round_trip();
  const Node& node = snapshot.graphs[0].nodes[0];
  EXPECT_EQ(node.params[0].bytes, descriptor);
  EXPECT_THAT(node.operands,
              ElementsAre(Operand{"param[0]+0:tensor_map", kWeight, 0, Access::kRead}));
  // The driver stores the address as the descriptor's first word: a reference too.
  Snapshot judged = snapshot;
  judged.epochs[0].spans = {Span{kWeight, 4096, OwnerKind::kParameter, "model.weight", ""},
                            Span{kOut, 4096, OwnerKind::kInput, "out", "graph output"}};
  const Report report = check(judged);
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 2U);
  EXPECT_EQ(report.summary.count(Verdict::kInput), 1U);
}

// The session with an allocator's blocks beside the driver's table (the stand-in for
// torch's caching allocator: cupti/torch_allocator_snapshot.h).
class BlocksTest : public ::testing::Test {
 protected:
  // GpuTorchGraphTest's memory on the H200: one 2 MiB segment, the weight, the unregistered
  // factor right after it, the output; a kernel reading the three.
  static constexpr Address kSegment = 0x7f58ce800000;
  static constexpr Address kWeight = kSegment;
  static constexpr Address kOther = kSegment + 0x4000;  // the weight's end
  static constexpr Address kOut = kSegment + 0x8000;
  static constexpr Address kOwnSegment = 0x7f58cf600000;

  std::unique_ptr<CheckerSession> session(std::vector<Address> words) {
    SessionSources sources;
    sources.allocations = [this] { return table_; };
    const GraphRecord graph = test_support::one_kernel_graph(8, "mul_kernel", words);
    sources.graphs = [graph] { return std::vector<GraphRecord>{graph}; };
    SessionOptions options;
    options.log = [](std::string_view) {};
    auto made = std::make_unique<CheckerSession>(std::move(options), std::move(sources));
    made->set_spans({Span{kWeight, 0x4000, OwnerKind::kParameter, "model.weight", ""},
                     Span{kOut, 0x4000, OwnerKind::kInput, "out", "static graph output"}});
    made->add_allocations([this] { return blocks_; }, SourceGenerations::kInherit);
    made->note_graph_capture(8);
    return made;
  }
  static std::optional<Verdict> verdict_at(const Report& report, Address address) {
    for (const Finding& finding : report.findings) {
      if (finding.address == address) {
        return finding.verdict;
      }
    }
    return std::nullopt;
  }

  std::vector<Allocation> table_{{kSegment, 2 << 20, "default", 1, "cuMemAlloc_v2 #1"}};
  std::vector<Allocation> blocks_{{kWeight, 0x4000, "default", 0, "torch block dev0"},
                                  {kOther, 0x4000, "default", 0, "other"},
                                  {kOut, 0x4000, "default", 0, "torch block dev0"}};
};

TEST_F(BlocksTest, ANeighbourBlockIsItsOwnAndNotTheRegisteredTensorsEnd) {
  auto checked = session({kWeight, kOther, kOut});
  const Report report = checked->check_now("after_replay");
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1U);
  EXPECT_EQ(report.summary.count(Verdict::kInput), 1U);
  EXPECT_EQ(verdict_at(report, kOther), Verdict::kUnregistered);
  ASSERT_EQ(report.findings.size(), 1U);
  EXPECT_EQ(report.findings[0].owner, "other");
}

TEST_F(BlocksTest, ABlockInASegmentTheDriverTableNeverSawIsJudged) {
  // Allocated before the subscription: only the allocator knows it.
  blocks_.push_back({kOwnSegment, 0x1000, "default", 0, "held"});
  auto checked = session({kWeight, kOwnSegment + 0x10});
  const Report report = checked->check_now("after_replay");
  EXPECT_EQ(verdict_at(report, kOwnSegment + 0x10), Verdict::kUnregistered);
  EXPECT_TRUE(report.unattributed.empty());
}

TEST_F(BlocksTest, ARegisteredTensorsBlockIsNoFinding) {
  auto checked = session({kWeight, kWeight + 0x100, kOut});
  const Report report = checked->check_now("after_replay");
  EXPECT_FALSE(report.has_findings()) << to_text(report);
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 2U);
}

// GpuGraphTest.VmmSleepWakeAndReloadMatchTheCpuStory: the derived tensor right after the weight
// in a VMM arena. Its block takes the mapping's generation: lost after a remap, as on the CPU.
TEST_F(BlocksTest, BlocksTakeTheGenerationOfTheMappingUnderThem) {
  table_ = {{kSegment, 2 << 20, "vmm", 1, "cuMemMap #1"}};
  auto checked = session({kWeight, kOther, kOut});
  EXPECT_EQ(verdict_at(checked->check_now("at_capture"), kOther), Verdict::kUnregistered);
  table_.clear();  // asleep: unmapped
  checked->record_epoch("after_sleep");
  table_ = {{kSegment, 2 << 20, "vmm", 3, "cuMemMap #1"}};  // mapped again, bytes gone
  const Report after_wake = checked->check_now("after_wake");
  EXPECT_EQ(verdict_at(after_wake, kOther), Verdict::kLost);
  EXPECT_EQ(verdict_at(after_wake, kWeight), std::nullopt) << "registered: restored";
  const Snapshot snapshot = checked->snapshot("now");
  const Epoch* asleep = snapshot.find_epoch("after_sleep");
  ASSERT_NE(asleep, nullptr);
  for (const Allocation& allocation : asleep->allocations) {
    EXPECT_EQ(allocation.generation, 1U) << "no mapping under it: " << allocation.label;
  }
  const Epoch* now = snapshot.find_epoch("now");
  ASSERT_NE(now, nullptr);
  for (const Allocation& allocation : now->allocations) {
    EXPECT_EQ(allocation.generation, 3U) << allocation.label;
  }
}

// No allocator, no driver table under a word: it is counted, per node, not judged.
TEST_F(BlocksTest, APointerIntoMemoryNothingRecordedIsCountedNotJudged) {
  constexpr Address kLibrary = kSegment + 0x100000;  // a library's own cudaMalloc, unseen
  table_ = {{kSegment, 0x10000, "default", 1, "cuMemAlloc_v2 #1"},
            {kOwnSegment, 0x1000, "default", 2, "cuMemAlloc_v2 #2"}};
  auto checked = session({kWeight, kLibrary, kLibrary + 0x40, 7, kSegment + 0x10000});
  const Report report = checked->check_now("after_replay");
  EXPECT_EQ(report.summary.references, 1U) << "the weight";
  ASSERT_EQ(report.unattributed.size(), 1U);
  EXPECT_EQ(report.unattributed[0].node, 0U);
  EXPECT_EQ(report.unattributed[0].kernel, "mul_kernel");
  EXPECT_EQ(report.unattributed[0].words, 2U) << "not the scalar, not the segment's end";
  EXPECT_EQ(report.unattributed[0].first, kLibrary);
  EXPECT_EQ(parse_report(to_json(report)), report);
}

}  // namespace
}  // namespace graphcheck::cupti
