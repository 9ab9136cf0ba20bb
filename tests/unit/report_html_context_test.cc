// The HTML report's context (HtmlOptions): every other epoch's report as the checker makes it,
// the navigation block a folder's writer rewrites in place, node numbering, and what the page
// says it checked. What the page shows of them is the browser tier's (tests/browser/).
#include <gmock/gmock.h>
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/report.h>
#include <graphcheck/report_html.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_paths.h"
#include "common/thrown_message.h"

namespace graphcheck {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

fs::path data_dir() { return test_paths::data_dir(); }

// The JSON inside the script element with this id, parsed.
nlohmann::json script_json(const std::string& page, const std::string& id) {
  const std::string open = R"(<script type="application/json" id=")" + id + "\">";
  const std::size_t begin = page.find(open);
  EXPECT_NE(begin, std::string::npos) << id;
  const std::size_t from = begin + open.size();
  return nlohmann::json::parse(page.substr(from, page.find("</script>", from) - from));
}

// The bytes between the navigation block's tags.
std::string navigation_text(const std::string& page) {
  const std::string open = R"(<script type="application/json" id="graphcheck-nav">)";
  const std::size_t from = page.find(open) + open.size();
  return page.substr(from, page.find("</script>", from) - from);
}

TEST(ReportHtmlContext, EachOtherEpochCarriesTheCheckersReportAgainstTheSameBaseline) {
  const Snapshot snapshot = read_snapshot(data_dir() / "decode_step.json");
  CheckOptions options;
  options.epoch = "after_sleep";
  options.baseline = "capture";
  const Report report = check(snapshot, options);
  const nlohmann::json data = script_json(to_html(report, &snapshot), "graphcheck-data");
  // In snapshot order, the checked epoch left out.
  ASSERT_EQ(data["epochs"].size(), 2U);
  EXPECT_EQ(data["epochs"][0]["epoch"], "capture");
  EXPECT_EQ(data["epochs"][1]["epoch"], "after_reload");
  for (const nlohmann::json& entry : data["epochs"]) {
    CheckOptions other = options;
    other.epoch = entry["epoch"];
    EXPECT_EQ(parse_report(entry["report"].dump()), check(snapshot, other)) << entry["epoch"];
  }
  // Each epoch has its own verdicts: the reload's stale findings are not the sleep's.
  EXPECT_NE(data["epochs"][1]["report"]["summary"]["stale"], report.summary.count(Verdict::kStale));
}

TEST(ReportHtmlContext, TheOtherEpochsAreCheckedWithTheReportsAllowGlobs) {
  const Snapshot snapshot = read_snapshot(data_dir() / "verdict_unregistered.json");
  const Report plain = check(snapshot);
  ASSERT_FALSE(plain.findings.empty());
  Snapshot twice = snapshot;
  Epoch again = twice.epochs.back();
  again.label = "again";
  twice.epochs.push_back(again);
  CheckOptions options;
  options.epoch = twice.epochs.front().label;
  options.allow = {plain.findings.front().owner};
  const Report allowed = check(twice, options);
  HtmlOptions page;
  page.allow = options.allow;
  const nlohmann::json with = script_json(to_html(allowed, &twice, page), "graphcheck-data");
  const nlohmann::json without = script_json(to_html(allowed, &twice), "graphcheck-data");
  EXPECT_EQ(with["epochs"].back()["report"]["summary"]["unregistered"], 0);
  EXPECT_GT(with["epochs"].back()["report"]["summary"]["allowed"], 0);
  EXPECT_GT(without["epochs"].back()["report"]["summary"]["unregistered"], 0);
}

TEST(ReportHtmlContext, AtMostSixteenOtherEpochsTheBaselineAndTheLatestFirst) {
  Snapshot snapshot = read_snapshot(data_dir() / "verdict_registered.json");
  const Epoch first = snapshot.epochs.front();
  for (int i = 1; i <= 20; ++i) {
    Epoch epoch = first;
    epoch.label = "reload_" + std::to_string(i);
    snapshot.epochs.push_back(epoch);
  }
  CheckOptions options;
  options.epoch = "reload_20";
  options.baseline = first.label;
  const nlohmann::json data =
      script_json(to_html(check(snapshot, options), &snapshot), "graphcheck-data");
  ASSERT_EQ(data["epochs"].size(), 20U);
  std::vector<std::string> skipped;
  for (const nlohmann::json& entry : data["epochs"]) {
    if (entry.contains("skipped")) {
      skipped.push_back(entry["epoch"]);
      EXPECT_THAT(entry["skipped"].get<std::string>(), HasSubstr("graphcheck check --epoch"));
    } else {
      EXPECT_TRUE(entry.contains("report")) << entry["epoch"];
    }
  }
  // The baseline and the 15 epochs right before the checked one are carried.
  EXPECT_EQ(skipped, (std::vector<std::string>{"reload_1", "reload_2", "reload_3", "reload_4"}));

  // Past the byte budget, the rest are skipped too (16 reports of 20k kernels made a 606 MB
  // page): here one report is already past it, so the first carried epoch is the only one.
  HtmlOptions small;
  small.other_epoch_bytes = 1;
  const nlohmann::json budget =
      script_json(to_html(check(snapshot, options), &snapshot, small), "graphcheck-data");
  std::size_t carried = 0;
  for (const nlohmann::json& entry : budget["epochs"]) {
    if (entry.contains("report")) {
      ++carried;
    } else {
      EXPECT_THAT(entry["skipped"].get<std::string>(), HasSubstr("graphcheck check --epoch"));
    }
  }
  EXPECT_EQ(carried, 1U);
  EXPECT_THAT(budget["epochs"].back()["skipped"].get<std::string>(),
              HasSubstr("the page carries 1 bytes of other epochs' reports at most"));
}

TEST(ReportHtmlContext, AnEpochTheCheckerRefusesIsSaidNotThrown) {
  Snapshot snapshot = read_snapshot(data_dir() / "decode_step.json");
  Report report = check(snapshot);
  report.baseline = "an epoch of another snapshot";
  const nlohmann::json data = script_json(to_html(report, &snapshot), "graphcheck-data");
  ASSERT_FALSE(data["epochs"].empty());
  EXPECT_THAT(data["epochs"][0]["error"].get<std::string>(),
              HasSubstr("an epoch of another snapshot"));
}

TEST(ReportHtmlContext, NavigationIsAFixedSizeBlockAndNullWithout) {
  const Snapshot snapshot = read_snapshot(data_dir() / "verdict_stale.json");
  const Report report = check(snapshot);
  EXPECT_EQ(navigation_text(to_html(report, &snapshot)), "null");
  HtmlOptions options;
  options.navigation = HtmlNavigation{"index.html", "a</script>.html", ""};
  const std::string page = to_html(report, &snapshot, options);
  const std::string block = navigation_text(page);
  EXPECT_EQ(block.size(), kHtmlNavigationBytes);
  const nlohmann::json links = nlohmann::json::parse(block);
  EXPECT_EQ(links["index"], "index.html");
  EXPECT_EQ(links["previous"], "a</script>.html");  // escaped in the page, intact in the JSON
  EXPECT_EQ(links["next"], "");
  options.navigation->previous = std::string(kHtmlNavigationBytes, 'x');
  EXPECT_THAT(test_support::thrown_message([&] { (void)to_html(report, &snapshot, options); }),
              HasSubstr(" bytes, more than the " + std::to_string(kHtmlNavigationBytes) +
                        " their block holds; use shorter (relative) hrefs"));
}

TEST(ReportHtmlContext, CudaNodeIdsAreOneRunOfTheGraphsNodes) {
  const Snapshot snapshot = read_snapshot(data_dir() / "gpu" / "watch_legacy.json");
  const nlohmann::json data = script_json(to_html(check(snapshot), &snapshot), "graphcheck-data");
  const GraphRecord& graph = snapshot.graphs.front();
  // Node 17179869184 (graph 4 << 32 in CUDA's numbering) is shown as 1:0, and so on.
  EXPECT_EQ(data["snapshot"]["graphs"][0]["node_runs"],
            nlohmann::json::parse("[[0," + std::to_string(graph.nodes.front().id) + "," +
                                  std::to_string(graph.nodes.size()) + "]]"));
}

TEST(ReportHtmlContext, NodeRunsFollowBodiesDepthFirst) {
  const Snapshot snapshot = read_snapshot(data_dir() / "node_child_graph.json");
  const nlohmann::json data = script_json(to_html(check(snapshot), &snapshot), "graphcheck-data");
  std::uint64_t numbered = 0;
  for (const nlohmann::json& run : data["snapshot"]["graphs"][0]["node_runs"]) {
    EXPECT_EQ(run[0], numbered);
    numbered += run[2].get<std::uint64_t>();
  }
  EXPECT_EQ(numbered, data["snapshot"]["graphs"][0]["nodes"]);
}

TEST(ReportHtmlContext, SubjectAndHeaderAreEmbeddedAsText) {
  const Report report = check(read_snapshot(data_dir() / "verdict_stale.json"));
  HtmlOptions options;
  options.subject = "model (ReferenceModel) \xc2\xb7 worker rank 0 #2";
  options.header = {"graphcheck watch: check point #2 'after_reload'", "read by: </script>"};
  const nlohmann::json data = script_json(to_html(report, nullptr, options), "graphcheck-data");
  EXPECT_EQ(data["context"]["subject"], options.subject);
  EXPECT_EQ(data["context"]["header"], nlohmann::json(options.header));
  EXPECT_TRUE(data["epochs"].empty());
}

}  // namespace
}  // namespace graphcheck
