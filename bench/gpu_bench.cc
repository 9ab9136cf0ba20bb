// GPU benchmarks (issue 4 §7, issue 32 §3), all in one run on one GPU. The pair benchmarks
// are NOT YET RUN on a GPU (written and compiled without one); the 2026-12-04 H200 run
// measured the earlier form (capture_instantiate/graphcheck:{0,1}, three repetitions each,
// one after the other). Without a device every benchmark reports an error (skip).
//   capture_pairs/nodes:{100,1000,10000}  capture + instantiate of a graph of that many
//       one-block kernels, plain and with graphcheck subscribed in interleaved pairs
//       (kPairs pairs, the order alternating; each sample the median of kRuns
//       captures): per node, min and median of each side, their spread, and what
//       graphcheck adds (goal: at most +0.5 us per node)
//   replay_pairs                          one replay of the 1,000-node graph, the same
//       pairs (goal: no difference)
//   on_demand_check                       session.check_now() over that graph
// Built by tests/gpu/CMakeLists.txt (CUDA is enabled only there) as graphcheck_gpu_bench.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>  // the typed cudaMalloc overloads

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gpu/gpu_kernels.h"
#include "gpu/gpu_support.h"

namespace graphcheck::gpu_testing {
namespace {

constexpr int kElements = 256;
constexpr int kPairs = 5;  // interleaved plain / graphcheck samples
constexpr int kRuns = 5;   // captures (or replays) per sample; the sample is their median

// One process-wide subscription; the plain samples unsubscribe it.
struct Bench {
  Bench() {
    reason = skip_reason();
    if (!reason.empty()) {
      return;
    }
    cupti::BackendOptions options;
    // The exec graphs the loops destroy are not checked (that is a destroy's cost, not a
    // capture's), and not kept: on_demand_check then checks the one graph it made.
    options.session.check_at_destroy = false;
    live = std::make_unique<LiveBackend>(std::move(options));
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
  cudaGraphExec_t capture(int nodes) const {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal);
    for (int i = 0; i < nodes; ++i) {
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

bool ready(benchmark::State& state) {
  Bench& b = bench();
  if (!b.reason.empty()) {
    state.SkipWithError(("no GPU: " + b.reason).c_str());
    return false;
  }
  return true;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Seconds of one call of `run`, the median of kRuns.
double sample(const std::function<void()>& run) {
  std::vector<double> seconds;
  for (int r = 0; r < kRuns; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return median(seconds);
}

// kPairs interleaved pairs of samples, plain and with graphcheck, the first of a pair
// alternating; counters in microseconds per `unit` (nodes, or 1), min, median and spread
// (max - min) of each side, and the difference of the medians. False on an error.
bool pairs(benchmark::State& state, double unit, const std::function<void()>& run) {
  Bench& b = bench();
  std::vector<double> plain;
  std::vector<double> checked;
  double total = 0;
  for (int pair = 0; pair < kPairs; ++pair) {
    for (const int order : {0, 1}) {
      const bool on = (pair + order) % 2 == 1;
      b.use_graphcheck(on);
      if (!b.status.ok()) {
        state.SkipWithError(b.status.message().c_str());
        return false;
      }
      const double seconds = sample(run);
      total += seconds * kRuns;
      (on ? checked : plain).push_back(seconds * 1e6 / unit);
    }
  }
  b.use_graphcheck(true);
  state.SetIterationTime(total);
  const auto put = [&](const std::string& side, const std::vector<double>& values) {
    const auto [low, high] = std::minmax_element(values.begin(), values.end());
    state.counters[side + "_min"] = *low;
    state.counters[side + "_median"] = median(values);
    state.counters[side + "_spread"] = *high - *low;
  };
  put("plain", plain);
  put("graphcheck", checked);
  state.counters["added"] = median(checked) - median(plain);
  state.counters["pairs"] = kPairs;
  return true;
}

void capture_pairs(benchmark::State& state) {
  if (!ready(state)) {
    return;
  }
  const auto nodes = static_cast<int>(state.range(0));
  for (auto _ : state) {
    const std::uint64_t walked = bench().live->backend->capture().stats().graphs_walked;
    const bool ok = pairs(state, nodes, [nodes] {
      cudaGraphExec_t exec = bench().capture(nodes);
      cudaGraphExecDestroy(exec);  // inside the sample: both sides pay it alike
    });
    if (!ok) {
      return;
    }
    // Graphs graphcheck read (1 per capture with graphcheck: at instantiate). Fewer than the
    // captures made with it subscribed means CUPTI sent nothing after a resubscription: the
    // "graphcheck" samples were plain ones, and their difference no figure.
    const std::uint64_t read = bench().live->backend->capture().stats().graphs_walked - walked;
    state.counters["graphs_walked"] = static_cast<double>(read);
    constexpr std::uint64_t kWithGraphcheck = std::uint64_t{kPairs} * kRuns;
    if (read < kWithGraphcheck) {
      state.SkipWithError(("graphcheck read " + std::to_string(read) + " of the " +
                           std::to_string(kWithGraphcheck) +
                           " graphs captured while subscribed: the comparison measured nothing")
                              .c_str());
      return;
    }
  }
}
BENCHMARK(capture_pairs)
    ->ArgName("nodes")
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->Iterations(1)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

void replay_pairs(benchmark::State& state) {
  if (!ready(state)) {
    return;
  }
  bench().use_graphcheck(true);
  cudaGraphExec_t exec = bench().capture(1000);
  for (auto _ : state) {
    const bool ok = pairs(state, 1, [exec] {
      cudaGraphLaunch(exec, bench().stream);
      cudaStreamSynchronize(bench().stream);
    });
    if (!ok) {
      break;
    }
  }
  cudaGraphExecDestroy(exec);
}
BENCHMARK(replay_pairs)->Iterations(1)->UseManualTime()->Unit(benchmark::kMicrosecond);

void on_demand_check(benchmark::State& state) {
  if (!ready(state)) {
    return;
  }
  bench().use_graphcheck(true);
  cudaGraphExec_t exec = bench().capture(1000);
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
