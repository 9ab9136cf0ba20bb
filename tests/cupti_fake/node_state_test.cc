// Node kinds and node state the backend must read (issue 18 §4): batch mem-op nodes' wait
// and write addresses, and nodes disabled in an exec graph (cuGraphNodeSetEnabled), which are
// skipped, not judged.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cupti/backend.h"
#include "cupti_fake/capture_fixture.h"

namespace graphcheck::cupti {
namespace {

using testing::CaptureTest;
using ::testing::Contains;
using testing::FakeNode;
using ::testing::HasSubstr;

CUstreamBatchMemOpParams wait_op(CUdeviceptr address, CUstreamBatchMemOpType type) {
  CUstreamBatchMemOpParams op{};
  op.waitValue.operation = type;
  op.waitValue.address = address;
  return op;
}

CUstreamBatchMemOpParams write_op(CUdeviceptr address, CUstreamBatchMemOpType type) {
  CUstreamBatchMemOpParams op{};
  op.writeValue.operation = type;
  op.writeValue.address = address;
  return op;
}

FakeNode batch_node(std::uint64_t id, std::vector<CUstreamBatchMemOpParams> ops) {
  FakeNode node;
  node.type = CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
  node.id = id;
  node.mem_ops = std::move(ops);
  return node;
}

class NodeStateTest : public CaptureTest {
 protected:
  CUfunction axpy_ = api_.add_function("axpy", {{0, 8}});
  std::uint64_t x_ = 0x7f3a00000000;
  std::array<void*, 1> params_{&x_};
};

TEST_F(NodeStateTest, BatchMemOpNodesYieldTheirWaitAndWriteAddresses) {
  const CUgraph graph = api_.add_graph(1);
  CUstreamBatchMemOpParams flush{};
  flush.flushRemoteWrites.operation = CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
  api_.add_node(graph,
                batch_node(7, {write_op(0x7f0000000100, CU_STREAM_MEM_OP_WRITE_VALUE_64),
                               wait_op(0x7f0000000200, CU_STREAM_MEM_OP_WAIT_VALUE_32), flush}));
  const CUgraphExec exec = api_.add_exec(10);
  instantiate(exec, graph);
  ASSERT_EQ(callback_error(), "");
  const auto record = capture_.exec_graph(exec);
  ASSERT_NE(record, nullptr);
  ASSERT_EQ(record->nodes.size(), 1U);
  EXPECT_EQ(record->nodes[0].type, NodeType::kBatchMemOp);
  EXPECT_EQ(record->nodes[0].operands,
            (std::vector<Operand>{{"reads[0]", 0x7f0000000200, 4, Access::kRead},
                                  {"writes[0]", 0x7f0000000100, 8, Access::kWrite}}));
}

TEST_F(NodeStateTest, AnExecSetterReplacesABatchMemOpNodesAddresses) {
  const CUgraph graph = api_.add_graph(1);
  const CUgraphNode node = api_.add_node(
      graph, batch_node(7, {write_op(0x7f0000000100, CU_STREAM_MEM_OP_WRITE_VALUE_32)}));
  const CUgraphExec exec = api_.add_exec(10);
  instantiate(exec, graph);
  CUstreamBatchMemOpParams moved = write_op(0x7f0000009000, CU_STREAM_MEM_OP_WRITE_VALUE_32);
  CUDA_BATCH_MEM_OP_NODE_PARAMS params{};
  params.count = 1;
  params.paramArray = &moved;
  cuGraphExecBatchMemOpNodeSetParams_params setter{exec, node, &params};
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecBatchMemOpNodeSetParams,
           &setter);
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(capture_.exec_graph(exec)->nodes[0].operands,
            (std::vector<Operand>{{"writes[0]", 0x7f0000009000, 4, Access::kWrite}}));
}

TEST_F(NodeStateTest, ADisabledNodeIsSkippedAndNotedUntilEnabledAgain) {
  const CUgraph graph = api_.add_graph(1);
  const CUgraphNode kernel = api_.add_node(graph, kernel_node(5, axpy_, params_.data()));
  const CUgraphExec exec = api_.add_exec(10);
  instantiate(exec, graph);
  ASSERT_EQ(capture_.exec_graph(exec)->nodes[0].params.size(), 1U);

  cuGraphNodeSetEnabled_params off{exec, kernel, 0};
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphNodeSetEnabled, &off);
  ASSERT_EQ(callback_error(), "");
  const auto disabled = capture_.exec_graph(exec);
  ASSERT_EQ(disabled->nodes.size(), 1U) << "the node stays, without references";
  EXPECT_TRUE(disabled->nodes[0].params.empty()) << "a disabled node is still checked";
  EXPECT_EQ(disabled->nodes[0].name, "axpy");
  EXPECT_THAT(capture_.exec_warnings(10),
              Contains("note: graph 10 node 5 (kernel axpy) is disabled (cuGraphNodeSetEnabled): "
                       "not checked while disabled"));

  // The runtime form enables it again: checked as before.
  cudaGraphNodeSetEnabled_v11060_params on{exec, kernel, 1};
  api_exit(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphNodeSetEnabled_v11060,
           &on);
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(capture_.exec_graph(exec)->nodes[0].params.size(), 1U);
  EXPECT_TRUE(capture_.exec_warnings(10).empty());
}

TEST_F(NodeStateTest, AFailedDisableChangesNothing) {
  const CUgraph graph = api_.add_graph(1);
  const CUgraphNode kernel = api_.add_node(graph, kernel_node(5, axpy_, params_.data()));
  const CUgraphExec exec = api_.add_exec(10);
  instantiate(exec, graph);
  cuGraphNodeSetEnabled_params off{exec, kernel, 0};
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphNodeSetEnabled, &off,
           CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(capture_.exec_graph(exec)->nodes[0].params.size(), 1U);
}

// Through the backend: the disabled node's stale pointer is no finding.
TEST(NodeStateBackendTest, ADisabledNodeIsNoFinding) {
  testing::FakeDriver api;
  Backend backend(api, {});
  std::uint64_t buffer = 0x7f0000100000;  // allocated, registered nowhere: unregistered
  void* args[] = {&buffer};
  const CUgraph graph = api.add_graph(1);
  FakeNode node;
  node.type = CU_GRAPH_NODE_TYPE_KERNEL;
  node.id = 5;
  node.kernel.func = api.add_function("scale", {{0, 8}});
  node.kernel.kernelParams = args;
  const CUgraphNode handle = api.add_node(graph, node);
  CUgraphExec exec = api.add_exec(10);
  CUresult ok = CUDA_SUCCESS;
  const auto exit_call = [&](CUpti_CallbackId cbid, const void* params) {
    CUpti_CallbackData data{};
    data.callbackSite = CUPTI_API_EXIT;
    data.functionParams = params;
    data.functionReturnValue = &ok;
    backend.dispatcher().on_callback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
  };
  CUdeviceptr allocated = buffer;
  cuMemAlloc_v2_params alloc{&allocated, 4096};
  exit_call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &alloc);
  cuGraphInstantiateWithFlags_params instantiate{&exec, graph, 0};
  exit_call(CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &instantiate);
  EXPECT_EQ(backend.session().check_now("before").findings.size(), 1U);
  cuGraphNodeSetEnabled_params off{exec, handle, 0};
  exit_call(CUPTI_DRIVER_TRACE_CBID_cuGraphNodeSetEnabled, &off);
  const Report report = backend.session().check_now("after");
  EXPECT_TRUE(report.findings.empty()) << to_text(report);
  EXPECT_THAT(report.warnings, Contains(HasSubstr("is disabled (cuGraphNodeSetEnabled)")));
  EXPECT_THAT(to_text(report), HasSubstr("notes (1):"));
}

}  // namespace
}  // namespace graphcheck::cupti
