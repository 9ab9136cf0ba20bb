// `graphcheck report DIR` end to end on a watch folder of two worker ranks: check points
// grouped by label, owners compared across ranks (one found on rank 0 only is flagged),
// notes, stale globs, census findings, reports moved into the folder or missing, exit codes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "unit/watch_folder_fixture.h"

namespace graphcheck::testing_cli {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

using CliReportTest = WatchFolderTest;

TEST_F(CliReportTest, TextGroupsByCheckPointAndFlagsAnOwnerFoundOnOneRankOnly) {
  write_tensor_parallel_folder();
  const RunResult result = run({"report", folder().string()});
  EXPECT_EQ(result.status, 1) << result.err;
  EXPECT_EQ(result.err, "");
  const std::string& out = result.out;
  EXPECT_THAT(out, StartsWith("graphcheck watch summary: " + folder().string() +
                              "\n4 check points from 2 processes, 2 labels\n"));
  EXPECT_THAT(out, HasSubstr("\ncheck point \"capture\" at 2026-12-02 04:18:03 UTC: findings on "
                             "2 of 2 processes\n"
                             "  worker rank 0  pid 25013  #1  592 references: unregistered 3\n"));
  EXPECT_THAT(out, HasSubstr("  worker rank 1  pid 25014  #1  592 references: unregistered 2\n"));
  EXPECT_LT(out.find("check point \"capture\""), out.find("check point \"after_wake\""));
  EXPECT_THAT(out, HasSubstr("\n      report: 20261202T041803"));
  EXPECT_THAT(out, HasSubstr("Z-worker-rank-0-p25013-001-capture.report.txt\n"));
  EXPECT_THAT(out,
              HasSubstr("  findings by owner (2):\n    UNREGISTERED " + std::string(kWorkspace) +
                        ": 4 references, on worker rank 0, worker rank 1\n"));
  EXPECT_THAT(out,
              HasSubstr("    UNREGISTERED " + std::string(kScale) +
                        ": 1 reference, found on worker rank 0 only (not on worker rank 1)\n"));
  EXPECT_THAT(out, HasSubstr("    LOST " + std::string(kRope) +
                             ": 2 references, on worker rank 0, worker rank 1\n"));
  EXPECT_EQ(occurrences(out, kTwinNote), 1U) << out;  // both ranks noted it: listed once
  EXPECT_THAT(out, HasSubstr("\n  " + std::string(kStaleGlob) +
                             ": stale at capture on worker rank 0, worker rank 1\n"));
  EXPECT_EQ(occurrences(out, "report missing"), 0U);
  // The total counts an owner again at each check point that found it: say how many owners.
  EXPECT_THAT(out, EndsWith("\n\nover 2 check points: 3 distinct owners (an owner found at "
                            "several check points is counted at each)\nfindings: 7 (the check "
                            "fails: 1 stale allowlist entry)\n"));
}

TEST_F(CliReportTest, JsonNamesEveryOwnerWithItsRolesAndWhetherItIsEverywhere) {
  write_tensor_parallel_folder();
  const RunResult result = run({"report", folder().string(), "--format", "json"});
  EXPECT_EQ(result.status, 1) << result.err;
  const Json json = Json::parse(result.out);
  EXPECT_EQ(json["format"], "graphcheck-report-summary");
  EXPECT_EQ(json["version"], 1);
  EXPECT_EQ(json["dir"], folder().string());
  EXPECT_EQ(json["findings"], 7);
  ASSERT_EQ(json["checkpoints"].size(), 2U);
  const Json& capture = json["checkpoints"][0];
  EXPECT_EQ(capture["label"], "capture");
  ASSERT_EQ(capture["processes"].size(), 2U);
  const Json& rank0 = capture["processes"][0];
  EXPECT_EQ(rank0["role"], "worker rank 0");
  EXPECT_EQ(rank0["pid"], kRank0);
  EXPECT_EQ(rank0["seq"], 1);
  EXPECT_DOUBLE_EQ(rank0["time"].get<double>(), kCaptureTime);
  EXPECT_EQ(rank0["summary"]["unregistered"], 3);
  EXPECT_EQ(rank0["summary"]["references"], 592);
  EXPECT_THAT(rank0["report"].get<std::string>(), EndsWith("-p25013-001-capture.report.json"));
  ASSERT_EQ(capture["owners"].size(), 2U);
  EXPECT_EQ(capture["owners"][0], (Json{{"verdict", "unregistered"},
                                        {"owner", kWorkspace},
                                        {"references", 4},
                                        {"roles", {"worker rank 0", "worker rank 1"}},
                                        {"everywhere", true}}));
  EXPECT_EQ(capture["owners"][1], (Json{{"verdict", "unregistered"},
                                        {"owner", kScale},
                                        {"references", 1},
                                        {"roles", {"worker rank 0"}},
                                        {"everywhere", false}}));
  EXPECT_EQ(capture["notes"], Json({kTwinNote}));
  EXPECT_EQ(json["checkpoints"][1]["owners"][0]["verdict"], "lost");
  EXPECT_EQ(json["checkpoints"][1]["owners"][0]["everywhere"], true);
  EXPECT_EQ(json["stale_allow"],
            Json::parse(R"([{"glob": "model.layers.*.self_attn.mla_attn.W_UV", "where":
                [{"label": "capture", "roles": ["worker rank 0", "worker rank 1"]}]}])"));
  EXPECT_EQ(json["missing_reports"], Json::array());
}

TEST_F(CliReportTest, CleanFolderExitsZeroAndOutputGoesToTheFile) {
  add(on_rank(0, "capture", 1, make_report("capture", {})));
  add(on_rank(1, "capture", 1, make_report("capture", {})));
  write_index();
  const RunResult result = run({"report", folder().string()});
  EXPECT_EQ(result.status, 0) << result.out << result.err;
  EXPECT_THAT(result.out, HasSubstr(": no findings on 2 processes\n"));
  EXPECT_THAT(result.out,
              HasSubstr("  worker rank 1  pid 25014  #1  592 references, no findings\n"));
  EXPECT_THAT(result.out, EndsWith("\nfindings: 0\n"));

  // The folder's index is an input: --output cannot replace it.
  const std::string index = (folder() / "index.jsonl").string();
  const std::string indexed = read_text(index);
  const RunResult clobber = run({"report", folder().string(), "--output", index});
  EXPECT_EQ(clobber.status, 2);
  EXPECT_THAT(clobber.err, HasSubstr("--output " + index + ": is the folder's index"));
  EXPECT_EQ(read_text(index), indexed);

  const fs::path output = dir_ / "summary.json";
  const RunResult to_file =
      run({"report", folder().string(), "--format=json", "--output", output.string()});
  EXPECT_EQ(to_file.status, 0) << to_file.err;
  EXPECT_EQ(to_file.out, "");
  EXPECT_EQ(Json::parse(read_text(output))["findings"], 0);
}

TEST_F(CliReportTest, OwnersThatDifferOnlyInTheirLayerNumberAreOneLine) {
  // One site per layer: a model of 32 layers listed 32 lines per site, where the text report
  // compacts the family. Rank 1 lacks layer 3's: that row stays on a line of its own.
  std::vector<Finding> rank0;
  std::vector<Finding> rank1;
  for (std::uint64_t layer = 0; layer < 4; ++layer) {
    const std::string scale = "model.layers." + std::to_string(layer) + ".mlp.alpha";
    rank0.push_back(finding(Verdict::kUnregistered, scale, layer));
    rank0.push_back(finding(Verdict::kUnregistered, scale, layer + 10));
    if (layer != 3) {
      rank1.push_back(finding(Verdict::kUnregistered, scale, layer));
    }
  }
  add(on_rank(0, "capture", 1, make_report("capture", rank0)));
  add(on_rank(1, "capture", 1, make_report("capture", rank1)));
  write_index();
  const RunResult result = run({"report", folder().string()});
  EXPECT_EQ(result.status, 1) << result.err;
  EXPECT_THAT(result.out,
              HasSubstr("  findings by owner (4):\n"
                        "    UNREGISTERED model.layers.{0-2}.mlp.alpha: 3 owners, 9 references, "
                        "on worker rank 0, worker rank 1\n"
                        "    UNREGISTERED model.layers.3.mlp.alpha: 2 references, found on worker "
                        "rank 0 only (not on worker rank 1)\n"));
  // The JSON keeps a row per owner.
  const Json json = Json::parse(run({"report", folder().string(), "--format=json"}).out);
  EXPECT_EQ(json["checkpoints"][0]["owners"].size(), 4U);
}

TEST_F(CliReportTest, OneProcessCapturingGraphsOneAtATimeIsOneProcessNotMany) {
  // A process that captures its graphs one at a time has a check point per graph under one
  // label: "no findings on 3 processes" was read for one (a review's finding).
  for (std::uint64_t seq = 1; seq <= 3; ++seq) {
    add(on_rank(0, "capture", seq, make_report("capture", {})));
  }
  add(on_rank(0, "after_wake", 4, make_report("after_wake", {})));
  add(on_rank(0, "after_wake", 5, make_report("after_wake", {finding(Verdict::kLost, kScale, 1)})));
  write_index();
  const RunResult result = run({"report", folder().string()});
  EXPECT_EQ(result.status, 1) << result.err;
  EXPECT_THAT(result.out, HasSubstr("\n5 check points from 1 process, 2 labels\n"));
  EXPECT_THAT(result.out, HasSubstr(": no findings at 3 check points of 1 process\n"));
  EXPECT_THAT(result.out, HasSubstr(": findings at 1 of 2 check points (1 process)\n"));
  EXPECT_THAT(result.out, Not(HasSubstr("processes")));
}

TEST_F(CliReportTest, AMissingReportsProcessIsNamedWithItsPidOnce) {
  // As its row is: a process without a role is "pid N", one of two pids sharing a role is
  // "role (pid N)"; neither gets its pid a second time.
  CheckPoint roleless = on_rank(0, "capture", 1, make_report("capture", {}));
  roleless.role = "";
  add(roleless)["files"] = Json::object();
  add(on_rank(0, "capture", 2, make_report("capture", {})))["files"] = Json::object();
  CheckPoint shared = on_rank(0, "capture", 3, make_report("capture", {}));
  shared.pid = kRank1;
  add(shared)["files"] = Json::object();
  write_index();
  const std::string out = run({"report", folder().string()}).out;
  EXPECT_THAT(out, HasSubstr("  capture on pid 25013 (#1): the index line names no report"));
  EXPECT_THAT(out, HasSubstr("  capture on worker rank 0 (pid 25013) (#2): the index line"));
  EXPECT_THAT(out, HasSubstr("  capture on worker rank 0 (pid 25014) (#3): the index line"));
  EXPECT_THAT(out, Not(HasSubstr(") (pid")));
}

TEST_F(CliReportTest, StaleGlobsFailUnlessKeptAndRoleLessProcessesAreNamedByPid) {
  CheckPoint point = on_rank(0, "capture", 1, make_report("capture", {}, {kStaleGlob}));
  point.role = "";
  add(point);
  write_index();
  const RunResult failed = run({"report", folder().string()});
  EXPECT_EQ(failed.status, 1) << failed.err;
  // Named by its pid once (issue 33: the row read "pid 25013  pid 25013").
  EXPECT_THAT(failed.out, HasSubstr("\n  pid 25013  #1  592 references, no findings\n"));
  EXPECT_THAT(failed.out, Not(HasSubstr("pid 25013  pid 25013")));
  EXPECT_THAT(failed.out, HasSubstr(": stale at capture on pid 25013\n"));
  const RunResult kept = run({"report", folder().string(), "--keep-stale-allow"});
  EXPECT_EQ(kept.status, 0) << kept.err;
  EXPECT_THAT(kept.out, HasSubstr("kept on purpose: --keep-stale-allow"));
  EXPECT_THAT(kept.out, EndsWith("\nfindings: 0\n"));
}

TEST_F(CliReportTest, CensusFindingsAreOwnersByPathAcrossRanks) {
  // The census check point at load: no graphs, an empty report, the findings in the index.
  Report empty;
  empty.epoch = "load";
  empty.baseline = "load";
  CheckPoint rank0 = on_rank(0, "load", 1, empty);
  rank0.census = {"layers.0.mlp.experts.w13_scale_tmp: (8, 4) float32",
                  "model.rope_cache: (64,) float32"};
  CheckPoint rank1 = on_rank(1, "load", 1, empty);
  rank1.census = {"layers.0.mlp.experts.w13_scale_tmp: (8, 2) float32"};  // its shard
  add(rank0);
  add(rank1);
  write_index();
  const RunResult text = run({"report", folder().string()});
  EXPECT_EQ(text.status, 1) << text.err;
  EXPECT_THAT(text.out,
              HasSubstr("  worker rank 0  pid 25013  #1  0 references: unregistered (census) 2\n"));
  EXPECT_THAT(text.out,
              HasSubstr("    CENSUS layers.0.mlp.experts.w13_scale_tmp: on worker rank 0, "
                        "worker rank 1\n"
                        "    CENSUS model.rope_cache: found on worker rank 0 only (not on "
                        "worker rank 1)\n"));
  EXPECT_THAT(text.out, EndsWith("\nfindings: 3\n"));
  const Json json = Json::parse(run({"report", folder().string(), "--format", "json"}).out);
  EXPECT_EQ(json["checkpoints"][0]["owners"][1], (Json{{"verdict", "census"},
                                                       {"owner", "model.rope_cache"},
                                                       {"references", 1},
                                                       {"roles", {"worker rank 0"}},
                                                       {"everywhere", false}}));
}

TEST_F(CliReportTest, ReportMovedIntoTheFolderIsFoundByItsFileName) {
  // The folder was copied off the server: the absolute paths of the index point nowhere.
  Json& line =
      add(on_rank(0, "capture", 1, make_report("capture", {finding(Verdict::kStale, kScale, 9)})));
  const std::string name = fs::path(line["files"]["report_json"].get<std::string>()).filename();
  line["files"]["report_json"] = "/srv/old-host/gc/" + name;
  Json& relative = add(on_rank(1, "capture", 1, make_report("capture", {})));
  relative["files"]["report_json"] =
      "graphcheck-reports/" +
      fs::path(relative["files"]["report_json"].get<std::string>()).filename().string();
  write_index();
  const RunResult result = run({"report", folder().string(), "--format", "json"});
  EXPECT_EQ(result.status, 1) << result.err;
  const Json json = Json::parse(result.out);
  EXPECT_EQ(json["missing_reports"], Json::array());
  EXPECT_EQ(json["checkpoints"][0]["processes"][0]["report"], (folder() / name).string());
  EXPECT_EQ(json["checkpoints"][0]["owners"][0]["verdict"], "stale");
  EXPECT_EQ(json["checkpoints"][0]["owners"][0]["roles"], Json({"worker rank 0"}));
  EXPECT_EQ(json["checkpoints"][0]["owners"][0]["everywhere"], false);
}

TEST_F(CliReportTest, MissingReportsAreListedNotFatal) {
  add(on_rank(0, "capture", 1,
              make_report("capture", {finding(Verdict::kUnregistered, kScale, 1)})));
  Json& gone = add(on_rank(1, "capture", 1,
                           make_report("capture", {finding(Verdict::kUnregistered, kScale, 1)})));
  fs::remove(gone["files"]["report_json"].get<std::string>());
  Json& unwritten = add(on_rank(0, "after_wake", 2, make_report("after_wake", {})));
  unwritten["files"] = Json::object();
  write_index();

  const RunResult text = run({"report", folder().string()});
  EXPECT_EQ(text.status, 1) << text.err;  // the findings; the missing reports do not fail
  EXPECT_THAT(text.out, HasSubstr("  worker rank 1  pid 25014  #1  592 references: unregistered 1 "
                                  "(report missing: counts from index.jsonl)\n"));
  EXPECT_THAT(text.out, HasSubstr("\nreports missing (2): "));
  EXPECT_THAT(text.out,
              HasSubstr("  capture on worker rank 1 (pid 25014, #1): " +
                        gone["files"]["report_json"].get<std::string>() + " not found\n"));
  EXPECT_THAT(text.out, HasSubstr("  after_wake on worker rank 0 (pid 25013, #2): the index line "
                                  "names no report"));
  // Only rank 0's report was read: its owner is not flagged as found there only.
  EXPECT_THAT(text.out, HasSubstr("  findings by owner (1; no report from worker rank 1):\n"
                                  "    UNREGISTERED lm_head.quant_method.scale: 1 reference, on "
                                  "worker rank 0\n"));
  EXPECT_THAT(text.out, EndsWith("\nfindings: 2\n"));

  const Json json = Json::parse(run({"report", folder().string(), "--format", "json"}).out);
  ASSERT_EQ(json["missing_reports"].size(), 2U);
  EXPECT_EQ(json["missing_reports"][0]["label"], "capture");
  EXPECT_EQ(json["missing_reports"][0]["role"], "worker rank 1");
  EXPECT_EQ(json["missing_reports"][0]["pid"], kRank1);
  EXPECT_THAT(json["missing_reports"][0]["reason"].get<std::string>(), HasSubstr("not found"));
  EXPECT_EQ(json["checkpoints"][0]["processes"][1]["report"], nullptr);
  EXPECT_EQ(json["checkpoints"][0]["processes"][1]["summary"]["unregistered"], 1);
}

}  // namespace
}  // namespace graphcheck::testing_cli
