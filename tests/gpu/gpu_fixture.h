// The fixture of the gpu tier's node-type and launch-style tests (node_types_gpu_test.cc,
// launch_styles_gpu_test.cc): a subscribed backend, a stream, device buffers freed at the
// end, driver entry points reached through the runtime, and the end-of-test bookkeeping
// (snapshot, callback counts, no callback error). Ran on an H200 on 2026-12-04
// (docs/gpu-check.md), with the failures fixed since and not yet run there again.
#ifndef GRAPHCHECK_TESTS_GPU_GPU_FIXTURE_H_
#define GRAPHCHECK_TESTS_GPU_GPU_FIXTURE_H_

#include <cuda.h>
#include <cuda_runtime.h>  // the typed cudaMalloc overloads
#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "gpu/gpu_kernels.h"
#include "gpu/gpu_support.h"

namespace graphcheck::gpu_testing {

/// A driver function through the runtime (`cudaGetDriverEntryPointByVersion` at the headers'
/// `CUDA_VERSION`, so that each symbol is the version its `decltype` names: a 12.0 request
/// refused `cuGraphExecNodeSetParams`, new in 12.2, on the first GPU run), or null with a line
/// on stderr naming it: the binary links the static runtime and no libcuda, and CUPTI sees
/// these calls as it sees any driver call.
template <typename Fn>
Fn driver_entry(const char* name) {
  void* pointer = nullptr;
  cudaDriverEntryPointQueryResult query{};
  const cudaError_t status =
      cudaGetDriverEntryPointByVersion(name, &pointer, CUDA_VERSION, cudaEnableDefault, &query);
  if (status != cudaSuccess || pointer == nullptr) {
    std::cerr << "graphcheck-gpu: no driver entry point " << name << " at version " << CUDA_VERSION
              << " (" << cudaGetErrorName(status) << ", query result " << static_cast<int>(query)
              << ")\n";
    return nullptr;
  }
  return reinterpret_cast<Fn>(pointer);
}

#define GRAPHCHECK_CU_OK(call)                              \
  do {                                                      \
    const CUresult graphcheck_cu_status = (call);           \
    ASSERT_EQ(graphcheck_cu_status, CUDA_SUCCESS) << #call; \
  } while (false)

inline Address address_of(const void* pointer) { return reinterpret_cast<Address>(pointer); }

/// The first 8 bytes at byte `offset` of kernel argument `param` of `node` (0 when absent):
/// a pointer word as the record holds it.
inline Address param_word(const Node& node, std::size_t param, std::size_t offset = 0) {
  if (param >= node.params.size() || node.params[param].bytes.size() < offset + sizeof(Address)) {
    return 0;
  }
  Address word = 0;
  std::memcpy(&word, node.params[param].bytes.data() + offset, sizeof(word));
  return word;
}

/// Each test: a fresh subscription (skipped without a GPU, or while graphcheck's injection
/// holds CUPTI), one stream, `kBytes` device buffers from `buffer()`.
class GpuFixture : public ::testing::Test {
 protected:
  static constexpr int kElements = 1024;
  static constexpr std::size_t kBytes = kElements * sizeof(float);

  void SetUp() override {
    GRAPHCHECK_SKIP_WITHOUT_GPU();
    live_ = std::make_unique<LiveBackend>();
    GRAPHCHECK_SKIP_WHILE_INJECTED(*live_);
    ASSERT_TRUE(live_->status.ok()) << live_->status.message();
    GRAPHCHECK_CUDA_OK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }

  void TearDown() override {
    for (const cudaGraphExec_t exec : execs_) {
      cudaGraphExecDestroy(exec);
    }
    for (float* buffer : buffers_) {
      cudaFree(buffer);
    }
    if (stream_ != nullptr) {
      cudaStreamDestroy(stream_);
    }
    live_.reset();  // unsubscribes: the next test subscribes afresh
  }

  cupti::Backend& backend() { return *live_->backend; }

  /// A `kBytes` device buffer (cudaMalloc), freed in TearDown; null on failure.
  float* buffer() {
    float* pointer = nullptr;
    if (cudaMalloc(&pointer, kBytes) != cudaSuccess) {
      return nullptr;
    }
    buffers_.push_back(pointer);
    return pointer;
  }

  /// Instantiates `graph` (then destroyed, as PyTorch does) and keeps the exec graph until
  /// TearDown; null on failure.
  cudaGraphExec_t instantiate(cudaGraph_t graph) {
    cudaGraphExec_t exec = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    if (status != cudaSuccess) {
      return nullptr;
    }
    keep(exec);
    return exec;
  }

  /// Keeps `exec` until TearDown destroys it.
  void keep(cudaGraphExec_t exec) { execs_.push_back(exec); }

  /// `instantiate(graph)`, one `launch`, and the exec graph's record; null (and a failure)
  /// when a step fails.
  std::shared_ptr<const GraphRecord> run_captured(cudaGraph_t graph) {
    const cudaGraphExec_t exec = instantiate(graph);
    EXPECT_NE(exec, nullptr) << "cudaGraphInstantiate failed";
    if (exec == nullptr) {
      return nullptr;
    }
    launch(exec);
    auto made = record(exec);
    EXPECT_NE(made, nullptr) << "the backend saw no instantiate";
    return made;
  }

  /// The record of `exec` as the backend holds it (null when it saw no instantiate).
  std::shared_ptr<const GraphRecord> record(cudaGraphExec_t exec) {
    return backend().capture().exec_graph(exec);
  }

  /// Registers `weight` as a parameter and `out` as an input (each `kBytes`).
  void register_weight_and_out(const float* weight, const float* out) {
    backend().session().set_spans(
        {Span{address_of(weight), kBytes, OwnerKind::kParameter, "model.weight", ""},
         Span{address_of(out), kBytes, OwnerKind::kInput, "out", "graph output"}});
  }

  /// Launches `exec` once and waits: the driver accepted what the record describes.
  void launch(cudaGraphExec_t exec) {
    GRAPHCHECK_CUDA_OK(cudaGraphLaunch(exec, stream_));
    GRAPHCHECK_CUDA_OK(cudaStreamSynchronize(stream_));
  }

  /// The end of a test: the snapshot as `name`.json, CUPTI's counters, and no error left in
  /// the dispatcher's first-error slot.
  void finish(const std::string& name) {
    record_snapshot(backend().session().snapshot("final"), name);
    print_callback_counts(backend(), name);
    const cupti::Status callback_error = backend().dispatcher().take_error();
    EXPECT_TRUE(callback_error.ok()) << callback_error.message();
  }

  cudaStream_t stream_ = nullptr;

 private:
  std::unique_ptr<LiveBackend> live_;
  std::vector<float*> buffers_;
  std::vector<cudaGraphExec_t> execs_;
};

}  // namespace graphcheck::gpu_testing

#endif  // GRAPHCHECK_TESTS_GPU_GPU_FIXTURE_H_
