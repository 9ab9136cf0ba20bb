// CheckSession: every check reports what graphcheck::check reports for the session's
// snapshot (byte for byte), in every epoch and baseline, after epochs, graphs and the
// allowlist change; unchanged checks return the last report; a sleep and wake replays tables.
#include <graphcheck/check_session.h>
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/thrown_message.h"
#include "unit/check_session_helpers.h"
#include "unit/checker_helpers.h"

namespace graphcheck {
namespace {

using test_support::thrown_message;
using testing_helpers::expected;
using testing_helpers::le_word;
using testing_helpers::make_alloc;
using testing_helpers::make_span;
using testing_helpers::outcome;
using testing_helpers::report_text;

constexpr Address kBase = 0x7e0000000000;
constexpr Address kRegion = 0x10000;

Address region(int i) { return kBase + static_cast<Address>(i) * kRegion; }

// Kernel words into every kind of memory (registered, runtime, input, graph pool, an
// unregistered workspace, an allowed one, an end pointer, a word in a gap), an operand
// crossing owners, a mem_alloc range and a child graph.
GraphRecord graph(std::uint64_t id, const std::string& epoch) {
  GraphRecord record{id, epoch, {}};
  Node kernel;
  kernel.id = 0;
  kernel.type = NodeType::kKernel;
  kernel.name = "gemm";
  std::vector<std::uint8_t> words;
  for (const Address word :
       {region(0) + 0x10, region(1) + 0x20, region(2), region(3) + 0x40, region(4) + 0x30,
        region(5) + 0x18, region(0) + 0x100, region(6) + 0x8, Address{64}, region(8) + 0x10}) {
    const std::vector<std::uint8_t> bytes = le_word(word);
    words.insert(words.end(), bytes.begin(), bytes.end());
  }
  kernel.params = {{0, le_word(region(7) + 0x20)}, {8, words}};
  record.nodes.push_back(kernel);
  Node copy;
  copy.id = 1;
  copy.type = NodeType::kMemcpy;
  copy.operands = {{"src", region(0) + 0xf0, 0x40, Access::kRead},
                   {"dst", region(4), 0x100, Access::kWrite}};
  record.nodes.push_back(copy);
  Node alloc;
  alloc.id = 2;
  alloc.type = NodeType::kMemAlloc;
  alloc.operands = {{"alloc", region(8), 0x100, Access::kUnknown}};
  record.nodes.push_back(alloc);
  Node child;
  child.id = 3;
  child.type = NodeType::kChildGraph;
  Node inner = kernel;
  inner.id = 4;
  inner.name = "inner";
  child.bodies = {{inner}};
  record.nodes.push_back(child);
  return record;
}

Epoch capture_epoch() {
  Epoch epoch{"capture", {}, {}};
  epoch.spans = {make_span(region(0), 0x100, OwnerKind::kParameter, "w"),
                 make_span(region(1), 0x100, OwnerKind::kRuntime, "kv"),
                 make_span(region(2), 0x100, OwnerKind::kInput, "x"),
                 make_span(region(7), 0x100, OwnerKind::kBuffer, "b")};
  epoch.allocations = {make_alloc(region(0), 0x200, 1, "seg.w", "weights"),
                       make_alloc(region(1), 0x200, 1),
                       make_alloc(region(2), 0x200, 1, "inputs"),
                       make_alloc(region(3), 0x1000, 1, "", "graph"),
                       make_alloc(region(4), 0x200, 1, "workspace.a"),
                       make_alloc(region(5), 0x200, 1, "allowed.b"),
                       make_alloc(region(7), 0x200, 1, "seg.b", "weights")};
  return epoch;
}

// After sleep and wake: the same ranges, new generations for the weights and a workspace.
Epoch wake_epoch(const std::string& label, std::uint64_t generation) {
  Epoch epoch = capture_epoch();
  epoch.label = label;
  for (Allocation& allocation : epoch.allocations) {
    if (allocation.pool == "weights" || allocation.label == "workspace.a") {
      allocation.generation = generation;
    }
  }
  return epoch;
}

// After a reload that rebound "w" and freed a workspace: other ranges.
Epoch reload_epoch() {
  Epoch epoch = capture_epoch();
  epoch.label = "reload";
  epoch.spans[0].begin += 0x80;
  epoch.allocations.erase(epoch.allocations.begin() + 5);
  return epoch;
}

Snapshot story_snapshot() {
  Snapshot snapshot;
  snapshot.epochs = {capture_epoch(), wake_epoch("wake", 2), reload_epoch()};
  snapshot.graphs = {graph(1, "capture"), graph(2, "capture"), graph(3, "wake")};
  snapshot.allow = {"allowed.*", "never.*"};
  return snapshot;
}

std::string actual(CheckSession& session, const CheckOptions& options) {
  return outcome([&] { return report_text(*session.check(options)); });
}

// Every epoch and baseline (and none), with and without extra globs, both policies.
void expect_every_check_matches(CheckSession& session) {
  const Snapshot snapshot = session.snapshot();
  std::vector<std::string> labels = session.epoch_labels();
  labels.push_back("");
  labels.push_back("missing");
  int round = 0;
  for (const std::string& epoch : labels) {
    for (const std::string& baseline : labels) {
      for (const std::vector<std::string>& allow :
           {std::vector<std::string>{}, std::vector<std::string>{"workspace.*", "gone"}}) {
        CheckOptions options;
        options.epoch = epoch;
        options.baseline = baseline;
        options.allow = allow;
        options.stale_allow = ++round % 2 == 0 ? StaleAllowPolicy::kKeep : StaleAllowPolicy::kFail;
        EXPECT_EQ(actual(session, options), expected(snapshot, options))
            << "epoch '" << epoch << "', baseline '" << baseline << "', " << allow.size()
            << " globs";
      }
    }
  }
}

TEST(CheckSessionTest, EveryEpochAndBaselineReportsWhatCheckReports) {
  CheckSession session(story_snapshot());
  expect_every_check_matches(session);
  expect_every_check_matches(session);  // again, from the kept reports and tables
}

TEST(CheckSessionTest, UnchangedChecksReturnTheLastReport) {
  CheckSession session(story_snapshot());
  CheckOptions options;
  options.epoch = "wake";
  const std::shared_ptr<const Report> first = session.check(options);
  EXPECT_FALSE(session.last_stats().reused_report);
  EXPECT_EQ(session.put_epoch(wake_epoch("wake", 2)), EpochChange::kUnchanged);
  EXPECT_EQ(session.check(options).get(), first.get());
  EXPECT_TRUE(session.last_stats().reused_report);
  options.allow = {"workspace.*"};
  EXPECT_NE(session.check(options).get(), first.get()) << "other options: another check";
  EXPECT_FALSE(session.last_stats().reused_report);
}

TEST(CheckSessionTest, SleepAndWakeReplaysTheListedReferencesOnly) {
  CheckSession session(story_snapshot());
  session.remove_epoch("reload");  // with an allowlist, every epoch must share the cells
  CheckOptions options;
  options.epoch = "wake";
  const Report before = *session.check(options);
  EXPECT_EQ(session.last_stats().graphs_scanned, 3U);
  for (std::uint64_t generation = 3; generation < 6; ++generation) {
    EXPECT_EQ(session.put_epoch(wake_epoch("wake", generation)), EpochChange::kReplaced);
    const std::shared_ptr<const Report> report = session.check(options);
    EXPECT_EQ(session.last_stats().graphs_scanned, 0U);
    EXPECT_EQ(session.last_stats().graphs_replayed, 3U);
    EXPECT_GT(session.last_stats().references_replayed, 0U);
    EXPECT_LT(session.last_stats().references_replayed, report->summary.references)
        << "references a sole registered span owns are not decided again";
    EXPECT_EQ(to_json(*report), to_json(check(session.snapshot(), options)));
    // The word in the gap (region 6) is counted from the table, as a scan counts it.
    ASSERT_EQ(report->unattributed.size(), 6U) << "per graph: the kernel, its child graph's copy";
    EXPECT_EQ(report->unattributed[0].first, region(6) + 0x8);
  }
  EXPECT_GT(before.summary.count(Verdict::kLost), 0U) << "the story has lost references";
}

TEST(CheckSessionTest, EpochWithOtherRangesScansAgain) {
  CheckSession session(story_snapshot());
  CheckOptions options;
  options.epoch = "reload";
  static_cast<void>(session.check(options));
  Epoch reload = reload_epoch();
  reload.spans[3].begin += 0x40;  // another rebinding
  EXPECT_EQ(session.put_epoch(reload), EpochChange::kReplaced);
  const std::shared_ptr<const Report> report = session.check(options);
  EXPECT_EQ(session.last_stats().graphs_replayed, 0U);
  EXPECT_EQ(to_json(*report), to_json(check(session.snapshot(), options)));
  expect_every_check_matches(session);
}

TEST(CheckSessionTest, GraphAndAllowlistChangesAreSeen) {
  CheckSession session(story_snapshot());
  CheckOptions options;
  options.epoch = "wake";
  const std::shared_ptr<const Report> first = session.check(options);
  GraphRecord changed = graph(2, "capture");
  changed.nodes[0].params[0] = {0, le_word(region(4) + 0x8)};  // into the workspace now
  session.put_graph(changed);
  const std::shared_ptr<const Report> second = session.check(options);
  EXPECT_EQ(second->summary.count(Verdict::kLost), first->summary.count(Verdict::kLost) + 1);
  EXPECT_EQ(to_json(*second), to_json(check(session.snapshot(), options)));
  EXPECT_TRUE(session.remove_graph(3));
  EXPECT_FALSE(session.remove_graph(3));
  session.set_allow({"never.*"});
  expect_every_check_matches(session);
  EXPECT_EQ(session.check(options)->stale_allow, std::vector<std::string>{"never.*"});
}

TEST(CheckSessionTest, TheSameSharedRecordOrAnEqualOneChangesNothing) {
  CheckSession session(story_snapshot());
  const std::shared_ptr<const Report> first = session.check();
  session.put_graph(session.find_graph(1));
  session.put_graph(graph(2, "capture"));
  EXPECT_EQ(session.check().get(), first.get());
  EXPECT_EQ(thrown_message([&] { session.put_graph(std::shared_ptr<const GraphRecord>()); }),
            "check session: put_graph: the graph record is null; pass a record");
}

TEST(CheckSessionTest, SelectedGraphsAreCheckedAlone) {
  CheckSession session(story_snapshot());
  for (const std::vector<std::uint64_t>& ids :
       {std::vector<std::uint64_t>{2}, std::vector<std::uint64_t>{3, 1}}) {
    for (const std::string epoch : {"capture", "wake", "reload"}) {
      CheckOptions options;
      options.epoch = epoch;
      EXPECT_EQ(to_json(*session.check(options, ids)),
                to_json(check(session.snapshot(ids), options)))
          << epoch;
    }
  }
  EXPECT_EQ(session.snapshot({3, 1}).graphs[0].id, 1U) << "in session order";
  EXPECT_EQ(thrown_message([&] { static_cast<void>(session.check({}, {9})); }),
            "check session: graph id 9 is not in the session (it has: 1, 2, 3); pass one of "
            "those ids or put_graph it first");
}

TEST(CheckSessionTest, EpochsArePutInPlaceOrLastAndRemoved) {
  CheckSession session(story_snapshot());
  EXPECT_EQ(session.put_epoch(wake_epoch("later", 9)), EpochChange::kAdded);
  EXPECT_EQ(session.put_epoch(capture_epoch(), EpochPlace::kLast), EpochChange::kReplaced);
  EXPECT_EQ(session.epoch_labels(),
            (std::vector<std::string>{"wake", "reload", "later", "capture"}));
  EXPECT_EQ(session.put_epoch(capture_epoch(), EpochPlace::kLast), EpochChange::kUnchanged);
  expect_every_check_matches(session);
  EXPECT_TRUE(session.remove_epoch("later"));
  EXPECT_FALSE(session.remove_epoch("later"));
  EXPECT_EQ(session.find_epoch("later"), nullptr);
  EXPECT_EQ(session.find_epoch("wake")->label, "wake");
  EXPECT_EQ(thrown_message([&] { session.put_epoch(Epoch{}); }),
            "check session: put_epoch: the epoch has no label; give each epoch a unique label");
  expect_every_check_matches(session);
}

TEST(CheckSessionTest, HeldReportsStayAsTheyWereWhileLaterOnesReuseDroppedOnes) {
  CheckSession session(story_snapshot());
  session.remove_epoch("reload");
  CheckOptions options;
  options.epoch = "wake";
  const std::shared_ptr<const Report> held = session.check(options);
  const std::string held_json = to_json(*held);
  for (std::uint64_t generation = 3; generation < 8; ++generation) {
    session.put_epoch(wake_epoch("wake", generation % 2 == 0 ? 1 : generation));
    // Not held: the next check may write its findings into this report's.
    EXPECT_EQ(to_json(*session.check(options)), to_json(check(session.snapshot(), options)));
  }
  EXPECT_EQ(to_json(*held), held_json) << "a report a caller holds is never written again";
}

TEST(CheckSessionTest, AnEmptySessionChecksLikeAnEmptySnapshot) {
  CheckSession session;
  EXPECT_EQ(actual(session, {}), expected(Snapshot{}, {}));
  session.put_epoch(capture_epoch());
  EXPECT_EQ(actual(session, {}), expected(session.snapshot(), {}));
  EXPECT_EQ(session.check()->summary.graphs, 0U);
  EXPECT_EQ(session.table_bytes(), 0U) << "no graph: no epoch was indexed";
  session.put_graph(graph(1, "capture"));
  EXPECT_EQ(actual(session, {}), expected(session.snapshot(), {}));
  EXPECT_GT(session.table_bytes(), 0U) << "the capture epoch's index and the graph's table";
}

}  // namespace
}  // namespace graphcheck
