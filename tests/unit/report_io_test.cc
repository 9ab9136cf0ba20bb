// Report JSON (format version 1): the writer's layout and the reader, which round-trips it.
#include <gmock/gmock.h>
#include <graphcheck/error.h>
#include <graphcheck/report.h>
#include <gtest/gtest.h>

#include <string>

namespace graphcheck {
namespace {

using ::testing::HasSubstr;
using ::testing::ThrowsMessage;

Report sample_report() {
  Report report;
  report.epoch = "after_wake";
  report.baseline = "capture";
  report.summary.graphs = 1;
  report.summary.nodes = 5;
  report.summary.references = 9;
  report.summary.counts = {4, 1, 1, 0, 1, 1, 0, 1, 0};
  Finding kernel;
  kernel.graph = 1;
  kernel.node = 0;
  kernel.node_type = NodeType::kKernel;
  kernel.kernel = "gemm_kernel";
  kernel.param = 0;
  kernel.offset = 8;
  kernel.address = 0x7f3a00000000;
  kernel.verdict = Verdict::kStale;
  kernel.owner = "layers.0.mlp.weight";
  kernel.owner_kind = OwnerKind::kParameter;
  kernel.detail = "moved to 0x7f3c00000000 after capture";
  kernel.fix = "reload in place with copy_, not by rebinding";
  Finding op;
  op.graph = 1;
  op.node = 4;
  op.node_type = NodeType::kOp;
  op.kernel = "aten::mm";
  op.operand = "reads[1]";
  op.address = 0x7f3a00300010;
  op.access = Access::kRead;
  op.range_begin = 0x7f3a00300100;
  op.range_size = 0x700;
  op.verdict = Verdict::kUnregistered;
  op.owner = "layers.0.quant_method.workspace";
  op.detail = "inside an allocation no span covers";
  op.fix = "register it with set_derived_buffer";
  Finding memcpy;
  memcpy.graph = 2;
  memcpy.node = 1;
  memcpy.node_type = NodeType::kMemcpy;
  memcpy.operand = "src";
  memcpy.address = 0x10;
  memcpy.verdict = Verdict::kDangling;
  report.findings = {kernel, op, memcpy};
  report.stale_allow = {"layers.*.old_workspace"};
  report.warnings = {"0x1000-0x2000: covered by a (parameter) and b (buffer); a wins"};
  return report;
}

std::string error_of(const std::string& json) {
  try {
    (void)parse_report(json);
  } catch (const Error& error) {
    return error.what();
  }
  return "<parsed>";
}

TEST(ReportJson, WritesTheDocumentedLayout) {
  const std::string text = to_json(sample_report(), -1);
  EXPECT_THAT(
      text,
      HasSubstr(
          R"({"format":"graphcheck-report","version":1,"epoch":"after_wake","baseline":"capture",)"));
  EXPECT_THAT(
      text,
      HasSubstr(
          R"("summary":{"graphs":1,"nodes":5,"references":9,"registered":4,"runtime":1,"graph":1,"input":0,"allowed":1,"unregistered":1,"dangling":0,"stale":1,"lost":0})"));
  EXPECT_THAT(
      text,
      HasSubstr(
          R"({"graph":1,"node":0,"node_type":"kernel","kernel":"gemm_kernel","param":0,"offset":8,"address":"0x7f3a00000000","verdict":"stale","owner":"layers.0.mlp.weight","owner_kind":"parameter","detail":"moved to 0x7f3c00000000 after capture","fix":"reload in place with copy_, not by rebinding"})"));
  EXPECT_THAT(
      text,
      HasSubstr(
          R"({"graph":1,"node":4,"node_type":"op","kernel":"aten::mm","operand":"reads[1]","address":"0x7f3a00300010","access":"read","range_begin":"0x7f3a00300100","range_size":1792,"verdict":"unregistered","owner":"layers.0.quant_method.workspace","owner_kind":null,)"));
  EXPECT_THAT(
      text,
      HasSubstr(
          R"({"graph":2,"node":1,"node_type":"memcpy","operand":"src","address":"0x10","verdict":"dangling",)"));
  EXPECT_THAT(text, HasSubstr(R"("stale_allow":["layers.*.old_workspace"],"warnings":[")"));
  EXPECT_TRUE(text.ends_with(R"(],"stale_allow_policy":"fail"})")) << text;
  EXPECT_EQ(text.find('\n'), std::string::npos);
  EXPECT_THAT(to_json(sample_report()), HasSubstr("\n  \"epoch\": \"after_wake\",\n"));
}

TEST(ReportJson, AnIndentPastTheWidestIsRefused) {
  // nlohmann's serializer grows its indent buffer once per level: an indent past 1,024 read
  // heap bytes past it, and 2^31 - 1 crashed (a hostile tester's finding).
  EXPECT_THAT(to_json(sample_report(), kMaxJsonIndent), HasSubstr("\"epoch\""));
  for (const int indent : {kMaxJsonIndent + 1, 100000, 2147483647}) {
    EXPECT_THAT([&] { (void)to_json(sample_report(), indent); },
                ::testing::ThrowsMessage<Error>(
                    "to_json: indent " + std::to_string(indent) +
                    " is wider than 64 spaces; pass 0 to 64, or a negative indent for one line"));
  }
}

TEST(ReportJson, RoundTrips) {
  const Report report = sample_report();
  EXPECT_EQ(parse_report(to_json(report)), report);
  EXPECT_EQ(parse_report(to_json(report, -1)), report);
  EXPECT_EQ(parse_report(to_json(Report{})), Report{});
}

TEST(ReportJson, RoundTripsFieldsOutsideTheUsualScheme) {
  Report report;
  Finding odd;
  odd.node_type = NodeType::kMemset;
  odd.kernel = "named";
  odd.param = 3;
  Finding bare;
  bare.node_type = NodeType::kKernel;
  bare.operand = "x";
  report.findings = {odd, bare};
  EXPECT_EQ(parse_report(to_json(report)), report);
  EXPECT_THAT(
      to_json(report, -1),
      HasSubstr(R"("node_type":"kernel","kernel":"","param":null,"offset":null,"operand":"x")"));
}

TEST(ReportJson, InvalidUtf8InNamesIsReplacedNotFatal) {
  Report report;
  report.warnings = {"bad \xff byte"};
  EXPECT_THAT(to_json(report, -1), HasSubstr("bad \xef\xbf\xbd byte"));
}

TEST(ReportJson, ReadsTheDesignExampleWithoutWarnings) {
  const Report report = parse_report(R"({"format": "graphcheck-report", "version": 1,
 "epoch": "after_wake", "baseline": "capture",
 "summary": {"graphs": 1, "nodes": 5, "references": 9,
             "registered": 4, "runtime": 1, "graph": 1, "input": 0, "allowed": 1,
             "unregistered": 1, "dangling": 0, "stale": 1, "lost": 0},
 "findings": [{"graph": 1, "node": 0, "node_type": "kernel", "kernel": "gemm_kernel", "param": 0, "offset": 0,
               "address": "0x7f3a00000000", "verdict": "stale",
               "owner": "layers.0.mlp.weight", "owner_kind": "parameter",
               "detail": "moved to 0x7f3c00000000 after capture", "fix": "..."}],
 "stale_allow": []})");
  EXPECT_EQ(report.summary.count(Verdict::kStale), 1U);
  EXPECT_EQ(report.summary.findings(), 2U);
  ASSERT_EQ(report.findings.size(), 1U);
  EXPECT_EQ(report.findings[0].owner_kind, OwnerKind::kParameter);
  EXPECT_EQ(report.findings[0].param, 0U);
  EXPECT_TRUE(report.warnings.empty());
}

TEST(ReportJson, ErrorsNameTheJsonPath) {
  std::string text = to_json(sample_report(), -1);
  EXPECT_THAT(error_of("{"), HasSubstr("report: not valid JSON: "));
  // A report, a NUL and garbage (a torn write): refused where the NUL is, not read as the report.
  EXPECT_THAT(error_of(text + std::string(1, '\0') + "{{"),
              HasSubstr("report: not valid JSON: a NUL byte at line 1, column " +
                        std::to_string(text.size() + 1)));
  EXPECT_EQ(error_of(R"({"format": "graphcheck-snapshot", "version": 1})"),
            R"(report: format: expected "graphcheck-report", found "graphcheck-snapshot")");
  EXPECT_EQ(error_of(R"({"format": "graphcheck-report", "version": 3})"),
            "report: version: expected 1 (this build reads report format version 1), found 3");
  const auto replaced = [&](const std::string& from, const std::string& to) {
    std::string copy = text;
    copy.replace(copy.find(from), from.size(), to);
    return error_of(copy);
  };
  EXPECT_EQ(replaced(R"("lost":0)", R"("lost":-1)"),
            "report: summary.lost: expected a non-negative integer, found -1");
  EXPECT_EQ(replaced(R"(,"lost":0)", ""), R"(report: summary: missing required key "lost")");
  EXPECT_THAT(replaced(R"("verdict":"stale")", R"("verdict":"bad")"),
              HasSubstr(R"(report: findings[0].verdict: expected a finding verdict)"));
  // A reference that is no finding among the findings, and counts that do not add up to the
  // references (2^64 - 1 wrapped their sum): a summary then passed a row showing "dangling 1".
  EXPECT_THAT(replaced(R"("verdict":"stale")", R"("verdict":"allowed")"),
              HasSubstr(R"(expected a finding verdict ("unregistered", "dangling", "stale" or )"
                        R"("lost"), found "allowed")"));
  EXPECT_THAT(replaced(R"("lost":0)", R"("lost":18446744073709551615)"),
              HasSubstr("report: summary.references: expected the verdict counts' sum (every "
                        "reference has one verdict), found "));
  EXPECT_THAT(replaced(R"("param":0)", R"("param":4294967296)"),
              HasSubstr("report: findings[0].param: expected an integer from 0 to 4294967295, or "
                        "null, found 4294967296"));
  EXPECT_THAT(replaced(R"("address":"0x10")", R"("address":"16")"),
              HasSubstr(R"(report: findings[2].address: expected an address string)"));
  EXPECT_THAT(replaced(R"("owner_kind":"parameter")", R"("owner_kind":"weights")"),
              HasSubstr(R"(report: findings[0].owner_kind: expected an owner kind)"));
  EXPECT_THAT(replaced(R"("access":"read")", R"("access":"rw")"),
              HasSubstr(R"(report: findings[1].access: expected an access ("read", "write", )"));
  EXPECT_EQ(replaced(R"("stale_allow_policy":"fail")", R"("stale_allow_policy":"maybe")"),
            R"(report: stale_allow_policy: expected "fail" or "keep", found "maybe")");
  EXPECT_THAT(replaced(R"("node_type":"op")", R"("node_type":7)"),
              HasSubstr(R"(report: findings[1].node_type: expected a node type)"));
}

}  // namespace
}  // namespace graphcheck
