// The gpu tier (label gpu; every test skips without a device). Ran on an H200 on 2026-12-04:
// the VMM story failed there and is fixed since, not yet run again (docs/gpu-check.md). A real
// CUDA graph of a plain kernel whose pointers sit inside a struct argument, captured through
// CUPTI; and a sleep/wake/reload story through a VMM allocator whose verdicts must match the
// CPU story (unregistered at capture, lost after a discard, stale after rebinding).
#include <cuda_runtime.h>  // the typed cudaMalloc overloads
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "gpu/gpu_kernels.h"
#include "gpu/gpu_support.h"

namespace graphcheck::gpu_testing {
namespace {

using ::testing::HasSubstr;

constexpr int kElements = 1024;
constexpr std::size_t kBytes = kElements * sizeof(float);

// Captures `p` into a graph on a fresh stream and instantiates it.
cudaGraphExec_t capture(const Pointers& p, cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (capture_struct_kernel(p, stream, &graph) != cudaSuccess ||
      cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
    return nullptr;
  }
  cudaGraphDestroy(graph);  // as PyTorch does (keep_graph=False): records must survive it
  return exec;
}

// Under graphcheck's injection (gpu-check.sh's smoke run) the injection holds CUPTI: run the
// same graph for it, and leave the graph and its buffers alive so that its exit check has a
// graph to judge (the injection drops the records of destroyed exec graphs).
void run_graph_for_the_injection() {
  float* buffers[3] = {};
  for (float*& buffer : buffers) {
    GRAPHCHECK_CUDA_OK(cudaMalloc(&buffer, kBytes));
  }
  cudaStream_t stream = nullptr;
  GRAPHCHECK_CUDA_OK(cudaStreamCreate(&stream));
  const cudaGraphExec_t exec =
      capture(Pointers{buffers[0], buffers[1], buffers[2], kElements}, stream);
  ASSERT_NE(exec, nullptr);
  GRAPHCHECK_CUDA_OK(cudaGraphLaunch(exec, stream));
  GRAPHCHECK_CUDA_OK(cudaStreamSynchronize(stream));
}

TEST(GpuGraphTest, PlainKernelWithStructArgumentIsRecordedAndJudged) {
  GRAPHCHECK_SKIP_WITHOUT_GPU();
  LiveBackend live;
  if (!live.status.ok() && injected_by_graphcheck()) {
    run_graph_for_the_injection();
    GTEST_SKIP() << "graphcheck's injection holds CUPTI (" << live.status.message()
                 << "); the graph ran for its exit check instead";
  }
  ASSERT_TRUE(live.status.ok()) << live.status.message();
  cupti::Backend& backend = *live.backend;

  float* weight = nullptr;
  float* scratch = nullptr;
  float* out = nullptr;
  GRAPHCHECK_CUDA_OK(cudaMalloc(&weight, kBytes));
  GRAPHCHECK_CUDA_OK(cudaMalloc(&scratch, kBytes));
  GRAPHCHECK_CUDA_OK(cudaMalloc(&out, kBytes));
  backend.session().set_spans(
      {Span{reinterpret_cast<Address>(weight), kBytes, OwnerKind::kParameter, "model.weight", ""},
       Span{reinterpret_cast<Address>(out), kBytes, OwnerKind::kInput, "out", "graph output"}});
  cudaStream_t stream = nullptr;
  GRAPHCHECK_CUDA_OK(cudaStreamCreate(&stream));
  const cudaGraphExec_t exec = capture(Pointers{weight, scratch, out, kElements}, stream);
  ASSERT_NE(exec, nullptr);
  GRAPHCHECK_CUDA_OK(cudaGraphLaunch(exec, stream));
  GRAPHCHECK_CUDA_OK(cudaStreamSynchronize(stream));
  print_callback_counts(backend, "plain_kernel");
  const cupti::Status callback_error = backend.dispatcher().take_error();
  ASSERT_TRUE(callback_error.ok()) << callback_error.message();

  const Snapshot snapshot = backend.session().snapshot("after_launch");
  record_snapshot(snapshot, "plain_kernel_struct_arg");
  ASSERT_EQ(snapshot.graphs.size(), 1u);
  ASSERT_EQ(snapshot.graphs[0].nodes.size(), 1u);
  const Node& node = snapshot.graphs[0].nodes[0];
  EXPECT_EQ(node.type, NodeType::kKernel);
  EXPECT_THAT(node.name, HasSubstr("struct_kernel"));
  ASSERT_EQ(node.params.size(), 1u) << "one by-value struct argument";
  EXPECT_EQ(node.params[0].bytes.size(), sizeof(Pointers));

  const Report report = backend.session().check_now("check");
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1u);
  EXPECT_EQ(report.summary.count(Verdict::kInput), 1u);
  EXPECT_EQ(verdict_at(report, reinterpret_cast<Address>(scratch)), Verdict::kUnregistered);

  cudaGraphExecDestroy(exec);
  cudaStreamDestroy(stream);
  cudaFree(weight);
  cudaFree(scratch);
  cudaFree(out);
}

TEST(GpuGraphTest, VmmSleepWakeAndReloadMatchTheCpuStory) {
  GRAPHCHECK_SKIP_WITHOUT_GPU();
  cupti::BackendOptions options;
  options.session.launch_check = cupti::LaunchCheck::kEveryLaunch;  // warn: exercise the hook
  LiveBackend live(std::move(options));
  GRAPHCHECK_SKIP_WHILE_INJECTED(live);
  ASSERT_TRUE(live.status.ok()) << live.status.message();
  cupti::Backend& backend = *live.backend;
  int device = 0;
  GRAPHCHECK_CUDA_OK(cudaGetDevice(&device));
  // Make the primary context current before the VMM calls (cudaGetDevice does not create
  // it), as vLLM's allocator does: the arena must not depend on a context appearing later.
  GRAPHCHECK_CUDA_OK(cudaSetDevice(device));
  GRAPHCHECK_CUDA_OK(cudaFree(nullptr));

  VmmAllocator arena(device, 2 * kBytes);
  ASSERT_TRUE(arena.error().empty()) << arena.error();
  // NOLINTNEXTLINE(performance-no-int-to-ptr): a VMM address is an integer (CUdeviceptr)
  auto* weight = reinterpret_cast<float*>(arena.base());
  // NOLINTNEXTLINE(performance-no-int-to-ptr): never registered
  auto* derived = reinterpret_cast<float*>(arena.base() + kBytes);
  float* out = nullptr;
  GRAPHCHECK_CUDA_OK(cudaMalloc(&out, kBytes));
  const Span weight_span{arena.base(), kBytes, OwnerKind::kParameter, "model.weight", ""};
  const Span out_span{reinterpret_cast<Address>(out), kBytes, OwnerKind::kInput, "out", "output"};
  backend.session().set_spans({weight_span, out_span});
  // The arena is an allocator with a block per tensor (the derived one right after the
  // weight, back to back), as torch's caching allocator has for vLLM's VMM pool: without its
  // blocks the derived pointer equals the weight's end and is taken for it (the first GPU
  // run, 2026-12-04). The blocks take the generation of the mapping under them.
  backend.session().add_allocations(
      [base = arena.base()] {
        return std::vector<Allocation>{{base, kBytes, "vmm", 0, "arena block 0 (weight)"},
                                       {base + kBytes, kBytes, "vmm", 0, "arena block 1"}};
      },
      cupti::SourceGenerations::kInherit);
  cudaStream_t stream = nullptr;
  GRAPHCHECK_CUDA_OK(cudaStreamCreate(&stream));
  const cudaGraphExec_t exec = capture(Pointers{weight, derived, out, kElements}, stream);
  ASSERT_NE(exec, nullptr);

  const Report at_capture = backend.session().check_now("at_capture");
  EXPECT_EQ(verdict_at(at_capture, arena.base() + kBytes), Verdict::kUnregistered);

  arena.sleep();
  ASSERT_TRUE(arena.error().empty()) << arena.error();
  backend.session().record_epoch("after_sleep");
  arena.wake();
  // A failed wake leaves the range unmapped: launching the graph on it would fault and
  // poison the context for every later test in this process.
  ASSERT_TRUE(arena.error().empty()) << arena.error();
  const Report after_wake = backend.session().check_now("after_wake");
  EXPECT_EQ(verdict_at(after_wake, arena.base() + kBytes), Verdict::kLost);
  EXPECT_EQ(verdict_at(after_wake, arena.base()), std::nullopt) << "registered: restored";
  GRAPHCHECK_CUDA_OK(cudaGraphLaunch(exec, stream));  // launch check, policy warn
  GRAPHCHECK_CUDA_OK(cudaStreamSynchronize(stream));
  EXPECT_GE(backend.session().launches_checked(), 1u);

  // Reload in place: same address, the registered owner stays: no finding for the weight.
  GRAPHCHECK_CUDA_OK(cudaMemset(weight, 0, kBytes));
  const Report in_place = backend.session().check_now("after_reload_in_place");
  EXPECT_EQ(verdict_at(in_place, arena.base()), std::nullopt);

  // Reload by rebinding: the parameter now lives elsewhere; the graph still reads the old one.
  float* rebound = nullptr;
  GRAPHCHECK_CUDA_OK(cudaMalloc(&rebound, kBytes));
  backend.session().set_spans(
      {Span{reinterpret_cast<Address>(rebound), kBytes, OwnerKind::kParameter, "model.weight", ""},
       out_span});
  const Report rebound_report = backend.session().check_now("after_reload_rebind");
  EXPECT_EQ(verdict_at(rebound_report, arena.base()), Verdict::kStale);
  record_snapshot(backend.session().snapshot("final"), "vmm_sleep_wake_reload");
  print_callback_counts(backend, "vmm_sleep_wake_reload");
  const cupti::Status callback_error = backend.dispatcher().take_error();
  EXPECT_TRUE(callback_error.ok()) << callback_error.message();

  cudaGraphExecDestroy(exec);
  cudaStreamDestroy(stream);
  cudaFree(out);
  cudaFree(rebound);
}

}  // namespace
}  // namespace graphcheck::gpu_testing
