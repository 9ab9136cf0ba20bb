// Kernel nodes whose arguments cannot be read the usual way (issue 18 item 4): a CUkernel
// cast to CUfunction that cuFuncGetParamInfo refuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "cupti_fake/capture_fixture.h"

namespace graphcheck::cupti {
namespace {

using testing::bytes_of;
using testing::CaptureTest;
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

}  // namespace
}  // namespace graphcheck::cupti
