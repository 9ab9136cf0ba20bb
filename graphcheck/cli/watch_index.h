// The index of a watch folder: `index.jsonl`, one JSON object per line, appended by every
// process of a server that runs with GRAPHCHECK=1 at each of its check points (docs/server.md).
// `graphcheck report DIR` reads it to find every check point and its report.
#ifndef GRAPHCHECK_CLI_WATCH_INDEX_H_
#define GRAPHCHECK_CLI_WATCH_INDEX_H_

#include <graphcheck/report.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace graphcheck::cli {

/// The index file's name inside a watch folder.
inline constexpr const char* kWatchIndexName = "index.jsonl";

/// One line of `index.jsonl`: one check point of one process. Keys the summary does not use
/// (graphs, model, seconds) are ignored, as unknown keys are.
struct WatchEntry {
  std::size_t line = 0;  ///< 1-based line number in index.jsonl
  std::uint64_t seq = 0;
  std::string label;
  double time = 0.0;  ///< seconds since the Unix epoch
  std::uint64_t pid = 0;
  std::string role;                  ///< "worker rank 0"; "" when unknown or absent
  std::vector<std::string> skipped;  ///< graphs not checked, each with why
  std::vector<std::string> notes;    ///< absent in lines of older versions: empty
  /// A census check point's findings: "path: shape dtype" per storage the model keeps outside
  /// its parameters and buffers. They count as findings; absent in older lines: empty.
  std::vector<std::string> census;
  std::optional<bool> ok;  ///< no findings in any graph, when the line says
  /// Counts from the line; graphs, nodes and ok-class verdicts are 0 when absent.
  Summary summary;
  std::string report_json;  ///< files.report_json as written; "" when absent
  std::string report_text;  ///< files.report_text as written; "" when absent
};

/// What `read_watch_index` read: every whole line, and a note per line it could not read.
struct WatchIndex {
  std::vector<WatchEntry> entries;
  /// One per line that is not JSON ("<index>:<line>: skipped: ..."): a process stopped while
  /// writing its line (a crashed server leaves its last line torn).
  std::vector<std::string> notes;
};

/// What is at `path`, for messages: "nothing", "a symlink loop", "a symlink to nothing", "a
/// folder", "a regular file", "a FIFO (named pipe)", "a socket", "a device", or "a path that
/// cannot be inspected (<reason>)". Never throws for the path's sake.
[[nodiscard]] std::string path_kind(const std::filesystem::path& path);

/// Reads `dir`/index.jsonl; blank lines are skipped, and a line that is not JSON (a torn
/// line) is skipped with a note. Required per line: seq, label, time, pid, summary (with
/// references, unregistered, dangling, stale, lost); every other key the summary uses is
/// optional but must have its type when present.
/// @throws Error naming `dir` when it is not a folder (saying what is there instead: a symlink
/// loop, a file, nothing), or holds no index, an index that is not a regular file, an empty
/// one ("holds no graphcheck watch output") or one with no line that is JSON; naming
/// `<dir>/index.jsonl:<line>` and the field, what was expected and what was found, for a JSON
/// line whose field is missing or of the wrong type.
[[nodiscard]] WatchIndex read_watch_index(const std::filesystem::path& dir);

}  // namespace graphcheck::cli

#endif  // GRAPHCHECK_CLI_WATCH_INDEX_H_
