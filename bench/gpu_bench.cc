// GPU benchmarks (issue 4, section 7), all in one run on one GPU. UNVERIFIED: written and
// compiled without a GPU; every benchmark reports an error (skip) without a device.
//   capture_instantiate/graphcheck:{0,1}  capture + instantiate of a 1,000-kernel graph
//       (goal: graphcheck adds at most 5% and at most 40 us per node)
//   replay/graphcheck:{0,1}              one replay of that graph (goal: no difference)
//   on_demand_check                        session.check_now() over that graph
// Built by tests/gpu/CMakeLists.txt (CUDA is enabled only there) as graphcheck_gpu_bench.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>  // the typed cudaMalloc overloads

#include <cstdint>
#include <memory>
#include <string>

#include "gpu/gpu_kernels.h"
#include "gpu/gpu_support.h"

namespace graphcheck::gpu_testing {
namespace {

constexpr int kNodes = 1000;
constexpr int kElements = 256;

// One process-wide subscription; the "without graphcheck" runs unsubscribe it.
struct Bench {
  Bench() {
    reason = skip_reason();
    if (!reason.empty()) {
      return;
    }
    live = std::make_unique<LiveBackend>();
    if (!live->status.ok()) {
      reason = live->status.message();
      return;
    }
    cudaStreamCreate(&stream);
    cudaMalloc(&x, kElements * sizeof(float));
    cudaMalloc(&y, kElements * sizeof(float));
    // Registered, so the check measures lookups rather than printing 2,000 findings.
    const std::uint64_t bytes = kElements * sizeof(float);
    live->backend->session().set_spans(
        {Span{reinterpret_cast<Address>(x), bytes, OwnerKind::kParameter, "x", ""},
         Span{reinterpret_cast<Address>(y), bytes, OwnerKind::kInput, "y", "output"}});
  }
  void use_graphcheck(bool on) {
    // The subscriber keeps its own state; failures surface as a benchmark error below.
    status = on ? live->backend->enable() : live->backend->disable();
  }
  cudaGraphExec_t capture() const {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
    for (int i = 0; i < kNodes; ++i) {
      launch_axpy_kernel(1.0F, x, y, kElements, stream);
    }
    cudaStreamEndCapture(stream, &graph);
    cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    return exec;
  }

  std::string reason;
  std::unique_ptr<LiveBackend> live;
  cupti::Status status;
  cudaStream_t stream = nullptr;
  float* x = nullptr;
  float* y = nullptr;
};

Bench& bench() {
  static Bench instance;  // NOLINT: one per process, like the CUPTI subscription
  return instance;
}

bool ready(benchmark::State& state, int graphcheck) {
  Bench& b = bench();
  if (!b.reason.empty()) {
    state.SkipWithError(("no GPU: " + b.reason).c_str());
    return false;
  }
  b.use_graphcheck(graphcheck != 0);
  if (!b.status.ok()) {
    state.SkipWithError(b.status.message().c_str());
    return false;
  }
  return true;
}

void capture_instantiate(benchmark::State& state) {
  if (!ready(state, static_cast<int>(state.range(0)))) {
    return;
  }
  const std::uint64_t walked = bench().live->backend->capture().stats().graphs_walked;
  for (auto _ : state) {
    cudaGraphExec_t exec = bench().capture();
    state.PauseTiming();
    cudaGraphExecDestroy(exec);
    state.ResumeTiming();
  }
  // Graphs graphcheck read in the loop (2 per iteration with graphcheck:1: capture end and
  // instantiate; 0 means CUPTI sent nothing and the comparison measures nothing).
  state.counters["graphs_walked"] =
      static_cast<double>(bench().live->backend->capture().stats().graphs_walked - walked);
  state.counters["us_per_node"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kNodes / 1e6,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(capture_instantiate)
    ->ArgName("graphcheck")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void replay(benchmark::State& state) {
  if (!ready(state, static_cast<int>(state.range(0)))) {
    return;
  }
  cudaGraphExec_t exec = bench().capture();
  for (auto _ : state) {
    cudaGraphLaunch(exec, bench().stream);
    cudaStreamSynchronize(bench().stream);
  }
  cudaGraphExecDestroy(exec);
}
BENCHMARK(replay)
    ->ArgName("graphcheck")
    ->Arg(0)
    ->Arg(1)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

void on_demand_check(benchmark::State& state) {
  if (!ready(state, 1)) {
    return;
  }
  cudaGraphExec_t exec = bench().capture();
  std::uint64_t references = 0;
  for (auto _ : state) {
    const Report report = bench().live->backend->session().check_now("bench");
    references = report.summary.references;
  }
  state.counters["references"] = static_cast<double>(references);
  cudaGraphExecDestroy(exec);
}
BENCHMARK(on_demand_check)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace graphcheck::gpu_testing

BENCHMARK_MAIN();
