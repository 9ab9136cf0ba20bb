// A property test of CheckSession: random sessions changed step by step (sleep and wake with
// new generations, rebinding reloads, new and removed epochs and graphs, other allowlists),
// each check (its graphs read on up to 3 threads) compared with graphcheck::check of the
// session's snapshot on one thread, byte for byte in JSON and text. Fixed seeds.
#include <graphcheck/check_session.h>
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "unit/check_session_helpers.h"
#include "unit/checker_helpers.h"

namespace graphcheck {
namespace {

using testing_helpers::expected;
using testing_helpers::le_word;
using testing_helpers::outcome;
using testing_helpers::report_text;

constexpr Address kBase = 0x7d0000000000;
constexpr std::uint64_t kUnit = 0x100;
constexpr int kUnits = 96;  // the address space the objects share, in units

class RandomSession {
 public:
  explicit RandomSession(std::uint32_t seed) : rng_(seed) {
    Snapshot snapshot;
    snapshot.epochs.push_back(random_epoch("capture"));
    snapshot.epochs.push_back(wake(snapshot.epochs[0], "wake"));
    for (std::uint64_t id = 1; id <= 3; ++id) {
      snapshot.graphs.push_back(random_graph(id, snapshot.epochs));
    }
    snapshot.allow = {"allowed.*", "never.*"};
    session_ = CheckSession(std::move(snapshot));
  }

  // One random change, then one or two checks compared with a fresh check.
  void step(int number) {
    const std::vector<std::string> labels = session_.epoch_labels();
    switch (pick(8)) {
      case 0:
      case 1: {  // sleep and wake: the same ranges, new generations
        const Epoch& from = *session_.find_epoch(labels[pick(labels.size())]);
        session_.put_epoch(wake(from, from.label),
                           pick(2) == 0 ? EpochPlace::kKeep : EpochPlace::kLast);
        break;
      }
      case 2: {  // a reload that rebinds or frees
        const Epoch& from = *session_.find_epoch(labels[pick(labels.size())]);
        session_.put_epoch(reload(from, pick(3) == 0 ? "e" + std::to_string(number) : from.label));
        break;
      }
      case 3:
        if (labels.size() > 2) {
          session_.remove_epoch(labels[pick(labels.size())]);
        }
        break;
      case 4: {
        const Snapshot snapshot = session_.snapshot();
        session_.put_graph(random_graph(1 + pick(4), snapshot.epochs));
        break;
      }
      case 5:
        session_.remove_graph(1 + pick(4));
        break;
      case 6: {
        std::vector<std::string> globs;
        for (const char* glob : {"allowed.*", "workspace.*", "w0", "never.*", "*"}) {
          if (pick(3) == 0) {
            globs.emplace_back(glob);
          }
        }
        session_.set_allow(globs);
        break;
      }
      default:
        break;  // unchanged: the next check may return the last report
    }
    const CheckOptions options = random_options();
    for (int again = 0; again < 2; ++again) {
      std::vector<std::uint64_t> ids = session_.graph_ids();
      const bool subset = pick(4) == 0 && ids.size() > 1;
      if (subset) {
        ids.erase(ids.begin() + static_cast<std::ptrdiff_t>(pick(ids.size())));
      }
      const std::string got = outcome([&] {
        const std::shared_ptr<const Report> report =
            subset ? session_.check(options, ids) : session_.check(options);
        const SessionCheckStats& stats = session_.last_stats();
        coverage_.reused += stats.reused_report ? 1 : 0;
        coverage_.replayed += stats.graphs_replayed != 0 && stats.graphs_scanned == 0 ? 1 : 0;
        coverage_.findings += report->findings.empty() ? 0 : 1;
        return report_text(*report);
      });
      coverage_.errors += got.starts_with("error: ") ? 1 : 0;
      CheckOptions serial = options;  // the same report on one thread
      serial.threads = 1;
      ASSERT_EQ(got, expected(session_.snapshot(ids), serial))
          << "step " << number << (again != 0 ? " (again)" : "") << ", epoch '" << options.epoch
          << "', baseline '" << options.baseline << "'";
    }
  }

  // How many checks took each path, so that the test shows it exercised them.
  struct Coverage {
    int reused = 0;    // returned the last report
    int replayed = 0;  // decided every graph from its table
    int findings = 0;  // reported findings
    int errors = 0;    // threw (an epoch that is not there)
  };
  [[nodiscard]] const Coverage& coverage() const { return coverage_; }

 private:
  std::size_t pick(std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng_);
  }
  Address unit_address() { return kBase + pick(kUnits) * kUnit; }

  Epoch random_epoch(const std::string& label) {
    Epoch epoch{label, {}, {}};
    constexpr std::array<OwnerKind, 5> kKinds = {OwnerKind::kParameter, OwnerKind::kBuffer,
                                                 OwnerKind::kRuntime, OwnerKind::kInput,
                                                 OwnerKind::kGraph};
    const std::array<const char*, 5> names = {"w0", "w1", "kv", "x", "g"};
    for (std::size_t i = 0, n = 2 + pick(10); i < n; ++i) {
      const std::uint64_t size =
          std::array<std::uint64_t, 4>{kUnit, 2 * kUnit, 16, 4 * kUnit}[pick(4)];
      epoch.spans.push_back(
          {unit_address() + (pick(2) * kUnit / 2), size, kKinds[pick(5)], names[pick(5)], ""});
    }
    const std::array<const char*, 5> pools = {"weights", "kv_cache", "graph", "graph:1", "act"};
    const std::array<const char*, 5> tags = {"", "", "workspace.a", "allowed.b", "w0"};
    for (std::size_t i = 0, n = 1 + pick(8); i < n; ++i) {
      const std::uint64_t size = std::array<std::uint64_t, 3>{kUnit, 4 * kUnit, 8 * kUnit}[pick(3)];
      epoch.allocations.push_back({unit_address(), size, pools[pick(5)], 1, tags[pick(5)]});
    }
    return epoch;
  }

  // The same ranges, some allocations with a new generation.
  Epoch wake(const Epoch& from, const std::string& label) {
    Epoch epoch = from;
    epoch.label = label;
    for (Allocation& allocation : epoch.allocations) {
      allocation.generation += pick(3) == 0 ? 0U : 1U;
    }
    return epoch;
  }

  // Rebound spans, a freed allocation, perhaps a new span.
  Epoch reload(const Epoch& from, const std::string& label) {
    Epoch epoch = wake(from, label);
    for (Span& span : epoch.spans) {
      span.begin += pick(3) == 0 ? (1 + pick(4)) * kUnit / 2 : 0;
    }
    if (!epoch.allocations.empty() && pick(2) == 0) {
      epoch.allocations.erase(epoch.allocations.begin() +
                              static_cast<std::ptrdiff_t>(pick(epoch.allocations.size())));
    }
    if (pick(3) == 0) {
      epoch.spans.push_back({unit_address(), kUnit, OwnerKind::kBuffer, "w1", ""});
    }
    return epoch;
  }

  // A word that lands on the edges of the epochs' ranges, inside them, in gaps or nowhere.
  Address random_word(const std::vector<Epoch>& epochs) {
    const std::size_t kind = pick(10);
    if (kind == 0) {
      return std::uniform_int_distribution<std::uint64_t>()(rng_);
    }
    if (kind == 1) {
      return pick(4096);
    }
    const Epoch& epoch = epochs[pick(epochs.size())];
    if (kind < 8 && !epoch.spans.empty()) {
      const bool span = pick(2) == 0 || epoch.allocations.empty();
      const Address begin = span ? epoch.spans[pick(epoch.spans.size())].begin
                                 : epoch.allocations[pick(epoch.allocations.size())].begin;
      const std::uint64_t size = span ? kUnit : 4 * kUnit;
      const std::array<Address, 6> edges = {
          begin, begin + size, begin + size - 1, begin + pick(size), begin - 1, begin + 8};
      return edges[pick(edges.size())];
    }
    return unit_address() + pick(kUnit);
  }

  std::vector<Node> random_nodes(const std::vector<Epoch>& epochs, std::uint64_t* next_id,
                                 int depth) {
    std::vector<Node> nodes;
    for (std::size_t i = 0, n = 1 + pick(6); i < n; ++i) {
      Node node;
      node.id = (*next_id)++;
      const std::size_t type = pick(depth < 2 ? 9 : 7);
      if (type < 3) {
        node.type = NodeType::kKernel;
        node.name = type == 0 ? "gemm" : "norm";
        for (std::uint32_t p = 0, params = static_cast<std::uint32_t>(pick(4)); p < params; ++p) {
          std::vector<std::uint8_t> bytes;
          for (std::size_t w = 0, words = 1 + pick(5); w < words; ++w) {
            const std::vector<std::uint8_t> word = le_word(random_word(epochs));
            bytes.insert(bytes.end(), word.begin(), word.end());
          }
          node.params.push_back({p * 64, bytes});
        }
        if (pick(5) == 0) {
          node.operands.push_back({"tma", random_word(epochs), pick(2) * kUnit, Access::kRead});
        }
      } else if (type < 7) {
        constexpr std::array<NodeType, 4> kTypes = {NodeType::kMemcpy, NodeType::kMemset,
                                                    NodeType::kMemAlloc, NodeType::kOp};
        node.type = kTypes[type - 3];
        node.name = node.type == NodeType::kOp ? "aten::mm" : "";
        const std::array<std::uint64_t, 4> sizes = {8, kUnit, 3 * kUnit, 16 * kUnit};
        node.operands.push_back(
            {"dst", random_word(epochs) & ~Address{7}, sizes[pick(4)], Access::kWrite});
        if (node.type == NodeType::kMemcpy || node.type == NodeType::kOp) {
          node.operands.push_back(
              {"src", random_word(epochs) & ~Address{7}, sizes[pick(4)], Access::kRead});
        }
      } else {
        node.type = type == 7 ? NodeType::kChildGraph : NodeType::kConditional;
        for (std::size_t b = 0, bodies = 1 + pick(2); b < bodies; ++b) {
          node.bodies.push_back(random_nodes(epochs, next_id, depth + 1));
        }
      }
      nodes.push_back(std::move(node));
    }
    return nodes;
  }

  GraphRecord random_graph(std::uint64_t id, const std::vector<Epoch>& epochs) {
    std::uint64_t next_id = 0;
    return {id, epochs[pick(epochs.size())].label, random_nodes(epochs, &next_id, 0)};
  }

  CheckOptions random_options() {
    std::vector<std::string> labels = session_.epoch_labels();
    labels.emplace_back("");
    labels.emplace_back("");
    CheckOptions options;
    options.epoch = pick(20) == 0 ? "missing" : labels[pick(labels.size())];
    options.baseline = labels[pick(labels.size())];
    if (pick(3) == 0) {
      options.allow = {"workspace.*", "gone.*"};
    }
    options.stale_allow = pick(2) == 0 ? StaleAllowPolicy::kKeep : StaleAllowPolicy::kFail;
    options.threads = pick(4);  // 0 (one per core), or up to 3 threads for the 3 graphs
    return options;
  }

  std::mt19937 rng_;
  CheckSession session_;
  Coverage coverage_;
};

TEST(CheckSessionPropertyTest, RandomChangesReportWhatAFreshCheckReports) {
  RandomSession::Coverage total;
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    RandomSession session(seed);
    for (int step = 0; step < 40; ++step) {
      session.step(step);
      if (testing::Test::HasFatalFailure()) {
        return;
      }
    }
    total.reused += session.coverage().reused;
    total.replayed += session.coverage().replayed;
    total.findings += session.coverage().findings;
    total.errors += session.coverage().errors;
  }
  // Each path was taken often enough for the comparisons above to mean something.
  EXPECT_GT(total.reused, 100);
  EXPECT_GT(total.replayed, 100);
  EXPECT_GT(total.findings, 500);
  EXPECT_GT(total.errors, 10);
  std::cout << "reused " << total.reused << ", replayed " << total.replayed << ", findings "
            << total.findings << ", errors " << total.errors << " of 3200 checks\n";
}

}  // namespace
}  // namespace graphcheck
