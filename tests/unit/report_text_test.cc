// The human report (to_text): the list of fixes it starts with (each sentence once), grouping,
// compaction of node and argument lists, and the counts on the last lines.
#include <gmock/gmock.h>
#include <graphcheck/report.h>
#include <gtest/gtest.h>

#include <string>

namespace graphcheck {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

Finding kernel_finding(std::uint64_t node, std::string kernel, std::string owner, Verdict verdict,
                       std::uint32_t param, std::uint32_t offset) {
  Finding finding;
  finding.graph = 1;
  finding.node = node;
  finding.kernel = std::move(kernel);
  finding.param = param;
  finding.offset = offset;
  finding.address = 0x7f3a00000000 + node;
  finding.verdict = verdict;
  finding.owner = std::move(owner);
  finding.detail = "detail of node " + std::to_string(node);
  finding.fix = "register it with set_derived_buffer";
  return finding;
}

Report report_with(std::vector<Finding> findings) {
  Report report;
  report.epoch = "after_sleep";
  report.baseline = "capture";
  report.summary.graphs = 1;
  report.summary.nodes = 40;
  report.summary.references = 100;
  report.summary.counts[static_cast<std::size_t>(Verdict::kRegistered)] = 100 - findings.size();
  for (const Finding& finding : findings) {
    ++report.summary.counts[static_cast<std::size_t>(finding.verdict)];
  }
  report.findings = std::move(findings);
  return report;
}

TEST(TextReport, GroupsByKernelThenOwnerFamilyAndCompactsNodesAndOffsets) {
  Finding stale = kernel_finding(20, "gemm", "layers.7.w", Verdict::kStale, 1, 0);
  stale.fix = "reload in place with copy_";
  Report report = report_with({
      kernel_finding(3, "gemm", "layers.0.alpha", Verdict::kLost, 0, 40),
      kernel_finding(4, "gemm", "layers.0.alpha", Verdict::kLost, 0, 40),
      kernel_finding(5, "gemm", "layers.0.alpha", Verdict::kLost, 2, 0),
      kernel_finding(9, "gemm", "layers.0.alpha", Verdict::kLost, 0, 48),
      kernel_finding(6, "rope", "rope_cache", Verdict::kLost, 3, 0),
      kernel_finding(12, "gemm", "layers.1.alpha", Verdict::kLost, 0, 40),
      kernel_finding(13, "gemm", "layers.1.beta", Verdict::kLost, 0, 56),
      stale,
  });
  std::string text = to_text(report);
  EXPECT_THAT(text, HasSubstr("graphcheck report: epoch \"after_sleep\" checked against "
                              "\"capture\"\n1 graph, 40 nodes, 100 references\n"));
  // First the fixes, each sentence once, most urgent first (the stale one), with the owners
  // each covers (families compacted) and their references.
  EXPECT_THAT(text, HasSubstr("\nto fix (2), most urgent first:\n"
                              "  fix 1: reload in place with copy_\n"
                              "         1 allocation label, 1 reference: layers.7.w\n"
                              "  fix 2: register it with set_derived_buffer\n"
                              "         4 allocation labels, 7 references: layers.{0-1}.alpha, "
                              "rope_cache, layers.1.beta\n"));
  // Sections in order of first appearance; groups by precedence (stale before lost); one
  // group for the alpha of layers 0 and 1; each group names its fix by number only.
  EXPECT_THAT(text, HasSubstr("\nkernel gemm: 7 findings in 4 owners\n"
                              "  STALE layers.7.w (allocation label): 1 reference (fix 1)\n"
                              "      where: graph 1 node 20 | param 1 @ +0\n"
                              "      e.g.   0x7f3a00000014: detail of node 20\n"
                              "  LOST layers.{0-1}.alpha (allocation label): 5 references (fix 2)\n"
                              "      where: graph 1 nodes 3-5, 9, 12 | param 0 @ +40,+48, "
                              "param 2 @ +0\n"
                              "      e.g.   0x7f3a00000003: detail of node 3\n"
                              "  LOST layers.1.beta (allocation label): 1 reference (fix 2)\n"
                              "      where: graph 1 node 13 | param 0 @ +56\n"
                              "      e.g.   0x7f3a0000000d: detail of node 13\n"
                              "\nkernel rope: 1 finding in 1 owner\n"
                              "  LOST rope_cache (allocation label): 1 reference (fix 2)\n"));
  EXPECT_LT(text.find("kernel gemm"), text.find("kernel rope"));
  // Each fix sentence appears once in the whole report (issue 33).
  EXPECT_EQ(text.find("register it with set_derived_buffer"),
            text.rfind("register it with set_derived_buffer"));
  EXPECT_EQ(text.find("reload in place with copy_"), text.rfind("reload in place with copy_"));
  // The verdicts that occur, findings most urgent first; no zeros.
  EXPECT_THAT(text, HasSubstr("\nreferences: 100 (stale 1, lost 7, registered 92)\nfindings: 8\n"));
}

TEST(TextReport, GraphsWithTheSameNodesAreOneEntryOfTheWhereLine) {
  // An engine's graphs of one model, one per batch size: graphs 2-4 read the owner at the
  // same nodes, graph 1 at others. One entry per node list, not one per graph.
  std::vector<Finding> findings;
  for (std::uint64_t graph = 1; graph <= 4; ++graph) {
    for (const std::uint64_t node : {graph == 1 ? std::uint64_t{30} : std::uint64_t{31}, 160UL}) {
      Finding finding = kernel_finding(node, "gemm", "layers.0.scale", Verdict::kLost, 0, 8);
      finding.graph = graph;
      findings.push_back(finding);
    }
  }
  const std::string text = to_text(report_with(findings));
  EXPECT_THAT(text, HasSubstr("      where: graph 1 nodes 30, 160; graphs 2-4 nodes 31, 160 | "
                              "param 0 @ +8\n"));
}

TEST(TextReport, NamesOwnerKindsNodeKindsOperandsAndMissingOwners) {
  Finding stale = kernel_finding(1, "gemm", "layers.7.qkv.weight", Verdict::kStale, 0, 0);
  stale.owner_kind = OwnerKind::kParameter;
  stale.fix = "reload in place with copy_, not by rebinding";
  Finding copy;
  copy.graph = 2;
  copy.node = 8;
  copy.node_type = NodeType::kMemcpy;
  copy.operand = "src";
  copy.address = 0x10;
  copy.verdict = Verdict::kDangling;
  std::string text = to_text(report_with({stale, copy}));
  EXPECT_THAT(text, HasSubstr("  STALE layers.7.qkv.weight (parameter): 1 reference (fix 1)\n"));
  EXPECT_THAT(text, HasSubstr("  fix 1: reload in place with copy_, not by rebinding\n"
                              "         1 parameter, 1 reference: layers.7.qkv.weight\n"
                              "  fix 2: (no fix given)\n"
                              "         1 owner, 1 reference: <no owner or label>\n"));
  EXPECT_THAT(text, HasSubstr("\nmemcpy node: 1 finding in 1 owner\n"
                              "  DANGLING <no owner or label>: 1 reference (fix 2)\n"
                              "      where: graph 2 node 8 | operand src\n"
                              "      e.g.   0x10\n"));
}

TEST(TextReport, WithoutFindingsSaysSoAndListsWarningsAndStaleGlobs) {
  Report report = report_with({});
  report.baseline.clear();
  report.warnings = {"0x1000-0x2000: covered by a (parameter) and b (buffer); resolved as a"};
  report.stale_allow = {"layers.*.W_UV"};
  std::string text = to_text(report);
  EXPECT_THAT(text, HasSubstr("checked against each graph's capture epoch\n"));
  EXPECT_THAT(text, HasSubstr("\nno findings"));
  EXPECT_THAT(text, Not(HasSubstr("kernel ")));
  EXPECT_THAT(text, HasSubstr("overlap warnings (1)"));
  EXPECT_THAT(text, HasSubstr("\n  0x1000-0x2000: covered by a (parameter)"));
  EXPECT_THAT(text, HasSubstr("stale allowlist entries (1)"));
  EXPECT_THAT(text, HasSubstr("\n  layers.*.W_UV\n"));
  EXPECT_TRUE(
      text.ends_with("\nreferences: 100 (registered 100)\n"
                     "findings: 0 (the check fails: 1 stale allowlist entry)\n"))
      << text;
  report.stale_allow_policy = StaleAllowPolicy::kKeep;
  EXPECT_TRUE(to_text(report).ends_with("(registered 100)\nfindings: 0\n"));
  report.summary = Summary{};
  EXPECT_TRUE(to_text(report).ends_with("\nreferences: 0\nfindings: 0\n")) << to_text(report);
}

TEST(TextReport, AStaleGlobSaysWhereAWiderGlobWouldHaveMatched) {
  Report report = report_with({kernel_finding(3, "gemm", "layers.0.mlp.quant_method.packed",
                                              Verdict::kUnregistered, 1, 0)});
  report.stale_allow = {"layers.*.quant_method.packed", "never.this"};
  const std::string text = to_text(report);
  EXPECT_THAT(text, HasSubstr("\n  layers.*.quant_method.packed  ('*' stays within one dotted "
                              "name: layers.**.quant_method.packed would match 1 owner(s) with "
                              "findings)\n"));
  EXPECT_THAT(text, HasSubstr("\n  never.this\n"));  // no slip found: the glob alone
}

// Backends' "not checked: " warnings (the CUPTI backend's unreadable kernels) get their own
// section, apart from the checker's overlap warnings (issue 18 item 3).
TEST(TextReport, AToDoLineCutAtEightGroupsCountsTheRestAsGroups) {
  std::vector<Finding> findings;
  for (std::uint64_t i = 0; i < 10; ++i) {  // ten owners in ten families (no index to fold)
    findings.push_back(kernel_finding(i, "gemm",
                                      "owner_" + std::string(1, static_cast<char>('a' + i)),
                                      Verdict::kUnregistered, 1, 0));
  }
  const std::string text = to_text(report_with(findings));
  EXPECT_THAT(text, HasSubstr("owner_h, and 2 more groups\n")) << text;
  EXPECT_THAT(text, HasSubstr("UNREGISTERED owner_j"));  // named below, in its section
}

TEST(TextReport, NodesNotCheckedAreListedApartFromOverlapWarnings) {
  Report report = report_with({});
  report.warnings = {
      "not checked: graph 40 node 1 (kernel gemm): its arguments could not be "
      "read: kernel gemm: kernelParams[1] is null"};
  const std::string text = to_text(report);
  EXPECT_THAT(text, Not(HasSubstr("overlap warnings")));
  EXPECT_THAT(text, HasSubstr("\nnodes not checked (1): their addresses could not be read"));
  EXPECT_THAT(text, HasSubstr("\n  graph 40 node 1 (kernel gemm): its arguments could not"));
}

// "note: " lines (the CUPTI backend: graphs checked as they were destroyed, or none checked
// at all) are listed as notes, neither overlaps nor unread nodes (issue 18 §1).
TEST(TextReport, NotesAreListedApart) {
  Report report = report_with({});
  report.warnings = {"note: 1 graph was checked as its exec graph was destroyed: graph 9"};
  const std::string text = to_text(report);
  EXPECT_THAT(text, Not(HasSubstr("overlap warnings")));
  EXPECT_THAT(text, Not(HasSubstr("nodes not checked")));
  EXPECT_THAT(text, HasSubstr("\nnotes (1):\n  1 graph was checked as its exec graph was "
                              "destroyed: graph 9\n"));
}

TEST(TextReport, PointerLikeWordsInNoKnownMemoryAreCountedNotJudged) {
  Report report = report_with({});
  report.unattributed.push_back(UnattributedWords{1, 7, "triton_fused", 2, 0x7f0000001000});
  report.unattributed.push_back(UnattributedWords{2, 3, "", 1, 0x7f0000002000});
  const std::string text = to_text(report);
  EXPECT_THAT(text, HasSubstr("pointer-like words in no known memory (3 words in 2 kernel "
                              "nodes): not judged, not findings"));
  EXPECT_THAT(text, HasSubstr("  graph 1 node 7 (kernel triton_fused): 2 words, first "
                              "0x7f0000001000\n"));
  EXPECT_THAT(text, HasSubstr("  graph 2 node 3 (kernel ?): 1 word, first 0x7f0000002000\n"));
  EXPECT_THAT(text, HasSubstr("no findings"));
  EXPECT_THAT(to_text(report_with({})), Not(HasSubstr("pointer-like")));
}

TEST(TextReport, ManyNodesWithUnattributedWordsAreCutWithACount) {
  Report report = report_with({});
  for (std::uint64_t node = 0; node < 25; ++node) {
    report.unattributed.push_back(UnattributedWords{1, node, "k", 1, 0x7f0000000000 + node});
  }
  const std::string text = to_text(report);
  EXPECT_THAT(text, HasSubstr("graph 1 node 19 (kernel k)"));
  EXPECT_THAT(text, Not(HasSubstr("graph 1 node 20 (kernel k)")));
  EXPECT_THAT(text, HasSubstr("  ... and 5 more nodes (the JSON report lists every one)\n"));
}

}  // namespace
}  // namespace graphcheck
