// Kernel nodes whose arguments cannot be read the usual way (issue 18 items 3 and 4): a
// CUkernel cast to CUfunction that cuFuncGetParamInfo refuses, and kernels whose arguments
// cannot be read at all, which leave the rest of their graph checked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "cupti/checker_session.h"
#include "cupti_fake/capture_fixture.h"

namespace graphcheck::cupti {
namespace {

using ::testing::AllOf;
using testing::bytes_of;
using testing::CaptureTest;
using ::testing::Contains;
using ::testing::ElementsAre;
using testing::FakeNode;
using ::testing::HasSubstr;

constexpr std::uint64_t kOut = 0x7f3b00000000;

class KernelArgsTest : public CaptureTest {
 protected:
  // A graph of `kernel` followed by a memset and a readable kernel, instantiated as exec 40.
  std::shared_ptr<const GraphRecord> instantiate_with(const FakeNode& kernel) {
    CUgraph graph = api_.add_graph(1);
    graph_ = graph;
    api_.add_node(graph, kernel);
    FakeNode memset;
    memset.type = CU_GRAPH_NODE_TYPE_MEMSET;
    memset.id = 2;
    memset.memset = {0x1000, 0, 0, 1, 64, 1};
    api_.add_node(graph, memset);
    api_.add_node(graph, good_);
    instantiate(exec_, graph);
    return capture_.exec_graph(exec_);
  }
  // The readable nodes of instantiate_with's graph are all there.
  static void expect_rest_read(const GraphRecord& record) {
    ASSERT_EQ(record.nodes.size(), 3U);
    EXPECT_EQ(record.nodes[1].type, NodeType::kMemset);
    EXPECT_EQ(record.nodes[2].name, "copy");
    EXPECT_EQ(record.nodes[2].params, (std::vector<KernelParam>{{0, bytes_of(kOut)}}));
  }

  std::uint64_t out_ = kOut;
  std::array<void*, 2> args_{&out_, &out_};
  CUfunction copy_ = api_.add_function("copy", {{0, 8}});
  CUfunction gemm_ = api_.add_function("gemm", {{0, 8}, {8, 8}});
  FakeNode good_ = kernel_node(3, copy_, args_.data());
  CUgraphExec exec_ = api_.add_exec(40);
  CUgraph graph_ = nullptr;
};

// cuBLAS and cudaGetKernel hand out CUkernel handles that end up in `func`.
TEST_F(KernelArgsTest, FallsBackToCuKernelGetParamInfoWhenCuFuncGetParamInfoRefuses) {
  CUkernel library_kernel = api_.add_kernel("_Z6cublasPf", {{0, 8}});
  CUgraph graph = api_.add_graph(1);
  api_.add_node(graph, kernel_node(9, reinterpret_cast<CUfunction>(library_kernel), args_.data()));
  api_.fail["cu_func_get_param_info"] = CUDA_ERROR_INVALID_HANDLE;
  api_.fail["cu_func_get_name"] = CUDA_ERROR_INVALID_HANDLE;
  end_capture(graph);
  ASSERT_EQ(callback_error(), "");
  const Node& read = capture_.captured_graphs().at(0)->nodes.at(0);
  EXPECT_EQ(read.name, "cublas(float*)");
  EXPECT_EQ(read.params, (std::vector<KernelParam>{{0, bytes_of(kOut)}}));
  EXPECT_EQ(api_.calls["cu_kernel_get_param_info"], 2);  // one argument, then INVALID_VALUE
}

// The retry's INVALID_VALUE is "past the last argument" only for a handle that is a CUkernel:
// for one cuKernelGetName refuses, the first error stands and the node is not checked.
TEST_F(KernelArgsTest, ARetryRefusedForAnotherHandleTypeIsNoKernelWithoutArguments) {
  api_.fail["cu_func_get_param_info"] = CUDA_ERROR_NOT_SUPPORTED;
  api_.fail["cu_kernel_get_param_info"] = CUDA_ERROR_INVALID_VALUE;
  api_.fail["cu_kernel_get_name"] = CUDA_ERROR_INVALID_HANDLE;
  const auto record = instantiate_with(kernel_node(1, gemm_, args_.data()));
  EXPECT_EQ(callback_error(), "");
  ASSERT_NE(record, nullptr);
  EXPECT_TRUE(record->nodes[0].params.empty());
  // (The injected errors reach the graph's other kernel too.)
  EXPECT_THAT(
      capture_.exec_warnings(40),
      Contains(AllOf(HasSubstr("node 1 (kernel gemm)"),
                     HasSubstr("cuFuncGetParamInfo failed with CUDA_ERROR_NOT_SUPPORTED"))));
}

TEST_F(KernelArgsTest, ACuKernelWithoutArgumentsInFuncIsReadAsOne) {
  CUkernel library_kernel = api_.add_kernel("_Z4initv", {});
  api_.fail["cu_func_get_param_info"] = CUDA_ERROR_INVALID_HANDLE;
  api_.fail["cu_func_get_name"] = CUDA_ERROR_INVALID_HANDLE;
  const auto record =
      instantiate_with(kernel_node(1, reinterpret_cast<CUfunction>(library_kernel), nullptr));
  EXPECT_EQ(callback_error(), "");
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->nodes[0].name, "init()");
  EXPECT_TRUE(record->nodes[0].params.empty());
  EXPECT_TRUE(capture_.exec_warnings(40).empty());
}

TEST_F(KernelArgsTest, AParamInfoErrorLeavesTheKernelUncheckedAndTheGraphChecked) {
  CUkernel broken = api_.add_kernel("broken", {{0, 8}});
  FakeNode node = kernel_node(1, nullptr, args_.data());
  node.kernel.kern = broken;
  api_.fail["cu_kernel_get_param_info"] = CUDA_ERROR_NOT_SUPPORTED;
  const auto record = instantiate_with(node);
  EXPECT_EQ(callback_error(), "");
  ASSERT_NE(record, nullptr);
  expect_rest_read(*record);
  EXPECT_EQ(record->nodes[0].type, NodeType::kKernel);
  EXPECT_EQ(record->nodes[0].id, 1U);
  EXPECT_EQ(record->nodes[0].name, "broken");
  EXPECT_TRUE(record->nodes[0].params.empty());
}

TEST_F(KernelArgsTest, AnUnknownExtraKeyLeavesTheKernelUncheckedAndTheGraphChecked) {
  std::array<void*, 3> extra{reinterpret_cast<void*>(0x7), nullptr, CU_LAUNCH_PARAM_END};
  FakeNode node = kernel_node(1, gemm_, nullptr);
  node.kernel.extra = extra.data();
  const auto record = instantiate_with(node);
  EXPECT_EQ(callback_error(), "");
  ASSERT_NE(record, nullptr);
  expect_rest_read(*record);
  EXPECT_EQ(record->nodes[0].name, "gemm");
  EXPECT_TRUE(record->nodes[0].params.empty());
}

TEST_F(KernelArgsTest, ANullKernelParamsEntryLeavesTheKernelUncheckedAndTheGraphChecked) {
  std::array<void*, 2> args{&out_, nullptr};
  const auto record = instantiate_with(kernel_node(1, gemm_, args.data()));
  EXPECT_EQ(callback_error(), "");
  ASSERT_NE(record, nullptr);
  expect_rest_read(*record);
  EXPECT_TRUE(record->nodes[0].params.empty());
  EXPECT_THAT(capture_.warnings(),
              ElementsAre(HasSubstr("not checked: graph 40 node 1 (kernel gemm): its arguments "
                                    "could not be read: kernel gemm: kernelParams[1] is null")));
}

TEST_F(KernelArgsTest, TheReportNamesTheUncheckedKernelAmongItsWarnings) {
  std::array<void*, 3> extra{reinterpret_cast<void*>(0x7), nullptr, CU_LAUNCH_PARAM_END};
  FakeNode node = kernel_node(1, gemm_, nullptr);
  node.kernel.extra = extra.data();
  (void)instantiate_with(node);
  SessionSources sources;
  sources.graphs = [this] {
    std::vector<GraphRecord> graphs;
    for (const auto& record : capture_.exec_graphs()) {
      graphs.push_back(*record);
    }
    return graphs;
  };
  sources.graph_warnings = [this](std::uint64_t id) { return capture_.exec_warnings(id); };
  SessionOptions options;
  std::string log;
  options.log = [&log](std::string_view text) { log += text; };
  CheckerSession session(options, sources);
  const Report report = session.check_now("exit");
  EXPECT_EQ(report.summary.nodes, 3U);
  EXPECT_THAT(report.warnings, ElementsAre(HasSubstr("not checked: graph 40 node 1 (kernel "
                                                     "gemm): its arguments could not be read: "
                                                     "kernel gemm: unknown `extra`")));
  EXPECT_THAT(log, HasSubstr("unknown `extra` launch option 7"));

  // A setter that makes the kernel readable again clears the warning.
  std::array<void*, 2> args{&out_, &out_};
  CUDA_KERNEL_NODE_PARAMS params{};
  params.func = gemm_;
  params.kernelParams = args.data();
  cuGraphExecKernelNodeSetParams_v2_params call{exec_, api_.graph_of(graph_).nodes[0], &params};
  api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2,
           &call);
  EXPECT_EQ(callback_error(), "");
  EXPECT_TRUE(capture_.exec_warnings(40).empty());
}

}  // namespace
}  // namespace graphcheck::cupti
