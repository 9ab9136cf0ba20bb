// The HTML report: the page embeds the report's JSON (and the snapshot's map data) where no
// name can break out of the script, and `graphcheck check --format html` writes it. What the
// page shows in a browser is tested by the browser tier (tests/browser/).
#include <gmock/gmock.h>
#include <graphcheck/checker.h>
#include <graphcheck/report.h>
#include <graphcheck/report_html.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_paths.h"
#include "unit/cli_run_helpers.h"

namespace graphcheck {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr std::string_view kDataOpen = R"(<script type="application/json" id="graphcheck-data">)";

fs::path data_dir() { return test_paths::data_dir(); }

// The JSON between the data script's tags, parsed.
nlohmann::json embedded_data(const std::string& page) {
  const std::size_t open = page.find(kDataOpen);
  EXPECT_NE(open, std::string::npos);
  const std::size_t begin = open + kDataOpen.size();
  const std::size_t end = page.find("</script>", begin);
  EXPECT_NE(end, std::string::npos);
  return nlohmann::json::parse(page.substr(begin, end - begin));
}

// A snapshot whose owner and kernel names try to end the script and open a comment.
Snapshot hostile_snapshot() {
  Snapshot snapshot = read_snapshot(data_dir() / "verdict_unregistered.json");
  for (Epoch& epoch : snapshot.epochs) {
    for (Allocation& allocation : epoch.allocations) {
      if (!allocation.label.empty()) {
        allocation.label = "evil</script><script>alert(1)</script><!--";
      }
    }
  }
  snapshot.graphs[0].nodes[0].name = "k</SCRIPT>";
  return snapshot;
}

TEST(ReportHtml, EmbedsTheReportJsonAndTheTemplate) {
  const Snapshot snapshot = read_snapshot(data_dir() / "decode_step.json");
  const Report report = check(snapshot);
  const std::string page = to_html(report);
  EXPECT_THAT(page, StartsWith("<!DOCTYPE html>"));
  EXPECT_THAT(page, HasSubstr("id=\"page-errors\""));
  EXPECT_THAT(page, HasSubstr("id=\"page-ready\""));
  EXPECT_THAT(page, Not(HasSubstr("@GRAPHCHECK_DATA@")));
  EXPECT_THAT(page, Not(HasSubstr("/*@GRAPHCHECK_SCRIPTS@*/")));
  // Nothing is fetched: no external script, stylesheet or image.
  EXPECT_THAT(page, Not(HasSubstr("src=\"http")));
  EXPECT_THAT(page, Not(HasSubstr("href=\"http")));
  // Without JavaScript every count reads 0: the page says so instead of looking clean.
  EXPECT_THAT(page, HasSubstr("<body>\n<noscript><p class=\"noscript\">This page draws its "
                              "report with JavaScript"));
  const nlohmann::json data = embedded_data(page);
  EXPECT_EQ(parse_report(data["report"].dump()), report);
  EXPECT_TRUE(data["snapshot"].is_null());
}

TEST(ReportHtml, WithTheSnapshotCarriesEpochsAndEveryReference) {
  const Snapshot snapshot = read_snapshot(data_dir() / "decode_step.json");
  const Report report = check(snapshot);
  const nlohmann::json data = embedded_data(to_html(report, &snapshot));
  ASSERT_TRUE(data["snapshot"].is_object());
  EXPECT_EQ(data["snapshot"]["epochs"].size(), snapshot.epochs.size());
  ASSERT_EQ(data["snapshot"]["graphs"].size(), snapshot.graphs.size());
  std::size_t refs = 0;
  std::size_t with_findings = 0;
  for (const nlohmann::json& graph : data["snapshot"]["graphs"]) {
    refs += graph["refs"].size();
    for (const nlohmann::json& ref : graph["refs"]) {
      if (ref.size() > 7 && !ref[7].empty()) {  // trailing defaults are left out
        ++with_findings;
      }
    }
  }
  // The page draws the references the checker judged, and ties every finding to one.
  EXPECT_EQ(refs, report.summary.references);
  EXPECT_GT(with_findings, 0U);
  EXPECT_LE(with_findings, report.findings.size());
}

TEST(ReportHtml, NamesCannotEndTheDataScript) {
  const Snapshot snapshot = hostile_snapshot();
  const Report report = check(snapshot);
  ASSERT_FALSE(report.findings.empty());
  const std::string page = to_html(report, &snapshot);
  EXPECT_THAT(page, Not(HasSubstr("evil</script>")));
  EXPECT_THAT(page, Not(HasSubstr("<!--\"")));
  EXPECT_THAT(page, Not(HasSubstr("k</SCRIPT>")));
  // Escaped, the names still arrive intact.
  const nlohmann::json data = embedded_data(page);
  EXPECT_EQ(data["report"]["findings"][0]["owner"], "evil</script><script>alert(1)</script><!--");
  EXPECT_THAT(data["snapshot"]["names"].dump(), HasSubstr("k</SCRIPT>"));
}

TEST(ReportHtml, BadUtf8InNamesIsReplacedNotFatal) {
  Snapshot snapshot = read_snapshot(data_dir() / "verdict_unregistered.json");
  snapshot.graphs[0].nodes[0].name = std::string("gemm\xff\xfe", 6);
  const Report report = check(snapshot);
  const nlohmann::json data = embedded_data(to_html(report, &snapshot));
  // Each bad byte is U+FFFD (EF BF BD), not dropped: the name stays as long as it was.
  EXPECT_THAT(data["snapshot"]["names"].dump(), HasSubstr("gemm\xef\xbf\xbd\xef\xbf\xbd\""));
}

class CliHtmlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("graphcheck_html_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  testing_cli::RunResult run(const std::vector<std::string>& args) {
    return testing_cli::run_program(test_paths::cli_path(), args, dir_ / "stderr.txt");
  }
  fs::path dir_;
};

TEST_F(CliHtmlTest, FormatHtmlWritesThePageToOutput) {
  const fs::path html = dir_ / "report.html";
  const std::string snapshot_path = (data_dir() / "verdict_stale.json").string();
  const testing_cli::RunResult result =
      run({"check", snapshot_path, "--format", "html", "--output", html.string()});
  EXPECT_EQ(result.status, 1) << result.err;  // findings: the exit code is check's
  EXPECT_EQ(result.out, "");
  const Snapshot snapshot = read_snapshot(snapshot_path);
  // Titled by the snapshot's file name, never its folder.
  HtmlOptions options;
  options.subject = "verdict_stale.json";
  EXPECT_EQ(testing_cli::read_text(html), to_html(check(snapshot), &snapshot, options));
  EXPECT_THAT(testing_cli::read_text(html), Not(HasSubstr(data_dir().string())));
}

TEST_F(CliHtmlTest, FormatHtmlWithoutOutputWritesStdout) {
  const std::string snapshot_path = (data_dir() / "verdict_registered.json").string();
  const testing_cli::RunResult result = run({"check", snapshot_path, "--format=html"});
  EXPECT_EQ(result.status, 0) << result.err;
  const Snapshot snapshot = read_snapshot(snapshot_path);
  HtmlOptions options;
  options.subject = "verdict_registered.json";
  EXPECT_EQ(result.out, to_html(check(snapshot), &snapshot, options));
}

TEST_F(CliHtmlTest, BadFormatNamesTheValidOnes) {
  const testing_cli::RunResult result =
      run({"check", (data_dir() / "verdict_registered.json").string(), "--format", "pdf"});
  EXPECT_EQ(result.status, 2);
  EXPECT_THAT(result.err, HasSubstr("pdf"));
  EXPECT_THAT(result.err, HasSubstr("html"));
  EXPECT_THAT(result.err, HasSubstr("json"));
  EXPECT_THAT(result.err, HasSubstr("text"));
}

}  // namespace
}  // namespace graphcheck
