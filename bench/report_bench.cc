// The report writers on big graphs: the HTML page (streamed, graphcheck/report_html.cc)
// beside the text report of the same check, each with its time, its peak memory (bytes held
// by operator new while it writes, the snapshot and the report already in memory) and its
// output's size, against the snapshot's size as a file (its JSON). Two shapes of graph: the
// browser tier's big snapshot (tests/browser/big_snapshot.py: two references per kernel, 1%
// stale after a reload) and a dense one (eight pointer words per kernel, every one a
// reference). Run: graphcheck_report_bench --benchmark_filter=report
#include <benchmark/benchmark.h>
#include <graphcheck/checker.h>
#include <graphcheck/report.h>
#include <graphcheck/report_html.h>
#include <graphcheck/snapshot.h>

#include <cstdint>
#include <cstring>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

#include "bench/counting_new.h"

namespace graphcheck {
namespace {

constexpr Address kWeights = 0x7F2000000000;
constexpr Address kKv = 0x7F6000000000;
constexpr Address kDefault = 0x7F7000000000;
constexpr Address kMoved = 0x7F4000000000;
constexpr std::uint64_t kLayers = 250;
constexpr std::uint64_t kPerLayer = 4;
constexpr std::uint64_t kMiB = std::uint64_t{1} << 20U;
constexpr std::uint64_t kMovedLayers[] = {3, 97, 201};

bool moved(std::uint64_t layer) {
  for (std::uint64_t m : kMovedLayers) {
    if (m == layer) {
      return true;
    }
  }
  return false;
}

Epoch make_epoch(const std::string& label, bool reloaded) {
  Epoch epoch{label, {}, {}};
  for (std::uint64_t layer = 0; layer < kLayers; ++layer) {
    for (std::uint64_t i = 0; i < kPerLayer; ++i) {
      const Address base = reloaded && moved(layer) ? kMoved : kWeights;
      epoch.spans.push_back({base + (layer * kPerLayer + i) * kMiB, kMiB, OwnerKind::kParameter,
                             "model.layers." + std::to_string(layer) + ".w" + std::to_string(i),
                             ""});
    }
  }
  epoch.spans.push_back({kKv, std::uint64_t{1} << 30U, OwnerKind::kRuntime, "kv_cache", "KV"});
  epoch.allocations.push_back({kWeights, kLayers * kPerLayer * kMiB, "weights", 1, ""});
  epoch.allocations.push_back({kKv, std::uint64_t{1} << 30U, "default", 1, ""});
  epoch.allocations.push_back({kDefault, 4096, "default", 1, "model.quant_method.workspace"});
  if (reloaded) {
    epoch.allocations.push_back({kMoved, 3 * kPerLayer * kMiB, "weights", 1, ""});
  } else {
    epoch.allocations.push_back({kDefault + kMiB, 65536, "default", 1, "scratch"});
  }
  return epoch;
}

std::vector<std::uint8_t> words(const std::vector<std::uint64_t>& values) {
  std::vector<std::uint8_t> bytes(values.size() * 8);
  std::memcpy(bytes.data(), values.data(), bytes.size());  // little-endian host
  return bytes;
}

Address weight(std::uint64_t index, std::uint64_t salt) {
  const std::uint64_t layer = (index / 40) % kLayers;
  return kWeights + (layer * kPerLayer + salt % kPerLayer) * kMiB + 256 * (index % 7);
}

// "big": tests/browser/big_snapshot.py's kernel; "dense": eight pointer words in one argument.
Node kernel(std::uint64_t index, bool dense) {
  Node node{index, NodeType::kKernel, "gemm_kernel_" + std::to_string(index % 13), {}, {}, {}};
  if (dense) {
    std::vector<std::uint64_t> pointers;
    for (std::uint64_t w = 0; w < 8; ++w) {
      pointers.push_back(w == 7 ? kKv + 4096 * index : weight(index, w));
    }
    node.params.push_back({0, words(pointers)});
    return node;
  }
  node.params.push_back({0, words({weight(index, index)})});
  node.params.push_back({8, words({kKv + 4096 * index, index})});
  if (index % 1000 == 0) {
    node.params.push_back({24, words({kDefault + 64})});
  }
  if (index % 2500 == 1) {
    node.params.push_back({32, words({kDefault + kMiB + 128})});
  }
  return node;
}

struct Case {
  Snapshot snapshot;
  Report report;
  std::uint64_t snapshot_json = 0;
  std::uint64_t report_json = 0;
};

const Case& make_case(std::uint64_t nodes, bool dense) {
  static std::uint64_t cached_nodes = 0;
  static bool cached_dense = false;
  static Case cached;
  if (cached_nodes != nodes || cached_dense != dense) {
    cached = Case{};
    cached.snapshot.epochs = {make_epoch("capture", false), make_epoch("after_reload", true)};
    GraphRecord graph{1, "capture", {}};
    for (std::uint64_t i = 0; i < nodes; ++i) {
      graph.nodes.push_back(kernel(i, dense));
    }
    cached.snapshot.graphs.push_back(std::move(graph));
    cached.report = check(cached.snapshot);
    cached.snapshot_json = to_json(cached.snapshot).size();
    cached.report_json = to_json(cached.report, -1).size();
    cached_nodes = nodes;
    cached_dense = dense;
  }
  return cached;
}

// A stream that counts what it is given and keeps none of it.
class CountingBuffer : public std::streambuf {
 public:
  [[nodiscard]] std::uint64_t size() const { return size_; }

 protected:
  std::streamsize xsputn(const char* /*data*/, std::streamsize count) override {
    size_ += static_cast<std::uint64_t>(count);
    return count;
  }
  int_type overflow(int_type c) override {
    ++size_;
    return c;
  }

 private:
  std::uint64_t size_ = 0;
};

void counters(benchmark::State& state, const Case& c, std::uint64_t output, std::int64_t peak) {
  constexpr double kMB = 1e6;
  state.counters["snapshot_MB"] = static_cast<double>(c.snapshot_json) / kMB;
  state.counters["report_json_MB"] = static_cast<double>(c.report_json) / kMB;
  state.counters["out_MB"] = static_cast<double>(output) / kMB;
  state.counters["peak_MB"] = static_cast<double>(peak) / kMB;
  state.counters["peak/snapshot"] =
      static_cast<double>(peak) / static_cast<double>(c.snapshot_json);
  state.counters["out/(report+snapshot)"] =
      static_cast<double>(output) / static_cast<double>(c.report_json + c.snapshot_json);
}

void text_benchmark(benchmark::State& state, std::uint64_t nodes, bool dense) {
  const Case& c = make_case(nodes, dense);
  std::uint64_t size = 0;
  std::int64_t peak = 0;
  for (auto _ : state) {
    bench::start_counting();
    const std::string text = to_text(c.report);
    peak = bench::peak_bytes();
    bench::stop_counting();
    size = text.size();
    benchmark::DoNotOptimize(text);
  }
  counters(state, c, size, peak);
}

void html_benchmark(benchmark::State& state, std::uint64_t nodes, bool dense) {
  const Case& c = make_case(nodes, dense);
  std::uint64_t size = 0;
  std::int64_t peak = 0;
  for (auto _ : state) {
    CountingBuffer buffer;
    std::ostream out(&buffer);
    bench::start_counting();
    write_html(out, c.report, &c.snapshot);
    peak = bench::stop_counting();
    size = buffer.size();
  }
  counters(state, c, size, peak);
}

}  // namespace
}  // namespace graphcheck

int main(int argc, char** argv) {
  for (const bool dense : {false, true}) {
    for (const std::uint64_t nodes : {10000U, 100000U, 200000U}) {
      const std::string suffix =
          std::string(dense ? "dense" : "big") + "/nodes:" + std::to_string(nodes);
      benchmark::RegisterBenchmark(("report/text/" + suffix).c_str(), graphcheck::text_benchmark,
                                   nodes, dense)
          ->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark(("report/html/" + suffix).c_str(), graphcheck::html_benchmark,
                                   nodes, dense)
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    return 1;
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
