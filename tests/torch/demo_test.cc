// `graphcheck demo` end to end: it exits 0, writes both snapshots and a summary, and
// `graphcheck check` on each written snapshot gives the counts the summary reports.
#include <gmock/gmock.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

namespace graphcheck {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct RunResult {
  int status = -1;
  std::string out;
};

RunResult run(const std::string& arguments) {
  const std::string command = std::string("'") + GRAPHCHECK_CLI_PATH + "' " + arguments;
  RunResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    return result;
  }
  std::array<char, 4096> chunk{};
  std::size_t got = 0;
  while ((got = fread(chunk.data(), 1, chunk.size(), pipe)) > 0) {
    result.out.append(chunk.data(), got);
  }
  const int status = pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream file(path);
  return nlohmann::json::parse(file);
}

TEST(DemoCommand, WritesSnapshotsWhoseCheckedCountsMatchTheSummary) {
  const fs::path dir = fs::temp_directory_path() / ("graphcheck_demo_" + std::to_string(getpid()));
  fs::remove_all(dir);
  const RunResult demo = run("demo --out '" + dir.string() + "'");
  ASSERT_EQ(demo.status, 0) << demo.out;
  EXPECT_THAT(demo.out, HasSubstr("== legacy variant"));
  EXPECT_THAT(demo.out, HasSubstr("process_weights_after_loading"));
  const nlohmann::json summary = read_json(dir / "summary.json");
  for (const std::string variant : {"legacy", "registered"}) {
    const fs::path snapshot = dir / (variant + ".json");
    ASSERT_TRUE(fs::exists(snapshot)) << snapshot;
    EXPECT_EQ(read_snapshot(snapshot).producer.backend, "aten");
    const auto& steps = summary.at("variants").at(variant).at("steps");
    ASSERT_EQ(steps.size(), 4U) << variant;
    for (const auto& step : steps) {
      const std::string label = step.at("label").get<std::string>();
      const RunResult check =
          run("check '" + snapshot.string() + "' --epoch " + label + " --format json");
      ASSERT_LE(check.status, 1) << variant << " " << label << ": " << check.out;
      const Report report = parse_report(check.out);
      for (std::size_t i = 0; i < kVerdictCount; ++i) {
        const auto verdict = static_cast<Verdict>(i);
        EXPECT_EQ(step.at("summary").at(std::string(to_string(verdict))).get<std::uint64_t>(),
                  report.summary.count(verdict))
            << variant << " " << label << " " << to_string(verdict);
      }
      EXPECT_EQ(check.status, report.has_findings() ? 1 : 0);
    }
  }
  // The story's point, as the summary records it.
  const auto& legacy = summary["variants"]["legacy"]["steps"];
  const auto& registered = summary["variants"]["registered"]["steps"];
  EXPECT_GT(legacy[0]["summary"]["unregistered"].get<int>(), 0);
  EXPECT_FALSE(legacy[2]["outputs_equal"].get<bool>());
  EXPECT_GT(legacy[2]["summary"]["lost"].get<int>(), 0);
  EXPECT_TRUE(registered[2]["outputs_equal"].get<bool>());
  EXPECT_EQ(registered[2]["summary"]["lost"].get<int>(), 0);
  EXPECT_GT(registered[3]["summary"]["stale"].get<int>(), 0);
  fs::remove_all(dir);
}

TEST(DemoCommand, UnwritableOutputIsAnErrorWithExitTwo) {
  const RunResult demo = run("demo --out /proc/graphcheck_no_such_dir 2>&1");
  EXPECT_EQ(demo.status, 2);
  EXPECT_THAT(demo.out, HasSubstr("graphcheck: error: --out /proc/graphcheck_no_such_dir"));
}

}  // namespace
}  // namespace graphcheck
