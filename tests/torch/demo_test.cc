// `graphcheck demo` end to end: it exits 0, writes both snapshots and a summary,
// `graphcheck check` on each written snapshot gives the counts the summary reports, and the
// story (replayed graph vs eager forward, verdict counts) is exactly the documented one.
#include <gmock/gmock.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "common/test_paths.h"

namespace graphcheck {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

struct RunResult {
  int status = -1;
  std::string out;
};

RunResult run(const std::string& arguments) {
  const std::string command = std::string("'") + test_paths::cli_path() + "' " + arguments;
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

std::string read_text(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// One `graphcheck demo` run shared by the tests that read its output (it takes seconds).
class DemoRun : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ =
        new fs::path(fs::temp_directory_path() / ("graphcheck_demo_" + std::to_string(getpid())));
    fs::remove_all(*dir_);
    demo_ = new RunResult(run("demo --out '" + dir_->string() + "'"));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete demo_;
  }
  static fs::path* dir_;
  static RunResult* demo_;
};
fs::path* DemoRun::dir_ = nullptr;
RunResult* DemoRun::demo_ = nullptr;

TEST_F(DemoRun, WritesSnapshotsWhoseCheckedCountsMatchTheSummary) {
  const fs::path& dir = *dir_;
  const RunResult& demo = *demo_;
  ASSERT_EQ(demo.status, 0) << demo.out;
  EXPECT_THAT(demo.out, HasSubstr("== legacy variant"));
  EXPECT_THAT(demo.out, HasSubstr("process_weights_after_loading"));
  const nlohmann::json summary = read_json(dir / "summary.json");
  for (const std::string variant : {"legacy", "registered"}) {
    const fs::path snapshot = dir / (variant + ".json");
    ASSERT_TRUE(fs::exists(snapshot)) << snapshot;
    EXPECT_EQ(read_snapshot(snapshot).producer.backend, "aten");
    // The page of the story's last step, the same as `graphcheck check --format html` makes.
    const fs::path page = dir / (variant + ".html");
    ASSERT_TRUE(fs::exists(page)) << page;
    const RunResult html = run("check '" + snapshot.string() +
                               "' --epoch after_reload_rebind --format html --output '" +
                               (dir / (variant + ".check.html")).string() + "'");
    EXPECT_EQ(html.status, 1) << html.out;  // the rebinding reload's findings
    // The same page but for its subject: the demo names the story's variant, `check` the
    // snapshot's file name.
    std::string demo_page = read_text(page);
    const std::string words =
        "\"subject\":\"reference model, " + variant + " variant (" + variant + ".json)\"";
    const std::size_t at = demo_page.find(words);
    ASSERT_NE(at, std::string::npos) << variant;
    demo_page.replace(at, words.size(), "\"subject\":\"" + variant + ".json\"");
    EXPECT_EQ(demo_page, read_text(dir / (variant + ".check.html")));
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
}

// One step of the story as summary.json records it: whether the replayed graph equals an
// eager forward, and the verdict counts of the capture checked in the step's epoch.
struct ExpectedStep {
  std::string label;
  bool outputs_equal = false;
  std::uint64_t registered = 0;
  std::uint64_t unregistered = 0;
  std::uint64_t stale = 0;
  std::uint64_t lost = 0;
};

// The exact story of `graphcheck demo` (hidden 64, seed 11, torch 2.11 CPU). Every step also
// has 1 graph, 482 nodes, 558 references, 24 runtime, 496 graph, 4 input, 0 allowed and 0
// dangling (a view op's output is no reference: 1081 before; since 2026-12-07 neither are a
// view op's input nor a decomposition's operands, which its nested ops log: 841 before).
// Legacy: the planted tensors (26 references) are unregistered, then lost after level 2 (0xFF
// poison: replay and eager both NaN); the rebinding reload leaves the 8 parameter references
// stale. Registered: clean through level 2 (the in-place update of a second checkpoint reaches
// the graph), then the graph reads the rebound parameters' old storage: stale, and its output
// differs from eager.
const std::vector<std::pair<std::string, std::vector<ExpectedStep>>>& expected_story() {
  static const std::vector<std::pair<std::string, std::vector<ExpectedStep>>> story = {
      {"legacy",
       {{"capture", true, 8, 26, 0, 0},
        {"after_wake_l1", true, 8, 26, 0, 0},
        {"after_wake_l2_reload", false, 8, 0, 0, 26},
        {"after_reload_rebind", false, 0, 0, 8, 26}}},
      {"registered",
       {{"capture", true, 34, 0, 0, 0},
        {"after_wake_l1", true, 34, 0, 0, 0},
        {"after_wake_l2_reload", true, 34, 0, 0, 0},
        {"after_reload_rebind", false, 26, 0, 8, 0}}},
  };
  return story;
}

TEST_F(DemoRun, StoryHasTheExactOutcomesAndCounts) {
  ASSERT_EQ(demo_->status, 0) << demo_->out;
  const nlohmann::json summary = read_json(*dir_ / "summary.json");
  for (const auto& [variant, expected_steps] : expected_story()) {
    const auto& steps = summary.at("variants").at(variant).at("steps");
    ASSERT_EQ(steps.size(), expected_steps.size()) << variant;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const ExpectedStep& expected = expected_steps[i];
      const nlohmann::json& step = steps[i];
      const std::string where = variant + " " + expected.label;
      EXPECT_EQ(step.at("label"), expected.label) << where;
      EXPECT_EQ(step.at("outputs_equal").get<bool>(), expected.outputs_equal) << where;
      const nlohmann::json want = {{"graphs", 1},
                                   {"nodes", 482},
                                   {"references", 558},
                                   {"registered", expected.registered},
                                   {"runtime", 24},
                                   {"graph", 496},
                                   {"input", 4},
                                   {"allowed", 0},
                                   {"unregistered", expected.unregistered},
                                   {"dangling", 0},
                                   {"stale", expected.stale},
                                   {"lost", expected.lost}};
      EXPECT_EQ(step.at("summary"), want) << where;
    }
  }
  // Equal outputs are bit-identical; NaN outputs (legacy after level 2) have no finite
  // difference, so summary.json omits max_abs_diff there.
  const auto& legacy = summary["variants"]["legacy"]["steps"];
  const auto& registered = summary["variants"]["registered"]["steps"];
  EXPECT_EQ(registered[2]["max_abs_diff"].get<double>(), 0.0);
  EXPECT_GT(registered[3]["max_abs_diff"].get<double>(), 1.0);
  EXPECT_FALSE(legacy[2].contains("max_abs_diff"));
  EXPECT_FALSE(legacy[3].contains("max_abs_diff"));
}

// Under each step, what to fix: each fix sentence once with every owner it covers (the
// report's to-do list), not one line per owner repeating the sentence and cut at eight.
TEST_F(DemoRun, EachStepListsEachFixOnceWithEveryOwnerItCovers) {
  ASSERT_EQ(demo_->status, 0) << demo_->out;
  const std::string& out = demo_->out;
  const std::size_t registered = out.find("== registered variant");
  ASSERT_NE(registered, std::string::npos) << out;
  const std::string legacy_part = out.substr(0, registered);
  const std::size_t rebind_at = legacy_part.find("  after_reload_rebind");
  ASSERT_NE(rebind_at, std::string::npos) << legacy_part;
  const std::string rebind = legacy_part.substr(rebind_at);
  EXPECT_THAT(rebind, HasSubstr("      fix 1: reload the parameter in place with copy_ rather than "
                                "rebinding it"));
  EXPECT_THAT(rebind, HasSubstr("             7 parameters, 8 references: embed_tokens.weight, "
                                "layers.{0-1}.input_layernorm.weight, "
                                "layers.{0-1}.post_attention_layernorm.weight, norm.weight, "
                                "lm_head.weight\n"));
  EXPECT_THAT(rebind, HasSubstr("      fix 2: register it so sleep restores it"));
  EXPECT_THAT(rebind, HasSubstr("             3 allocation labels, 26 references: "));
  for (const char* site : {"ReferenceInt8Method::process_weights_after_loading", "make_sign_table",
                           "compute_cos_sin_cache"}) {
    EXPECT_THAT(rebind, HasSubstr(site));
  }
  EXPECT_THAT(rebind, ::testing::Not(HasSubstr("more owners")));
  // Four steps, each with findings and one fix (two after the rebinding reload): the
  // sentence of the unregistered ones is printed once per step, not once per owner.
  std::size_t sentences = 0;
  const std::string sentence = "fix 1: register it: fill a declared slot";
  for (std::size_t at = legacy_part.find(sentence); at != std::string::npos;
       at = legacy_part.find(sentence, at + 1)) {
    ++sentences;
  }
  EXPECT_EQ(sentences, 2U) << legacy_part;  // capture and after_wake_l1
  const std::string registered_part = out.substr(registered);
  EXPECT_THAT(registered_part, ::testing::Not(HasSubstr("fix 2:")));
}

TEST(DemoCommand, UnwritableOutputIsAnErrorWithExitTwo) {
  const RunResult demo = run("demo --out /proc/graphcheck_no_such_dir 2>&1");
  EXPECT_EQ(demo.status, 2);
  EXPECT_THAT(demo.out, HasSubstr("graphcheck: error: --out /proc/graphcheck_no_such_dir"));
}

}  // namespace
}  // namespace graphcheck
