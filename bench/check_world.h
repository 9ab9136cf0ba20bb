// The checker benchmarks' world (bench/check_bench.cc, bench/checkpoint_bench.cc): a
// decode-step-like registry (spans packed into weight allocations, a graph pool, a few
// unregistered workspaces) and graphs of kernels whose arguments mix pointers and scalars,
// and the floor's pass that reads their argument words without any lookup.
#ifndef GRAPHCHECK_BENCH_CHECK_WORLD_H_
#define GRAPHCHECK_BENCH_CHECK_WORLD_H_

#include <graphcheck/snapshot.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace graphcheck::bench {

constexpr Address kWeights = 0x7f3a00000000;
constexpr Address kPool = 0x7f5000000000;
constexpr Address kWorkspace = 0x7f6000000000;

// A sleep and wake of the weights pool: its contents discarded (a new `generation`), the same
// ranges, as vLLM's CuMemAllocator leaves them.
inline void wake_weights(Epoch& epoch, std::uint64_t generation) {
  for (Allocation& allocation : epoch.allocations) {
    if (allocation.pool == "weights") {
      allocation.generation = generation;
    }
  }
}

// A decode-step-like world: spans packed into weight allocations, a graph pool, a few
// unregistered workspaces, and kernels whose arguments mix pointers and scalars.
struct World {
  Snapshot snapshot;
  std::size_t nodes = 0;  // per graph
  std::size_t spans = 0;
};

class WorldBuilder {
 public:
  // `graphs` graphs of `nodes` kernel nodes each (ids 1, 2, ...), all captured in the
  // capture epoch; each graph's words are drawn anew (as a server's graphs, one per batch
  // size, read the same weights at other offsets and other activations).
  WorldBuilder(std::size_t nodes, std::size_t spans, std::size_t graphs = 1)
      : rng_(nodes * 1000003 + spans) {
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
    // After sleep level 2 and wake: the same spans and allocations.
    Epoch after_sleep = epoch;
    after_sleep.label = "after_sleep";
    wake_weights(after_sleep, 2);
    world_->snapshot.epochs.push_back(std::move(epoch));
    world_->snapshot.epochs.push_back(std::move(after_sleep));
    for (std::size_t g = 0; g < graphs; ++g) {
      GraphRecord graph{g + 1, "capture", {}};
      graph.nodes.reserve(nodes);
      for (std::size_t n = 0; n < nodes; ++n) {
        graph.nodes.push_back(kernel(n));
      }
      world_->snapshot.graphs.push_back(std::move(graph));
    }
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

// The floor's pass: read every word the scan reads and keep the pointer-looking ones, with
// no lookup and no report. Not inlined, so that a profiler can count it alone
// (callgrind --toggle-collect='*read_words*').
[[gnu::noinline]] inline std::uint64_t read_words(const GraphRecord& graph, std::uint64_t* kept) {
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

}  // namespace graphcheck::bench

#endif  // GRAPHCHECK_BENCH_CHECK_WORLD_H_
