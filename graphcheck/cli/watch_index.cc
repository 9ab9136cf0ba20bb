// Reading a watch folder's index.jsonl (watch_index.h). The Python watch writes it
// (python/graphcheck/_watch/output.py, CheckResult.to_dict); lines of older versions lack
// "notes", "census" and "role", so those are optional here.
#include "graphcheck/cli/watch_index.h"

#include <fmt/format.h>
#include <graphcheck/error.h>
#include <graphcheck/report.h>
#include <graphcheck/verdict.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string_view>
#include <system_error>
#include <utility>

namespace graphcheck::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// How much of a bad value an error message shows: enough to recognise it, one line always.
constexpr std::size_t kFoundChars = 40;
// The deepest nesting an index line may have (as the core's readers allow).
constexpr int kMaxDepth = 512;

constexpr std::string_view kUint = "a non-negative integer";
constexpr std::string_view kString = "a string";
constexpr std::string_view kStrings = "a list of strings";

enum class Need : std::uint8_t { kRequired, kOptional };

std::string describe(const Json& value) {
  std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  if (text.size() <= kFoundChars) {
    return text;
  }
  std::size_t cut = kFoundChars;
  // Never split a UTF-8 sequence: back up to the first byte of the one the cut falls in.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0U) == 0x80U) {
    --cut;
  }
  return text.substr(0, cut) + "...";
}

// The fields of one index line. Every error names the file and line (`where_`), the field's
// path in the line ("summary.references"), what was expected and what was found.
class LineReader {
 public:
  LineReader(const Json& line, std::string where) : line_(line), where_(std::move(where)) {}

  // Member `key` of the object at `parent` ("" for the line itself); nullptr when absent
  // and optional.
  const Json* member(const Json& parent, std::string_view parent_path, std::string_view key,
                     Need need, std::string_view expected) const {
    const std::string path =
        parent_path.empty() ? std::string(key) : fmt::format("{}.{}", parent_path, key);
    const auto found = parent.find(std::string(key));
    if (found != parent.end()) {
      return &*found;
    }
    if (need == Need::kRequired) {
      throw Error(
          fmt::format("{}: missing required key \"{}\" (expected {})", where_, path, expected));
    }
    return nullptr;
  }

  [[noreturn]] void fail(std::string_view path, std::string_view expected,
                         const Json& found) const {
    throw Error(
        fmt::format("{}: {}: expected {}, found {}", where_, path, expected, describe(found)));
  }

  std::uint64_t as_uint(const Json& value, std::string_view path) const {
    if (!value.is_number_unsigned()) {
      fail(path, kUint, value);
    }
    return value.get<std::uint64_t>();
  }

  std::string as_string(const Json& value, std::string_view path) const {
    if (!value.is_string()) {
      fail(path, kString, value);
    }
    return value.get<std::string>();
  }

  std::vector<std::string> as_strings(const Json& value, std::string_view path) const {
    if (!value.is_array()) {
      fail(path, kStrings, value);
    }
    std::vector<std::string> out;
    out.reserve(value.size());
    for (std::size_t i = 0; i < value.size(); ++i) {
      out.push_back(as_string(value[i], fmt::format("{}[{}]", path, i)));
    }
    return out;
  }

  const Json& line() const { return line_; }

 private:
  const Json& line_;
  std::string where_;
};

Summary read_summary(const LineReader& reader) {
  const Json& object = *reader.member(reader.line(), "", "summary", Need::kRequired,
                                      "an object of counts: references and each verdict");
  if (!object.is_object()) {
    reader.fail("summary", "an object of counts: references and each verdict", object);
  }
  Summary summary;
  // The counts a row of the summary shows are required; the rest only has to be well typed.
  auto count = [&](std::string_view key, Need need) -> std::uint64_t {
    const Json* value = reader.member(object, "summary", key, need, kUint);
    return value == nullptr ? 0 : reader.as_uint(*value, fmt::format("summary.{}", key));
  };
  summary.graphs = count("graphs", Need::kOptional);
  summary.nodes = count("nodes", Need::kOptional);
  summary.references = count("references", Need::kRequired);
  for (std::size_t i = 0; i < kVerdictCount; ++i) {
    const auto verdict = static_cast<Verdict>(i);
    summary.counts[i] =
        count(to_string(verdict), is_finding(verdict) ? Need::kRequired : Need::kOptional);
  }
  // Every reference has one verdict, so the counts given add up to at most the references
  // (the others are optional here); counts past them (2^64 - 1 wrapped their sum to 0) made a
  // row showing "dangling 1" pass.
  std::uint64_t given = 0;
  bool wrapped = false;
  for (const std::uint64_t value : summary.counts) {
    wrapped = wrapped || __builtin_add_overflow(given, value, &given);
  }
  if (wrapped || given > summary.references) {
    reader.fail("summary.references",
                "at least the sum of the verdict counts (every reference has one verdict)",
                *reader.member(object, "summary", "references", Need::kRequired, kUint));
  }
  return summary;
}

void read_files(const LineReader& reader, WatchEntry& entry) {
  const Json* files = reader.member(reader.line(), "", "files", Need::kOptional, "");
  if (files == nullptr) {
    return;
  }
  if (!files->is_object()) {
    reader.fail("files", "an object of file paths (report_json, report_text, ...)", *files);
  }
  if (const Json* path = reader.member(*files, "files", "report_json", Need::kOptional, "")) {
    entry.report_json = reader.as_string(*path, "files.report_json");
  }
  if (const Json* path = reader.member(*files, "files", "report_text", Need::kOptional, "")) {
    entry.report_text = reader.as_string(*path, "files.report_text");
  }
}

WatchEntry read_entry(const Json& line, std::size_t number, const std::string& where) {
  if (!line.is_object()) {
    throw Error(
        fmt::format("{}: expected one JSON object per line, found {}", where, describe(line)));
  }
  const LineReader reader(line, where);
  WatchEntry entry;
  entry.line = number;
  entry.seq = reader.as_uint(*reader.member(line, "", "seq", Need::kRequired, kUint), "seq");
  entry.label =
      reader.as_string(*reader.member(line, "", "label", Need::kRequired, kString), "label");
  const Json& time =
      *reader.member(line, "", "time", Need::kRequired, "a number (seconds since 1970)");
  if (!time.is_number()) {
    reader.fail("time", "a number (seconds since 1970)", time);
  }
  entry.time = time.get<double>();
  entry.pid = reader.as_uint(*reader.member(line, "", "pid", Need::kRequired, kUint), "pid");
  if (const Json* role = reader.member(line, "", "role", Need::kOptional, kString)) {
    entry.role = reader.as_string(*role, "role");
  }
  if (const Json* skipped = reader.member(line, "", "skipped", Need::kOptional, kStrings)) {
    entry.skipped = reader.as_strings(*skipped, "skipped");
  }
  if (const Json* notes = reader.member(line, "", "notes", Need::kOptional, kStrings)) {
    entry.notes = reader.as_strings(*notes, "notes");
  }
  if (const Json* census = reader.member(line, "", "census", Need::kOptional, kStrings)) {
    entry.census = reader.as_strings(*census, "census");
  }
  if (const Json* ok = reader.member(line, "", "ok", Need::kOptional, "")) {
    if (!ok->is_boolean()) {
      reader.fail("ok", "true or false", *ok);
    }
    entry.ok = ok->get<bool>();
  }
  entry.summary = read_summary(reader);
  read_files(reader, entry);
  return entry;
}

// Index lines nest three levels deep; a line nested like `[[[[...` is refused as soon as it
// passes kMaxDepth, before building it costs memory or printing it (recursively) costs stack.
Json::parser_callback_t refuse_deep_nesting(const std::string& where) {
  return [&where](int depth, Json::parse_event_t event, const Json& /*parsed*/) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxDepth) {
      throw Error(fmt::format("{}: expected arrays and objects nested at most {} levels deep",
                              where, kMaxDepth));
    }
    return true;
  };
}

std::string parse_error_text(const Json::exception& error) {
  // "[json.exception.parse_error.101] parse error at line 1, column 7: ..." -> "parse error
  // at column 7: ...": the line number that matters is the index line's, named before.
  std::string text = error.what();
  if (const std::size_t tag_end = text.find("] ");
      text.starts_with("[json.") && tag_end != std::string::npos) {
    text.erase(0, tag_end + 2);
  }
  if (const std::size_t at = text.find("at line 1, column "); at != std::string::npos) {
    text.replace(at, std::string_view("at line 1, column ").size(), "at column ");
  }
  return text;
}

}  // namespace

std::string path_kind(const fs::path& path) {
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (error) {
    if (error == std::errc::too_many_symbolic_link_levels) {
      return "a symlink loop";
    }
    if (error == std::errc::no_such_file_or_directory) {
      std::error_code ignored;
      return fs::is_symlink(fs::symlink_status(path, ignored)) ? "a symlink to nothing" : "nothing";
    }
    return fmt::format("a path that cannot be inspected ({})", error.message());
  }
  switch (status.type()) {
    case fs::file_type::not_found:
      return "nothing";
    case fs::file_type::directory:
      return "a folder";
    case fs::file_type::regular:
      return "a regular file";
    case fs::file_type::fifo:
      return "a FIFO (named pipe)";
    case fs::file_type::socket:
      return "a socket";
    case fs::file_type::block:
    case fs::file_type::character:
      return "a device";
    default:
      return "something that is neither a file nor a folder";
  }
}

WatchIndex read_watch_index(const fs::path& dir) {
  constexpr std::string_view kHint =
      "(a server run with GRAPHCHECK=1 appends a line to it in GRAPHCHECK_DIR at every check "
      "point; docs/server.md)";
  const std::string shown_dir = printable(dir.string());
  if (const std::string kind = path_kind(dir); kind != "a folder") {
    throw Error(fmt::format("{}: expected a folder written by graphcheck's watch, found {}",
                            shown_dir, kind == "nothing" ? "nothing there" : kind));
  }
  const fs::path index = dir / kWatchIndexName;
  const std::string shown = printable(index.string());
  if (const std::string kind = path_kind(index); kind == "nothing") {
    throw Error(fmt::format("{}: holds no graphcheck watch output: {} not found {}", shown_dir,
                            shown, kHint));
  } else if (kind != "a regular file") {
    throw Error(
        fmt::format("{}: expected the watch's index, a file of JSON lines, found {}", shown, kind));
  }
  std::ifstream file(index, std::ios::binary);
  if (!file) {
    throw Error(fmt::format("{}: cannot open for reading: {}", shown, std::strerror(errno)));
  }
  WatchIndex read;
  std::string text;
  std::size_t lines = 0;
  for (std::size_t number = 1; std::getline(file, text); ++number) {
    if (!text.empty() && text.back() == '\r') {
      text.pop_back();
    }
    if (text.find_first_not_of(" \t") == std::string::npos) {
      continue;  // a blank line, e.g. one left by hand editing
    }
    ++lines;
    const std::string where = fmt::format("{}:{}", shown, number);
    if (const std::size_t nul = text.find('\0'); nul != std::string::npos) {
      // The JSON parser stops at a NUL: the line before it would be read as the whole line.
      read.notes.push_back(fmt::format(
          "{}: skipped, not valid JSON (a NUL byte at column {}): a line torn or damaged", where,
          nul + 1));
      continue;
    }
    Json line;
    try {
      line = Json::parse(text, refuse_deep_nesting(where));
    } catch (const Json::parse_error& parse_error) {
      // What a process that stopped while writing leaves; the lines of the others still count.
      read.notes.push_back(fmt::format(
          "{}: skipped, not valid JSON ({}): a line torn by a process that stopped while "
          "writing it",
          where, parse_error_text(parse_error)));
      continue;
    } catch (const Json::out_of_range& range_error) {
      // Whole JSON with a number no double holds ("1e999"): not torn, and not written by
      // graphcheck (its numbers are counts, ids and times), so an edited or damaged line.
      throw Error(fmt::format(
          "{}: {} (expected the numbers graphcheck writes: counts, ids, times); fix or remove "
          "the line",
          where, parse_error_text(range_error)));
    }
    read.entries.push_back(read_entry(line, number, where));
  }
  if (file.bad()) {
    throw Error(fmt::format("{}: read failed: {}", shown, std::strerror(errno)));
  }
  if (lines == 0) {
    throw Error(fmt::format("{}: holds no graphcheck watch output: {} is empty {}", shown_dir,
                            shown, kHint));
  }
  if (read.entries.empty()) {
    throw Error(
        fmt::format("{}: holds no readable line ({} line{}, none valid JSON; the first: {})", shown,
                    lines, lines == 1 ? "" : "s", read.notes.front()));
  }
  return read;
}

}  // namespace graphcheck::cli
