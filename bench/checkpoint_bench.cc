// A server's check point (issue 32 §4): many graphs (one per batch size) against one
// registry, through one CheckSession as a check point holds them: 64 graphs of 10k kernel
// nodes each against 10k spans, checked after a sleep and wake (the registry's ranges
// unchanged, the weights pool's generation new), beside the floor of reading all their
// argument words. `first`: a fresh session's check (the epochs indexed once for all 64
// graphs, every graph scanned and its table made), its graphs read on one thread per core
// (CheckOptions::threads 0; wall time, and the CPU time of all threads); `first_one_thread`:
// the same on the calling thread alone. `again`: a later check point in the
// same state (the epoch put again, equal). `sleep_wake`: a later check point after another
// sleep and wake (new generations, the same ranges: the index shared, each graph replayed
// from its table). `per_graph_us` is the check point's time divided by its graphs.
// Registered by graphcheck_bench's main (bench/check_bench.cc); run:
//   graphcheck_bench --benchmark_filter='^checkpoint/' --benchmark_repetitions=3
#include <benchmark/benchmark.h>
#include <graphcheck/check_session.h>
#include <graphcheck/checker.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench/check_world.h"

namespace graphcheck::bench {
namespace {

constexpr std::size_t kGraphs = 64;
constexpr std::size_t kNodes = 10000;
constexpr std::size_t kSpans = 10000;

// The world's graphs as shared records (a session holds them without copying) and its two
// epochs; built once for the whole run (about 0.5 GB).
struct Server {
  Server() : world(WorldBuilder(kNodes, kSpans, kGraphs).take()) {
    for (GraphRecord& graph : world->snapshot.graphs) {
      graphs.push_back(std::make_shared<const GraphRecord>(std::move(graph)));
    }
    world->snapshot.graphs.clear();
  }
  // A session holding every graph and both epochs, not yet checked.
  [[nodiscard]] std::unique_ptr<CheckSession> session() const {
    auto made = std::make_unique<CheckSession>();
    for (const Epoch& epoch : world->snapshot.epochs) {
      made->put_epoch(epoch);
    }
    for (const auto& graph : graphs) {
      made->put_graph(graph);
    }
    made->set_allow(world->snapshot.allow);
    return made;
  }
  std::unique_ptr<World> world;
  std::vector<std::shared_ptr<const GraphRecord>> graphs;
};

const Server& server() {
  static const Server instance;  // NOLINT: built once, on first use, for every benchmark
  return instance;
}

CheckOptions after_sleep() {
  CheckOptions options;
  options.epoch = "after_sleep";
  return options;
}

void count(benchmark::State& state, std::uint64_t references) {
  state.counters["refs"] = static_cast<double>(references);
  state.counters["per_graph_us"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * kGraphs / 1e6,
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void checkpoint_floor(benchmark::State& state) {
  const Server& s = server();
  std::uint64_t kept = 0;
  for (auto _ : state) {
    std::uint64_t sum = 0;
    std::uint64_t total = 0;
    for (const auto& graph : s.graphs) {
      sum += read_words(*graph, &kept);
      total += kept;
    }
    benchmark::DoNotOptimize(sum);
    kept = total;
  }
  count(state, kept);
}

// `threads`: the check's thread count (0: one per core, CheckOptions::threads).
void checkpoint_first(benchmark::State& state, std::size_t threads) {
  const Server& s = server();
  CheckOptions options = after_sleep();
  options.threads = threads;
  std::uint64_t references = 0;
  std::size_t findings = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<CheckSession> session = s.session();
    state.ResumeTiming();
    std::shared_ptr<const Report> report = session->check(options);
    references = report->summary.references;
    findings = report->findings.size();
    state.PauseTiming();
    session.reset();  // its tables and the report freed outside the timed part
    report.reset();
    state.ResumeTiming();
  }
  count(state, references);
  state.counters["findings"] = static_cast<double>(findings);
}

void checkpoint_again(benchmark::State& state) {
  const Server& s = server();
  const CheckOptions options = after_sleep();
  std::unique_ptr<CheckSession> session = s.session();
  std::uint64_t references = session->check(options)->summary.references;
  const Epoch& now = s.world->snapshot.epochs[1];
  for (auto _ : state) {
    state.PauseTiming();
    Epoch copy = now;  // the caller's state, gathered outside the timed part
    state.ResumeTiming();
    session->put_epoch(std::move(copy));
    references = session->check(options)->summary.references;
  }
  count(state, references);
}

void checkpoint_sleep_wake(benchmark::State& state) {
  const Server& s = server();
  const CheckOptions options = after_sleep();
  std::unique_ptr<CheckSession> session = s.session();
  std::uint64_t references = session->check(options)->summary.references;
  Epoch woken = s.world->snapshot.epochs[1];
  std::uint64_t generation = 2;
  for (auto _ : state) {
    state.PauseTiming();
    wake_weights(woken, ++generation);
    Epoch copy = woken;
    state.ResumeTiming();
    session->put_epoch(std::move(copy));
    references = session->check(options)->summary.references;
  }
  count(state, references);
  state.counters["replayed_refs"] = static_cast<double>(session->last_stats().references_replayed);
}

}  // namespace

void register_checkpoint_benchmarks() {
  const std::string suffix = "/graphs:" + std::to_string(kGraphs) +
                             "/nodes:" + std::to_string(kNodes) +
                             "/spans:" + std::to_string(kSpans);
  benchmark::RegisterBenchmark(("checkpoint/floor" + suffix).c_str(), checkpoint_floor)
      ->Unit(benchmark::kMillisecond);
  // Wall time, and the CPU time of every thread of the process: the check reads the graphs
  // on one thread per core (two here), and on one thread alone in `first_one_thread`.
  benchmark::RegisterBenchmark(("checkpoint/first" + suffix).c_str(), checkpoint_first, 0)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->MeasureProcessCPUTime();
  benchmark::RegisterBenchmark(("checkpoint/first_one_thread" + suffix).c_str(), checkpoint_first,
                               1)
      ->Unit(benchmark::kMillisecond)
      ->UseRealTime()
      ->MeasureProcessCPUTime();
  benchmark::RegisterBenchmark(("checkpoint/again" + suffix).c_str(), checkpoint_again)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark(("checkpoint/sleep_wake" + suffix).c_str(), checkpoint_sleep_wake)
      ->Unit(benchmark::kMillisecond);
}

}  // namespace graphcheck::bench
