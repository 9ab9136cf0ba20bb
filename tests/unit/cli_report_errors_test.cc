// `graphcheck report DIR` on bad input: one error line (exit 2) naming the index line and
// field, the folder without watch output, the report that cannot be parsed; usage. A torn
// index line, a folder or a symlink loop where a file should be, and control bytes in names
// (issue 34).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "unit/watch_folder_fixture.h"

namespace graphcheck::testing_cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using CliReportTest = WatchFolderTest;

TEST_F(CliReportTest, BadIndexLinesNameTheLineAndTheField) {
  add(on_rank(0, "capture", 1, make_report("capture", {})));
  const std::string index = (folder() / "index.jsonl").string();
  const std::string good = lines_.back().dump();

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

  // Valid JSON whose number no double holds: nlohmann_json's out_of_range, not parse_error
  // (found by tests/fuzz/watch_fuzz.cc: "internal error" before).
  for (const std::string number : {"1e999", "-1e999"}) {
    Json line = lines_.back();
    line["time"] = 0;
    std::string text = line.dump();
    text.replace(text.find("\"time\":0"), 8, "\"time\":" + number);
    write_text(folder() / "index.jsonl", good + "\n" + text + "\n");
    expect_error(run({"report", folder().string()}),
                 {index + ":2: number overflow parsing '" + number + "'",
                  "expected the numbers graphcheck writes", "fix or remove the line"});
  }

  // Counts that do not add up to the references: 2^64 - 1 wrapped the findings' sum, and a
  // row showing "dangling 1" passed with exit 0.
  Json wrapped = lines_.back();
  wrapped["summary"]["unregistered"] = UINT64_MAX;
  wrapped["summary"]["dangling"] = 1;
  write_text(folder() / "index.jsonl", wrapped.dump() + "\n");
  expect_error(run({"report", folder().string()}),
               {index + ":1: summary.references: expected at least the sum of the verdict "
                        "counts (every reference has one verdict), found 592"});
  // The counts of the verdicts that are no findings may be left out: the rest adds up to less.
  Json findings_only = lines_.back();
  findings_only["summary"].erase("registered");
  write_text(folder() / "index.jsonl", findings_only.dump() + "\n");
  EXPECT_EQ(run({"report", folder().string()}).status, 0);
  // A NUL ends what the JSON parser reads: the line is skipped, not read up to it.
  write_text(folder() / "index.jsonl", good + "\n" + good + std::string(1, '\0') + "junk\n");
  EXPECT_THAT(run({"report", folder().string()}).out,
              HasSubstr(index + ":2: skipped, not valid JSON (a NUL byte at column " +
                        std::to_string(good.size() + 1) + ")"));

  write_text(folder() / "index.jsonl", "[1, 2]\n");
  expect_error(run({"report", folder().string()}),
               {index + ":1: expected one JSON object per line, found [1,2]"});
}

// What a server killed while it appended leaves: its last line cut short. Every whole line is
// still reported, the torn one is a note; only an index with no line to read is an error.
TEST_F(CliReportTest, ATornLineIsANoteAndEveryWholeLineIsReported) {
  add(on_rank(0, "capture", 1,
              make_report("capture", {finding(Verdict::kUnregistered, kScale, 3)})));
  add(on_rank(0, "after_wake", 2, make_report("after_wake", {})));
  const std::string index = (folder() / "index.jsonl").string();
  const std::string whole = lines_[0].dump() + "\n" + lines_[1].dump() + "\n";
  const std::string torn = lines_[1].dump().substr(0, 40);
  for (const std::string& tail : {torn, torn + "\n"}) {  // cut before or after its newline
    write_text(folder() / "index.jsonl", whole + tail);
    const RunResult result = run({"report", folder().string()});
    EXPECT_EQ(result.status, 1) << result.err;  // the findings of the whole lines
    EXPECT_EQ(result.err, "");
    EXPECT_THAT(result.out, HasSubstr("2 check points from 1 process"));
    EXPECT_THAT(result.out,
                HasSubstr("index lines not read (1): every other line is reported\n  " + index +
                          ":3: skipped, not valid JSON (parse error at column"));
    EXPECT_THAT(result.out, HasSubstr("a line torn by a process that stopped while writing it"));
    EXPECT_THAT(result.out, HasSubstr("UNREGISTERED " + std::string(kScale)));
    const RunResult json = run({"report", folder().string(), "--format", "json"});
    EXPECT_EQ(Json::parse(json.out)["index_notes"].size(), 1U);
  }
  // A torn line in the middle (two processes appending, one of them killed) is skipped too.
  write_text(folder() / "index.jsonl", lines_[0].dump() + "\n" + torn + "\n" + lines_[1].dump());
  EXPECT_THAT(run({"report", folder().string()}).out, HasSubstr(index + ":2: skipped"));
  // Nothing left to read: exit 2, naming the line.
  write_text(folder() / "index.jsonl", "\n" + torn);
  expect_error(run({"report", folder().string()}),
               {index + ": holds no readable line (1 line, none valid JSON; the first: " + index +
                ":2: skipped, not valid JSON"});
}

TEST_F(CliReportTest, ALoopOrAFolderWhereAFileShouldBeSaysSo) {
  Json& line = add(on_rank(0, "capture", 1, make_report("capture", {})));
  write_index();
  const fs::path report = line["files"]["report_json"].get<std::string>();
  fs::remove(report);
  fs::create_directory(report);  // a folder where the report should be
  RunResult result = run({"report", folder().string()});
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr(report.string() + " is a folder, not a report file"));
  EXPECT_THAT(result.out, Not(HasSubstr("not found")));
  fs::remove(report);
  fs::create_symlink(report.filename(), report);  // a link to itself
  result = run({"report", folder().string()});
  EXPECT_THAT(result.out, HasSubstr(report.string() + " is a symlink loop, not a report file"));
  // The index and the folder themselves.
  fs::remove(folder() / "index.jsonl");
  fs::create_symlink("index.jsonl", folder() / "index.jsonl");
  expect_error(run({"report", folder().string()}),
               {(folder() / "index.jsonl").string() +
                ": expected the watch's index, a file of JSON lines, found a symlink loop"});
  fs::remove(folder() / "index.jsonl");
  fs::create_directory(folder() / "index.jsonl");
  expect_error(run({"report", folder().string()}), {"found a folder"});
  const fs::path loop = dir_ / "loop";
  fs::create_symlink("loop", loop);
  expect_error(run({"report", loop.string()}),
               {loop.string() + ": expected a folder written by graphcheck's watch, found a "
                                "symlink loop"});
}

// Roles, labels, owners, notes and paths come from the processes that wrote the folder: the
// text summary prints them escaped, the JSON as they are.
TEST_F(CliReportTest, ControlBytesInNamesAreEscapedInTheText) {
  CheckPoint point = on_rank(0, "cap\x1b[2Jture", 1,
                             make_report("capture", {finding(Verdict::kStale, "w\nspoof\b", 3)}));
  point.role = "rank\r0";
  Json& line = add(with_notes(point, {"note\x1b]0;t\x07"}));
  line["skipped"] = Json::array({std::string("graph\0 9", 8)});
  write_index();
  const RunResult result = run({"report", folder().string()});
  EXPECT_EQ(result.status, 1) << result.err;
  for (const char c : result.out) {
    const auto byte = static_cast<unsigned char>(c);
    ASSERT_TRUE(byte >= 0x20 || c == '\n') << "raw control byte " << int{byte} << " in\n"
                                           << result.out;
  }
  for (const char* escaped :
       {"cap\\x1b[2Jture", "rank\\r0", "w\\nspoof\\x08", "note\\x1b]0;t\\x07", "graph\\0 9"}) {
    EXPECT_THAT(result.out, HasSubstr(escaped));
  }
  const Json json = Json::parse(run({"report", folder().string(), "--format", "json"}).out);
  EXPECT_EQ(json["checkpoints"][0]["label"], "cap\x1b[2Jture");
  EXPECT_EQ(json["checkpoints"][0]["owners"][0]["owner"], "w\nspoof\b");
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
