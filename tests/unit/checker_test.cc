// The verdict engine: one test per verdict, per node kind, and per option.
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "common/thrown_message.h"
#include "unit/checker_helpers.h"

namespace graphcheck {
namespace {

constexpr Address kW = 0x7f0000000000;      // parameter "w" at capture
constexpr Address kMoved = 0x7f0000800000;  // where a rebinding reload puts "w"
constexpr Address kWs = 0x7f0000100000;     // an unregistered workspace allocation

using testing_helpers::kernel_using;
using testing_helpers::make_alloc;
using testing_helpers::make_span;
using testing_helpers::one_reference;
using testing_helpers::only_verdict;

TEST(CheckerTest, OkVerdictsFollowTheOwnerKind) {
  const std::vector<std::pair<OwnerKind, Verdict>> cases = {
      {OwnerKind::kParameter, Verdict::kRegistered},
      {OwnerKind::kBuffer, Verdict::kRegistered},
      {OwnerKind::kRuntime, Verdict::kRuntime},
      {OwnerKind::kGraph, Verdict::kGraph},
      {OwnerKind::kInput, Verdict::kInput}};
  for (const auto& [kind, verdict] : cases) {
    const Report report = check(
        one_reference(kW + 8, {make_span(kW, 0x100, kind, "x")}, {make_alloc(kW, 0x1000, 1)}));
    EXPECT_EQ(only_verdict(report), verdict) << to_string(kind);
    EXPECT_TRUE(report.findings.empty());
    EXPECT_EQ(report.epoch, "capture");
    EXPECT_EQ(report.baseline, "capture");
  }
}

TEST(CheckerTest, GraphPoolAndMemAllocRangesAreGraphOwned) {
  EXPECT_EQ(only_verdict(check(one_reference(kWs, {}, {make_alloc(kWs, 64, 1, "", "graph:3")}))),
            Verdict::kGraph);
  Snapshot snapshot = one_reference(0x900010, {}, {}, {{"after_wake", {}, {}}});
  Node alloc;
  alloc.id = 1;
  alloc.type = NodeType::kMemAlloc;
  alloc.operands = {{"alloc", 0x900000, 0x100, Access::kWrite}};
  snapshot.graphs[0].nodes.push_back(alloc);
  const Report report = check(snapshot);  // in after_wake, where nothing else exists
  EXPECT_EQ(report.summary.references, 2U);
  EXPECT_EQ(report.summary.count(Verdict::kGraph), 2U);
}

TEST(CheckerTest, AllocationNoSpanCoversIsUnregisteredWithItsLabelAndFix) {
  const Report report =
      check(one_reference(kWs + 16, {}, {make_alloc(kWs, 512, 1, "layers.0.quant.workspace")}));
  ASSERT_EQ(report.findings.size(), 1U);
  const Finding& f = report.findings[0];
  EXPECT_EQ(f.verdict, Verdict::kUnregistered);
  EXPECT_EQ(f.graph, 1U);
  EXPECT_EQ(f.node, 0U);
  EXPECT_EQ(f.kernel, "gemm");
  EXPECT_EQ(f.param, 1U);
  EXPECT_EQ(f.offset, 8U);
  EXPECT_EQ(f.address, kWs + 16);
  EXPECT_EQ(f.owner, "layers.0.quant.workspace");
  EXPECT_FALSE(f.owner_kind.has_value());
  EXPECT_EQ(f.detail,
            "inside allocation 0x7f0000100000 (512 bytes, pool \"default\") that no "
            "span covers");
  // Each of the contract's ways, and the step a held tensor needs beyond being listed.
  for (const char* way : {"set_derived_buffer", "register_constant_buffer", "persistent_tensors()",
                          "register_held_tensors(model)", "runtime state"}) {
    EXPECT_NE(f.fix.find(way), std::string::npos) << way;
  }
}

TEST(CheckerTest, AllowlistTurnsUnregisteredIntoAllowedAndReportsUnusedGlobs) {
  Snapshot snapshot = one_reference(kWs, {}, {make_alloc(kWs, 512, 1, "layers.0.quant.workspace")});
  snapshot.allow = {"layers.*.quant.workspace", "never.*"};
  CheckOptions options;
  options.allow = {"layers.0.**", "layers.0.*", "rope_cache"};
  const Report report = check(snapshot, options);
  EXPECT_EQ(only_verdict(report), Verdict::kAllowed);
  EXPECT_TRUE(report.findings.empty());
  // Both matching globs allowed it; the others allowed nothing ("*" stays within one path
  // component: "layers.0.*" does not reach "layers.0.quant.workspace", "layers.0.**" does).
  EXPECT_EQ(report.stale_allow, (std::vector<std::string>{"never.*", "layers.0.*", "rope_cache"}));
}

TEST(CheckerTest, GlobMatchingARegisteredOwnerIsStillStale) {
  // The glob names something in the snapshot, but that owner is registered: it allowed no
  // reference, so the site was fixed and the glob must leave the list.
  Snapshot snapshot = one_reference(kW, {make_span(kW, 64, OwnerKind::kBuffer, "rope")}, {});
  snapshot.allow = {"rope"};
  const Report report = check(snapshot);
  EXPECT_EQ(only_verdict(report), Verdict::kRegistered);
  EXPECT_EQ(report.stale_allow, std::vector<std::string>{"rope"});
}

TEST(CheckerTest, FreedAllocationIsDanglingNamedByItsOldLabel) {
  const Report report =
      check(one_reference(kWs, {}, {make_alloc(kWs, 512, 1, "scratch")}, {{"after_wake", {}, {}}}));
  ASSERT_EQ(report.findings.size(), 1U);
  EXPECT_EQ(report.epoch, "after_wake");
  EXPECT_EQ(report.findings[0].verdict, Verdict::kDangling);
  EXPECT_EQ(report.findings[0].owner, "scratch");
  EXPECT_EQ(report.findings[0].detail,
            "allocation 0x7f0000100000 was freed after capture; no span or live allocation "
            "holds it in after_wake");
  EXPECT_NE(report.findings[0].fix.find("keep the tensor alive"), std::string::npos);
}

TEST(CheckerTest, ReboundParameterIsStaleMoved) {
  const Report report = check(one_reference(
      kW + 8, {make_span(kW, 0x100, OwnerKind::kParameter, "w")}, {make_alloc(kW, 0x1000, 1)},
      {{"after_reload",
        {make_span(kMoved, 0x100, OwnerKind::kParameter, "w")},
        {make_alloc(kW, 0x1000, 1), make_alloc(kMoved, 0x1000, 1)}}}));
  ASSERT_EQ(report.findings.size(), 1U);
  const Finding& f = report.findings[0];
  EXPECT_EQ(f.verdict, Verdict::kStale);
  EXPECT_EQ(f.owner, "w");
  EXPECT_EQ(f.owner_kind, OwnerKind::kParameter);
  EXPECT_EQ(f.detail, "moved to 0x7f0000800000 after capture");
  EXPECT_NE(f.fix.find("copy_"), std::string::npos);
}

TEST(CheckerTest, AddressWithANewOwnerIsStale) {
  const Report report = check(
      one_reference(kW, {make_span(kW, 0x100, OwnerKind::kParameter, "w")}, {},
                    {{"after_reload", {make_span(kW, 0x100, OwnerKind::kBuffer, "other")}, {}}}));
  ASSERT_EQ(report.findings.size(), 1U);
  EXPECT_EQ(report.findings[0].verdict, Verdict::kStale);
  EXPECT_EQ(report.findings[0].owner, "w");
  EXPECT_EQ(report.findings[0].detail, "now inside buffer \"other\"");
  EXPECT_NE(report.findings[0].fix.find("reload the parameter in place"), std::string::npos);
}

TEST(CheckerTest, GraphOwnedSpansAreNeverStale) {
  const Report report =
      check(one_reference(kW, {make_span(kW, 0x100, OwnerKind::kGraph, "pool")}, {},
                          {{"after", {make_span(kW, 0x100, OwnerKind::kRuntime, "kv")}, {}}}));
  EXPECT_EQ(only_verdict(report), Verdict::kRuntime);
}

TEST(CheckerTest, DiscardedBytesWithoutARestoringOwnerAreLost) {
  const Report report =
      check(one_reference(kWs, {}, {make_alloc(kWs, 512, 1, "derived.scale", "weights")},
                          {{"after_wake", {}, {make_alloc(kWs, 512, 2, "", "weights")}}}));
  ASSERT_EQ(report.findings.size(), 1U);
  EXPECT_EQ(report.findings[0].verdict, Verdict::kLost);
  EXPECT_EQ(report.findings[0].owner, "derived.scale");
  EXPECT_EQ(report.findings[0].detail, "generation 1 -> 2 (bytes discarded after capture)");
  EXPECT_NE(report.findings[0].fix.find("register it so sleep restores it"), std::string::npos);
  EXPECT_NE(report.findings[0].fix.find("register_held_tensors(model)"), std::string::npos);
}

TEST(CheckerTest, LostOnlyWithoutRegisteredRuntimeOrGraphOwner) {
  for (OwnerKind kind : {OwnerKind::kBuffer, OwnerKind::kRuntime, OwnerKind::kInput}) {
    const Span span = make_span(kWs, 512, kind, "x");
    const Report report = check(one_reference(kWs, {span}, {make_alloc(kWs, 512, 1)},
                                              {{"after_wake", {span}, {make_alloc(kWs, 512, 2)}}}));
    EXPECT_EQ(only_verdict(report), kind == OwnerKind::kInput    ? Verdict::kLost
                                    : kind == OwnerKind::kBuffer ? Verdict::kRegistered
                                                                 : Verdict::kRuntime);
  }
}

TEST(CheckerTest, AllowlistTurnsLostIntoAllowed) {
  Snapshot snapshot = one_reference(kWs, {}, {make_alloc(kWs, 512, 1, "marlin.workspace")},
                                    {{"after_wake", {}, {make_alloc(kWs, 512, 2)}}});
  snapshot.allow = {"marlin.*"};
  const Report report = check(snapshot);
  EXPECT_EQ(only_verdict(report), Verdict::kAllowed);
  EXPECT_TRUE(report.stale_allow.empty());
}

TEST(CheckerTest, BaselineOverrideComparesAgainstThatEpoch) {
  const Span w = make_span(kW, 0x100, OwnerKind::kParameter, "w");
  const Span moved = make_span(kMoved, 0x100, OwnerKind::kParameter, "w");
  const Snapshot snapshot = one_reference(kW, {w}, {make_alloc(kW, 0x1000, 1)},
                                          {{"after_wake", {w}, {make_alloc(kW, 0x1000, 1)}},
                                           {"after_reload", {moved}, {make_alloc(kW, 0x1000, 1)}}});
  CheckOptions options;
  options.baseline = "after_wake";
  Report report = check(snapshot, options);
  ASSERT_EQ(report.findings.size(), 1U);
  EXPECT_EQ(report.baseline, "after_wake");
  EXPECT_EQ(report.findings[0].detail, "moved to 0x7f0000800000 after after_wake");
  // Against itself nothing can be stale: the old allocation is simply unregistered now.
  options.baseline = "after_reload";
  report = check(snapshot, options);
  EXPECT_EQ(only_verdict(report), Verdict::kUnregistered);
  // Checking an earlier epoch is allowed too.
  options = {};
  options.epoch = "after_wake";
  EXPECT_EQ(only_verdict(check(snapshot, options)), Verdict::kRegistered);
}

TEST(CheckerTest, UnknownEpochLabelsAreErrorsListingTheKnownOnes) {
  const Snapshot snapshot = one_reference(kW, {}, {}, {{"after_wake", {}, {}}});
  CheckOptions options;
  options.epoch = "after_sleep";
  try {
    (void)check(snapshot, options);
    FAIL() << "expected an Error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(),
                 "check: epoch \"after_sleep\" is not an epoch of the snapshot (it has: capture, "
                 "after_wake); pass one of those labels");
  }
  // A label holding a NUL is shown escaped: the message went on past it (what() is a C
  // string: it ended at the NUL, losing the other labels).
  Snapshot with_nul = snapshot;
  with_nul.epochs.back().label = std::string("after\0wake", 10);
  options.epoch = "x";
  EXPECT_EQ(test_support::thrown_message([&] { (void)check(with_nul, options); }),
            "check: epoch \"x\" is not an epoch of the snapshot (it has: capture, after\\0wake); "
            "pass one of those labels");
  options = {};
  options.baseline = "nope";
  EXPECT_EQ(test_support::thrown_message([&] { (void)check(snapshot, options); }),
            "check: baseline \"nope\" is not an epoch of the snapshot (it has: capture, "
            "after_wake); pass one of those labels");
}

TEST(CheckerTest, NonKernelFindingsNameTheirOperand) {
  Snapshot snapshot;
  snapshot.epochs.push_back({"capture", {}, {make_alloc(kWs, 0x1000, 1, "ws")}});
  Node copy;
  copy.id = 4;
  copy.type = NodeType::kMemcpy;
  copy.operands = {{"src", kWs, 64, Access::kRead}, {"dst", kWs + 64, 64, Access::kWrite}};
  Node set;
  set.id = 5;
  set.type = NodeType::kMemset;
  set.operands = {{"dst", kWs + 128, 8, Access::kWrite}};
  Node free_node;
  free_node.id = 6;
  free_node.type = NodeType::kMemFree;
  free_node.operands = {{"dptr", 0x1234, 0, Access::kUnknown}};
  Node op;
  op.id = 7;
  op.type = NodeType::kOp;
  op.name = "aten::mm";
  op.operands = {{"reads[0]", kWs, 64, Access::kRead}};
  Node child;
  child.id = 8;
  child.type = NodeType::kChildGraph;
  child.bodies = {{kernel_using(80, kWs)}};
  snapshot.graphs.push_back({2, "capture", {copy, set, free_node, op, child}});
  const Report report = check(snapshot);
  ASSERT_EQ(report.findings.size(), 6U);
  EXPECT_EQ(report.summary.nodes, 6U);
  EXPECT_EQ(report.summary.references, 6U);
  EXPECT_EQ(report.findings[0].operand, "src");
  EXPECT_EQ(report.findings[0].kernel, "");
  EXPECT_EQ(report.findings[0].node_type, NodeType::kMemcpy);
  EXPECT_FALSE(report.findings[0].param.has_value());
  EXPECT_EQ(report.findings[1].operand, "dst");
  EXPECT_EQ(report.findings[2].node, 5U);
  EXPECT_EQ(report.findings[3].verdict, Verdict::kDangling);  // mem_free of unknown memory
  EXPECT_EQ(report.findings[3].operand, "dptr");
  EXPECT_EQ(report.findings[4].kernel, "aten::mm");
  EXPECT_EQ(report.findings[4].operand, "reads[0]");
  EXPECT_EQ(report.findings[5].node, 80U);  // a body node reports its own id
  EXPECT_EQ(report.findings[5].graph, 2U);
  EXPECT_EQ(report.findings[5].param, 1U);
}

TEST(CheckerTest, KernelOperandsGetVerdictsNamedByKernelAndRole) {
  // A TMA descriptor's global address: not in the argument bytes (the descriptor argument
  // holds no known word), reported by the backend as a kernel operand.
  Snapshot snapshot =
      one_reference(kW + 8, {make_span(kW, 0x100, OwnerKind::kParameter, "w")},
                    {make_alloc(kWs, 0x1000, 1, "ws")},
                    {{"after_wake", {make_span(kMoved, 0x100, OwnerKind::kParameter, "w")}, {}}});
  Node& node = snapshot.graphs[0].nodes[0];
  node.params.push_back({24, std::vector<std::uint8_t>(128, 0)});
  node.operands = {{"param[2]+0:tensor_map", kWs + 0x40, 0x100, Access::kRead},
                   {"param[2]+64:tensor_map", kW + 0x10, 0, Access::kRead}};

  const Report at_capture = check(snapshot, {"capture", "", {}});
  EXPECT_EQ(at_capture.summary.references, 3U);
  EXPECT_EQ(at_capture.summary.counts[static_cast<std::size_t>(Verdict::kRegistered)], 2U);
  ASSERT_EQ(at_capture.findings.size(), 1U);
  const Finding& unregistered = at_capture.findings[0];
  EXPECT_EQ(unregistered.verdict, Verdict::kUnregistered);
  EXPECT_EQ(unregistered.node_type, NodeType::kKernel);
  EXPECT_EQ(unregistered.kernel, "gemm");
  EXPECT_EQ(unregistered.operand, "param[2]+0:tensor_map");
  EXPECT_FALSE(unregistered.param.has_value());
  EXPECT_FALSE(unregistered.offset.has_value());
  EXPECT_EQ(unregistered.address, kWs + 0x40);
  EXPECT_EQ(unregistered.owner, "ws");

  // After a rebinding reload the descriptor still points at the old storage: stale, in
  // reference order (the argument word first, then the operands).
  const Report after = check(snapshot);
  ASSERT_EQ(after.findings.size(), 3U);
  EXPECT_EQ(after.findings[0].param, 1U);
  EXPECT_EQ(after.findings[0].verdict, Verdict::kStale);
  EXPECT_EQ(after.findings[1].operand, "param[2]+0:tensor_map");
  EXPECT_EQ(after.findings[1].verdict, Verdict::kDangling);
  EXPECT_EQ(after.findings[2].operand, "param[2]+64:tensor_map");
  EXPECT_EQ(after.findings[2].verdict, Verdict::kStale);
  EXPECT_EQ(after.findings[2].owner, "w");
  EXPECT_EQ(after.findings[2].detail, "moved to 0x7f0000800000 after capture");
}

TEST(CheckerTest, OverlapIsWarnedOncePerPairWhenReferenced) {
  Snapshot snapshot = one_reference(0x1000,
                                    {make_span(0x1000, 0x100, OwnerKind::kParameter, "a"),
                                     make_span(0x1000, 0x1000, OwnerKind::kBuffer, "b"),
                                     make_span(0x8000, 0x10, OwnerKind::kBuffer, "c"),
                                     make_span(0x8000, 0x10, OwnerKind::kRuntime, "d")},
                                    {});
  snapshot.graphs[0].nodes.push_back(kernel_using(1, 0x1008));
  const Report report = check(snapshot);
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 2U);
  // c/d overlap too, but no reference hits them.
  EXPECT_EQ(report.warnings,
            std::vector<std::string>{"epoch capture: 0x1000..0x1100 is inside parameter \"a\" "
                                     "and buffer \"b\"; resolved to \"a\" (innermost)"});
}

TEST(CheckerTest, OverlapWarningsAreCappedAtOneHundredLines) {
  Snapshot snapshot;
  snapshot.epochs.push_back({"capture", {}, {}});
  GraphRecord graph{1, "capture", {}};
  for (std::uint64_t i = 0; i < 130; ++i) {
    const Address base = 0x100000 + i * 0x1000;
    snapshot.epochs[0].spans.push_back(make_span(base, 0x10, OwnerKind::kParameter, "p"));
    snapshot.epochs[0].spans.push_back(make_span(base, 0x20, OwnerKind::kBuffer, "q"));
    graph.nodes.push_back(kernel_using(i, base));
  }
  snapshot.graphs.push_back(graph);
  const Report report = check(snapshot);
  ASSERT_EQ(report.warnings.size(), 101U);
  EXPECT_EQ(report.warnings.back(), "... and 30 more overlapping pairs");
}

TEST(CheckerTest, BaselineIsPerGraphWhenCaptureEpochsDiffer) {
  Snapshot snapshot = one_reference(kW, {}, {}, {{"second", {}, {}}});
  snapshot.graphs.push_back({2, "second", {}});
  EXPECT_EQ(check(snapshot).baseline, "per-graph");
  EXPECT_EQ(check(snapshot).summary.graphs, 2U);
}

TEST(CheckerTest, CheckLeavesTheSnapshotUnchanged) {
  Snapshot snapshot = one_reference(kWs, {make_span(kW, 8, OwnerKind::kParameter, "w")},
                                    {make_alloc(kWs, 8, 1, "x")}, {{"after", {}, {}}});
  snapshot.allow = {"x", "y"};
  const Snapshot before = snapshot;
  (void)check(snapshot);
  EXPECT_EQ(snapshot, before);
}

TEST(ReadAllowlistTest, SkipsBlankAndCommentLinesAndTrims) {
  const std::string path = ::testing::TempDir() + "graphcheck_allowlist_test.txt";
  {
    std::ofstream out(path);
    out << "# known sites\n\n  layers.*.workspace  \n\t# indented comment\nrope_cache\r\n";
  }
  EXPECT_EQ(read_allowlist(path), (std::vector<std::string>{"layers.*.workspace", "rope_cache"}));
  std::remove(path.c_str());
}

TEST(ReadAllowlistTest, UnreadablePathIsAnErrorNamingIt) {
  try {
    (void)read_allowlist("/nonexistent/allow.txt");
    FAIL() << "expected an Error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("/nonexistent/allow.txt"), std::string::npos);
  }
  EXPECT_THROW((void)read_allowlist(::testing::TempDir()), Error);  // a directory
}

}  // namespace
}  // namespace graphcheck
