// Driver calls per captured node, counted by the fake driver (issue 32 §1): a stream capture
// of 1,000 kernel nodes of 3 distinct kernels, its capture end and its instantiation, as
// CUPTI reports them. What the capture's callbacks gave (each node and its type) is not asked
// again; a kernel's argument layout and name are asked once per function, however many nodes
// launch it; a node's parameters are read once.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cupti/created_nodes.h"
#include "cupti_fake/capture_fixture.h"

namespace graphcheck::cupti {
namespace {

using testing::CaptureTest;
using testing::FakeNode;

constexpr int kNodes = 1000;
constexpr std::uint64_t kBase = 0x7f3a00000000;

// Calls by the CUDA driver's own name prefix ("cu_": driver, "cupti_": CUPTI).
int calls_with_prefix(const std::map<std::string, int>& calls, const std::string& prefix) {
  int total = 0;
  for (const auto& [name, count] : calls) {
    if (name.starts_with(prefix) && !name.starts_with("cupti_")) {
      total += count;
    }
  }
  return total;
}

class DriverCallsTest : public CaptureTest {
 protected:
  // Three kernels with 2, 3 and 5 arguments of 8 bytes.
  std::array<CUfunction, 3> kernels_{
      api_.add_function("_Z4copyPfS_", {{0, 8}, {8, 8}}),
      api_.add_function("_Z4axpyfPfS_", {{0, 8}, {8, 8}, {16, 8}}),
      api_.add_function("_Z4gemmPfS_S_ii", {{0, 8}, {8, 8}, {16, 8}, {24, 8}, {32, 8}})};
  std::deque<std::array<std::uint64_t, 5>> words_;  // each node's argument values
  std::deque<std::array<void*, 5>> pointers_;       // kernelParams of each node

  // A graph of kNodes kernel nodes launching the three kernels in turn, with the
  // GRAPHNODE_CREATED callback CUPTI sends for each node as the capture adds it.
  CUgraph capture_graph(std::uint32_t id) {
    const CUgraph graph = api_.add_graph(id);
    for (int n = 0; n < kNodes; ++n) {
      auto& words = words_.emplace_back();
      auto& pointers = pointers_.emplace_back();
      for (std::size_t w = 0; w < words.size(); ++w) {
        words[w] = kBase + 0x1000 * static_cast<std::uint64_t>(n) + 8 * w;
        pointers[w] = &words[w];
      }
      const CUgraphNode node = api_.add_node(
          graph, kernel_node(static_cast<std::uint64_t>(id) * 10000 + static_cast<std::uint64_t>(n),
                             kernels_[static_cast<std::size_t>(n % 3)], pointers.data()));
      CUpti_GraphData created{};
      created.graph = graph;
      created.node = node;
      created.nodeType = CU_GRAPH_NODE_TYPE_KERNEL;
      resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, created);
    }
    return graph;
  }
  // cudaStreamEndCapture and cudaGraphInstantiate as torch.cuda.graph calls them: the
  // driver's capture end inside the runtime's, then the instantiation.
  void end_and_instantiate(CUgraph graph, CUgraphExec exec) {
    end_capture(graph);
    cudaStreamEndCapture_v10000_params runtime{nullptr, &graph};
    api_exit(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000,
             &runtime);
    instantiate(exec, graph);
  }
  static int layout_calls() {
    // cuFuncGetParamInfo until CUDA_ERROR_INVALID_VALUE, per kernel: arguments + 1.
    return (2 + 1) + (3 + 1) + (5 + 1);
  }
};

TEST_F(DriverCallsTest, AThousandKernelNodesCostOneDriverCallEachAtCaptureAndInstantiate) {
  const CUgraph graph = capture_graph(1);
  EXPECT_TRUE(api_.calls.empty()) << "the capture's callbacks called the driver";
  const CUgraphExec exec = api_.add_exec(2);
  end_and_instantiate(graph, exec);
  ASSERT_EQ(callback_error(), "");

  // The record is complete: every node, its kernel's name and every argument.
  const auto record = capture_.exec_graph(exec);
  ASSERT_NE(record, nullptr);
  ASSERT_EQ(record->nodes.size(), static_cast<std::size_t>(kNodes));
  EXPECT_EQ(record->nodes[0].name, "copy(float*, float*)");
  EXPECT_EQ(record->nodes[2].name, "gemm(float*, float*, float*, int, int)");
  EXPECT_EQ(record->nodes[2].params.size(), 5U);
  EXPECT_EQ(record->nodes[999].id, 10999U);
  EXPECT_EQ(record->nodes[999].params.at(0).bytes, testing::bytes_of(kBase + 0x1000 * 999));

  // Per function, not per node: layout and name.
  EXPECT_EQ(api_.calls["cu_func_get_param_info"], layout_calls());
  EXPECT_EQ(api_.calls["cu_func_get_name"], 3);
  // Per node, once over capture end and instantiation: the parameters and CUPTI's node id.
  EXPECT_EQ(api_.calls["cu_graph_kernel_node_get_params"], kNodes);
  EXPECT_EQ(api_.calls["cupti_get_graph_node_id"], kNodes);
  // What GRAPHNODE_CREATED gave: the node's type.
  EXPECT_EQ(api_.calls["cu_graph_node_get_type"], 0);
  const int driver = calls_with_prefix(api_.calls, "cu_");
  EXPECT_LE(driver, kNodes * 12 / 10)
      << driver << " driver calls for " << kNodes << " kernel nodes";
}

TEST_F(DriverCallsTest, LayoutsAreKeptAcrossGraphsUntilAModuleIsUnloaded) {
  end_and_instantiate(capture_graph(1), api_.add_exec(2));
  api_.calls.clear();
  end_and_instantiate(capture_graph(3), api_.add_exec(4));
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(api_.calls["cu_func_get_param_info"], 0);
  EXPECT_EQ(api_.calls["cu_func_get_name"], 0);

  // A module unload may free a function handle for the next module to reuse: every layout
  // is asked again, whichever callback tells of the unload.
  for (const bool resource_callback : {true, false}) {
    if (resource_callback) {
      const CUpti_ResourceData data{};
      dispatcher_.on_callback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING,
                              &data);
    } else {
      cuLibraryUnload_params unload{nullptr};
      api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload, &unload);
    }
    api_.calls.clear();
    end_and_instantiate(capture_graph(resource_callback ? 5 : 7), api_.add_exec(6));
    ASSERT_EQ(callback_error(), "");
    EXPECT_EQ(api_.calls["cu_func_get_param_info"], layout_calls()) << resource_callback;
    EXPECT_EQ(api_.calls["cu_func_get_name"], 3) << resource_callback;
  }
}

// With the callbacks off (Backend::disable, then enable), an unload goes unseen: the layouts
// are asked again after the backend subscribes again (found by a review).
TEST_F(DriverCallsTest, LayoutsAreAskedAgainAfterTheCallbacksWereOff) {
  end_and_instantiate(capture_graph(1), api_.add_exec(2));
  capture_.forget_layouts();
  api_.calls.clear();
  end_and_instantiate(capture_graph(3), api_.add_exec(4));
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(api_.calls["cu_func_get_param_info"], layout_calls());
  EXPECT_EQ(api_.calls["cu_func_get_name"], 3);
}

TEST_F(DriverCallsTest, NodesTheCallbacksDidNotNameAreAskedForTheirType) {
  // A graph built before graphcheck subscribed: no GRAPHNODE_CREATED was seen.
  const CUgraph graph = api_.add_graph(9);
  std::array<std::uint64_t, 2> words{kBase, kBase + 8};
  std::array<void*, 2> pointers{words.data(), words.data() + 1};
  api_.add_node(graph, kernel_node(1, kernels_[0], pointers.data()));
  FakeNode memset;
  memset.type = CU_GRAPH_NODE_TYPE_MEMSET;
  memset.id = 2;
  memset.memset.dst = kBase;
  memset.memset.width = 16;
  memset.memset.elementSize = 1;
  api_.add_node(graph, memset);
  const CUgraphExec exec = api_.add_exec(10);
  instantiate(exec, graph);
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(api_.calls["cu_graph_node_get_type"], 2);
  const auto record = capture_.exec_graph(exec);
  ASSERT_NE(record, nullptr);
  ASSERT_EQ(record->nodes.size(), 2U);
  EXPECT_EQ(record->nodes[0].type, NodeType::kKernel);
  EXPECT_EQ(record->nodes[1].type, NodeType::kMemset);
}

// The driver fires GRAPHNODE_CREATED inside an instantiate too (the H200: two per one-node
// capture), for the nodes of the exec graph's own copy: counted, not noted (those notes were
// kept for the process's life, one graph per instantiation), and the read stays positional.
TEST_F(DriverCallsTest, NodesCreatedInsideAnInstantiateAreCountedNotNoted) {
  const CUgraph graph = capture_graph(1);
  const std::uint64_t noted = capture_.stats().nodes_noted;
  EXPECT_EQ(noted, static_cast<std::uint64_t>(kNodes));
  end_capture(graph);
  const CUgraphExec exec = api_.add_exec(2);
  cuGraphInstantiateWithFlags_params call{nullptr, graph, 0};
  api_enter(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &call);
  std::array<int, 2> copy{};  // the exec graph's copy: a graph and nodes no API call names
  CUpti_GraphData created{};
  created.graph = reinterpret_cast<CUgraph>(&copy[0]);
  created.node = reinterpret_cast<CUgraphNode>(&copy[1]);
  created.nodeType = CU_GRAPH_NODE_TYPE_KERNEL;
  resource(CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED, created);
  instantiate(exec, graph);  // GRAPHEXEC_CREATED, then the EXIT
  ASSERT_EQ(callback_error(), "");
  const GraphCaptureStats stats = capture_.stats();
  EXPECT_EQ(stats.nodes_created, static_cast<std::uint64_t>(kNodes) + 1);
  EXPECT_EQ(stats.nodes_created_instantiating, 1U);
  EXPECT_EQ(stats.nodes_noted, noted);
  ASSERT_NE(capture_.exec_graph(exec), nullptr);
  EXPECT_EQ(capture_.exec_graph(exec)->nodes.size(), static_cast<std::size_t>(kNodes));
  // After the EXIT, a node created is noted again (a failed instantiate ends too).
  api_enter(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &call);
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &call,
           CUDA_ERROR_INVALID_VALUE);
  capture_graph(3);
  EXPECT_EQ(capture_.stats().nodes_noted, noted + kNodes);
}

// The callbacks' notes answer by position while they are exactly the graph's nodes, by handle
// otherwise (a node destroyed, its handle reused by a node of another kind: the later note
// wins), and not at all for a node never noted or a graph past the cap.
TEST(CreatedNodesTest, NotesAnswerByPositionThenByHandleTheLatestWinning) {
  CreatedNodes created;
  std::array<int, 4> storage{};
  const auto handle = [&](std::size_t i) { return reinterpret_cast<CUgraphNode>(&storage[i]); };
  const auto graph = reinterpret_cast<CUgraph>(&created);
  created.note(graph, handle(0), CU_GRAPH_NODE_TYPE_KERNEL);
  created.note(graph, handle(1), CU_GRAPH_NODE_TYPE_MEMSET);
  const std::vector<CUgraphNode> both{handle(0), handle(1)};
  EXPECT_EQ(created.of(graph, both).type(1, handle(1)), CU_GRAPH_NODE_TYPE_MEMSET);
  // Node 1 destroyed (unseen), its handle reused by a memcpy node; a node never noted.
  created.note(graph, handle(1), CU_GRAPH_NODE_TYPE_MEMCPY);
  const std::vector<CUgraphNode> now{handle(0), handle(1), handle(2)};
  const NodeTypes types = created.of(graph, now);
  EXPECT_EQ(types.type(0, handle(0)), CU_GRAPH_NODE_TYPE_KERNEL);
  EXPECT_EQ(types.type(1, handle(1)), CU_GRAPH_NODE_TYPE_MEMCPY);
  EXPECT_EQ(types.type(2, handle(2)), std::nullopt);
  EXPECT_EQ(created.created(), 3U);
  created.forget(graph);
  EXPECT_EQ(created.of(graph, now).type(0, handle(0)), std::nullopt);
  EXPECT_EQ(created.size(), 0U);
}

TEST(CreatedNodesTest, AGraphPastTheCapIsNoLongerNoted) {
  CreatedNodes created;
  int storage = 0;
  const auto node = reinterpret_cast<CUgraphNode>(&storage);
  const auto graph = reinterpret_cast<CUgraph>(&created);
  for (std::size_t i = 0; i <= CreatedNodes::kMaxNotes; ++i) {
    created.note(graph, node, CU_GRAPH_NODE_TYPE_KERNEL);
  }
  EXPECT_EQ(created.size(), 0U) << "the list is freed at the cap";
  EXPECT_EQ(created.of(graph, {node}).type(0, node), std::nullopt);
}

}  // namespace
}  // namespace graphcheck::cupti
