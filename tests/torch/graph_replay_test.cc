// The CPU graph-replay story on the reference model, for both variants: after each step the
// captured graph is replayed and compared with an eager forward.
#include <gmock/gmock.h>
#include <graphcheck/torch/graph_replay.h>
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

namespace graphcheck::libtorch {
namespace {

using ::testing::ElementsAreArray;

ReplayResult replay(ModelVariant variant) {
  ReferenceConfig config;
  config.variant = variant;
  return run_graph_replay(reference_replay_factory(config, 11, 8));
}

// Owners of the findings with `verdict`, whatever their exact symbol spelling.
bool any_owner_contains(const Report& report, Verdict verdict, const std::string& text) {
  for (const Finding& finding : report.findings) {
    if (finding.verdict == verdict && finding.owner.find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

class GraphReplay : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    legacy_ = new ReplayResult(replay(ModelVariant::kLegacy));
    registered_ = new ReplayResult(replay(ModelVariant::kRegistered));
  }
  static void TearDownTestSuite() {
    delete legacy_;
    delete registered_;
  }
  static ReplayResult* legacy_;
  static ReplayResult* registered_;
};
ReplayResult* GraphReplay::legacy_ = nullptr;
ReplayResult* GraphReplay::registered_ = nullptr;

TEST_F(GraphReplay, StepsAndEpochsCarryTheDocumentedLabels) {
  for (const ReplayResult* result : {legacy_, registered_}) {
    std::vector<std::string> steps;
    std::vector<std::string> epochs;
    for (const auto& step : result->steps) {
      steps.push_back(step.label);
    }
    for (const auto& epoch : result->snapshot.epochs) {
      epochs.push_back(epoch.label);
    }
    EXPECT_THAT(steps, ElementsAreArray(replay_step_labels()));
    EXPECT_THAT(epochs, ElementsAreArray(replay_step_labels()));
    EXPECT_EQ(result->snapshot.producer.backend, "aten");
    ASSERT_EQ(result->snapshot.graphs.size(), 1U);
    EXPECT_GT(result->snapshot.graphs[0].nodes.size(), 50U);
  }
}

TEST_F(GraphReplay, RegisteredHasNoFindingAndIdenticalOutputsThroughBothSleepLevels) {
  for (std::size_t i = 0; i < 3; ++i) {
    const ReplayStep& step = registered_->steps[i];
    EXPECT_TRUE(step.outputs_equal) << step.label;
    EXPECT_EQ(step.max_abs_diff, 0.0) << step.label;
    EXPECT_FALSE(step.report.has_findings()) << step.label << "\n" << to_text(step.report);
    EXPECT_GT(step.report.summary.count(Verdict::kRegistered), 0U) << step.label;
    EXPECT_GT(step.report.summary.count(Verdict::kRuntime), 0U) << step.label;
    EXPECT_GT(step.report.summary.count(Verdict::kInput), 0U) << step.label;
  }
}

TEST_F(GraphReplay, LegacyCaptureNamesEveryPlantedSiteAsUnregistered) {
  const Report& report = legacy_->steps[0].report;
  EXPECT_TRUE(legacy_->steps[0].outputs_equal);
  EXPECT_GT(report.summary.count(Verdict::kUnregistered), 0U);
  EXPECT_EQ(report.summary.count(Verdict::kDangling), 0U);
  EXPECT_EQ(report.summary.findings(), report.summary.count(Verdict::kUnregistered));
  EXPECT_TRUE(any_owner_contains(report, Verdict::kUnregistered,
                                 "ReferenceInt8Method::process_weights_after_loading"))
      << to_text(report);
  EXPECT_TRUE(any_owner_contains(report, Verdict::kUnregistered, "make_sign_table"));
  EXPECT_TRUE(any_owner_contains(report, Verdict::kUnregistered, "compute_cos_sin_cache"));
}

TEST_F(GraphReplay, LegacyLevelOneRestoresEverythingButStaysUnregistered) {
  const ReplayStep& step = legacy_->steps[1];
  EXPECT_TRUE(step.outputs_equal);
  EXPECT_EQ(step.report.summary.count(Verdict::kLost), 0U);
  EXPECT_EQ(step.report.summary.count(Verdict::kUnregistered),
            legacy_->steps[0].report.summary.count(Verdict::kUnregistered));
}

TEST_F(GraphReplay, LegacyLevelTwoLosesThePlantedSitesAndChangesTheOutputs) {
  const ReplayStep& step = legacy_->steps[2];
  EXPECT_FALSE(step.outputs_equal);
  EXPECT_GT(step.report.summary.count(Verdict::kLost), 0U);
  EXPECT_TRUE(any_owner_contains(step.report, Verdict::kLost, "process_weights_after_loading"))
      << to_text(step.report);
  EXPECT_TRUE(any_owner_contains(step.report, Verdict::kLost, "make_sign_table"));
  EXPECT_TRUE(any_owner_contains(step.report, Verdict::kLost, "compute_cos_sin_cache"));
}

TEST_F(GraphReplay, RebindingReloadIsStaleForBothVariants) {
  for (const ReplayResult* result : {legacy_, registered_}) {
    const ReplayStep& step = result->steps[3];
    EXPECT_GT(step.report.summary.count(Verdict::kStale), 0U) << to_text(step.report);
    std::set<std::string> owners;
    for (const Finding& finding : step.report.findings) {
      if (finding.verdict == Verdict::kStale) {
        owners.insert(finding.owner);
      }
    }
    EXPECT_EQ(owners.count("embed_tokens.weight"), 1U);
    EXPECT_EQ(owners.count("lm_head.weight"), 1U);
  }
}

// The graph reads the rebound parameters' old addresses (memory the arena reuses for the new
// tensors), eager reads the new parameters: the stale graph shows in the outputs.
TEST_F(GraphReplay, RebindingReloadMakesTheReplayDifferFromEager) {
  const ReplayStep& registered = registered_->steps[3];
  EXPECT_FALSE(registered.outputs_equal);
  EXPECT_TRUE(std::isfinite(registered.max_abs_diff)) << registered.max_abs_diff;
  EXPECT_GT(registered.max_abs_diff, 0.0);
  EXPECT_FALSE(legacy_->steps[3].outputs_equal);
}

// Legacy after level 2: the planted tensors are 0xFF poison for the replay and eager alike,
// so both outputs are NaN and never compare equal.
TEST_F(GraphReplay, LegacyLevelTwoPoisonReadsAsNaN) {
  EXPECT_TRUE(std::isnan(legacy_->steps[2].max_abs_diff));
  EXPECT_TRUE(std::isnan(legacy_->steps[3].max_abs_diff));
  EXPECT_EQ(legacy_->steps[1].max_abs_diff, 0.0);
}

}  // namespace
}  // namespace graphcheck::libtorch
