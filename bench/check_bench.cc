// Check throughput: graphs of 1k, 10k and 100k kernel nodes (8 arguments each) against 1k,
// 10k and 100k spans, checked in their capture epoch and in a later one (after a sleep that
// discarded the weights pool), each beside a floor that reads the same argument words
// without any lookup; repeated checks through a CheckSession (unchanged epoch, and a new
// sleep and wake each time); the lookups alone; and the peak memory of a check beside the
// snapshot's size. Run: graphcheck_bench --benchmark_min_time=0.2
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

#include "bench/counting_new.h"

namespace graphcheck {
namespace {

constexpr Address kWeights = 0x7f3a00000000;
constexpr Address kPool = 0x7f5000000000;
constexpr Address kWorkspace = 0x7f6000000000;

// A decode-step-like world: spans packed into weight allocations, a graph pool, a few
// unregistered workspaces, and kernels whose arguments mix pointers and scalars.
struct World {
  Snapshot snapshot;
  std::size_t nodes = 0;
  std::size_t spans = 0;
};

class WorldBuilder {
 public:
  WorldBuilder(std::size_t nodes, std::size_t spans) : rng_(nodes * 1000003 + spans) {
    world_ = std::make_unique<World>();
    world_->nodes = nodes;
    world_->spans = spans;
    Epoch epoch{"capture", {}, {}};
    Address at = kWeights;
    for (std::size_t i = 0; i < spans; ++i) {
      if (i % 64 == 0) {  // one allocator segment per 64 tensors
        epoch.allocations.push_back({at, std::uint64_t{64} * 0x10000, "weights", 1, ""});
      }
      const std::uint64_t size = 0x100 + pick(0xff00);
      const auto kind = i % 10 == 9  ? OwnerKind::kRuntime
                        : i % 3 == 0 ? OwnerKind::kBuffer
                                     : OwnerKind::kParameter;
      epoch.spans.push_back(
          {at, size, kind, "layers." + std::to_string(i / 16) + ".t" + std::to_string(i % 16), ""});
      span_begins_.push_back(at);
      span_sizes_.push_back(size);
      at += 0x10000;
    }
    epoch.allocations.push_back({kPool, 1ULL << 30, "graph", 1, ""});
    for (int w = 0; w < 8; ++w) {
      epoch.allocations.push_back({kWorkspace + static_cast<Address>(w) * 0x100000, 0x1000,
                                   "default", 1, "layers." + std::to_string(w) + ".workspace"});
    }
    // After sleep level 2 and wake: the same spans and allocations, the weights pool's
    // contents discarded (a new generation), as vLLM's CuMemAllocator leaves them.
    Epoch after_sleep = epoch;
    after_sleep.label = "after_sleep";
    for (Allocation& allocation : after_sleep.allocations) {
      if (allocation.pool == "weights") {
        allocation.generation = 2;
      }
    }
    world_->snapshot.epochs.push_back(std::move(epoch));
    world_->snapshot.epochs.push_back(std::move(after_sleep));
    GraphRecord graph{1, "capture", {}};
    graph.nodes.reserve(nodes);
    for (std::size_t n = 0; n < nodes; ++n) {
      graph.nodes.push_back(kernel(n));
    }
    world_->snapshot.graphs.push_back(std::move(graph));
    world_->snapshot.allow = {"layers.0.workspace"};
  }
  std::unique_ptr<World> take() { return std::move(world_); }

 private:
  std::uint64_t pick(std::uint64_t below) {
    return std::uniform_int_distribution<std::uint64_t>(0, below - 1)(rng_);
  }
  Address pointer() {
    const std::uint64_t roll = pick(100);
    if (roll < 80) {
      const std::size_t span = pick(span_begins_.size());
      return span_begins_[span] + pick(span_sizes_[span]) / 16 * 16;
    }
    if (roll < 98) {
      return kPool + pick(1ULL << 30) / 256 * 256;  // intermediates in the graph pool
    }
    return kWorkspace + pick(8) * 0x100000 + pick(0x1000);  // unregistered (one allowed)
  }
  std::uint64_t scalar() {
    switch (pick(4)) {
      case 0:
        return pick(1ULL << 32);  // sizes, strides
      case 1:
        return 0x3f8000003f800000;  // two packed floats (alpha, beta)
      case 2:
        return ~std::uint64_t{0};  // -1
      default:
        return pick(4096) << 32 | pick(4096);  // packed int pair
    }
  }
  static std::vector<std::uint8_t> words(const std::vector<std::uint64_t>& values) {
    std::vector<std::uint8_t> bytes(values.size() * 8);
    std::memcpy(bytes.data(), values.data(), bytes.size());  // little-endian host
    return bytes;
  }
  // 8 arguments: 3 pointers, a 4-byte int, a scalar word, a 48-byte parameter block
  // (pointers among scalars, like a CUTLASS argument struct), a pointer or scalar, an int.
  Node kernel(std::size_t n) {
    Node node;
    node.id = n;
    node.type = NodeType::kKernel;
    node.name = "kernel_" + std::to_string(n % 24);
    std::uint64_t offset = 0;
    const auto add = [&](const std::vector<std::uint8_t>& bytes) {
      node.params.push_back({offset, bytes});
      offset += (bytes.size() + 7) / 8 * 8;
    };
    add(words({pointer()}));
    add(words({pointer()}));
    add(words({pointer()}));
    add({1, 0, 0, 0});
    add(words({scalar()}));
    if (n % 4 == 0) {
      add(words({scalar(), pointer(), scalar(), scalar(), pointer(), scalar()}));
    } else {
      add(words({pointer(), scalar()}));
    }
    add(words({pick(2) == 0 ? pointer() : scalar()}));
    add({7, 0, 0, 0});
    return node;
  }

  std::mt19937_64 rng_;
  std::unique_ptr<World> world_;
  std::vector<Address> span_begins_;
  std::vector<std::uint64_t> span_sizes_;
};

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

// The floor's pass: read every word the scan reads and keep the pointer-looking ones, with
// no lookup and no report. Not inlined, so that a profiler can count it alone
// (callgrind --toggle-collect='*read_words*').
[[gnu::noinline]] std::uint64_t read_words(const GraphRecord& graph, std::uint64_t* kept) {
  std::uint64_t sum = 0;
  std::uint64_t count = 0;
  for (const Node& node : graph.nodes) {
    for (const KernelParam& param : node.params) {
      for (std::size_t at = 0; at + 8 <= param.bytes.size(); at += 8) {
        std::uint64_t word = 0;
        std::memcpy(&word, param.bytes.data() + at, 8);
        if (word >= kWeights && word < kWorkspace + 0x1000000) {
          sum += word;
          ++count;
        }
      }
    }
  }
  *kept = count;
  return sum;
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
    ++generation;
    for (Allocation& allocation : woken.allocations) {
      if (allocation.pool == "weights") {
        allocation.generation = generation;
      }
    }
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
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
