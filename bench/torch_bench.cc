// LibTorch adapter benchmarks: registry build time (torch-a), forward time with and without
// the ATen capture window, and the replay of a captured forward (torch-b). Run:
// build/bin/graphcheck_torch_bench
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <benchmark/benchmark.h>
#include <graphcheck/torch/aten_capture.h>
#include <graphcheck/torch/reference_model.h>
#include <graphcheck/torch/registry.h>
#include <torch/nn/module.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace {

// ---- Registry build time for 100,000 tensors (owner: torch-a) ------------------------------

constexpr int kChildren = 1000;
constexpr int kTensorsPerKind = 50;  // 1000 children x (50 parameters + 50 buffers) = 100,000

// A module tree with 100,000 small tensors: the shape of a large model's state, without the
// bytes.
std::shared_ptr<torch::nn::Module> make_tree() {
  auto root = std::make_shared<torch::nn::Module>("Root");
  for (int c = 0; c < kChildren; ++c) {
    auto child = std::make_shared<torch::nn::Module>("Child");
    for (int t = 0; t < kTensorsPerKind; ++t) {
      child->register_parameter("weight_" + std::to_string(t), at::empty({4}),
                                /*requires_grad=*/false);
      child->register_buffer("buffer_" + std::to_string(t), at::empty({4}));
    }
    root->register_module("layer_" + std::to_string(c), child);
  }
  return root;
}

const torch::nn::Module& tree() {
  static const std::shared_ptr<torch::nn::Module> root = make_tree();
  return *root;
}

// Baseline: what any registry must pay, walking named_parameters() and named_buffers().
void baseline_named_parameters_and_buffers(benchmark::State& state) {
  const torch::nn::Module& root = tree();
  for (auto _ : state) {
    std::size_t bytes = 0;
    for (const auto& item : root.named_parameters()) {
      bytes += item.key().size() + static_cast<std::size_t>(item.value().numel());
    }
    for (const auto& item : root.named_buffers()) {
      bytes += item.key().size() + static_cast<std::size_t>(item.value().numel());
    }
    benchmark::DoNotOptimize(bytes);
  }
  state.SetItemsProcessed(state.iterations() * kChildren * kTensorsPerKind * 2);
}
BENCHMARK(baseline_named_parameters_and_buffers)->Unit(benchmark::kMillisecond);

// Registry::add_module over the same tree (enumeration plus storage checks).
void registry_add_module(benchmark::State& state) {
  const torch::nn::Module& root = tree();
  for (auto _ : state) {
    graphcheck::libtorch::Registry registry;
    registry.add_module(root);
    benchmark::DoNotOptimize(registry.entry_count());
  }
  state.SetItemsProcessed(state.iterations() * kChildren * kTensorsPerKind * 2);
}
BENCHMARK(registry_add_module)->Unit(benchmark::kMillisecond);

// add_module followed by spans(): the full cost of one epoch's registered spans.
void registry_add_module_and_spans(benchmark::State& state) {
  const torch::nn::Module& root = tree();
  for (auto _ : state) {
    graphcheck::libtorch::Registry registry;
    registry.add_module(root);
    const auto spans = registry.spans();
    benchmark::DoNotOptimize(spans.data());
  }
  state.SetItemsProcessed(state.iterations() * kChildren * kTensorsPerKind * 2);
}
BENCHMARK(registry_add_module_and_spans)->Unit(benchmark::kMillisecond);

// spans() alone on a built registry: what each later epoch pays.
void registry_spans(benchmark::State& state) {
  graphcheck::libtorch::Registry registry;
  registry.add_module(tree());
  for (auto _ : state) {
    const auto spans = registry.spans();
    benchmark::DoNotOptimize(spans.data());
  }
  state.SetItemsProcessed(state.iterations() * kChildren * kTensorsPerKind * 2);
}
BENCHMARK(registry_spans)->Unit(benchmark::kMillisecond);

// ---- Forward time with and without the ATen capture window (owner: torch-b) ----------------

// The reference model (registered variant, 2 layers, 16 tokens) at one hidden size, built once.
graphcheck::libtorch::ReferenceModel& bench_model(std::int64_t hidden) {
  static std::map<std::int64_t, std::shared_ptr<graphcheck::libtorch::ReferenceModel>> models;
  auto& model = models[hidden];
  if (!model) {
    graphcheck::libtorch::ReferenceConfig config;
    config.hidden = hidden;
    config.head_dim = hidden >= 256 ? 64 : 16;
    at::set_num_threads(1);  // one thread: the 2-core CI machine is shared; ratios stay honest
    model = graphcheck::libtorch::build_reference_model(config, 1, nullptr);
  }
  return *model;
}

constexpr std::int64_t kBenchTokens = 16;

// Seconds of one plain forward, run with the benchmark's timer paused: the baseline each
// benchmark below times in its own iterations, so that both see the same machine state.
double paused_plain_forward(benchmark::State& state, graphcheck::libtorch::ReferenceModel& model,
                            const at::Tensor& ids) {
  using Clock = std::chrono::steady_clock;
  state.PauseTiming();
  const auto start = Clock::now();
  benchmark::DoNotOptimize(model.forward(ids, ids).data_ptr());
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  state.ResumeTiming();
  return seconds;
}

// Forward without a capture window: the baseline.
void reference_forward(benchmark::State& state) {
  auto& model = bench_model(state.range(0));
  const at::Tensor ids = at::arange(kBenchTokens, at::kLong);
  for (auto _ : state) {
    benchmark::DoNotOptimize(model.forward(ids, ids).data_ptr());
  }
}
BENCHMARK(reference_forward)->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond);

// Forward inside a capture window (open, forward, finish); range(1) 0 keeps the ops for replay
// (the LibTorch adapter's default), 1 drops them (the Python watch's CUDA captures). Counters:
// ops recorded per forward, the slowdown against a plain forward timed in the same iterations
// (ratio; goal <= 2 at hidden >= 1024), the added time per forward (extra_us) and per op.
void reference_forward_captured(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  auto& model = bench_model(state.range(0));
  const at::Tensor ids = at::arange(kBenchTokens, at::kLong);
  graphcheck::libtorch::CaptureOptions options;
  options.replay_ops = state.range(1) == 0 ? graphcheck::libtorch::ReplayOps::kKeep
                                           : graphcheck::libtorch::ReplayOps::kDrop;
  double captured_s = 0;
  double plain_s = 0;
  std::uint64_t ops = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    graphcheck::libtorch::CaptureWindow window(options);
    window.declare_input("ids", ids);
    benchmark::DoNotOptimize(model.forward(ids, ids).data_ptr());
    const auto record = window.finish();
    captured_s += std::chrono::duration<double>(Clock::now() - start).count();
    ops = record.graph.nodes.size();
    plain_s += paused_plain_forward(state, model, ids);
  }
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["ops"] = static_cast<double>(ops);
  state.counters["ratio"] = captured_s / plain_s;
  state.counters["extra_us"] = (captured_s - plain_s) / iterations * 1e6;
  state.counters["ns_per_op"] =
      ops == 0 ? 0.0 : (captured_s - plain_s) / iterations / static_cast<double>(ops) * 1e9;
}

// The floor of the window's per-op cost: what any dispatcher observer that reads each op's
// operands pays, an empty thread-local RecordFunction callback that asks for inputs and
// outputs (as the window's does) and only walks them. Counters as reference_forward_captured's.
std::unique_ptr<at::ObserverContext> walk_inputs(const at::RecordFunction& fn) {
  for (const c10::IValue& input : fn.inputs()) {
    benchmark::DoNotOptimize(input.isTensor());
  }
  return nullptr;
}
void walk_outputs(const at::RecordFunction& fn, at::ObserverContext* /*context*/) {
  for (const c10::IValue& output : fn.outputs()) {
    benchmark::DoNotOptimize(output.isTensor());
  }
}
void reference_forward_observed(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  auto& model = bench_model(state.range(0));
  const at::Tensor ids = at::arange(kBenchTokens, at::kLong);
  double observed_s = 0;
  double plain_s = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    const at::CallbackHandle handle =
        at::addThreadLocalCallback(at::RecordFunctionCallback(&walk_inputs, &walk_outputs)
                                       .needsInputs(true)
                                       .needsOutputs(true)
                                       .scopes({at::RecordScope::FUNCTION}));
    benchmark::DoNotOptimize(model.forward(ids, ids).data_ptr());
    at::removeCallback(handle);
    observed_s += std::chrono::duration<double>(Clock::now() - start).count();
    plain_s += paused_plain_forward(state, model, ids);
  }
  state.counters["ratio"] = observed_s / plain_s;
  state.counters["extra_us"] =
      (observed_s - plain_s) / static_cast<double>(state.iterations()) * 1e6;
}

// Replay of a captured forward (`CapturedGraph::replay`: the depth-0 ops re-dispatched on
// views of the captured storages, results copied into them) against a plain forward timed
// in the same iterations. Counters: depth-0 ops replayed, ratio replay / forward.
void reference_replay(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  auto& model = bench_model(state.range(0));
  const at::Tensor ids = at::arange(kBenchTokens, at::kLong);
  graphcheck::libtorch::CaptureRecord record;
  {
    graphcheck::libtorch::CaptureWindow window;
    window.declare_input("ids", ids);
    benchmark::DoNotOptimize(model.forward(ids, ids).data_ptr());
    record = window.finish();
  }
  graphcheck::libtorch::CapturedGraph& graph = *record.replayable;
  double replay_s = 0;
  double plain_s = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    graph.replay();
    replay_s += std::chrono::duration<double>(Clock::now() - start).count();
    plain_s += paused_plain_forward(state, model, ids);
  }
  state.counters["ops"] = static_cast<double>(graph.op_count());
  state.counters["ratio"] = replay_s / plain_s;
}
BENCHMARK(reference_replay)->Arg(256)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond);

// The hot path alone: 256 tiny ops (4-element adds) per iteration, without a capture window
// (0), with one that keeps the ops for replay (1, the default) and with one that does not
// (2); the time per op difference is the recording cost per op.
void tiny_ops(benchmark::State& state) {
  constexpr int kOps = 256;
  const at::Tensor a = at::ones({4});
  const at::Tensor b = at::ones({4});
  graphcheck::libtorch::CaptureOptions options;
  options.replay_ops = state.range(0) == 2 ? graphcheck::libtorch::ReplayOps::kDrop
                                           : graphcheck::libtorch::ReplayOps::kKeep;
  for (auto _ : state) {
    std::optional<graphcheck::libtorch::CaptureWindow> window;
    if (state.range(0) != 0) {
      window.emplace(options);
    }
    for (int i = 0; i < kOps; ++i) {
      benchmark::DoNotOptimize(at::add(a, b).data_ptr());
    }
    if (window) {
      benchmark::DoNotOptimize(window->finish().graph.nodes.size());
    }
  }
  state.counters["per_op"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kOps,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(tiny_ops)->Arg(0)->Arg(1)->Arg(2);

BENCHMARK(reference_forward_captured)
    ->Args({256, 0})
    ->Args({1024, 0})
    ->Args({2048, 0})
    ->Args({256, 1})
    ->Args({1024, 1})
    ->Unit(benchmark::kMillisecond);
BENCHMARK(reference_forward_observed)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
