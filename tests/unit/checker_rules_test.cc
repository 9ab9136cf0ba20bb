// The verdict rules that hold on real memory (docs/verdicts.md): the same owner, not just
// some owner; operands judged over their whole range; end pointers; an allowlist whose use
// does not depend on the epoch checked and whose stale globs fail the check.
#include <gmock/gmock.h>
#include <graphcheck/checker.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "unit/checker_helpers.h"

namespace graphcheck {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_helpers::kernel_using;
using testing_helpers::make_alloc;
using testing_helpers::make_span;
using testing_helpers::one_reference;
using testing_helpers::only_verdict;

constexpr Address kWs = 0x7f0000100000;  // the quant method's workspace at capture
constexpr Address kP = 0x10000;          // parameter "p" at capture

const Finding& only_finding(const Report& report) {
  EXPECT_EQ(report.findings.size(), 1U);
  static const Finding kNone;
  return report.findings.empty() ? kNone : report.findings[0];
}

// --- 1. The same owner ---------------------------------------------------------------------

TEST(SameOwnerRule, ParameterLoadedIntoAFreedWorkspaceIsStale) {
  // The workspace was freed and a weight was loaded into its memory: another allocation
  // (another label) under a parameter span. The graph now writes into a weight.
  const Report report =
      check(one_reference(kWs + 0x10, {}, {make_alloc(kWs, 0x200, 1, "quant.workspace")},
                          {{"after_reload",
                            {make_span(kWs, 0x200, OwnerKind::kParameter, "layers.3.w")},
                            {make_alloc(kWs, 0x200, 1, "loader.load_weights")}}}));
  const Finding& f = only_finding(report);
  EXPECT_EQ(f.verdict, Verdict::kStale);
  EXPECT_EQ(f.owner, "quant.workspace");
  EXPECT_FALSE(f.owner_kind.has_value());
  EXPECT_EQ(f.detail,
            "owned by \"quant.workspace\" at capture, now inside parameter \"layers.3.w\"");
  EXPECT_THAT(f.fix, HasSubstr("freed and reused"));
}

TEST(SameOwnerRule, NewBytesUnderASpanInTheSameAllocationAreStale) {
  // The same allocation (begin and label) whose bytes were discarded and now hold a buffer.
  const Report report =
      check(one_reference(kWs + 0x10, {}, {make_alloc(kWs, 0x200, 1, "quant.workspace", "weights")},
                          {{"after_wake",
                            {make_span(kWs, 0x100, OwnerKind::kBuffer, "rope.cos")},
                            {make_alloc(kWs, 0x200, 2, "quant.workspace", "weights")}}}));
  const Finding& f = only_finding(report);
  EXPECT_EQ(f.verdict, Verdict::kStale);
  EXPECT_EQ(f.detail,
            "owned by \"quant.workspace\" at capture, now inside buffer \"rope.cos\" "
            "(generation 1 -> 2)");
}

TEST(SameOwnerRule, ATensorRegisteredLaterInItsOwnAllocationIsRegistered) {
  // Same allocation, same bytes: the owner was registered after capture, nothing moved.
  EXPECT_EQ(only_verdict(check(
                one_reference(kWs + 0x10, {}, {make_alloc(kWs, 0x200, 1, "quant.workspace")},
                              {{"after_fix",
                                {make_span(kWs, 0x200, OwnerKind::kBuffer, "quant.workspace")},
                                {make_alloc(kWs, 0x200, 1, "quant.workspace")}}}))),
            Verdict::kRegistered);
}

TEST(SameOwnerRule, AnotherAllocationAtTheAddressIsStale) {
  // Freed and reused by another allocation: another begin, or the same begin and another
  // label. Either way the graph reads someone else's bytes.
  const Allocation was = make_alloc(kWs, 0x200, 1, "quant.workspace");
  for (const Allocation& now : {make_alloc(kWs - 0x100, 0x400, 1, "kv.block"),
                                make_alloc(kWs, 0x200, 1, "sampler.scratch")}) {
    const Report report = check(one_reference(kWs + 0x10, {}, {was}, {{"after", {}, {now}}}));
    const Finding& f = only_finding(report);
    EXPECT_EQ(f.verdict, Verdict::kStale);
    EXPECT_EQ(f.owner, "quant.workspace");
    EXPECT_EQ(f.detail, "owned by \"quant.workspace\" at capture, now inside allocation " +
                            format_address(now.begin) + " \"" + now.label + "\"");
  }
}

TEST(SameOwnerRule, AnUnlabelledAllocationAtTheSameBeginIsTheSameOne) {
  // A backend that labels only the capture epoch: an empty label is unknown, not another.
  EXPECT_EQ(only_verdict(check(one_reference(kWs, {}, {make_alloc(kWs, 0x200, 1, "ws")},
                                             {{"after", {}, {make_alloc(kWs, 0x200, 1)}}}))),
            Verdict::kUnregistered);
}

TEST(SameOwnerRule, PartialMoveIsStaleEvenWhereTheNewRangeStillCovers) {
  // p rebound from 0x10000 to 0x10080 (same size): 0x10090 is still inside p, elsewhere in it.
  const Report report = check(one_reference(
      kP + 0x90, {make_span(kP, 0x100, OwnerKind::kParameter, "p")}, {},
      {{"after_reload", {make_span(kP + 0x80, 0x100, OwnerKind::kParameter, "p")}, {}}}));
  const Finding& f = only_finding(report);
  EXPECT_EQ(f.verdict, Verdict::kStale);
  EXPECT_EQ(f.owner, "p");
  EXPECT_EQ(f.owner_kind, OwnerKind::kParameter);
  EXPECT_EQ(f.detail, "moved to 0x10080 after capture");
}

TEST(SameOwnerRule, AMovedOwnerSaysWhatItsOldAddressHoldsNow) {
  // A rebinding reload put another parameter where "a" was: the graph reads b's values.
  const Report report =
      check(one_reference(kP + 0x10, {make_span(kP, 0x100, OwnerKind::kParameter, "a")}, {},
                          {{"after_reload",
                            {make_span(kP + 0x1000, 0x100, OwnerKind::kParameter, "a"),
                             make_span(kP, 0x100, OwnerKind::kParameter, "b")},
                            {}}}));
  EXPECT_EQ(only_finding(report).detail,
            "moved to 0x11000 after capture; the address now holds parameter \"b\"");
}

TEST(SameOwnerRule, AResizedSpanAtItsBeginHasNotMoved) {
  EXPECT_EQ(only_verdict(check(
                one_reference(kP + 0x10, {make_span(kP, 0x100, OwnerKind::kBuffer, "b")}, {},
                              {{"after", {make_span(kP, 0x80, OwnerKind::kBuffer, "b")}, {}}}))),
            Verdict::kRegistered);
}

TEST(SameOwnerRule, BlockFreedInsideALiveSegmentIsDangling) {
  // The capture owner was a block of a segment; later only the segment covers the address,
  // same generation: freed memory the allocator can hand out again.
  const Allocation segment = make_alloc(0x7f0000000000, 0x200000, 1, "segment");
  const Allocation block = make_alloc(0x7f0000000000 + 0x1000, 0x400, 1, "layers.0.scratch");
  const Report report =
      check(one_reference(0x7f0000001010, {}, {segment, block}, {{"after_free", {}, {segment}}}));
  const Finding& f = only_finding(report);
  EXPECT_EQ(f.verdict, Verdict::kDangling);
  EXPECT_EQ(f.owner, "layers.0.scratch");
  EXPECT_EQ(f.detail,
            "block 0x7f0000001000 (1024 bytes) was freed after capture; only the allocation "
            "around it, 0x7f0000000000 (2097152 bytes), is live in after_free");
  EXPECT_THAT(f.fix, HasSubstr("keep the tensor alive"));
  // The same block at the start of its segment (same begin, another label).
  const Allocation first = make_alloc(segment.begin, 0x400, 1, "first.block");
  EXPECT_EQ(only_verdict(check(one_reference(segment.begin + 8, {}, {segment, first},
                                             {{"after_free", {}, {segment}}}))),
            Verdict::kDangling);
}

TEST(SameOwnerRule, ANewLargerAllocationOverAFreedBlockIsStaleNotDangling) {
  // The allocation around the address did not exist at capture: memory reused, not a
  // segment left behind.
  const Allocation block = make_alloc(kWs, 0x400, 1, "scratch");
  const Report report = check(one_reference(
      kWs + 8, {}, {block}, {{"after", {}, {make_alloc(kWs - 0x1000, 0x10000, 1, "new")}}}));
  EXPECT_EQ(only_finding(report).verdict, Verdict::kStale);
}

TEST(SameOwnerRule, ARegisteredTensorThatLeftTheRegistryIsStaleByItsName) {
  // A buffer at capture, deleted and bound anew as a plain attribute by a reload: its old
  // storage is alive (the same allocation) and no span covers it. The graph reads what the
  // engine no longer reloads: stale, owned by the buffer's name, not an "unregistered"
  // source line with "register it" (a review's finding).
  const Allocation block = make_alloc(kWs, 0x100, 1, "quant.py:169 in process_weights");
  const Span scale = make_span(kWs, 0x100, OwnerKind::kBuffer, "layers.1.weight_scale");
  const Report report =
      check(one_reference(kWs + 0x10, {scale}, {block}, {{"after_reload", {}, {block}}}));
  const Finding& f = only_finding(report);
  EXPECT_EQ(f.verdict, Verdict::kStale);
  EXPECT_EQ(f.owner, "layers.1.weight_scale");
  EXPECT_EQ(f.owner_kind, OwnerKind::kBuffer);
  EXPECT_EQ(f.detail,
            "buffer \"layers.1.weight_scale\" at capture is no longer registered in "
            "after_reload; the graph still reads its storage, allocation 0x7f0000100000 "
            "\"quant.py:169 in process_weights\"");
  EXPECT_THAT(f.fix, HasSubstr("refill the buffer in place"));
  // Its bytes discarded as well (a sleep in between): still the owner that left, with the
  // generations.
  const Report slept = check(one_reference(
      kWs + 0x10, {scale}, {block},
      {{"after_wake", {}, {make_alloc(kWs, 0x100, 2, "quant.py:169 in process_weights")}}}));
  EXPECT_EQ(only_finding(slept).verdict, Verdict::kStale);
  EXPECT_THAT(only_finding(slept).detail, HasSubstr("(generation 1 -> 2)"));
  // Runtime state that is no longer declared is not a registered tensor that left: the
  // allocation decides (unregistered here).
  EXPECT_EQ(only_verdict(
                check(one_reference(kWs + 0x10, {make_span(kWs, 0x100, OwnerKind::kRuntime, "kv")},
                                    {block}, {{"after", {}, {block}}}))),
            Verdict::kUnregistered);
}

TEST(SameOwnerRule, StaleFixDependsOnTheOwnerKind) {
  std::vector<std::string> fixes;
  for (OwnerKind kind :
       {OwnerKind::kParameter, OwnerKind::kBuffer, OwnerKind::kRuntime, OwnerKind::kInput}) {
    const Report report =
        check(one_reference(kP + 8, {make_span(kP, 0x100, kind, "x")}, {},
                            {{"after", {make_span(kP + 0x1000, 0x100, kind, "x")}, {}}}));
    const Finding& f = only_finding(report);
    EXPECT_EQ(f.verdict, Verdict::kStale) << to_string(kind);
    fixes.push_back(f.fix);
  }
  EXPECT_THAT(fixes[0], HasSubstr("reload the parameter in place with copy_"));
  EXPECT_THAT(fixes[1], HasSubstr("refill the buffer in place"));
  EXPECT_THAT(fixes[2], HasSubstr("keep runtime state at one address"));
  EXPECT_THAT(fixes[3], HasSubstr("copy new inputs into the captured static input"));
}

// --- 2. Operands are ranges ------------------------------------------------------------------

// One op node reading `size` bytes at `begin`, in a snapshot with `spans` and `allocs`.
Snapshot one_op(Address begin, std::uint64_t size, std::vector<Span> spans,
                std::vector<Allocation> allocs, std::vector<Epoch> later = {}) {
  Snapshot snapshot;
  snapshot.epochs.push_back({"capture", std::move(spans), std::move(allocs)});
  for (Epoch& epoch : later) {
    snapshot.epochs.push_back(std::move(epoch));
  }
  Node op;
  op.id = 4;
  op.type = NodeType::kOp;
  op.name = "aten::mm";
  op.operands = {{"reads[0]", begin, size, Access::kRead}};
  snapshot.graphs.push_back({1, "capture", {op}});
  return snapshot;
}

TEST(RangeRule, ReadPastAParameterIntoAnAllocationIsUnregisteredForThatPart) {
  // aten::mm reads 0x800 bytes from a 0x100-byte parameter: 0x700 bytes of something else.
  const Report report =
      check(one_op(kWs, 0x800, {make_span(kWs, 0x100, OwnerKind::kParameter, "w")},
                   {make_alloc(kWs, 0x1000, 1, "segment.site")}));
  EXPECT_EQ(report.summary.references, 1U);
  const Finding& f = only_finding(report);
  EXPECT_EQ(f.verdict, Verdict::kUnregistered);
  EXPECT_EQ(f.owner, "segment.site");
  EXPECT_EQ(f.address, kWs);
  EXPECT_EQ(f.range_begin, kWs + 0x100);
  EXPECT_EQ(f.range_size, 0x700U);
  EXPECT_EQ(f.access, Access::kRead);
  EXPECT_EQ(f.operand, "reads[0]");
  // The same read within the parameter is registered.
  EXPECT_EQ(only_verdict(
                check(one_op(kWs + 0x10, 0xf0, {make_span(kWs, 0x100, OwnerKind::kParameter, "w")},
                             {make_alloc(kWs, 0x1000, 1, "segment.site")}))),
            Verdict::kRegistered);
}

TEST(RangeRule, TheWorstPartWinsAndAdjacentPartsOfItMerge) {
  // Parts: parameter a (moved later: stale), a gap in the allocation (unregistered),
  // parameter b (in place). Stale outranks unregistered wherever it lies.
  const std::vector<Span> spans = {make_span(kWs + 0x100, 0x100, OwnerKind::kParameter, "a"),
                                   make_span(kWs + 0x300, 0x100, OwnerKind::kParameter, "b")};
  const Allocation alloc = make_alloc(kWs, 0x1000, 1, "site");
  Epoch later{
      "after", {make_span(kWs + 0x800, 0x100, OwnerKind::kParameter, "a"), spans[1]}, {alloc}};
  const Report report = check(one_op(kWs + 0x100, 0x300, spans, {alloc}, {later}));
  const Finding& f = only_finding(report);
  EXPECT_EQ(f.verdict, Verdict::kStale);
  EXPECT_EQ(f.owner, "a");
  EXPECT_EQ(f.range_begin, kWs + 0x100);
  EXPECT_EQ(f.range_size, 0x100U);
  // At capture: the gap is the worst part.
  const Report at_capture =
      check(one_op(kWs + 0x100, 0x300, spans, {alloc}, {later}), {"capture", "", {}});
  const Finding& gap = only_finding(at_capture);
  EXPECT_EQ(gap.verdict, Verdict::kUnregistered);
  EXPECT_EQ(gap.range_begin, kWs + 0x200);
  EXPECT_EQ(gap.range_size, 0x100U);
}

TEST(RangeRule, CopiesAndKernelOperandsAreRangesAndInPlaceOpsReadAndWrite) {
  Snapshot snapshot = one_op(kWs, 0x10, {make_span(kWs, 0x100, OwnerKind::kBuffer, "b")},
                             {make_alloc(kWs, 0x1000, 1, "site")});
  Node& op = snapshot.graphs[0].nodes[0];
  op.operands = {{"reads[0]", kWs + 0xf0, 0x20, Access::kRead},
                 {"writes[0]", kWs + 0xf0, 0x20, Access::kWrite}};
  Node copy;
  copy.id = 5;
  copy.type = NodeType::kMemcpy;
  copy.operands = {{"src", kWs, 0x100, Access::kRead}, {"dst", kWs + 0x80, 0x100, Access::kWrite}};
  snapshot.graphs[0].nodes.push_back(copy);
  Node tma = kernel_using(6, 0);
  tma.operands = {{"param[1]+0:tensor_map", kWs + 0x40, 0x100, Access::kUnknown}};
  snapshot.graphs[0].nodes.push_back(tma);
  const Report report = check(snapshot);
  ASSERT_EQ(report.findings.size(), 4U);
  EXPECT_EQ(report.summary.references, 5U);  // the copy's src stays inside the buffer
  EXPECT_EQ(report.findings[0].access, Access::kReadWrite);
  EXPECT_EQ(report.findings[1].access, Access::kReadWrite);
  EXPECT_EQ(report.findings[0].range_begin, kWs + 0x100);
  EXPECT_EQ(report.findings[0].range_size, 0x10U);
  EXPECT_EQ(report.findings[2].operand, "dst");
  EXPECT_EQ(report.findings[2].access, Access::kWrite);
  EXPECT_EQ(report.findings[2].range_size, 0x80U);
  EXPECT_EQ(report.findings[3].operand, "param[1]+0:tensor_map");
  EXPECT_EQ(report.findings[3].range_begin, kWs + 0x100);
  EXPECT_EQ(report.findings[3].range_size, 0x40U);
  // The text report heads non-kernel findings by node type and shows the access and range.
  const std::string text = to_text(report);
  EXPECT_THAT(text, HasSubstr("\nop aten::mm: 2 findings in 1 owner\n"));
  EXPECT_THAT(text, HasSubstr("\nmemcpy node: 1 finding in 1 owner\n"));
  EXPECT_THAT(text, HasSubstr("\nkernel gemm: 1 finding in 1 owner\n"));
  EXPECT_THAT(text, HasSubstr("e.g.   0x7f00001000f0 read-write, bytes 0x7f0000100100.."
                              "0x7f0000100110 (16 bytes): inside allocation"));
  EXPECT_THAT(text, Not(HasSubstr("<memcpy node>")));
}

TEST(RangeRule, GraphRangesSplitAnOperandToo) {
  // Half of the read lies in the graph's own mem_alloc range, half in freed memory.
  Snapshot snapshot = one_op(0x900000, 0x200, {}, {}, {{"after", {}, {}}});
  Node alloc;
  alloc.id = 9;
  alloc.type = NodeType::kMemAlloc;
  alloc.operands = {{"alloc", 0x900000, 0x100, Access::kWrite}};
  snapshot.graphs[0].nodes.push_back(alloc);
  const Report report = check(snapshot);
  const Finding& f = only_finding(report);
  EXPECT_EQ(f.verdict, Verdict::kDangling);
  EXPECT_EQ(f.range_begin, 0x900100U);
  EXPECT_EQ(f.range_size, 0x100U);
}

// --- 3. End pointers --------------------------------------------------------------------------

TEST(EndPointerRule, BeginAndEndPairInsideASegmentAreBothTheSpans) {
  const Span w = make_span(kWs + 0x100, 0x100, OwnerKind::kParameter, "w");
  const Allocation segment = make_alloc(kWs, 0x1000, 1, "segment");
  Snapshot snapshot = one_reference(w.begin, {w}, {segment});
  snapshot.graphs[0].nodes.push_back(kernel_using(1, w.end()));
  const Report report = check(snapshot);
  EXPECT_EQ(report.summary.references, 2U);
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 2U);
  EXPECT_TRUE(report.findings.empty());
  // After a rebinding reload both words are stale, the end pointer as a word of "w".
  snapshot.epochs.push_back(
      {"after", {make_span(kWs + 0x800, 0x100, OwnerKind::kParameter, "w")}, {segment}});
  const Report after = check(snapshot);
  ASSERT_EQ(after.findings.size(), 2U);
  EXPECT_EQ(after.findings[1].address, w.end());
  EXPECT_EQ(after.findings[1].verdict, Verdict::kStale);
  EXPECT_EQ(after.findings[1].owner, "w");
}

TEST(EndPointerRule, AnEndPointerOutsideEveryAllocationIsStillAReference) {
  const Span w = make_span(kP, 0x100, OwnerKind::kBuffer, "w");
  EXPECT_EQ(only_verdict(check(one_reference(w.end(), {w}, {}))), Verdict::kRegistered);
}

TEST(EndPointerRule, WhereAnotherSpanBeginsTheWordIsThatSpans) {
  const Span w = make_span(kWs + 0x100, 0x100, OwnerKind::kParameter, "w");
  const Span next = make_span(w.end(), 0x100, OwnerKind::kRuntime, "kv");
  EXPECT_EQ(only_verdict(
                check(one_reference(w.end(), {w, next}, {make_alloc(kWs, 0x1000, 1, "segment")}))),
            Verdict::kRuntime);
  // An allocation begins there (the next block of the segment): the word is its begin.
  EXPECT_EQ(only_verdict(check(one_reference(w.end(), {w},
                                             {make_alloc(kWs, 0x1000, 1, "segment"),
                                              make_alloc(w.end(), 0x40, 1, "derived.alpha")}))),
            Verdict::kUnregistered);
  // No span ends there: one past an allocation is inside the next one, or nothing.
  EXPECT_EQ(only_verdict(check(one_reference(
                kWs + 0x1000, {},
                {make_alloc(kWs, 0x1000, 1, "a"), make_alloc(kWs + 0x1000, 0x100, 1, "b")}))),
            Verdict::kUnregistered);
}

// --- 4. An allowlist that must shrink ----------------------------------------------------------

TEST(AllowRule, GlobUseDoesNotDependOnTheEpochChecked) {
  // Allowed at capture, dangling after the free: the glob names the reference's owner in
  // the capture epoch, so it is in use whichever epoch is checked.
  Snapshot snapshot = one_reference(kWs, {}, {make_alloc(kWs, 0x200, 1, "marlin.workspace")},
                                    {{"after_free", {}, {}}});
  snapshot.allow = {"marlin.*", "fixed.site"};
  const Report at_capture = check(snapshot, {"capture", "", {}});
  EXPECT_EQ(only_verdict(at_capture), Verdict::kAllowed);
  const Report after = check(snapshot);
  EXPECT_EQ(only_verdict(after), Verdict::kDangling);
  EXPECT_EQ(at_capture.stale_allow, std::vector<std::string>{"fixed.site"});
  EXPECT_EQ(after.stale_allow, std::vector<std::string>{"fixed.site"});
}

TEST(AllowRule, StaleGlobsFailTheCheckUnlessKept) {
  Snapshot snapshot = one_reference(kP, {make_span(kP, 0x100, OwnerKind::kBuffer, "rope")}, {});
  snapshot.allow = {"rope*"};
  CheckOptions options;
  Report report = check(snapshot, options);
  EXPECT_FALSE(report.has_findings());
  EXPECT_EQ(report.stale_allow, std::vector<std::string>{"rope*"});  // registered: fixed
  EXPECT_TRUE(report.failed());
  EXPECT_THAT(to_text(report), HasSubstr("findings: 0 (the check fails: 1 stale allowlist entry)"));
  EXPECT_THAT(to_json(report, -1), HasSubstr(R"("stale_allow_policy":"fail")"));
  options.stale_allow = StaleAllowPolicy::kKeep;
  report = check(snapshot, options);
  EXPECT_EQ(report.stale_allow, std::vector<std::string>{"rope*"});
  EXPECT_FALSE(report.failed());
  EXPECT_THAT(to_text(report), HasSubstr("kept on purpose: --keep-stale-allow"));
  EXPECT_EQ(parse_report(to_json(report)), report);
}

}  // namespace
}  // namespace graphcheck
