// Check throughput: graphs of 1k, 10k and 100k kernel nodes (8 arguments each) against 1k,
// 10k and 100k spans, checked in their capture epoch and in a later one (after a sleep that
// discarded the weights pool), each beside a floor that reads the same argument words
// without any lookup; repeated checks through a CheckSession (unchanged epoch, and a new
// sleep and wake each time); the lookups alone; and the peak memory of a check beside the
// snapshot's size; and a server's check point of 64 graphs (bench/checkpoint_bench.cc).
// Run: graphcheck_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>
#include <graphcheck/address_index.h>
#include <graphcheck/check_session.h>
#include <graphcheck/checker.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench/check_world.h"
#include "bench/counting_new.h"

namespace graphcheck {
namespace {

using bench::read_words;
using bench::wake_weights;
using bench::World;
using bench::WorldBuilder;

// One world at a time: the check and its floor run back to back on the same one.
const World& world(std::size_t nodes, std::size_t spans) {
  static std::unique_ptr<World> cached;
  if (!cached || cached->nodes != nodes || cached->spans != spans) {
    cached.reset();
    cached = WorldBuilder(nodes, spans).take();
  }
  return *cached;
}

// check() in `epoch` ("capture": one epoch index; "after_sleep": the capture index and the
// later epoch's, which is also compared against the capture for stale and lost).
void check_benchmark(benchmark::State& state, std::size_t nodes, std::size_t spans,
                     const std::string& epoch) {
  const World& w = world(nodes, spans);
  CheckOptions options;
  options.epoch = epoch;
  std::uint64_t references = 0;
  for (auto _ : state) {
    Report report = check(w.snapshot, options);
    references = report.summary.references;
    benchmark::DoNotOptimize(report);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(nodes));
  state.counters["refs"] = static_cast<double>(references);
}

void floor_benchmark(benchmark::State& state, std::size_t nodes, std::size_t spans) {
  const World& w = world(nodes, spans);
  std::uint64_t kept = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(read_words(w.snapshot.graphs[0], &kept));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(nodes));
  state.counters["refs"] = static_cast<double>(kept);
}

// The lookups alone: every argument word inside the capture's known memory, gathered before
// the timed loop, classified by the capture index (built before it too) in probe groups as
// the checker does; no reading of the snapshot, no verdict, no report. With the index build
// and the floor, a lower bound for a full check.
void lookup_benchmark(benchmark::State& state, std::size_t nodes, std::size_t spans) {
  const World& w = world(nodes, spans);
  const AddressIndex index(w.snapshot.epochs[0]);
  std::vector<Address> words;
  for (const Node& node : w.snapshot.graphs[0].nodes) {
    for (const KernelParam& param : node.params) {
      for (std::size_t at = 0; at + 8 <= param.bytes.size(); at += 8) {
        Address word = 0;
        std::memcpy(&word, param.bytes.data() + at, 8);
        if (index.contains(word)) {
          words.push_back(word);
        }
      }
    }
  }
  constexpr std::size_t kGroup = 16;
  for (auto _ : state) {
    // Cells and classes summed in registers: one barrier per pass, not per word.
    std::uint64_t cells = 0;
    std::uint64_t classes = 0;
    std::array<std::uint32_t, kGroup> probes{};
    for (std::size_t i = 0; i < words.size(); i += kGroup) {
      const std::size_t count = std::min(kGroup, words.size() - i);
      for (std::size_t j = 0; j < count; ++j) {
        probes[j] = index.probe(words[i + j]);
      }
      for (std::size_t j = 0; j < count; ++j) {
        AddressIndex::CellClass cell_class = AddressIndex::CellClass::kOther;
        cells += index.classify_probed(words[i + j], probes[j], &cell_class);
        classes += static_cast<unsigned>(cell_class);
      }
    }
    benchmark::DoNotOptimize(cells);
    benchmark::DoNotOptimize(classes);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(nodes));
  state.counters["refs"] = static_cast<double>(words.size());  // every one a reference here
}

// A CheckSession checked again with nothing changed: the report of the last check.
void session_repeat_benchmark(benchmark::State& state, std::size_t nodes, std::size_t spans,
                              const std::string& epoch) {
  const World& w = world(nodes, spans);
  CheckSession session(w.snapshot);
  CheckOptions options;
  options.epoch = epoch;
  std::uint64_t references = session.check(options)->summary.references;
  for (auto _ : state) {
    std::shared_ptr<const Report> report = session.check(options);
    references = report->summary.references;
    benchmark::DoNotOptimize(report);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(nodes));
  state.counters["refs"] = static_cast<double>(references);
}

// The same, with the epoch put again (equal, as a caller that rebuilds its current state
// before each check puts it): the comparison of the epoch is the cost.
void session_reput_benchmark(benchmark::State& state, std::size_t nodes, std::size_t spans) {
  const World& w = world(nodes, spans);
  CheckSession session(w.snapshot);
  CheckOptions options;
  options.epoch = "after_sleep";
  static_cast<void>(session.check(options));
  const Epoch& after_sleep = w.snapshot.epochs[1];
  for (auto _ : state) {
    state.PauseTiming();
    Epoch copy = after_sleep;  // the caller's epoch, made outside the timed part
    state.ResumeTiming();
    session.put_epoch(std::move(copy));
    benchmark::DoNotOptimize(session.check(options));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(nodes));
}

// A sleep and wake before each check: the after-sleep epoch put again with new generations
// (same ranges), then checked. The session shares the capture's cells and decides again only
// the references its tables list.
void session_sleep_wake_benchmark(benchmark::State& state, std::size_t nodes, std::size_t spans) {
  const World& w = world(nodes, spans);
  CheckSession session(w.snapshot);
  CheckOptions options;
  options.epoch = "after_sleep";
  static_cast<void>(session.check(options));
  Epoch woken = w.snapshot.epochs[1];
  std::uint64_t generation = 2;
  std::uint64_t replayed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    wake_weights(woken, ++generation);
    Epoch copy = woken;  // the caller's new epoch, made outside the timed part
    state.ResumeTiming();
    session.put_epoch(std::move(copy));
    std::shared_ptr<const Report> report = session.check(options);
    replayed = session.last_stats().references_replayed;
    benchmark::DoNotOptimize(report);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(nodes));
  state.counters["replayed_refs"] = static_cast<double>(replayed);
}

// Peak memory of one check (on a fresh thread, so that no tables kept by an earlier check
// are reused) beside the snapshot's in-memory size (the bytes a copy of it allocates).
void memory_benchmark(benchmark::State& state, std::size_t nodes, std::size_t spans,
                      const std::string& epoch) {
  const World& w = world(nodes, spans);
  bench::start_counting();
  auto copy = std::make_unique<Snapshot>(w.snapshot);
  const std::int64_t snapshot_bytes = bench::live_bytes();
  copy.reset();
  bench::stop_counting();
  CheckOptions options;
  options.epoch = epoch;
  std::int64_t check_peak = 0;
  for (auto _ : state) {
    std::thread worker([&] {
      bench::start_counting();
      Report report = check(w.snapshot, options);
      check_peak = bench::stop_counting();
      benchmark::DoNotOptimize(report);
    });
    worker.join();
  }
  state.counters["snapshot_MB"] = static_cast<double>(snapshot_bytes) / 1e6;
  state.counters["check_peak_MB"] = static_cast<double>(check_peak) / 1e6;
  state.counters["peak_ratio"] = static_cast<double>(check_peak) /
                                 static_cast<double>(std::max<std::int64_t>(1, snapshot_bytes));
}

// Index construction alone, the per-epoch cost inside each check.
void index_benchmark(benchmark::State& state, std::size_t spans) {
  const World& w = world(1000, spans);
  for (auto _ : state) {
    AddressIndex index(w.snapshot.epochs[0]);
    benchmark::DoNotOptimize(index);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(spans));
}

}  // namespace

namespace bench {
void register_checkpoint_benchmarks();  // bench/checkpoint_bench.cc
}  // namespace bench
}  // namespace graphcheck

int main(int argc, char** argv) {
  using graphcheck::check_benchmark;
  using graphcheck::floor_benchmark;
  for (std::size_t nodes : {1000U, 10000U, 100000U}) {
    for (std::size_t spans : {1000U, 10000U, 100000U}) {
      const std::string suffix =
          "/nodes:" + std::to_string(nodes) + "/spans:" + std::to_string(spans);
      for (const std::string epoch : {"capture", "after_sleep"}) {
        benchmark::RegisterBenchmark(("check/" + epoch + suffix).c_str(), check_benchmark, nodes,
                                     spans, epoch)
            ->Unit(benchmark::kMillisecond);
      }
      benchmark::RegisterBenchmark(("floor" + suffix).c_str(), floor_benchmark, nodes, spans)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("lookup" + suffix).c_str(), graphcheck::lookup_benchmark, nodes,
                                   spans)
          ->Unit(benchmark::kMillisecond);
      for (const std::string epoch : {"capture", "after_sleep"}) {
        benchmark::RegisterBenchmark(("session/repeat/" + epoch + suffix).c_str(),
                                     graphcheck::session_repeat_benchmark, nodes, spans, epoch)
            ->Unit(benchmark::kMicrosecond);
      }
      benchmark::RegisterBenchmark(("session/reput/after_sleep" + suffix).c_str(),
                                   graphcheck::session_reput_benchmark, nodes, spans)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("session/sleep_wake/after_sleep" + suffix).c_str(),
                                   graphcheck::session_sleep_wake_benchmark, nodes, spans)
          ->Unit(benchmark::kMillisecond);
    }
  }
  for (std::size_t nodes : {10000U, 100000U}) {
    for (const std::string epoch : {"capture", "after_sleep"}) {
      benchmark::RegisterBenchmark(
          ("memory/" + epoch + "/nodes:" + std::to_string(nodes) + "/spans:10000").c_str(),
          graphcheck::memory_benchmark, nodes, 10000, epoch)
          ->Unit(benchmark::kMillisecond)
          ->Iterations(1);
    }
  }
  for (std::size_t spans : {1000U, 10000U, 100000U}) {
    benchmark::RegisterBenchmark(("index/spans:" + std::to_string(spans)).c_str(),
                                 graphcheck::index_benchmark, spans)
        ->Unit(benchmark::kMillisecond);
  }
  graphcheck::bench::register_checkpoint_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
