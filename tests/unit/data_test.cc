// The example snapshots in tests/data/: each carries an "expect" block (verdict counts in
// one epoch) that check() must reproduce. For the hand-built files there the counts are known
// by construction (each file is built to show its verdicts): a checker change that moves a
// count, or a data file edited by hand into inconsistency, fails here. The files in
// tests/data/gpu/ are different: recorded on a GPU machine, their expect blocks were computed
// by check() there (tests/common/expect_block.h), so they are regression fixtures: they say
// what the checker reported then, not what is right, and a failure on one asks whether the
// checker or the recorded answer is wrong.
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/snapshot.h>
#include <graphcheck/verdict.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/expect_block.h"
#include "common/test_paths.h"

namespace graphcheck {
namespace {

namespace fs = std::filesystem;

fs::path data_dir() { return test_paths::data_dir(); }

std::string read_text(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// Every *.json in tests/data/ and in tests/data/gpu/ (snapshots recorded on a GPU by the gpu
// tier, docs/gpu-check.md; regression fixtures, see the top), as paths relative to tests/data/.
std::vector<std::string> data_files() {
  std::vector<std::string> names;
  for (const char* folder : {"", "gpu"}) {
    const fs::path dir = data_dir() / folder;
    if (!fs::is_directory(dir)) {
      continue;
    }
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (entry.path().extension() == ".json") {
        names.push_back((fs::path(folder) / entry.path().filename()).string());
      }
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

// "expect" (required) plus the optional "expect_epochs" list.
std::vector<nlohmann::json> expectations(const nlohmann::json& doc) {
  std::vector<nlohmann::json> out{doc.at("expect")};
  if (doc.contains("expect_epochs")) {
    for (const auto& item : doc.at("expect_epochs")) {
      out.push_back(item);
    }
  }
  return out;
}

std::uint64_t summary_field(const Summary& summary, const std::string& key) {
  if (key == "graphs") {
    return summary.graphs;
  }
  if (key == "nodes") {
    return summary.nodes;
  }
  if (key == "references") {
    return summary.references;
  }
  std::optional<Verdict> verdict = parse_verdict(key);
  if (!verdict) {
    ADD_FAILURE() << "unknown key in expect.summary: " << key;
    return 0;
  }
  return summary.count(*verdict);
}

class DataSnapshotTest : public ::testing::TestWithParam<std::string> {};

TEST_P(DataSnapshotTest, CheckReproducesTheExpectedCounts) {
  const fs::path path = data_dir() / GetParam();
  nlohmann::json doc = nlohmann::json::parse(read_text(path));
  Snapshot snapshot = read_snapshot(path);
  for (const nlohmann::json& expect : expectations(doc)) {
    CheckOptions options;
    options.epoch = expect.at("epoch").get<std::string>();
    Report report = check(snapshot, options);
    SCOPED_TRACE(GetParam() + " in epoch " + options.epoch);
    EXPECT_EQ(report.epoch, options.epoch);
    for (const auto& [key, value] : expect.at("summary").items()) {
      EXPECT_EQ(summary_field(report.summary, key), value.get<std::uint64_t>()) << key;
    }
    std::uint64_t findings =
        report.summary.count(Verdict::kUnregistered) + report.summary.count(Verdict::kDangling) +
        report.summary.count(Verdict::kStale) + report.summary.count(Verdict::kLost);
    EXPECT_EQ(report.findings.size(), findings);
    if (expect.contains("stale_allow")) {
      EXPECT_EQ(report.stale_allow, expect.at("stale_allow").get<std::vector<std::string>>());
    }
    std::uint64_t unattributed = 0;
    for (const UnattributedWords& node : report.unattributed) {
      unattributed += node.words;
    }
    // Optional: kernel words in memory the snapshot does not know (docs/report-format.md).
    EXPECT_EQ(unattributed, expect.value("unattributed", std::uint64_t{0})) << "unattributed";
  }
}

TEST_P(DataSnapshotTest, LastEpochIsTheDefaultAndTheExpectBlockNamesIt) {
  const fs::path path = data_dir() / GetParam();
  nlohmann::json doc = nlohmann::json::parse(read_text(path));
  Snapshot snapshot = read_snapshot(path);
  ASSERT_FALSE(snapshot.epochs.empty());
  EXPECT_EQ(doc.at("expect").at("epoch").get<std::string>(), snapshot.epochs.back().label);
  EXPECT_EQ(check(snapshot).epoch, snapshot.epochs.back().label);
}

INSTANTIATE_TEST_SUITE_P(TestsData, DataSnapshotTest, ::testing::ValuesIn(data_files()),
                         [](const ::testing::TestParamInfo<std::string>& param_info) {
                           fs::path path(param_info.param);
                           std::string name = (path.parent_path() / path.stem()).string();
                           std::replace_if(
                               name.begin(), name.end(),
                               [](char c) { return c == '-' || c == '/' || c == '.'; }, '_');
                           return name;
                         });

TEST(TestsData, HasOneSnapshotPerVerdictThatProducesThatVerdict) {
  for (std::size_t i = 0; i < kVerdictCount; ++i) {
    auto verdict = static_cast<Verdict>(i);
    fs::path path = data_dir() / ("verdict_" + std::string(to_string(verdict)) + ".json");
    ASSERT_TRUE(fs::exists(path)) << path;
    Report report = check(read_snapshot(path));
    EXPECT_GE(report.summary.count(verdict), 1U) << path;
    EXPECT_EQ(report.has_findings(), is_finding(verdict)) << path;
  }
}

TEST(TestsData, HasOneSnapshotPerNodeKindHoldingThatKind) {
  for (std::string kind :
       {"kernel", "memcpy", "memset", "mem_alloc", "mem_free", "op", "child_graph", "conditional",
        "host", "empty", "event_record", "event_wait"}) {
    fs::path path = data_dir() / ("node_" + kind + ".json");
    ASSERT_TRUE(fs::exists(path)) << path;
    Snapshot snapshot = read_snapshot(path);
    ASSERT_EQ(snapshot.graphs.size(), 1U);
    const NodeList& nodes = snapshot.graphs[0].nodes;
    EXPECT_TRUE(std::any_of(nodes.begin(), nodes.end(), [&](const Node& node) {
      return to_string(node.type) == kind;
    })) << path;
  }
}

TEST(DecodeStep, IsARealisticDecodeStepUnderTwoMegabytes) {
  const fs::path path = data_dir() / "decode_step.json";
  EXPECT_LT(fs::file_size(path), 2U << 20);
  Snapshot snapshot = read_snapshot(path);
  ASSERT_EQ(snapshot.graphs.size(), 1U);
  std::vector<std::string> labels;
  for (const Epoch& epoch : snapshot.epochs) {
    labels.push_back(epoch.label);
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"capture", "after_sleep", "after_reload"}));
  const NodeList& nodes = snapshot.graphs[0].nodes;
  EXPECT_GE(nodes.size(), 32U * 18U);
  std::set<std::size_t> struct_sizes;
  for (const Node& node : nodes) {
    for (const KernelParam& param : node.params) {
      EXPECT_EQ(param.offset % std::min<std::size_t>(param.bytes.size(), 8), 0U) << node.name;
      if (param.bytes.size() > 8) {
        struct_sizes.insert(param.bytes.size());
      }
    }
  }
  ASSERT_FALSE(struct_sizes.empty());
  EXPECT_GE(*struct_sizes.begin(), 24U);
  EXPECT_EQ(*struct_sizes.rbegin(), 256U);
  EXPECT_TRUE(struct_sizes.contains(48U));
}

TEST(DecodeStep, LastEpochHasEveryKindOfFinding) {
  Report report = check(read_snapshot(data_dir() / "decode_step.json"));
  EXPECT_EQ(report.epoch, "after_reload");
  EXPECT_EQ(report.baseline, "capture");
  for (Verdict verdict : {Verdict::kUnregistered, Verdict::kDangling, Verdict::kStale,
                          Verdict::kLost, Verdict::kAllowed, Verdict::kRegistered,
                          Verdict::kRuntime, Verdict::kGraph, Verdict::kInput}) {
    EXPECT_GT(report.summary.count(verdict), 0U) << to_string(verdict);
  }
  auto stale = std::find_if(report.findings.begin(), report.findings.end(),
                            [](const Finding& f) { return f.verdict == Verdict::kStale; });
  ASSERT_NE(stale, report.findings.end());
  EXPECT_EQ(stale->owner.rfind("model.layers.7.", 0), 0U) << stale->owner;
  EXPECT_FALSE(stale->fix.empty());
}

// The gpu tier writes recorded snapshots with expect blocks computed by check() on the GPU
// machine (tests/common/expect_block.h). On every hand-built file here the blocks that code
// computes must agree with the blocks written by hand (known by construction), and the
// snapshot must read back unchanged: that is what makes the computed GPU blocks comparable.
TEST(ExpectBlocks, AgreeWithTheHandWrittenBlocksOfEveryDataFile) {
  for (const std::string& name : data_files()) {
    SCOPED_TRACE(name);
    const fs::path path = data_dir() / name;
    const nlohmann::json committed = nlohmann::json::parse(read_text(path));
    const Snapshot snapshot = read_snapshot(path);
    const std::string text = test_support::with_expect_blocks(snapshot, "regenerated");
    EXPECT_EQ(parse_snapshot(text, name), snapshot);
    const nlohmann::json generated = nlohmann::json::parse(text);
    EXPECT_EQ(generated.at("description"), "regenerated");
    EXPECT_EQ(generated.at("expect"), generated.at("expect_epochs").back());
    ASSERT_EQ(generated.at("expect_epochs").size(), snapshot.epochs.size());
    for (const nlohmann::json& expect : expectations(committed)) {
      const std::string epoch = expect.at("epoch").get<std::string>();
      const nlohmann::json* match = nullptr;
      for (const nlohmann::json& candidate : generated.at("expect_epochs")) {
        if (candidate.at("epoch") == epoch) {
          match = &candidate;
        }
      }
      ASSERT_NE(match, nullptr) << epoch;
      for (const auto& [key, value] : expect.at("summary").items()) {
        EXPECT_EQ(match->at("summary").at(key), value) << epoch << " " << key;
      }
      if (expect.contains("stale_allow")) {
        EXPECT_EQ(match->at("stale_allow"), expect.at("stale_allow")) << epoch;
      }
    }
  }
}

TEST(ExpectBlocks, CountEveryVerdictAndFailOnAnUnknownEpoch) {
  const Snapshot snapshot = read_snapshot(data_dir() / "verdict_stale.json");
  const nlohmann::json block = test_support::expect_block(snapshot, "after_reload");
  EXPECT_EQ(block.at("summary").size(), 3U + kVerdictCount);
  EXPECT_EQ(block.at("summary").at("stale"), 2);
  EXPECT_EQ(block.at("summary").at("lost"), 0);
  try {
    static_cast<void>(test_support::expect_block(snapshot, "after_lunch"));
    FAIL() << "expected graphcheck::Error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("after_lunch"), std::string::npos) << error.what();
  }
}

// The committed file is what the generator writes today (so a hand edit, or a generator
// change without regenerating, is caught). Skipped where python3 is missing.
TEST(DecodeStep, CommittedFileMatchesTheGenerator) {
  if (std::system("python3 -c pass >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "python3 not found";
  }
  const fs::path script = data_dir().parent_path().parent_path() / "scripts/make_decode_step.py";
  const fs::path out = fs::temp_directory_path() /
                       ("graphcheck_decode_step_" + std::to_string(::getpid()) + ".json");
  std::string command = "python3 '" + script.string() + "' '" + out.string() + "' >/dev/null";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  std::string generated = read_text(out);
  fs::remove(out);
  EXPECT_TRUE(generated == read_text(data_dir() / "decode_step.json"))
      << "tests/data/decode_step.json is out of date: run scripts/make_decode_step.py";
}

}  // namespace
}  // namespace graphcheck
