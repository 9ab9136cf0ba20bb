// Names with control bytes never reach a terminal raw (issue 34): `printable`, the text
// report of `check` (library and CLI) on hostile names, and a seeded property test over random
// bytes in every name a report prints. JSON output stays exact.
#include <gmock/gmock.h>
#include <graphcheck/checker.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "common/test_paths.h"
#include "unit/cli_run_helpers.h"

namespace graphcheck {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

bool valid_utf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();  // the strict handler throws on bytes that are not UTF-8
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

// The first byte a terminal would act on: a byte that is not UTF-8, a C0 control but the
// newline, DEL, or a C1 control (U+0080..U+009F: 0xC2 0x80..0x9F); npos when there is none.
std::size_t raw_control(const std::string& text) {
  if (!valid_utf8(text)) {
    return 0;
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const bool c1 =
        byte == 0xC2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if ((byte < 0x20 && byte != '\n') || byte == 0x7F || c1) {
      return i;
    }
  }
  return std::string::npos;
}

TEST(Printable, EscapesControlsAndBadBytesAndKeepsTheRest) {
  EXPECT_EQ(printable("layers.0.w"), "layers.0.w");
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\0b");
  EXPECT_EQ(printable("\x1b[31mred\x1b[0m"), "\\x1b[31mred\\x1b[0m");
  EXPECT_EQ(printable("one\ntwo\r\tx\b\x7f"), "one\\ntwo\\r\\tx\\x08\\x7f");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");  // é ✓ kept
  EXPECT_EQ(printable("csi\xc2\x9b"
                      "2J"),
            "csi\\x9b2J");                                        // U+009B, a C1 control
  EXPECT_EQ(printable("bad\xff\xfe\xc3"), "bad\\xff\\xfe\\xc3");  // not UTF-8: byte by byte
  EXPECT_EQ(printable("back\\slash"), "back\\slash");
}

Finding hostile_finding(std::string kernel, std::string owner) {
  Finding finding;
  finding.graph = 1;
  finding.node = 3;
  finding.kernel = std::move(kernel);
  finding.param = 0;
  finding.offset = 8;
  finding.address = 0x7f3a00000000;
  finding.verdict = Verdict::kUnregistered;
  finding.owner = std::move(owner);
  finding.detail = "inside allocation \"" + finding.owner + "\"";
  finding.fix = "register it";
  return finding;
}

Report hostile_report() {
  Report report;
  report.epoch = "after\nwake";
  report.baseline = "cap\x1b]0;title\x07ture";
  report.summary.graphs = 1;
  report.summary.references = 1;
  report.summary.counts[static_cast<std::size_t>(Verdict::kUnregistered)] = 1;
  report.findings = {hostile_finding("gemm\x1b[2J", std::string("model.w\0\bx\ny", 12))};
  report.warnings = {"note: scratch\r\nspoofed line"};
  report.stale_allow = {"glob\x1b[31m*"};
  return report;
}

TEST(TextReport, NamesWithControlBytesAreEscapedAndJsonStaysExact) {
  const Report report = hostile_report();
  const std::string text = to_text(report);
  EXPECT_EQ(raw_control(text), std::string::npos) << text;
  EXPECT_THAT(text,
              HasSubstr("epoch \"after\\nwake\" checked against \"cap\\x1b]0;title\\x07ture\""));
  EXPECT_THAT(text, HasSubstr("kernel gemm\\x1b[2J: 1 finding"));
  EXPECT_THAT(text, HasSubstr("UNREGISTERED model.w\\0\\x08x\\ny (allocation label)"));
  EXPECT_THAT(text, HasSubstr("  scratch\\r\\nspoofed line\n"));
  EXPECT_THAT(text, HasSubstr("  glob\\x1b[31m*\n"));
  // The escapes did not add or split lines: the same report with plain names has as many.
  Report plain = report;
  plain.epoch = "e";
  plain.baseline = "b";
  plain.findings = {hostile_finding("gemm", "model.w")};
  plain.warnings = {"note: scratch"};
  plain.stale_allow = {"glob"};
  const std::string plain_text = to_text(plain);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'),
            std::count(plain_text.begin(), plain_text.end(), '\n'));
  EXPECT_EQ(parse_report(to_json(report)), report);  // the JSON keeps every byte
}

// Random bytes, weighted toward what a terminal acts on and what is not UTF-8.
std::string random_name(std::mt19937_64& rng) {
  // "\0" converts to "" (a C string ends there): the empty piece stands for a NUL byte.
  static const std::vector<std::string> kPieces = {
      "\x1b[31m", "\n", "\r", "\0", "\b", "\x7f", "\xc2\x9b", "\x9b", "\xff", "\xc3", "\t",
      "layers.",  "0",  ".w", "é",  "\\", "\"",   "<",        " ",    "%s",   "{}"};
  std::string name;
  const std::size_t pieces = std::uniform_int_distribution<std::size_t>(0, 8)(rng);
  for (std::size_t i = 0; i < pieces; ++i) {
    if (std::uniform_int_distribution<int>(0, 3)(rng) == 0) {
      name += static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    } else {
      const std::string& piece =
          kPieces[std::uniform_int_distribution<std::size_t>(0, kPieces.size() - 1)(rng)];
      name += piece.empty() ? std::string(1, '\0') : piece;
    }
  }
  return name;
}

TEST(TextReport, RandomBytesInEveryNameNeverReachTheTerminalRaw) {
  std::mt19937_64 rng(34);  // seeded: a failure replays
  for (int round = 0; round < 300; ++round) {
    Report report;
    report.epoch = random_name(rng);
    report.baseline = random_name(rng);
    for (int f = 0; f < 4; ++f) {
      Finding finding = hostile_finding(random_name(rng), random_name(rng));
      finding.node = static_cast<std::uint64_t>(f);
      finding.node_type = f % 2 == 0 ? NodeType::kKernel : NodeType::kOp;
      if (f % 2 != 0) {
        finding.param.reset();
        finding.offset.reset();
        finding.operand = random_name(rng);
      }
      finding.detail = random_name(rng);
      finding.fix = random_name(rng);
      report.findings.push_back(std::move(finding));
    }
    report.warnings = {random_name(rng), "note: " + random_name(rng),
                       "not checked: " + random_name(rng)};
    report.stale_allow = {random_name(rng)};
    const std::string text = to_text(report);
    ASSERT_EQ(raw_control(text), std::string::npos) << "round " << round << ": " << text;
    // Names that are UTF-8 come back from the JSON report byte for byte.
    const Report parsed = parse_report(to_json(report));
    for (std::size_t f = 0; f < report.findings.size(); ++f) {
      if (valid_utf8(report.findings[f].owner)) {
        ASSERT_EQ(parsed.findings[f].owner, report.findings[f].owner) << "round " << round;
      }
    }
  }
}

// `random_name` made UTF-8 (a snapshot file holds JSON text: bytes that are not UTF-8 cannot
// be in it), control characters kept.
std::string random_text(std::mt19937_64& rng) {
  const std::string json = nlohmann::json(random_name(rng))
                               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return nlohmann::json::parse(json).get<std::string>();
}

TEST(CliText, CheckPrintsHostileNamesEscapedAndJsonExact) {
  const fs::path dir =
      fs::temp_directory_path() / ("graphcheck_hostile_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::mt19937_64 rng(3434);
  for (int round = 0; round < 12; ++round) {
    Snapshot snapshot = read_snapshot(fs::path(test_paths::data_dir()) / "verdict_lost.json");
    const std::string owner = round == 0 ? std::string("ws\x1b[31m\0\n", 9) : random_text(rng);
    for (Epoch& epoch : snapshot.epochs) {
      for (Allocation& allocation : epoch.allocations) {
        allocation.label = owner;
      }
      for (Span& span : epoch.spans) {
        span.name = random_text(rng);
      }
    }
    for (Node& node : snapshot.graphs[0].nodes) {
      node.name = random_text(rng);
    }
    const fs::path path = dir / "hostile.json";
    write_snapshot(snapshot, path);
    const testing_cli::RunResult text =
        testing_cli::run_program(test_paths::cli_path(), {"check", path.string()}, dir / "err");
    ASSERT_LE(text.status, 1) << text.err;
    ASSERT_EQ(raw_control(text.out), std::string::npos) << "round " << round << ": " << text.out;
    ASSERT_EQ(raw_control(text.err), std::string::npos) << text.err;
    const testing_cli::RunResult json = testing_cli::run_program(
        test_paths::cli_path(), {"check", path.string(), "--format", "json"}, dir / "err");
    const Report report = parse_report(json.out);
    EXPECT_EQ(report, check(snapshot));  // every name as it was, byte for byte
    if (round == 0) {
      EXPECT_THAT(text.out, HasSubstr("ws\\x1b[31m\\0\\n"));
      // Every byte of the owner in the JSON, NUL and ESC included.
      EXPECT_TRUE(std::any_of(report.findings.begin(), report.findings.end(),
                              [&owner](const Finding& f) { return f.owner == owner; }));
    }
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace graphcheck
