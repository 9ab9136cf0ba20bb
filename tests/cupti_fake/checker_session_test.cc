// The checker session: capture epochs, on-demand checks through a VMM sleep/wake story,
// launch checks under warn and error policies, and snapshot/report output.
#include "cupti/checker_session.h"

#include <gmock/gmock.h>
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "common/pointer_param.h"
#include "cupti/allocation_tracker.h"
#include "cupti_fake/callback_data.h"

namespace graphcheck::cupti {
namespace {

using testing::drive;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr Address kWeights = 0x7f0000000000;
constexpr std::uint64_t kTwoMiB = 2 << 20;
constexpr Address kWorkspace = kWeights + 0x100000;  // second half: no span covers it
constexpr std::uint64_t kExec = 0x5000;

using test_support::pointer_param;

// A kernel "gemm(weight, workspace)" whose arguments point into the weights mapping.
GraphRecord fabricated_graph() {
  GraphRecord graph;
  graph.id = 7;
  graph.epoch = "capture";
  Node node;
  node.id = 0;
  node.type = NodeType::kKernel;
  node.name = "gemm";
  node.params = {pointer_param(0, kWeights + 64), pointer_param(8, kWorkspace + 16)};
  graph.nodes.push_back(node);
  return graph;
}

class CheckerSessionTest : public ::testing::Test {
 protected:
  std::unique_ptr<CheckerSession> make_session(SessionOptions options) {
    SessionSources sources;
    sources.allocations = [this] { return tracker_.allocations(); };
    sources.graphs = [] { return std::vector<GraphRecord>{fabricated_graph()}; };
    sources.graph_for_exec = [](std::uint64_t exec) -> std::optional<GraphRecord> {
      if (exec != kExec) {
        return std::nullopt;
      }
      return fabricated_graph();
    };
    if (!options.log) {
      options.log = [this](std::string_view text) { log_ << text; };
    }
    auto session = std::make_unique<CheckerSession>(std::move(options), std::move(sources));
    session->set_spans({Span{kWeights, 0x100000, OwnerKind::kParameter, "layers.0.weight", ""}});
    return session;
  }
  void map_weights(CUmemGenericAllocationHandle handle) {
    CUmemGenericAllocationHandle out = handle;
    drive(tracker_, CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
          cuMemCreate_params{&out, kTwoMiB, nullptr, 0});
    drive(tracker_, CUPTI_DRIVER_TRACE_CBID_cuMemMap,
          cuMemMap_params{kWeights, kTwoMiB, 0, handle, 0});
  }
  void reserve_and_map() {
    CUdeviceptr out = kWeights;
    drive(tracker_, CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,
          cuMemAddressReserve_params{&out, kTwoMiB, 0, 0, 0});
    map_weights(1);
  }
  void sleep() {
    drive(tracker_, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, cuMemUnmap_params{kWeights, kTwoMiB});
  }
  static std::optional<Verdict> verdict_at(const Report& report, Address address) {
    for (const Finding& finding : report.findings) {
      if (finding.address == address) {
        return finding.verdict;
      }
    }
    return std::nullopt;
  }

  AllocationTracker tracker_;
  std::ostringstream log_;
};

TEST_F(CheckerSessionTest, CaptureEpochIsSharedUntilTheStateChanges) {
  reserve_and_map();
  auto session = make_session({});
  EXPECT_EQ(session->note_graph_capture(1), "capture");
  EXPECT_EQ(session->note_graph_capture(2), "capture");
  CUdeviceptr out = 0x9000000;
  drive(tracker_, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, cuMemAlloc_v2_params{&out, 64});
  EXPECT_EQ(session->note_graph_capture(3), "capture.1");
}

// Labels are the first free `label.N`, whatever was recorded in between; the search starts
// past the suffixes taken so far (it scanned every recorded epoch per suffix tried).
TEST_F(CheckerSessionTest, EpochLabelsTakeTheFirstFreeSuffix) {
  reserve_and_map();
  auto session = make_session({});
  EXPECT_EQ(session->record_epoch("capture.2"), "capture.2");
  std::vector<std::string> labels;
  for (std::uint64_t graph = 1; graph <= 4; ++graph) {
    labels.push_back(session->note_graph_capture(graph));
    CUdeviceptr out = 0x9000000 + graph * 0x1000;  // a new state: the next capture's epoch
    drive(tracker_, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, cuMemAlloc_v2_params{&out, 64});
  }
  EXPECT_THAT(labels, ::testing::ElementsAre("capture", "capture.1", "capture.3", "capture.4"));
  EXPECT_EQ(session->record_epoch("capture"), "capture.5");
  EXPECT_EQ(session->record_epoch("after_sleep"), "after_sleep");
  EXPECT_EQ(session->record_epoch("after_sleep"), "after_sleep.1");
}

TEST_F(CheckerSessionTest, SleepWakeStoryGivesDanglingThenLostThenUnregistered) {
  reserve_and_map();
  auto session = make_session({});
  session->note_graph_capture(7);

  const Report captured = session->check_now("capture_check");
  EXPECT_EQ(verdict_at(captured, kWorkspace + 16), Verdict::kUnregistered);
  EXPECT_EQ(captured.summary.count(Verdict::kRegistered), 1u);

  sleep();
  const Report asleep = session->check_now("after_sleep");
  EXPECT_EQ(verdict_at(asleep, kWorkspace + 16), Verdict::kDangling);

  map_weights(2);
  const Report awake = session->check_now("after_wake");
  EXPECT_EQ(verdict_at(awake, kWorkspace + 16), Verdict::kLost);
  EXPECT_EQ(awake.summary.count(Verdict::kRegistered), 1u) << "the contract restores it";

  tracker_.mark_restored(kWeights, kTwoMiB);
  const Report restored = session->check_now("after_restore");
  EXPECT_EQ(verdict_at(restored, kWorkspace + 16), Verdict::kUnregistered);
  EXPECT_THAT(log_.str(), HasSubstr("after_wake"));
}

TEST_F(CheckerSessionTest, GraphNeverNotedAtCaptureIsCheckedInTheCurrentState) {
  reserve_and_map();
  auto session = make_session({});
  const Snapshot snapshot = session->snapshot("now");
  ASSERT_EQ(snapshot.graphs.size(), 1u);
  EXPECT_EQ(snapshot.graphs[0].epoch, "now");
  EXPECT_EQ(snapshot.producer.backend, "cupti");
}

TEST_F(CheckerSessionTest, LaunchCheckOffChecksNothing) {
  reserve_and_map();
  auto session = make_session({});
  EXPECT_TRUE(session->on_graph_launch(kExec).ok());
  EXPECT_EQ(session->launches_checked(), 0u);
  EXPECT_TRUE(log_.str().empty());
}

TEST_F(CheckerSessionTest, WarnPolicyPrintsTheReportAndContinues) {
  reserve_and_map();
  SessionOptions options;
  options.launch_check = LaunchCheck::kEveryLaunch;
  auto session = make_session(options);
  session->note_graph_capture(7);
  EXPECT_TRUE(session->on_graph_launch(kExec).ok());
  EXPECT_EQ(session->launches_checked(), 1u);
  EXPECT_EQ(session->launches_with_findings(), 1u);
  EXPECT_THAT(log_.str(), HasSubstr("findings at launch of graph 7"));
  EXPECT_THAT(log_.str(), HasSubstr("unregistered"));
}

TEST_F(CheckerSessionTest, UnknownExecIsNotChecked) {
  reserve_and_map();
  SessionOptions options;
  options.launch_check = LaunchCheck::kEveryLaunch;
  options.policy = FindingPolicy::kError;
  auto session = make_session(options);
  EXPECT_TRUE(session->on_graph_launch(kExec + 1).ok());
  EXPECT_EQ(session->launches_checked(), 0u);
}

TEST_F(CheckerSessionTest, ErrorPolicyReturnsAFailingStatus) {
  reserve_and_map();
  SessionOptions options;
  options.launch_check = LaunchCheck::kEveryLaunch;
  options.policy = FindingPolicy::kError;
  auto session = make_session(options);
  session->note_graph_capture(7);
  const Status status = session->on_graph_launch(kExec);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("1 finding(s) at launch of graph 7"));
  EXPECT_THAT(status.message(), HasSubstr("policy error"));
}

TEST_F(CheckerSessionTest, ErrorPolicyLaunchWithoutFindingsPasses) {
  reserve_and_map();
  SessionOptions options;
  options.launch_check = LaunchCheck::kEveryLaunch;
  options.policy = FindingPolicy::kError;
  options.allow = {"cuMemMap*"};  // the workspace's allocation label
  auto session = make_session(options);
  session->note_graph_capture(7);
  EXPECT_TRUE(session->on_graph_launch(kExec).ok());
  EXPECT_EQ(session->launches_with_findings(), 0u);
}

TEST_F(CheckerSessionTest, ErrorPolicyCanExitTheProcessWithCodeOne) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  reserve_and_map();
  SessionOptions options;
  options.launch_check = LaunchCheck::kEveryLaunch;
  options.policy = FindingPolicy::kError;
  options.error_action = ErrorAction::kExitProcess;
  options.log = [](std::string_view text) {
    std::fprintf(stderr, "%.*s", int(text.size()), text.data());
  };
  auto session = make_session(options);
  session->note_graph_capture(7);
  EXPECT_EXIT(static_cast<void>(session->on_graph_launch(kExec)), ::testing::ExitedWithCode(1),
              "findings at launch of graph 7");
}

TEST_F(CheckerSessionTest, ErrorPolicyCanAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  reserve_and_map();
  SessionOptions options;
  options.launch_check = LaunchCheck::kEveryLaunch;
  options.policy = FindingPolicy::kError;
  options.error_action = ErrorAction::kAbort;
  options.log = [](std::string_view text) {
    std::fprintf(stderr, "%.*s", int(text.size()), text.data());
  };
  auto session = make_session(options);
  session->note_graph_capture(7);
  EXPECT_DEATH(static_cast<void>(session->on_graph_launch(kExec)), "findings at launch");
}

// A fresh folder per process and test: CTest runs tests in parallel processes, and under
// ASan a fixture's address is the same in each of them (its heap is not randomized).
std::filesystem::path temp_folder() {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("graphcheck-session-" + std::to_string(::getpid()) + "-" +
                    ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

TEST_F(CheckerSessionTest, WritesSnapshotVersionOneAndReportsToTheOutputFolder) {
  const auto dir = temp_folder();
  reserve_and_map();
  SessionOptions options;
  options.out_dir = dir;
  options.file_prefix = "graphcheck-42";
  auto session = make_session(options);
  session->note_graph_capture(7);
  sleep();
  session->record_epoch("after_sleep");
  map_weights(2);
  const Report report = session->check_now("exit");
  const Report again = session->check_now("exit");

  const Snapshot snapshot = read_snapshot(dir / "graphcheck-42-exit-snapshot.json");
  EXPECT_EQ(snapshot.producer.backend, "cupti");
  ASSERT_EQ(snapshot.epochs.size(), 3u);
  EXPECT_EQ(snapshot.epochs[0].label, "capture");
  EXPECT_EQ(snapshot.epochs[1].label, "after_sleep");
  EXPECT_TRUE(snapshot.epochs[1].allocations.empty());
  EXPECT_EQ(snapshot.epochs[2].label, "exit");
  ASSERT_EQ(snapshot.graphs.size(), 1u);
  EXPECT_EQ(snapshot.graphs[0].epoch, "capture");

  std::ifstream stream(dir / "graphcheck-42-exit-report.json");
  std::stringstream text;
  text << stream.rdbuf();
  EXPECT_EQ(parse_report(text.str()).findings, report.findings);
  EXPECT_TRUE(std::filesystem::exists(dir / "graphcheck-42-exit-report.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir / "graphcheck-42-exit.1-report.json"))
      << "a second check with the same label must not overwrite the first";
  EXPECT_EQ(again.findings, report.findings);
  std::filesystem::remove_all(dir);
}

// The files a check wrote: the snapshot, checked again by graphcheck::check in its last
// epoch, gives the report written beside it, byte for byte.
void expect_report_of_snapshot(const std::filesystem::path& dir, const std::string& stem) {
  SCOPED_TRACE(stem);
  const Snapshot snapshot = read_snapshot(dir / (stem + "-snapshot.json"));
  ASSERT_FALSE(snapshot.epochs.empty());
  CheckOptions options;
  options.epoch = snapshot.epochs.back().label;
  std::ifstream stream(dir / (stem + "-report.json"));
  std::stringstream written;
  written << stream.rdbuf();
  EXPECT_EQ(written.str(), to_json(check(snapshot, options)));
}

TEST_F(CheckerSessionTest, RepeatedLaunchChecksReportWhatACheckOfTheirSnapshotReports) {
  const auto dir = temp_folder();
  reserve_and_map();
  SessionOptions options;
  options.launch_check = LaunchCheck::kEveryLaunch;
  options.out_dir = dir;
  auto session = make_session(options);
  session->note_graph_capture(7);
  EXPECT_TRUE(session->on_graph_launch(kExec).ok());
  EXPECT_TRUE(session->on_graph_launch(kExec).ok());  // the same findings: counted, not written
  sleep();
  map_weights(2);  // a sleep and wake: new generation, the same ranges
  EXPECT_TRUE(session->on_graph_launch(kExec).ok());
  EXPECT_EQ(session->launches_checked(), 3u);
  EXPECT_EQ(session->launches_with_findings(), 3u);
  expect_report_of_snapshot(dir, "graphcheck-launch");
  expect_report_of_snapshot(dir, "graphcheck-launch.1");
  EXPECT_FALSE(std::filesystem::exists(dir / "graphcheck-launch.2-report.json"));
  std::ifstream first(dir / "graphcheck-launch-report.json");
  std::ifstream woken(dir / "graphcheck-launch.1-report.json");
  std::stringstream before;
  std::stringstream after;
  before << first.rdbuf();
  after << woken.rdbuf();
  EXPECT_THAT(before.str(), HasSubstr("\"unregistered\""));
  EXPECT_THAT(after.str(), HasSubstr("\"lost\"")) << "the workspace's bytes were discarded";
  std::filesystem::remove_all(dir);
}

// Issue 18 item 6: a graph replayed with unchanged findings logs and writes its report once.
TEST_F(CheckerSessionTest, LaunchesWithTheSameFindingsAreReportedOnceWithACount) {
  const auto dir = temp_folder();
  reserve_and_map();
  SessionOptions options;
  options.launch_check = LaunchCheck::kEveryLaunch;
  options.out_dir = dir;
  auto session = make_session(options);
  session->note_graph_capture(7);
  for (int launch = 0; launch < 3; ++launch) {
    EXPECT_TRUE(session->on_graph_launch(kExec).ok());
  }
  EXPECT_EQ(session->launches_with_findings(), 3u);
  const std::string log = log_.str();
  EXPECT_EQ(log.find("findings at launch of graph 7"), log.rfind("findings at launch of graph 7"));
  EXPECT_TRUE(std::filesystem::exists(dir / "graphcheck-launch-report.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "graphcheck-launch.1-report.json"));
  (void)session->check_now("exit");
  EXPECT_THAT(log_.str(), HasSubstr("recurred at 2 later launches"));
  std::filesystem::remove_all(dir);
}

TEST_F(CheckerSessionTest, RepeatedCheckNowReportsWhatACheckOfItsSnapshotReports) {
  reserve_and_map();
  auto session = make_session({});
  session->note_graph_capture(7);
  const auto expect_same = [&](const std::string& label) {
    SCOPED_TRACE(label);
    const Snapshot snapshot = session->snapshot(label);
    CheckOptions options;
    options.epoch = snapshot.epochs.back().label;
    EXPECT_EQ(to_json(session->check_now(label)), to_json(check(snapshot, options)));
  };
  expect_same("now");
  expect_same("now");  // unchanged
  sleep();
  expect_same("now");  // the same label, another state
  session->record_epoch("after_sleep");
  map_weights(2);
  expect_same("after_wake");  // another label: the last check's state leaves the session
  expect_same("now");
}

TEST_F(CheckerSessionTest, SharedGraphRecordIsCheckedAgainOnlyWhenReplaced) {
  reserve_and_map();
  auto record = std::make_shared<const GraphRecord>(fabricated_graph());
  SessionSources sources;
  sources.allocations = [this] { return tracker_.allocations(); };
  sources.shared_graph_for_exec = [&record](std::uint64_t exec) {
    return exec == kExec ? record : nullptr;
  };
  SessionOptions options;
  options.launch_check = LaunchCheck::kEveryLaunch;
  options.log = [this](std::string_view text) { log_ << text; };
  CheckerSession session(std::move(options), std::move(sources));
  session.set_spans({Span{kWeights, 0x100000, OwnerKind::kParameter, "layers.0.weight", ""}});
  session.note_graph_capture(7);
  EXPECT_TRUE(session.on_graph_launch(kExec).ok());
  EXPECT_EQ(session.launches_with_findings(), 1u);
  // An exec update: a new record whose second argument now points into the weights.
  GraphRecord updated = fabricated_graph();
  updated.nodes[0].params[1] = pointer_param(8, kWeights + 128);
  record = std::make_shared<const GraphRecord>(std::move(updated));
  EXPECT_TRUE(session.on_graph_launch(kExec).ok());
  EXPECT_EQ(session.launches_checked(), 2u);
  EXPECT_EQ(session.launches_with_findings(), 1u) << "the updated record has no finding";
  EXPECT_TRUE(session.on_graph_launch(kExec + 1).ok());
  EXPECT_EQ(session.launches_checked(), 2u) << "an exec without a record is not checked";
}

// A recorded epoch labelled "launch" is a capture epoch like any other: a graph never noted
// at capture, checked in its own launch state first, must not take its place.
TEST_F(CheckerSessionTest, GraphNeverNotedAtCaptureLeavesARecordedLaunchEpochInPlace) {
  reserve_and_map();
  GraphRecord uncaptured = fabricated_graph();
  uncaptured.id = 8;
  uncaptured.epoch = "elsewhere";
  GraphRecord recorded = fabricated_graph();
  recorded.id = 9;
  recorded.epoch = "launch";
  SessionSources sources;
  sources.allocations = [this] { return tracker_.allocations(); };
  sources.graph_for_exec = [&](std::uint64_t exec) -> std::optional<GraphRecord> {
    if (exec == kExec) {
      return uncaptured;
    }
    return exec == kExec + 1 ? std::optional<GraphRecord>(recorded) : std::nullopt;
  };
  SessionOptions options;
  options.launch_check = LaunchCheck::kEveryLaunch;
  options.log = [this](std::string_view text) { log_ << text; };
  CheckerSession session(std::move(options), std::move(sources));
  session.set_spans({Span{kWeights, 0x100000, OwnerKind::kParameter, "layers.0.weight", ""}});
  EXPECT_EQ(session.record_epoch("launch"), "launch");
  sleep();
  map_weights(2);  // the workspace's bytes are discarded after the recorded epoch
  EXPECT_TRUE(session.on_graph_launch(kExec).ok());
  EXPECT_THAT(log_.str(), HasSubstr("UNREGISTERED")) << "graph 8: found in the launch state";
  EXPECT_THAT(log_.str(), Not(HasSubstr("LOST")));
  EXPECT_TRUE(session.on_graph_launch(kExec + 1).ok());
  EXPECT_THAT(log_.str(), HasSubstr("LOST")) << "graph 9: against the recorded epoch";
  EXPECT_EQ(session.launches_checked(), 2u);
}

// Files that cannot be written (a folder removed meanwhile, a full disk) are logged with the
// path, and the report still comes back: the injection's exit status under
// GRAPHCHECK_POLICY=error comes from it. Before, the write threw out of check_now, and a
// process whose exit check had findings exited 0.
TEST_F(CheckerSessionTest, UnwritableOutputFolderIsLoggedAndTheReportStillReturned) {
  reserve_and_map();
  SessionOptions options;
  options.out_dir = "/proc/graphcheck-no-such-folder";
  auto session = make_session(options);
  const Report report = session->check_now("exit");
  EXPECT_EQ(verdict_at(report, kWorkspace + 16), Verdict::kUnregistered);
  EXPECT_THAT(log_.str(), HasSubstr("the files of epoch 'exit' were not written to "
                                    "/proc/graphcheck-no-such-folder: "));
}

}  // namespace
}  // namespace graphcheck::cupti
