// Updates of instantiated graphs: per-node setters (driver and runtime forms), the generic
// setter, whole-graph updates, and their error paths.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>

#include "cupti_fake/capture_fixture.h"

namespace graphcheck::cupti {
namespace {

using testing::bytes_of;
using testing::CaptureTest;
using ::testing::ElementsAre;
using testing::FakeNode;
using ::testing::HasSubstr;

class ExecUpdateTest : public CaptureTest {
 protected:
  ExecUpdateTest() {
    kernel_ = api_.add_node(graph_, kernel_node(1, scale_, old_params_.data()));
    memset_ = api_.add_node(graph_, memset_node(2, 0x1000, 64));
    instantiate(exec_, graph_);
    EXPECT_EQ(callback_error(), "");
  }
  // cuGraphExecKernelNodeSetParams_v2 with `params` returning `result`.
  void set_kernel(const CUDA_KERNEL_NODE_PARAMS& params, CUgraphNode node, int result = 0) {
    cuGraphExecKernelNodeSetParams_v2_params call{exec_, node, &params};
    api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2,
             &call, result);
  }
  const Node& node(std::size_t i) { return capture_.exec_graph(exec_)->nodes.at(i); }
  // Driver kernel-node parameters: `func` with the argument pointers `args`.
  static CUDA_KERNEL_NODE_PARAMS kernel_params(CUfunction func, void** args) {
    CUDA_KERNEL_NODE_PARAMS params{};
    params.func = func;
    params.kernelParams = args;
    return params;
  }
  // The runtime forms' kernel parameters: a host stub (not a CUfunction) and `args`.
  static cudaKernelNodeParams runtime_kernel(void** args) {
    cudaKernelNodeParams params{};
    params.func = reinterpret_cast<void*>(0x1234);
    params.kernelParams = args;
    return params;
  }
  static cudaGraphNodeParams runtime_generic(void** args) {
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeKernel;
    params.kernel.func = reinterpret_cast<void*>(0x1234);
    params.kernel.kernelParams = args;
    return params;
  }
  // A 1-D memset node (width `bytes`, byte elements) with the given id and destination.
  static FakeNode memset_node(std::uint64_t id, std::uint64_t dst, std::size_t bytes) {
    FakeNode memset;
    memset.type = CU_GRAPH_NODE_TYPE_MEMSET;
    memset.id = id;
    memset.memset = {dst, 0, 0, 1, bytes, 1};
    return memset;
  }
  // The runtime setter `cbid` with `params`, returning `result`, with no driver call inside
  // that CUPTI reported.
  void runtime_alone(CUpti_CallbackId cbid, const void* params, int result = 0) {
    api_enter(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, params);
    api_exit(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, params, result);
  }
  // cuGraphExecUpdate_v2 of the exec graph with the whole of `update`.
  void update_whole(CUgraph update) {
    cuGraphExecUpdate_v2_params call{exec_, update, nullptr};
    api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2, &call);
  }

  CUfunction scale_ = api_.add_function("scale", {{0, 8}});
  std::uint64_t old_pointer_ = 0x7f0000000000;
  std::uint64_t new_pointer_ = 0x7f0000100000;
  std::array<void*, 1> old_params_{&old_pointer_};
  std::array<void*, 1> new_params_{&new_pointer_};
  CUgraph graph_ = api_.add_graph(1);
  CUgraphExec exec_ = api_.add_exec(90);
  CUgraphNode kernel_ = nullptr;
  CUgraphNode memset_ = nullptr;
};

TEST_F(ExecUpdateTest, KernelSetParamsReplacesTheArgumentsInANewRecord) {
  const auto before = capture_.exec_graph(exec_);
  const CUDA_KERNEL_NODE_PARAMS params = kernel_params(scale_, new_params_.data());
  set_kernel(params, kernel_);
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(node(0).params.at(0).bytes, bytes_of(new_pointer_));
  EXPECT_EQ(node(0).id, 1U);
  EXPECT_EQ(before->nodes.at(0).params.at(0).bytes, bytes_of(old_pointer_));  // old record intact
  EXPECT_EQ(capture_.stats().exec_updates, 1U);
}

TEST_F(ExecUpdateTest, RejectedAndEnterOnlyUpdatesChangeNothing) {
  const CUDA_KERNEL_NODE_PARAMS params = kernel_params(scale_, new_params_.data());
  cuGraphExecKernelNodeSetParams_v2_params call{exec_, kernel_, &params};
  api_enter(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2,
            &call);
  set_kernel(params, kernel_, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(node(0).params.at(0).bytes, bytes_of(old_pointer_));
  EXPECT_EQ(capture_.stats().exec_updates, 0U);
}

TEST_F(ExecUpdateTest, AnUpdateOfANodeTheRecordLacksIsReported) {
  CUgraph other = api_.add_graph(2);
  CUgraphNode stranger = api_.add_node(other, kernel_node(7, scale_, new_params_.data()));
  const CUDA_KERNEL_NODE_PARAMS params = kernel_params(scale_, new_params_.data());
  set_kernel(params, stranger);
  EXPECT_THAT(callback_error(),
              HasSubstr("exec graph 90 had a node updated that its record does not hold"));
}

TEST_F(ExecUpdateTest, UpdatesOfUnknownExecGraphsAreIgnored) {
  CUgraphExec unknown = api_.add_exec(91);
  const CUDA_KERNEL_NODE_PARAMS params = kernel_params(scale_, new_params_.data());
  cuGraphExecKernelNodeSetParams_v2_params call{unknown, kernel_, &params};
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2,
           &call);
  EXPECT_EQ(callback_error(), "");
  EXPECT_EQ(capture_.exec_graph(unknown), nullptr);
}

TEST_F(ExecUpdateTest, GenericSetParamsHandlesKernelMemsetAndMemcpy) {
  CUgraphNodeParams params{};
  params.type = CU_GRAPH_NODE_TYPE_KERNEL;
  params.kernel.func = scale_;
  params.kernel.kernelParams = new_params_.data();
  cuGraphExecNodeSetParams_params call{exec_, kernel_, &params};
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecNodeSetParams, &call);
  EXPECT_EQ(node(0).params.at(0).bytes, bytes_of(new_pointer_));

  CUgraphNodeParams memset{};
  memset.type = CU_GRAPH_NODE_TYPE_MEMSET;
  memset.memset.dst = 0x2000;
  memset.memset.elementSize = 4;
  memset.memset.width = 8;
  memset.memset.height = 1;
  cuGraphExecNodeSetParams_params set_memset{exec_, memset_, &memset};
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecNodeSetParams,
           &set_memset);
  EXPECT_THAT(node(1).operands, ElementsAre(Operand{"dst", 0x2000, 32, Access::kWrite}));

  CUDA_MEMCPY3D copy{};
  copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcDevice = 0x3000;
  copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.dstDevice = 0x4000;
  copy.WidthInBytes = 16;
  cuGraphExecMemcpyNodeSetParams_params set_copy{exec_, memset_, &copy, nullptr};
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemcpyNodeSetParams,
           &set_copy);
  ASSERT_EQ(callback_error(), "");
  EXPECT_THAT(node(1).operands, ElementsAre(Operand{"src", 0x3000, 16, Access::kRead},
                                            Operand{"dst", 0x4000, 16, Access::kWrite}));
  EXPECT_EQ(capture_.stats().exec_updates, 3U);
}

// The runtime's cudaGraphExecKernelNodeSetParams calls the driver's setter inside: its EXIT
// read the new arguments with the new kernel's layout, and the runtime EXIT (whose `func` is
// a host stub) changes nothing.
TEST_F(ExecUpdateTest, ARuntimeKernelSetterIsReadAtTheDriverSetterInsideIt) {
  const CUfunction wide = api_.add_function("wide", {{0, 8}, {8, 8}});
  std::uint64_t second = 0x7f0000200000;
  std::array<void*, 2> wide_params{&new_pointer_, &second};
  cudaKernelNodeParams runtime = runtime_kernel(wide_params.data());
  cudaGraphExecKernelNodeSetParams_v10010_params runtime_call{exec_, kernel_, &runtime};
  api_enter(CUPTI_CB_DOMAIN_RUNTIME_API,
            CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecKernelNodeSetParams_v10010, &runtime_call);
  const CUDA_KERNEL_NODE_PARAMS driver = kernel_params(wide, wide_params.data());
  set_kernel(driver, kernel_);
  api_exit(CUPTI_CB_DOMAIN_RUNTIME_API,
           CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecKernelNodeSetParams_v10010, &runtime_call);
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(node(0).name, "wide");
  ASSERT_EQ(node(0).params.size(), 2U);
  EXPECT_EQ(node(0).params.at(1).bytes, bytes_of(second));
  EXPECT_TRUE(capture_.exec_warnings(90).empty());
  EXPECT_EQ(capture_.stats().exec_updates, 1U);
  EXPECT_EQ(capture_.stats().runtime_kernel_setters_alone, 0U);
}

// When CUPTI reports the runtime setter alone, its host stub names no driver function, so the
// kernel (which the setter may have changed) and its argument layout are unknown. Before, the
// node's previous layout was used: here 2 arguments read from the caller's 1-entry array.
TEST_F(ExecUpdateTest, ARuntimeOnlyKernelSetterLeavesTheNodeNotChecked) {
  const CUfunction wide = api_.add_function("wide", {{0, 8}, {8, 8}});
  std::uint64_t second = 0x7f0000200000;
  std::array<void*, 2> wide_params{&old_pointer_, &second};
  const CUDA_KERNEL_NODE_PARAMS driver = kernel_params(wide, wide_params.data());
  set_kernel(driver, kernel_);  // the node now launches `wide` (2 arguments)
  ASSERT_EQ(node(0).params.size(), 2U);

  // A later runtime setter to a 1-argument kernel; the earlier driver setter of the same node
  // on this thread does not count for it.
  cudaGraphNodeParams generic = runtime_generic(new_params_.data());  // 1 entry
  cudaGraphExecNodeSetParams_v12020_params call{exec_, kernel_, &generic};
  runtime_alone(CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecNodeSetParams_v12020, &call);
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(node(0).type, NodeType::kKernel);
  EXPECT_EQ(node(0).id, 1U);
  EXPECT_TRUE(node(0).params.empty());
  EXPECT_THAT(capture_.exec_warnings(90),
              ElementsAre(HasSubstr("not checked: graph 90 node 1: its arguments could not be "
                                    "read: updated by cudaGraphExecNodeSetParams, and CUPTI "
                                    "reported no driver setter inside it")));
  EXPECT_EQ(capture_.stats().runtime_kernel_setters_alone, 1U);

  // A driver setter makes it readable again.
  set_kernel(driver, kernel_);
  EXPECT_EQ(node(0).params.size(), 2U);
  EXPECT_TRUE(capture_.exec_warnings(90).empty());
}

// A runtime kernel setter reported inside another: the driver setter's read inside both
// stands, judged at the outer call's EXIT (found by a review: the inner EXIT used up the
// driver setter's note and the outer one then discarded a good read).
TEST_F(ExecUpdateTest, NestedRuntimeSettersKeepTheDriverSettersRead) {
  cudaGraphNodeParams generic = runtime_generic(new_params_.data());
  cudaGraphExecNodeSetParams_v12020_params outer{exec_, kernel_, &generic};
  cudaKernelNodeParams runtime = runtime_kernel(new_params_.data());
  cudaGraphExecKernelNodeSetParams_v10010_params inner{exec_, kernel_, &runtime};
  api_enter(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecNodeSetParams_v12020,
            &outer);
  api_enter(CUPTI_CB_DOMAIN_RUNTIME_API,
            CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecKernelNodeSetParams_v10010, &inner);
  const CUDA_KERNEL_NODE_PARAMS driver = kernel_params(scale_, new_params_.data());
  set_kernel(driver, kernel_);
  api_exit(CUPTI_CB_DOMAIN_RUNTIME_API,
           CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecKernelNodeSetParams_v10010, &inner);
  api_exit(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecNodeSetParams_v12020,
           &outer);
  ASSERT_EQ(callback_error(), "");
  ASSERT_EQ(node(0).params.size(), 1U);
  EXPECT_EQ(node(0).params.at(0).bytes, bytes_of(new_pointer_));
  EXPECT_TRUE(capture_.exec_warnings(90).empty());
  EXPECT_EQ(capture_.stats().runtime_kernel_setters_alone, 0U);
}

// A runtime kernel setter that fails (the H200 refused one of the gpu test's on purpose) still
// ends: a later runtime setter without a driver setter inside is reported alone, not taken
// for one nested in the failed call (found by a review: the failed EXIT left the depth up).
TEST_F(ExecUpdateTest, AFailedRuntimeSetterDoesNotHideALaterOneReportedAlone) {
  cudaKernelNodeParams runtime = runtime_kernel(new_params_.data());
  cudaGraphExecKernelNodeSetParams_v10010_params refused{exec_, kernel_, &runtime};
  runtime_alone(CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecKernelNodeSetParams_v10010, &refused,
                static_cast<int>(cudaErrorInvalidValue));
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(node(0).params.at(0).bytes, bytes_of(old_pointer_));  // a failed call changes nothing
  EXPECT_EQ(capture_.stats().runtime_kernel_setters_alone, 0U);

  cudaGraphNodeParams generic = runtime_generic(new_params_.data());
  cudaGraphExecNodeSetParams_v12020_params alone{exec_, kernel_, &generic};
  runtime_alone(CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecNodeSetParams_v12020, &alone);
  ASSERT_EQ(callback_error(), "");
  EXPECT_TRUE(node(0).params.empty());
  EXPECT_EQ(capture_.stats().runtime_kernel_setters_alone, 1U);
  EXPECT_THAT(capture_.exec_warnings(90),
              ElementsAre(HasSubstr("CUPTI reported no driver setter inside it")));
}

TEST_F(ExecUpdateTest, WholeGraphUpdateRereadsTheSourceGraph) {
  CUgraph replacement = api_.add_graph(3);
  api_.add_node(replacement, kernel_node(11, scale_, new_params_.data()));
  api_.add_node(replacement, memset_node(12, 0x5000, 16));
  update_whole(replacement);
  ASSERT_EQ(callback_error(), "");
  const auto record = capture_.exec_graph(exec_);
  EXPECT_EQ(record->id, 90U);
  ASSERT_EQ(record->nodes.size(), 2U);
  EXPECT_EQ(record->nodes[0].params.at(0).bytes, bytes_of(new_pointer_));
  EXPECT_THAT(record->nodes[1].operands, ElementsAre(Operand{"dst", 0x5000, 16, Access::kWrite}));
  // The exec graph's nodes keep their identities: the ids of the instantiated graph's nodes.
  EXPECT_EQ(record->nodes[0].id, 1U);
  EXPECT_EQ(record->nodes[1].id, 2U);
}

// cuda.h (cuGraphExecKernelNodeSetParams): hNode is a node "from the graph from which
// graphExec was instantiated", also after cuGraphExecUpdate; issue 18 item 1.
TEST_F(ExecUpdateTest, SettersAfterAWholeGraphUpdateNameTheInstantiatedGraphsNodes) {
  CUgraph replacement = api_.add_graph(3);
  api_.add_node(replacement, kernel_node(11, scale_, new_params_.data()));
  api_.add_node(replacement, memset_node(12, 0x5000, 16));
  update_whole(replacement);
  ASSERT_EQ(callback_error(), "");

  const CUDA_KERNEL_NODE_PARAMS params = kernel_params(scale_, old_params_.data());
  set_kernel(params, kernel_);
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(node(0).params.at(0).bytes, bytes_of(old_pointer_));
  EXPECT_EQ(node(0).id, 1U);

  CUDA_MEMSET_NODE_PARAMS fresh{0x6000, 0, 0, 1, 8, 1};
  cuGraphExecMemsetNodeSetParams_params set_memset{exec_, memset_, &fresh, nullptr};
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemsetNodeSetParams,
           &set_memset);
  ASSERT_EQ(callback_error(), "");
  EXPECT_THAT(node(1).operands, ElementsAre(Operand{"dst", 0x6000, 8, Access::kWrite}));

  EXPECT_EQ(capture_.stats().exec_updates, 3U);
}

// On an H200 (driver 580, 2026-12-04) a setter naming the update graph's node after
// cuGraphExecUpdate failed with cudaErrorInvalidValue, and one naming the instantiated graph's
// node succeeded: the update graph's handles are not the exec graph's. A refused setter
// changes nothing; one the record cannot place is reported. A second update pairs again.
TEST_F(ExecUpdateTest, TheUpdateGraphsHandlesAreNotTheExecGraphsAndASecondUpdatePairsAgain) {
  CUgraph first = api_.add_graph(3);
  CUgraphNode first_kernel = api_.add_node(first, kernel_node(11, scale_, new_params_.data()));
  api_.add_node(first, api_.node_of(memset_));
  update_whole(first);
  ASSERT_EQ(callback_error(), "");
  const CUDA_KERNEL_NODE_PARAMS params = kernel_params(scale_, old_params_.data());
  set_kernel(params, first_kernel, CUDA_ERROR_INVALID_VALUE);  // what the driver answered
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(node(0).params.at(0).bytes, bytes_of(new_pointer_));
  set_kernel(params, first_kernel);  // a driver that took it: the record cannot follow
  EXPECT_THAT(callback_error(), HasSubstr("had a node updated that its record does not hold"));
  EXPECT_EQ(node(0).params.at(0).bytes, bytes_of(new_pointer_));
  set_kernel(params, kernel_);
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(node(0).params.at(0).bytes, bytes_of(old_pointer_));

  CUgraph second = api_.add_graph(4);
  api_.add_node(second, kernel_node(21, scale_, new_params_.data()));
  api_.add_node(second, api_.node_of(memset_));
  update_whole(second);
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(node(0).params.at(0).bytes, bytes_of(new_pointer_));
  set_kernel(params, kernel_);
  ASSERT_EQ(callback_error(), "");
  EXPECT_EQ(node(0).params.at(0).bytes, bytes_of(old_pointer_));
  EXPECT_EQ(node(0).id, 1U);
}

TEST_F(ExecUpdateTest, AnUpdateGraphWhoseNodesDoNotPairByPositionIsReported) {
  CUgraph replacement = api_.add_graph(3);
  api_.add_node(replacement, memset_node(12, 0x5000, 16));
  api_.add_node(replacement, kernel_node(11, scale_, new_params_.data()));
  update_whole(replacement);
  EXPECT_THAT(callback_error(), HasSubstr("do not pair by position with the instantiated graph's"));
  // The record holds what the update graph says; the unpaired nodes take no setter.
  EXPECT_EQ(node(0).type, NodeType::kMemset);
  const CUDA_KERNEL_NODE_PARAMS params = kernel_params(scale_, old_params_.data());
  set_kernel(params, kernel_);
  EXPECT_THAT(callback_error(), HasSubstr("had a node updated that its record does not hold"));
}

TEST_F(ExecUpdateTest, NodesInsideChildGraphsAreUpdatedInPlace) {
  CUgraph child = api_.add_graph(5);
  CUgraphNode inner = api_.add_node(child, kernel_node(51, scale_, old_params_.data()));
  CUgraph outer = api_.add_graph(6);
  FakeNode holder;
  holder.type = CU_GRAPH_NODE_TYPE_GRAPH;
  holder.id = 50;
  holder.child = child;
  api_.add_node(outer, holder);
  CUgraphExec exec = api_.add_exec(95);
  instantiate(exec, outer);
  const CUDA_KERNEL_NODE_PARAMS params = kernel_params(scale_, new_params_.data());
  cuGraphExecKernelNodeSetParams_v2_params call{exec, inner, &params};
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2,
           &call);
  ASSERT_EQ(callback_error(), "");
  const Node& updated = capture_.exec_graph(exec)->nodes.at(0).bodies.at(0).at(0);
  EXPECT_EQ(updated.id, 51U);
  EXPECT_EQ(updated.params.at(0).bytes, bytes_of(new_pointer_));
}

TEST_F(ExecUpdateTest, NodeUpdateResourceCallbacksAreCounted) {
  CUpti_GraphData data{};
  data.graphExec = exec_;
  data.node = kernel_;
  resource(CUPTI_CBID_RESOURCE_GRAPH_NODE_SET_PARAMS, data);
  resource(CUPTI_CBID_RESOURCE_GRAPH_NODE_UPDATED, data);
  EXPECT_EQ(capture_.stats().node_update_events, 2U);
}

}  // namespace
}  // namespace graphcheck::cupti
