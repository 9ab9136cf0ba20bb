// `graphcheck report DIR` on bad input: one error line (exit 2) naming the index line and
// field, the folder without watch output, the report that cannot be parsed; usage.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "unit/watch_folder_fixture.h"

namespace graphcheck::testing_cli {
namespace {

using ::testing::HasSubstr;

using CliReportTest = WatchFolderTest;

TEST_F(CliReportTest, BadIndexLinesNameTheLineAndTheField) {
  add(on_rank(0, "capture", 1, make_report("capture", {})));
  const std::string index = (folder() / "index.jsonl").string();
  const std::string good = lines_.back().dump();

  write_text(folder() / "index.jsonl", good + "\n\n{\"seq\": 2, \"label\": \n");
  expect_error(run({"report", folder().string()}), {index + ":3: not valid JSON: "});

  Json no_pid = lines_.back();
  no_pid.erase("pid");
  write_text(folder() / "index.jsonl", good + "\n" + no_pid.dump() + "\n");
  expect_error(run({"report", folder().string()}),
               {index + ":2: missing required key \"pid\"", "expected a non-negative integer"});

  Json bad_count = lines_.back();
  bad_count["summary"]["unregistered"] = "many";
  write_text(folder() / "index.jsonl", bad_count.dump() + "\n");
  expect_error(
      run({"report", folder().string()}),
      {index + ":1: summary.unregistered: expected a non-negative integer, found \"many\""});

  Json bad_note = lines_.back();
  bad_note["notes"] = Json::array({"fine", 7});
  write_text(folder() / "index.jsonl", bad_note.dump() + "\n");
  expect_error(run({"report", folder().string()}),
               {index + ":1: notes[1]: expected a string, found 7"});

  write_text(folder() / "index.jsonl", "[1, 2]\n");
  expect_error(run({"report", folder().string()}),
               {index + ":1: expected one JSON object per line, found [1,2]"});
}

TEST_F(CliReportTest, MissingOrEmptyIndexSaysTheFolderHoldsNoWatchOutput) {
  expect_error(run({"report", folder().string()}),
               {folder().string() + ": holds no graphcheck watch output: ",
                (folder() / "index.jsonl").string() + " not found"});
  write_text(folder() / "index.jsonl", "\n");
  expect_error(run({"report", folder().string()}),
               {folder().string() + ": holds no graphcheck watch output: ", "is empty"});
  expect_error(run({"report", (dir_ / "nowhere").string()}),
               {(dir_ / "nowhere").string() + ": expected a folder written by graphcheck's watch, "
                                              "found nothing there"});
}

TEST_F(CliReportTest, UnreadableReportIsAnErrorNamingTheFile) {
  Json& line = add(on_rank(0, "capture", 1, make_report("capture", {})));
  const std::string path = line["files"]["report_json"];
  write_text(path, R"({"format": "graphcheck-report", "version": 1})");
  write_index();
  expect_error(run({"report", folder().string()}), {path + ": ", "epoch"});
}

TEST_F(CliReportTest, HelpListsTheCommandAndItsOptions) {
  EXPECT_THAT(run({"--help"}).out, HasSubstr("report"));
  const RunResult help = run({"report", "--help"});
  EXPECT_EQ(help.status, 0);
  for (const char* option : {"DIR", "--format", "--output", "--keep-stale-allow"}) {
    EXPECT_THAT(help.out, HasSubstr(option));
  }
  expect_error(run({"report"}), {"DIR"});
  expect_error(run({"report", folder().string(), "--format", "xml"}), {"xml"});
}

}  // namespace
}  // namespace graphcheck::testing_cli
