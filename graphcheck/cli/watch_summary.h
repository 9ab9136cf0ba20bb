// One summary of a watch folder (the folder a GRAPHCHECK=1 server writes, shared by all its
// processes and ranks): check points grouped by label, one row per process, the findings'
// owners across processes (an owner found on some ranks only is flagged), notes, stale
// allowlist globs and reports that could not be found. `graphcheck report DIR` prints it.
#ifndef GRAPHCHECK_CLI_WATCH_SUMMARY_H_
#define GRAPHCHECK_CLI_WATCH_SUMMARY_H_

#include <graphcheck/report.h>
#include <graphcheck/verdict.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "graphcheck/cli/watch_index.h"

namespace graphcheck::cli {

/// One check point of one process: its index line and its report, when found.
struct ProcessRow {
  WatchEntry entry;
  /// How the summary names the process: its role, "pid N" when it has none, and
  /// "role (pid N)" when processes of different pids share the role in one check point.
  std::string name;
  std::string report_path;  ///< the report JSON read; "" when missing
  std::string text_path;    ///< its text twin when it exists; "" otherwise
  std::optional<Report> report;
  std::string missing;  ///< why the report is missing; "" when read

  /// The counts: the report's when read, else the index line's.
  [[nodiscard]] const Summary& summary() const { return report ? report->summary : entry.summary; }
  /// References with a finding verdict, plus census findings.
  [[nodiscard]] std::uint64_t findings() const {
    return summary().findings() + entry.census.size();
  }
};

/// Where an owner row comes from.
enum class OwnerSource : std::uint8_t {
  kReport,  ///< findings of a report: references with `verdict`
  kCensus,  ///< census lines of the index: storages the model keeps outside its registry
};

/// The findings of one verdict and owner, across the processes of one check point.
struct OwnerRow {
  OwnerSource source = OwnerSource::kReport;
  Verdict verdict = Verdict::kUnregistered;  ///< kReport only
  /// As the reports give it ("" when no owner or label is known); the path of a census line.
  std::string owner;
  /// kReport: references (findings) over all processes; kCensus: census lines, one a process.
  std::uint64_t references = 0;
  std::vector<std::string> processes;  ///< names of the processes it was found on, row order
  /// Found on every process of the check point that could show it: every process whose
  /// report was read (kReport), every process (kCensus: the index holds the census).
  bool everywhere = true;
};

/// The rows of one check point label.
struct CheckpointSummary {
  std::string label;
  std::vector<ProcessRow> processes;  ///< by role (rank numbers in numeric order), pid, time
  /// stale, lost, dangling, unregistered, census; within each, in the order first found.
  std::vector<OwnerRow> owners;
  std::vector<std::string> notes;    ///< each once, in row order
  std::vector<std::string> skipped;  ///< each once, in row order
  /// The processes (names) whose report was read: where a report's owner could be found.
  std::vector<std::string> read_processes;
  /// Every process (names) of the check point: where a census line could be found.
  std::vector<std::string> all_processes;
};

/// Where one allowlist glob was stale: a check point label and the processes there.
struct StaleWhere {
  std::string label;
  std::vector<std::string> processes;
};

/// An allowlist glob that matched nothing, with every check point and process it did so in.
struct StaleAllowRow {
  std::string glob;
  std::vector<StaleWhere> where;
};

/// The merged folder.
struct WatchSummary {
  std::string dir;                             ///< as given on the command line
  std::vector<CheckpointSummary> checkpoints;  ///< labels in order of first appearance (time)
  std::vector<StaleAllowRow> stale_allow;      ///< globs in order of first appearance
  /// Lines of index.jsonl that could not be read (torn), one note each (WatchIndex::notes).
  std::vector<std::string> index_notes;
  /// Whether stale allowlist globs fail the summary (`--keep-stale-allow`: kKeep).
  StaleAllowPolicy stale_allow_policy = StaleAllowPolicy::kFail;

  /// References with a finding verdict and census findings, over every check point of every
  /// process.
  [[nodiscard]] std::uint64_t findings() const;
  /// True when any check point has findings (its counts, its report, its census or its index
  /// line's "ok" say so), or a stale allowlist glob under kFail: `graphcheck report` exits 1
  /// exactly then.
  [[nodiscard]] bool failed() const;
  /// Every row whose report is missing, in check point order.
  [[nodiscard]] std::vector<const ProcessRow*> missing_reports() const;
};

/// Reads `dir` (index.jsonl and the reports it names) and merges it. A report is looked for
/// at files.report_json when that path is absolute and is a file, else under its file name in
/// `dir` (a folder copied off a server); a line without one, or a report found nowhere, is a
/// row with `missing` set (saying what is there instead when a path holds something that is
/// not a file: a folder, a symlink loop).
/// @throws Error from `read_watch_index`, and naming the report file when one is found but
/// cannot be read or parsed.
[[nodiscard]] WatchSummary summarize_watch(const std::filesystem::path& dir,
                                           StaleAllowPolicy stale_allow_policy);

/// The human summary: per check point its processes, owners, notes; then stale globs, missing
/// reports, and "findings: N" on the last line (as `graphcheck check` ends).
[[nodiscard]] std::string to_text(const WatchSummary& summary);

/// The summary as JSON, format "graphcheck-report-summary" version 1 (docs/cli.md).
[[nodiscard]] std::string to_json(const WatchSummary& summary);

}  // namespace graphcheck::cli

#endif  // GRAPHCHECK_CLI_WATCH_SUMMARY_H_
