// The gpu tier (label gpu; skips without a device). Ran on an H200 on 2026-12-04 and passed
// (docs/gpu-check.md). Updates of an instantiated graph on a real driver: cudaGraphExecUpdate
// to a graph with other pointers, then per-node setters through a node of the new graph and
// through a node of the graph the exec was instantiated from. cuda.h documents the second
// (cuGraphExecKernelNodeSetParams: "from the graph from which graphExec was instantiated");
// on the H200 the driver refused the first (cudaErrorInvalidValue) and took the second, and
// graphcheck's record keeps only the instantiated graph's handles since (docs/cupti.md). The
// outcome of each is written to callback_counts.txt.
#include <cuda_runtime.h>  // the typed cudaMalloc overloads
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <sstream>
#include <string>

#include "gpu/gpu_kernels.h"
#include "gpu/gpu_support.h"

namespace graphcheck::gpu_testing {
namespace {

constexpr int kElements = 256;
constexpr std::size_t kBytes = kElements * sizeof(float);

// The struct argument's `weight` field as the exec record holds it (offset 0 of param 0).
Address recorded_weight(cupti::Backend& backend, cudaGraphExec_t exec) {
  const auto record = backend.capture().exec_graph(exec);  // cudaGraphExec_t is a CUgraphExec
  if (record == nullptr || record->nodes.size() != 1 || record->nodes[0].params.empty() ||
      record->nodes[0].params[0].bytes.size() < sizeof(Address)) {
    return 0;
  }
  Address weight = 0;
  std::memcpy(&weight, record->nodes[0].params[0].bytes.data(), sizeof(weight));
  return weight;
}

// The graph of one struct_kernel node on `stream` (kept: the caller destroys it).
cudaGraph_t capture_graph(const Pointers& p, cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  return capture_struct_kernel(p, stream, &graph) == cudaSuccess ? graph : nullptr;
}

cudaGraphNode_t only_node(cudaGraph_t graph) {
  cudaGraphNode_t node = nullptr;
  size_t count = 1;
  return cudaGraphGetNodes(graph, &node, &count) == cudaSuccess && count == 1 ? node : nullptr;
}

// Sets the exec graph's kernel node, named by `node`, to `p`: the template's parameters
// with another struct argument.
cudaError_t set_kernel(cudaGraphExec_t exec, cudaGraphNode_t node, cudaGraphNode_t source,
                       Pointers p) {
  cudaKernelNodeParams params{};
  const cudaError_t read = cudaGraphKernelNodeGetParams(source, &params);
  if (read != cudaSuccess) {
    return read;
  }
  std::array<void*, 1> args{&p};
  params.kernelParams = args.data();
  params.extra = nullptr;
  return cudaGraphExecKernelNodeSetParams(exec, node, &params);
}

TEST(GpuExecUpdateTest, TheRecordFollowsAnUpdateAndEveryAcceptedNodeSetter) {
  GRAPHCHECK_SKIP_WITHOUT_GPU();
  LiveBackend live;
  GRAPHCHECK_SKIP_WHILE_INJECTED(live);
  ASSERT_TRUE(live.status.ok()) << live.status.message();
  cupti::Backend& backend = *live.backend;

  std::array<float*, 4> buffers{};
  for (float*& buffer : buffers) {
    GRAPHCHECK_CUDA_OK(cudaMalloc(&buffer, kBytes));
  }
  auto address = [](const float* p) { return reinterpret_cast<Address>(p); };
  cudaStream_t stream = nullptr;
  GRAPHCHECK_CUDA_OK(cudaStreamCreate(&stream));
  const cudaGraph_t original =
      capture_graph(Pointers{buffers[0], buffers[1], buffers[2], kElements}, stream);
  const cudaGraph_t updated =
      capture_graph(Pointers{buffers[3], buffers[1], buffers[2], kElements}, stream);
  ASSERT_NE(original, nullptr);
  ASSERT_NE(updated, nullptr);
  cudaGraphExec_t exec = nullptr;
  GRAPHCHECK_CUDA_OK(cudaGraphInstantiate(&exec, original, 0));
  EXPECT_EQ(recorded_weight(backend, exec), address(buffers[0]));

  cudaGraphExecUpdateResultInfo info{};
  GRAPHCHECK_CUDA_OK(cudaGraphExecUpdate(exec, updated, &info));
  const cupti::Status after_update = backend.dispatcher().take_error();
  ASSERT_TRUE(after_update.ok()) << after_update.message();
  EXPECT_EQ(recorded_weight(backend, exec), address(buffers[3]));

  const cudaGraphNode_t updated_node = only_node(updated);
  const cudaGraphNode_t original_node = only_node(original);
  ASSERT_NE(updated_node, nullptr);
  ASSERT_NE(original_node, nullptr);
  const cudaError_t via_updated = set_kernel(
      exec, updated_node, updated_node, Pointers{buffers[1], buffers[0], buffers[2], kElements});
  const cupti::Status after_updated = backend.dispatcher().take_error();
  const Address weight_after_updated = recorded_weight(backend, exec);
  const cudaError_t via_original = set_kernel(
      exec, original_node, original_node, Pointers{buffers[2], buffers[0], buffers[1], kElements});
  const cupti::Status after_original = backend.dispatcher().take_error();
  const Address weight_after_original = recorded_weight(backend, exec);

  // runtime_kernel_setters_alone nonzero: CUPTI reported a runtime setter without the driver
  // setter inside it, whose node graphcheck then leaves not checked (docs/cupti.md).
  std::ostringstream line;
  line << "graphcheck-gpu: exec_update: set_via_updated_graph_node="
       << cudaGetErrorName(via_updated)
       << " graphcheck=" << (after_updated.ok() ? "ok" : after_updated.message())
       << " set_via_original_node=" << cudaGetErrorName(via_original)
       << " graphcheck=" << (after_original.ok() ? "ok" : after_original.message())
       << " runtime_kernel_setters_alone=" << backend.capture().stats().runtime_kernel_setters_alone
       << "\n";
  report_observation(line.str());

  EXPECT_TRUE(via_updated == cudaSuccess || via_original == cudaSuccess)
      << "the driver accepted neither node handle after cudaGraphExecUpdate";
  if (via_updated == cudaSuccess) {
    EXPECT_TRUE(after_updated.ok()) << after_updated.message();
    EXPECT_EQ(weight_after_updated, address(buffers[1]));
  }
  if (via_original == cudaSuccess) {
    EXPECT_TRUE(after_original.ok()) << after_original.message();
    EXPECT_EQ(weight_after_original, address(buffers[2]));
  }
  GRAPHCHECK_CUDA_OK(cudaGraphLaunch(exec, stream));
  GRAPHCHECK_CUDA_OK(cudaStreamSynchronize(stream));

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(original);
  cudaGraphDestroy(updated);
  cudaStreamDestroy(stream);
  for (float* buffer : buffers) {
    cudaFree(buffer);
  }
}

}  // namespace
}  // namespace graphcheck::gpu_testing
