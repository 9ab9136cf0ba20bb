// A watch folder as a tensor-parallel server writes it with GRAPHCHECK=1 (docs/server.md):
// index.jsonl appended by every worker rank, one report (JSON and text) per check point and
// process, named as the watch names them (python/graphcheck/_watch/output.py). Reports are
// made by the library (Report -> to_json/to_text). For the `graphcheck report` tests.
#ifndef GRAPHCHECK_TESTS_UNIT_WATCH_FOLDER_FIXTURE_H_
#define GRAPHCHECK_TESTS_UNIT_WATCH_FOLDER_FIXTURE_H_

#include <gmock/gmock.h>
#include <graphcheck/report.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <deque>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_paths.h"
#include "unit/cli_run_helpers.h"

namespace graphcheck::testing_cli {

namespace fs = std::filesystem;
using Json = nlohmann::json;

inline constexpr double kCaptureTime = 1796185083.425;  // 2026-12-02 04:18:03.425 UTC
inline constexpr double kWakeTime = kCaptureTime + 61.5;
inline constexpr std::uint64_t kRank0 = 25013;
inline constexpr std::uint64_t kRank1 = 25014;
inline constexpr const char* kWorkspace = "layers.0.mlp.gate_up_proj.quant_method.workspace";
inline constexpr const char* kScale = "lm_head.quant_method.scale";
inline constexpr const char* kRope = "model.rotary_emb.cos_sin_cache";
inline constexpr const char* kStaleGlob = "model.layers.*.self_attn.mla_attn.W_UV";
inline constexpr const char* kTwinNote =
    "CPU twin: the warm-up forward was captured in the ATen window, not a CUDA graph";

inline Finding finding(Verdict verdict, const std::string& owner, std::uint64_t node) {
  Finding out;
  out.graph = 1;
  out.node = node;
  out.kernel = "void marlin::Marlin<256, 4>";
  out.param = 3;
  out.offset = 0;
  out.address = 0x7f3a00000000 + node * 0x100;
  out.verdict = verdict;
  out.owner = owner;
  out.detail = "inside an allocation that no span covers";
  out.fix = "register it with set_derived_buffer";
  return out;
}

inline Report make_report(const std::string& epoch, std::vector<Finding> findings,
                          std::vector<std::string> stale_allow = {}) {
  Report report;
  report.epoch = epoch;
  report.baseline = "capture";
  report.summary.graphs = 1;
  report.summary.nodes = 276;
  report.summary.references = 592;
  report.summary.counts[static_cast<std::size_t>(Verdict::kRegistered)] = 592 - findings.size();
  for (const Finding& f : findings) {
    ++report.summary.counts[static_cast<std::size_t>(f.verdict)];
  }
  report.findings = std::move(findings);
  report.stale_allow = std::move(stale_allow);
  return report;
}

// One check point of one process, as the watch records it.
struct CheckPoint {
  std::uint64_t seq = 1;
  std::string label;
  double time = 0.0;
  std::uint64_t pid = 0;
  std::string role;
  std::vector<std::string> notes;
  std::vector<std::string> census;  // a census check point's findings (no graphs)
  Report report;
};

// Check point `label`, number `seq` of worker rank `rank`; rank 1 writes a little after rank
// 0, as the ranks of one server do.
inline CheckPoint on_rank(int rank, const std::string& label, std::uint64_t seq, Report report) {
  CheckPoint point;
  point.seq = seq;
  point.label = label;
  point.time = (seq == 1 ? kCaptureTime : kWakeTime) + 0.05 * rank;
  point.pid = rank == 0 ? kRank0 : kRank1;
  point.role = "worker rank " + std::to_string(rank);
  point.report = std::move(report);
  return point;
}

inline CheckPoint with_notes(CheckPoint point, std::vector<std::string> notes) {
  point.notes = std::move(notes);
  return point;
}

// A watch folder in a per-test temporary directory (`folder()`), filled by `add` and
// `write_index`, and the built `graphcheck` run on it.
class WatchFolderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("graphcheck_cli_report_" + std::string(info->name()) + "_" +
                                        std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "gc");
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path folder() const { return dir_ / "gc"; }

  // Writes the check point's report files into the folder and returns its index line (kept
  // in `lines_`, written by `write_index`, so that a test can change it first).
  Json& add(const CheckPoint& point) {
    // The watch's names (output.py, ReportWriter): <UTC time>-[<role>-]p<pid>-<seq>-<label>.
    const auto whole = static_cast<std::time_t>(point.time);
    std::tm tm{};
    gmtime_r(&whole, &tm);
    std::array<char, 32> stamp{};
    std::strftime(stamp.data(), stamp.size(), "%Y%m%dT%H%M%S", &tm);
    std::string role = point.role;
    std::replace(role.begin(), role.end(), ' ', '-');
    const auto millis = static_cast<int>((point.time - static_cast<double>(whole)) * 1000);
    std::array<char, 160> name{};
    std::snprintf(name.data(), name.size(), "%s%03dZ-%s%sp%llu-%03llu-%s", stamp.data(), millis,
                  role.c_str(), role.empty() ? "" : "-", static_cast<unsigned long long>(point.pid),
                  static_cast<unsigned long long>(point.seq), point.label.c_str());
    const std::string stem(name.data());
    const fs::path json = folder() / (stem + ".report.json");
    const fs::path text = folder() / (stem + ".report.txt");
    write_text(json, to_json(point.report) + "\n");
    write_text(text, to_text(point.report));
    Json summary = Json::parse(to_json(point.report))["summary"];
    lines_.push_back(Json{{"seq", point.seq},
                          {"label", point.label},
                          {"time", point.time},
                          {"pid", point.pid},
                          {"graphs", {1}},
                          {"skipped", Json::array()},
                          {"model", "model (LlamaForCausalLM) [given]"},
                          {"role", point.role},
                          {"notes", point.notes},
                          {"census", point.census},
                          {"seconds", 0.0123},
                          {"ok", !point.report.has_findings() && point.census.empty()},
                          {"summary", summary},
                          {"files",
                           {{"report_json", json.string()},
                            {"report_text", text.string()},
                            {"snapshot:1", (folder() / "p1-graph1.snapshot.json").string()}}}});
    return lines_.back();
  }

  void write_index() const {
    std::string text;
    for (const Json& line : lines_) {
      text += line.dump() + "\n";
    }
    write_text(folder() / "index.jsonl", text);
  }

  // A tensor-parallel run: two ranks, check points "capture" and "after_wake". The workspace
  // is found on both ranks, the scale on rank 0 only; rank 1 appended its lines first.
  void write_tensor_parallel_folder() {
    add(with_notes(on_rank(1, "capture", 1,
                           make_report("capture",
                                       {finding(Verdict::kUnregistered, kWorkspace, 3),
                                        finding(Verdict::kUnregistered, kWorkspace, 40)},
                                       {kStaleGlob})),
                   {kTwinNote}));
    add(with_notes(on_rank(0, "capture", 1,
                           make_report("capture",
                                       {finding(Verdict::kUnregistered, kWorkspace, 3),
                                        finding(Verdict::kUnregistered, kScale, 270),
                                        finding(Verdict::kUnregistered, kWorkspace, 40)},
                                       {kStaleGlob})),
                   {kTwinNote}));
    add(on_rank(0, "after_wake", 2,
                make_report("after_wake", {finding(Verdict::kLost, kRope, 5)})));
    add(on_rank(1, "after_wake", 2,
                make_report("after_wake", {finding(Verdict::kLost, kRope, 5)})));
    write_index();
  }

  RunResult run(const std::vector<std::string>& args) {
    return testing_cli::run_program(test_paths::cli_path(), args, dir_ / "stderr.txt");
  }

  // Expects exit 2 and one "graphcheck: error: " line on stderr holding every needle.
  static void expect_error(const RunResult& result, const std::vector<std::string>& needles) {
    EXPECT_EQ(result.status, 2) << result.out << result.err;
    EXPECT_THAT(result.err, ::testing::StartsWith("graphcheck: error: "));
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    for (const std::string& needle : needles) {
      EXPECT_THAT(result.err, ::testing::HasSubstr(needle));
    }
    EXPECT_EQ(result.out, "");
  }

  static std::size_t occurrences(const std::string& text, const std::string& needle) {
    std::size_t count = 0;
    for (std::size_t at = text.find(needle); at != std::string::npos;
         at = text.find(needle, at + needle.size())) {
      ++count;
    }
    return count;
  }

  fs::path dir_;
  std::deque<Json> lines_;  // a deque: `add` hands out references that later adds keep valid
};

}  // namespace graphcheck::testing_cli

#endif  // GRAPHCHECK_TESTS_UNIT_WATCH_FOLDER_FIXTURE_H_
