// Graph capture through constructed CUPTI callbacks and a fabricated graph: kernel arguments
// in both forms, memcpy/memset/alloc/free nodes, child graphs, conditional bodies, TMA
// descriptors, and the error paths.
#include <gmock/gmock.h>
#include <graphcheck/error.h>
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "cupti_fake/capture_fixture.h"

namespace graphcheck::cupti {
namespace {

using testing::bytes_of;
using testing::CaptureTest;
using ::testing::ElementsAre;
using testing::FakeDriver;
using testing::FakeNode;
using ::testing::HasSubstr;

// A by-value struct argument holding two device pointers and a scalar.
struct Args {
  std::uint64_t weight;
  std::int32_t n;
  std::uint64_t scale;
};
static_assert(sizeof(Args) == 24);

constexpr std::uint64_t kWeight = 0x7f3a00000000;
constexpr std::uint64_t kScale = 0x7f3a00200000;
constexpr std::uint64_t kOut = 0x7f3b00000000;

class GraphCaptureTest : public CaptureTest {
 protected:
  // kernel(float* out, Args args): mangled as a C++ compiler would.
  CUfunction gemm_ = api_.add_function("_Z4gemmPf4Args", {{0, 8}, {8, 24}});
  std::uint64_t out_ = kOut;
  Args args_{kWeight, 128, kScale};
  std::array<void*, 2> kernel_params_{&out_, &args_};
};

TEST_F(GraphCaptureTest, ReadsKernelArgumentsFromKernelParamsAtCaptureEnd) {
  CUgraph graph = api_.add_graph(7);
  api_.add_node(graph, kernel_node(100, gemm_, kernel_params_.data()));
  end_capture(graph);
  ASSERT_EQ(callback_error(), "");
  const auto captured = capture_.captured_graphs();
  ASSERT_EQ(captured.size(), 1U);
  const GraphRecord& record = *captured[0];
  EXPECT_EQ(record.id, 7U);
  EXPECT_EQ(record.epoch, "capture");
  ASSERT_EQ(record.nodes.size(), 1U);
  const Node& node = record.nodes[0];
  EXPECT_EQ(node.id, 100U);
  EXPECT_EQ(node.type, NodeType::kKernel);
  EXPECT_EQ(node.name, "gemm(float*, Args)");
  ASSERT_EQ(node.params.size(), 2U);
  EXPECT_EQ(node.params[0], (KernelParam{0, bytes_of(kOut)}));
  EXPECT_EQ(node.params[1], (KernelParam{8, bytes_of(args_)}));
}

TEST_F(GraphCaptureTest, ReadsThePackedExtraFormAtTheLayoutOffsets) {
  std::array<std::uint8_t, 32> buffer{};
  std::memcpy(buffer.data(), &out_, 8);
  std::memcpy(buffer.data() + 8, &args_, 24);
  std::size_t size = buffer.size();
  std::array<void*, 5> extra{CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(),
                             CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  CUgraph graph = api_.add_graph(1);
  FakeNode node = kernel_node(5, gemm_, nullptr);
  node.kernel.extra = extra.data();
  api_.add_node(graph, node);
  CUgraphExec exec = api_.add_exec(40);
  instantiate(exec, graph);
  ASSERT_EQ(callback_error(), "");
  const auto record = capture_.exec_graph(exec);
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->id, 40U);
  ASSERT_EQ(record->nodes.size(), 1U);
  EXPECT_EQ(record->nodes[0].params[0], (KernelParam{0, bytes_of(kOut)}));
  EXPECT_EQ(record->nodes[0].params[1], (KernelParam{8, bytes_of(args_)}));
}

// A kernel whose arguments cannot be read stays in the record without them, and the capture
// names it among its warnings (issue 18 item 3); the rest of the graph is read.
TEST_F(GraphCaptureTest, AnExtraBufferSmallerThanTheLayoutIsReported) {
  std::array<std::uint8_t, 16> buffer{};
  std::size_t size = buffer.size();
  std::array<void*, 5> extra{CU_LAUNCH_PARAM_BUFFER_POINTER, buffer.data(),
                             CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  CUgraph graph = api_.add_graph(1);
  FakeNode node = kernel_node(5, gemm_, nullptr);
  node.kernel.extra = extra.data();
  api_.add_node(graph, node);
  end_capture(graph);
  EXPECT_EQ(callback_error(), "");
  ASSERT_EQ(capture_.captured_graphs().size(), 1U);
  EXPECT_TRUE(capture_.captured_graphs()[0]->nodes.at(0).params.empty());
  EXPECT_THAT(capture_.warnings(),
              ElementsAre(HasSubstr("kernel gemm(float*, Args): argument 1 spans bytes [8, 32) "
                                    "but the packed `extra` buffer holds 16 bytes")));
}

TEST_F(GraphCaptureTest, AKernelNodeWithoutArgumentPointersIsReported) {
  CUgraph graph = api_.add_graph(1);
  api_.add_node(graph, kernel_node(5, gemm_, nullptr));
  end_capture(graph);
  EXPECT_EQ(callback_error(), "");
  EXPECT_THAT(capture_.warnings(),
              ElementsAre(HasSubstr("not checked: captured graph 1 node 5 (kernel gemm(float*, "
                                    "Args)): its arguments could not be read: kernel gemm(float*, "
                                    "Args) takes 2 arguments but its node has neither "
                                    "kernelParams nor extra")));
}

TEST_F(GraphCaptureTest, UsesCuKernelCallsWhenTheNodeHasNoFunction) {
  CUkernel kern = api_.add_kernel("plain_c_kernel", {{0, 8}});
  CUgraph graph = api_.add_graph(1);
  FakeNode node = kernel_node(9, nullptr, kernel_params_.data());
  node.kernel.kern = kern;
  api_.add_node(graph, node);
  end_capture(graph);
  ASSERT_EQ(callback_error(), "");
  const Node& read = capture_.captured_graphs().at(0)->nodes.at(0);
  EXPECT_EQ(read.name, "plain_c_kernel");
  EXPECT_EQ(read.params, (std::vector<KernelParam>{{0, bytes_of(kOut)}}));
  EXPECT_EQ(api_.calls["cu_kernel_get_param_info"], 2);  // one argument, then INVALID_VALUE
  EXPECT_EQ(api_.calls["cu_func_get_param_info"], 0);
}

TEST_F(GraphCaptureTest, KernelLayoutsAreCachedPerFunction) {
  CUgraph graph = api_.add_graph(1);
  for (std::uint64_t id = 0; id < 3; ++id) {
    api_.add_node(graph, kernel_node(id, gemm_, kernel_params_.data()));
  }
  end_capture(graph);
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(capture_.captured_graphs().at(0)->nodes.size(), 3U);
  EXPECT_EQ(api_.calls["cu_func_get_param_info"], 3);  // two arguments + the end, once
}

TEST_F(GraphCaptureTest, MemcpyOperandsCoverThePitchedExtentAndSkipHostSides) {
  CUgraph graph = api_.add_graph(1);
  FakeNode copy;
  copy.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  copy.id = 1;
  copy.memcpy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.memcpy.srcDevice = 0x10000;
  copy.memcpy.srcXInBytes = 16;
  copy.memcpy.srcY = 2;
  copy.memcpy.srcZ = 1;
  copy.memcpy.srcPitch = 256;
  copy.memcpy.srcHeight = 8;
  copy.memcpy.dstMemoryType = CU_MEMORYTYPE_HOST;
  copy.memcpy.WidthInBytes = 64;
  copy.memcpy.Height = 3;
  copy.memcpy.Depth = 2;
  api_.add_node(graph, copy);
  end_capture(graph);
  ASSERT_EQ(callback_error(), "");
  const Node& node = capture_.captured_graphs().at(0)->nodes.at(0);
  EXPECT_EQ(node.type, NodeType::kMemcpy);
  // begin = base + x + y*pitch + z*height*pitch; extent = (D-1)*height*pitch + (H-1)*pitch + W
  EXPECT_THAT(node.operands, ElementsAre(Operand{"src", 0x10000 + 16 + 2 * 256 + 1 * 8 * 256,
                                                 1 * 8 * 256 + 2 * 256 + 64, Access::kRead}));
}

TEST_F(GraphCaptureTest, UnifiedMemcpyOperandsThatAreHostMemoryAreSkipped) {
  api_.memory_types[0x5000] = CU_MEMORYTYPE_HOST;
  api_.memory_types[0x9000] = CU_MEMORYTYPE_DEVICE;
  CUgraph graph = api_.add_graph(1);
  FakeNode copy;
  copy.type = CU_GRAPH_NODE_TYPE_MEMCPY;
  copy.memcpy.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
  copy.memcpy.srcDevice = 0x5000;
  copy.memcpy.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  copy.memcpy.dstDevice = 0x9000;
  copy.memcpy.WidthInBytes = 4096;
  copy.memcpy.Height = 1;
  copy.memcpy.Depth = 1;
  api_.add_node(graph, copy);
  end_capture(graph);
  ASSERT_EQ(callback_error(), "");
  EXPECT_THAT(capture_.captured_graphs().at(0)->nodes.at(0).operands,
              ElementsAre(Operand{"dst", 0x9000, 4096, Access::kWrite}));
}

TEST_F(GraphCaptureTest, MemsetAllocAndFreeNodesBecomeOperands) {
  CUgraph graph = api_.add_graph(1);
  FakeNode memset;
  memset.type = CU_GRAPH_NODE_TYPE_MEMSET;
  memset.memset = {0x20000, 512, 0, 4, 100, 3};  // dst, pitch, value, elementSize, width, height
  FakeNode alloc;
  alloc.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  alloc.alloc.dptr = 0x30000;
  alloc.alloc.bytesize = 8192;
  FakeNode free;
  free.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  free.freed = 0x30000;
  api_.add_node(graph, memset);
  api_.add_node(graph, alloc);
  api_.add_node(graph, free);
  end_capture(graph);
  ASSERT_EQ(callback_error(), "");
  const NodeList& nodes = capture_.captured_graphs().at(0)->nodes;
  ASSERT_EQ(nodes.size(), 3U);
  EXPECT_EQ(nodes[0].type, NodeType::kMemset);
  EXPECT_THAT(nodes[0].operands,
              ElementsAre(Operand{"dst", 0x20000, 2 * 512 + 400, Access::kWrite}));
  EXPECT_EQ(nodes[1].type, NodeType::kMemAlloc);
  EXPECT_THAT(nodes[1].operands, ElementsAre(Operand{"alloc", 0x30000, 8192, Access::kWrite}));
  EXPECT_EQ(nodes[2].type, NodeType::kMemFree);
  EXPECT_THAT(nodes[2].operands, ElementsAre(Operand{"dptr", 0x30000, 0, Access::kUnknown}));
}

TEST_F(GraphCaptureTest, ChildGraphsAreReadRecursively) {
  CUgraph child = api_.add_graph(2);
  api_.add_node(child, kernel_node(21, gemm_, kernel_params_.data()));
  CUgraph graph = api_.add_graph(1);
  FakeNode holder;
  holder.type = CU_GRAPH_NODE_TYPE_GRAPH;
  holder.id = 20;
  holder.child = child;
  api_.add_node(graph, holder);
  end_capture(graph);
  ASSERT_EQ(callback_error(), "");
  const Node& node = capture_.captured_graphs().at(0)->nodes.at(0);
  EXPECT_EQ(node.type, NodeType::kChildGraph);
  ASSERT_EQ(node.bodies.size(), 1U);
  ASSERT_EQ(node.bodies[0].size(), 1U);
  EXPECT_EQ(node.bodies[0][0].id, 21U);
  EXPECT_EQ(node.bodies[0][0].params[1].bytes, bytes_of(args_));
}

TEST_F(GraphCaptureTest, ConditionalBodiesNotedAtAddNodeAreRead) {
  CUgraph then_body = api_.add_graph(3);
  api_.add_node(then_body, kernel_node(31, gemm_, kernel_params_.data()));
  CUgraph else_body = api_.add_graph(4);
  CUgraph graph = api_.add_graph(1);
  FakeNode conditional;
  conditional.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  conditional.id = 30;
  CUgraphNode handle = api_.add_node(graph, conditional);

  std::array<CUgraph, 2> bodies{then_body, else_body};
  CUgraphNodeParams params{};
  params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  params.conditional.type = CU_GRAPH_COND_TYPE_IF;
  params.conditional.size = 2;
  params.conditional.phGraph_out = bodies.data();
  cuGraphAddNode_v2_params add{&handle, graph, nullptr, nullptr, 0, &params};
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode_v2, &add);

  CUgraphExec exec = api_.add_exec(50);
  instantiate(exec, graph);
  ASSERT_EQ(callback_error(), "");
  const Node& node = capture_.exec_graph(exec)->nodes.at(0);
  EXPECT_EQ(node.type, NodeType::kConditional);
  ASSERT_EQ(node.bodies.size(), 2U);
  ASSERT_EQ(node.bodies[0].size(), 1U);
  EXPECT_EQ(node.bodies[0][0].id, 31U);
  EXPECT_TRUE(node.bodies[1].empty());
}

TEST_F(GraphCaptureTest, TmaDescriptorsAreAttributedToTheirGlobalAddress) {
  CUtensorMap map{};
  for (std::size_t i = 0; i < 16; ++i) {
    map.opaque[i] = 0x1111111111111111ULL * (i + 1);
  }
  void* global = reinterpret_cast<void*>(kWeight);
  cuTensorMapEncodeTiled_params encode{};
  encode.tensorMap = &map;
  encode.globalAddress = global;
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeTiled, &encode);

  // kernel(CUtensorMap a, Params p) where Params holds a u64 and, at +64, a descriptor
  // aligned to 64 bytes only (as CUTLASS's TmaDescriptor is), in a 64-aligned layout.
  struct Params {
    alignas(64) std::uint64_t x;
    alignas(64) unsigned char inner[128];  // at offset 64
  };
  static_assert(offsetof(Params, inner) == 64);
  Params packed{};
  std::memcpy(packed.inner, &map, sizeof(map));
  CUfunction tma = api_.add_function("tma_kernel", {{0, 128}, {128, sizeof(Params)}});
  std::array<void*, 2> args{&map, &packed};
  CUgraph graph = api_.add_graph(1);
  api_.add_node(graph, kernel_node(1, tma, args.data()));
  end_capture(graph);
  ASSERT_EQ(callback_error(), "");
  EXPECT_THAT(capture_.captured_graphs().at(0)->nodes.at(0).operands,
              ElementsAre(Operand{"param[0]+0:tensor_map", kWeight, 0, Access::kRead},
                          Operand{"param[1]+64:tensor_map", kWeight, 0, Access::kRead}));

  // Re-pointing the descriptor: its new bytes map to the new address.
  map.opaque[0] ^= 0xff;
  cuTensorMapReplaceAddress_params replace{&map, reinterpret_cast<void*>(kScale)};
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuTensorMapReplaceAddress, &replace);
  std::array<void*, 2> new_args{&map, &packed};
  CUgraph second = api_.add_graph(2);
  api_.add_node(second, kernel_node(2, tma, new_args.data()));
  end_capture(second);
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(capture_.captured_graphs().at(1)->nodes.at(0).operands.at(0).begin, kScale);
  EXPECT_EQ(capture_.stats().tensor_maps, 2U);
}

TEST_F(GraphCaptureTest, RuntimeCaptureEndAfterTheDriverOneDoesNotReadTwice) {
  CUgraph graph = api_.add_graph(1);
  api_.add_node(graph, kernel_node(1, gemm_, kernel_params_.data()));
  end_capture(graph);
  cudaStreamEndCapture_v10000_params runtime{nullptr, &graph};
  api_exit(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000,
           &runtime);
  EXPECT_EQ(api_.calls["cupti_get_graph_id"], 1) << "the runtime's end noted it again";
  // A runtime capture end with no driver EXIT before it is noted.
  CUgraph other = api_.add_graph(2);
  cudaStreamEndCapture_v10000_params alone{nullptr, &other};
  api_exit(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000,
           &alone);
  // Capture ends note their graphs; a graph is read when its record is needed, once.
  EXPECT_EQ(capture_.stats().graphs_walked, 0U);
  EXPECT_EQ(api_.calls["cu_graph_get_nodes"], 0);
  EXPECT_EQ(capture_.captured_graphs().size(), 2U);
  EXPECT_EQ(capture_.captured_graphs().size(), 2U);
  EXPECT_EQ(capture_.stats().graphs_walked, 2U);
}

TEST_F(GraphCaptureTest, RuntimeInstantiateAfterTheDriverOneKeepsOneRecord) {
  CUgraph graph = api_.add_graph(1);
  api_.add_node(graph, kernel_node(1, gemm_, kernel_params_.data()));
  CUgraphExec exec = api_.add_exec(60);
  instantiate(exec, graph);
  cudaGraphInstantiateWithFlags_v11040_params runtime{&exec, graph, 0};
  api_exit(CUPTI_CB_DOMAIN_RUNTIME_API,
           CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithFlags_v11040, &runtime);
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(capture_.exec_graphs().size(), 1U);
  EXPECT_EQ(capture_.stats().graphs_walked, 1U);
  EXPECT_EQ(capture_.stats().execs_created, 1U);
  EXPECT_EQ(capture_.stats().exec_templates_matched, 1U);
  EXPECT_EQ(capture_.stats().exec_templates_differed, 0U);
}

TEST_F(GraphCaptureTest, ExecGraphsAnnouncedOnlyByResourceCallbacksAreReadAtTheNextExit) {
  CUgraph graph = api_.add_graph(1);
  api_.add_node(graph, kernel_node(1, gemm_, kernel_params_.data()));
  CUgraphExec exec = api_.add_exec(70);
  CUpti_GraphData created{};
  created.graph = graph;
  created.graphExec = exec;
  resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, created);
  CUgraphExec none = nullptr;
  cuGraphInstantiate_v2_params params{&none, nullptr, nullptr, nullptr, 0};
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2, &params);
  ASSERT_EQ(callback_error(), "");
  ASSERT_NE(capture_.exec_graph(exec), nullptr);
  EXPECT_EQ(capture_.exec_graph(exec)->id, 70U);
}

TEST_F(GraphCaptureTest, AnExecAnnouncedWithoutItsTemplateDoesNotFailTheNextInstantiate) {
  // CUPTI's headers do not promise that GRAPHEXEC_CREATED fills in `graph`: an announcement
  // without it cannot be read, and must not turn the next instantiate into an error.
  CUgraph graph = api_.add_graph(1);
  api_.add_node(graph, kernel_node(1, gemm_, kernel_params_.data()));
  CUgraphExec unknown = api_.add_exec(71);
  CUpti_GraphData created{};
  created.graphExec = unknown;
  resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, created);
  CUgraphExec exec = api_.add_exec(72);
  instantiate(exec, graph);
  EXPECT_EQ(callback_error(), "");
  ASSERT_NE(capture_.exec_graph(exec), nullptr);
  EXPECT_EQ(capture_.exec_graph(exec)->nodes.size(), 1U);
  EXPECT_EQ(capture_.exec_graph(unknown), nullptr);
  EXPECT_EQ(capture_.stats().exec_templates_matched, 1U);
}

TEST_F(GraphCaptureTest, DestroyCallbacksDropRecords) {
  CUgraph graph = api_.add_graph(1);
  CUgraphExec exec = api_.add_exec(80);
  end_capture(graph);
  instantiate(exec, graph);
  CUpti_GraphData data{};
  data.graph = graph;
  data.graphExec = exec;
  resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, data);
  resource(CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING, data);
  EXPECT_EQ(capture_.exec_graph(exec), nullptr);
  EXPECT_TRUE(capture_.captured_graphs().empty());
  EXPECT_EQ(capture_.stats().execs_destroyed, 1U);
}

TEST_F(GraphCaptureTest, FailedCallsAndEnterSitesAreIgnored) {
  CUgraph graph = api_.add_graph(1);
  cuStreamEndCapture_params params{nullptr, &graph};
  api_enter(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, &params);
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, &params,
           CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_TRUE(capture_.captured_graphs().empty());
  EXPECT_EQ(api_.calls["cu_graph_get_nodes"], 0);
}

TEST_F(GraphCaptureTest, AFailingDriverCallIsReportedWithItsNameAndError) {
  api_.fail["cu_graph_kernel_node_get_params"] = CUDA_ERROR_INVALID_HANDLE;
  CUgraph graph = api_.add_graph(1);
  api_.add_node(graph, kernel_node(1, gemm_, kernel_params_.data()));
  constexpr std::string_view kMessage =
      "cuGraphKernelNodeGetParams failed with CUDA_ERROR_INVALID_HANDLE (invalid resource handle)";
  // At instantiate, in the callback: kept for the next API call, the CUDA call goes on.
  CUgraphExec exec = api_.add_exec(2);
  EXPECT_NO_THROW(instantiate(exec, graph));
  EXPECT_THAT(callback_error(), HasSubstr(kMessage));
  EXPECT_EQ(capture_.exec_graph(exec), nullptr);
  // Asked for the captured graph's record: thrown to the caller, once.
  end_capture(graph);
  EXPECT_EQ(callback_error(), "");
  try {
    (void)capture_.captured_graphs();
    FAIL() << "the failed read was not reported";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr(kMessage));
  }
  EXPECT_TRUE(capture_.captured_graphs().empty());
}

TEST_F(GraphCaptureTest, NodeKindsAndEpochLabelsAreRecorded) {
  capture_.set_epoch("after_wake");
  CUgraph graph = api_.add_graph(1);
  FakeNode host;
  host.type = CU_GRAPH_NODE_TYPE_HOST;
  FakeNode future;
  future.type = static_cast<CUgraphNodeType>(15);  // newer than these headers
  api_.add_node(graph, host);
  api_.add_node(graph, future);
  end_capture(graph);
  ASSERT_EQ(callback_error(), "");
  const GraphRecord& record = *capture_.captured_graphs().at(0);
  EXPECT_EQ(record.epoch, "after_wake");
  EXPECT_EQ(record.nodes[0].type, NodeType::kHost);
  EXPECT_EQ(record.nodes[1].type, NodeType::kEmpty);
  EXPECT_EQ(record.nodes[1].name, "cuda_node_type_15");
}

TEST_F(GraphCaptureTest, AGraphContainingItselfIsReportedNotFollowedForever) {
  CUgraph graph = api_.add_graph(1);
  FakeNode loop;
  loop.type = CU_GRAPH_NODE_TYPE_GRAPH;
  loop.child = graph;
  api_.add_node(graph, loop);
  try {
    (void)capture_.read_graph(graph, 1);
    FAIL() << "read_graph followed the cycle";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("the graph refers to itself"));
  }
  CUgraphExec exec = api_.add_exec(2);
  instantiate(exec, graph);
  EXPECT_THAT(callback_error(), HasSubstr("deeper than 64 levels"));
}

}  // namespace
}  // namespace graphcheck::cupti
