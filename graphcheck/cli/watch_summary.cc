// Merging a watch folder into one summary (watch_summary.h): index lines grouped by check
// point label, their reports found and read, owners compared across processes.
#include "graphcheck/cli/watch_summary.h"

#include <fmt/format.h>
#include <graphcheck/detail/text_groups.h>
#include <graphcheck/error.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>

namespace graphcheck::cli {
namespace {

namespace fs = std::filesystem;

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

// The end of the run of digits that starts at `begin`.
std::size_t digits_end(std::string_view text, std::size_t begin) {
  while (begin < text.size() && is_digit(text[begin])) {
    ++begin;
  }
  return begin;
}

// `text` compared with digit runs read as numbers, so that "worker rank 2" sorts before
// "worker rank 10" in a server with more than ten ranks.
bool natural_less(std::string_view a, std::string_view b) {
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < a.size() && j < b.size()) {
    if (is_digit(a[i]) && is_digit(b[j])) {
      const std::size_t i_end = digits_end(a, i);
      const std::size_t j_end = digits_end(b, j);
      std::string_view x = a.substr(i, i_end - i);
      std::string_view y = b.substr(j, j_end - j);
      x.remove_prefix(std::min(x.find_first_not_of('0'), x.size()));
      y.remove_prefix(std::min(y.find_first_not_of('0'), y.size()));
      if (x.size() != y.size()) {
        return x.size() < y.size();
      }
      if (x != y) {
        return x < y;
      }
      i = i_end;
      j = j_end;
      continue;
    }
    if (a[i] != b[j]) {
      return a[i] < b[j];
    }
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

// Rows of one check point: named roles first (in rank order), then role-less processes by
// pid; one process's repeated check points of a label by time.
bool row_less(const ProcessRow& a, const ProcessRow& b) {
  const WatchEntry& x = a.entry;
  const WatchEntry& y = b.entry;
  if (x.role.empty() != y.role.empty()) {
    return y.role.empty();
  }
  if (x.role != y.role) {
    return natural_less(x.role, y.role);
  }
  if (x.pid != y.pid) {
    return x.pid < y.pid;
  }
  return x.time < y.time;
}

// Names the rows of one check point: pids are shown only where a role alone is ambiguous (a
// restarted server writing into the same folder).
void name_rows(std::vector<ProcessRow>& rows) {
  std::map<std::string, std::set<std::uint64_t>> pids_by_role;
  for (const ProcessRow& row : rows) {
    pids_by_role[row.entry.role].insert(row.entry.pid);
  }
  for (ProcessRow& row : rows) {
    const WatchEntry& entry = row.entry;
    if (entry.role.empty()) {
      row.name = fmt::format("pid {}", entry.pid);
    } else if (pids_by_role[entry.role].size() > 1) {
      row.name = fmt::format("{} (pid {})", entry.role, entry.pid);
    } else {
      row.name = entry.role;
    }
  }
}

bool is_file(const fs::path& path) {
  std::error_code error;
  return fs::is_regular_file(path, error);
}

// A file the index names: at its written path when that is absolute and exists, else under
// its file name in `dir` (the folder was copied off the server, or the server wrote a path
// relative to its own working directory). nullopt when neither exists.
std::optional<fs::path> locate(const fs::path& dir, const std::string& written) {
  const fs::path path(written);
  if (path.is_absolute() && is_file(path)) {
    return path;
  }
  if (fs::path in_dir = dir / path.filename(); path.has_filename() && is_file(in_dir)) {
    return in_dir;
  }
  return std::nullopt;
}

// Why neither place `locate` looks holds the report: "not found", or what is there instead (a
// folder, a symlink loop), for each place.
std::string why_missing(const fs::path& dir, const std::string& written) {
  const fs::path in_dir = dir / fs::path(written).filename();
  std::error_code error;  // without a working directory, name both paths as they are
  const bool same = fs::absolute(in_dir, error).lexically_normal() ==
                    fs::absolute(written, error).lexically_normal();
  auto what = [](const fs::path& path) {
    const std::string kind = path_kind(path);
    return kind == "nothing" ? fmt::format("{} not found", path.string())
                             : fmt::format("{} is {}, not a report file", path.string(), kind);
  };
  if (same) {
    return what(written);
  }
  const std::string kind = path_kind(written);
  const std::string kind_in_dir = path_kind(in_dir);
  if (kind == "nothing" && kind_in_dir == "nothing") {
    return fmt::format("{} not found, nor {}", written, in_dir.string());
  }
  return fmt::format("{}; {}", what(written), what(in_dir));
}

Report read_report_file(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    throw Error(fmt::format("{}: cannot open the report for reading: {}", path.string(),
                            std::strerror(errno)));
  }
  const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
  if (file.bad()) {
    throw Error(fmt::format("{}: read failed: {}", path.string(), std::strerror(errno)));
  }
  try {
    return parse_report(text);
  } catch (const Error& error) {
    // parse_report names its input "report"; name the file instead.
    std::string_view message = error.what();
    constexpr std::string_view kSource = "report: ";
    if (message.starts_with(kSource)) {
      message.remove_prefix(kSource.size());
    }
    throw Error(fmt::format("{}: {}", path.string(), message));
  }
}

void load_report(const fs::path& dir, ProcessRow& row) {
  const WatchEntry& entry = row.entry;
  // The text report is pointed to even when its JSON twin is missing: it may be the one
  // readable report of the row.
  if (!entry.report_text.empty()) {
    row.text_path = locate(dir, entry.report_text).value_or(fs::path()).string();
  }
  if (entry.report_json.empty()) {
    row.missing = "the index line names no report (files.report_json is absent: writing it failed)";
    return;
  }
  const std::optional<fs::path> path = locate(dir, entry.report_json);
  if (!path) {
    row.missing = why_missing(dir, entry.report_json);
    return;
  }
  row.report = read_report_file(*path);
  row.report_path = path->string();
}

template <typename T>
void add_once(std::vector<T>& list, const T& value) {
  if (std::find(list.begin(), list.end(), value) == list.end()) {
    list.push_back(value);
  }
}

// Most urgent first, as the text report of `graphcheck check` orders its groups; census
// findings (no graph reads them yet) last.
int urgency(const OwnerRow& owner) {
  if (owner.source == OwnerSource::kCensus) {
    return static_cast<int>(detail::kFindingsByUrgency.size());
  }
  return detail::precedence(owner.verdict);
}

// A census line is "path: shape dtype"; the path names the owner (shapes differ by rank
// under tensor parallelism, so the whole line would not match across ranks).
std::string census_path(const std::string& line) { return line.substr(0, line.find(": ")); }

class OwnerTable {
 public:
  explicit OwnerTable(std::vector<OwnerRow>& rows) : rows_(rows) {}

  void add(OwnerSource source, Verdict verdict, const std::string& owner,
           const std::string& process) {
    const auto [it, added] = index_.try_emplace(Key(source, verdict, owner), rows_.size());
    if (added) {
      OwnerRow row;
      row.source = source;
      row.verdict = verdict;
      row.owner = owner;
      rows_.push_back(std::move(row));
    }
    OwnerRow& row = rows_[it->second];
    ++row.references;
    add_once(row.processes, process);
  }

 private:
  using Key = std::tuple<OwnerSource, Verdict, std::string>;
  std::vector<OwnerRow>& rows_;
  std::map<Key, std::size_t> index_;
};

void merge_owners(CheckpointSummary& checkpoint) {
  OwnerTable table(checkpoint.owners);
  for (const ProcessRow& row : checkpoint.processes) {
    add_once(checkpoint.all_processes, row.name);
    for (const std::string& line : row.entry.census) {
      table.add(OwnerSource::kCensus, Verdict::kUnregistered, census_path(line), row.name);
    }
    if (!row.report) {
      continue;
    }
    add_once(checkpoint.read_processes, row.name);
    for (const Finding& finding : row.report->findings) {
      table.add(OwnerSource::kReport, finding.verdict, finding.owner, row.name);
    }
  }
  for (OwnerRow& owner : checkpoint.owners) {
    const std::vector<std::string>& base =
        owner.source == OwnerSource::kCensus ? checkpoint.all_processes : checkpoint.read_processes;
    owner.everywhere = owner.processes.size() == base.size();
  }
  std::stable_sort(checkpoint.owners.begin(), checkpoint.owners.end(),
                   [](const OwnerRow& a, const OwnerRow& b) { return urgency(a) < urgency(b); });
}

void merge_stale_allow(const CheckpointSummary& checkpoint, std::vector<StaleAllowRow>& rows) {
  for (const ProcessRow& row : checkpoint.processes) {
    if (!row.report) {
      continue;
    }
    for (const std::string& glob : row.report->stale_allow) {
      auto it = std::find_if(rows.begin(), rows.end(),
                             [&glob](const StaleAllowRow& r) { return r.glob == glob; });
      if (it == rows.end()) {
        StaleAllowRow stale;
        stale.glob = glob;
        it = rows.insert(rows.end(), std::move(stale));
      }
      if (it->where.empty() || it->where.back().label != checkpoint.label) {
        StaleWhere where;
        where.label = checkpoint.label;
        it->where.push_back(std::move(where));
      }
      add_once(it->where.back().processes, row.name);
    }
  }
}

}  // namespace

std::uint64_t WatchSummary::findings() const {
  std::uint64_t total = 0;
  for (const CheckpointSummary& checkpoint : checkpoints) {
    for (const ProcessRow& row : checkpoint.processes) {
      // Saturating: each row's counts add up to its references, but rows of huge counts
      // together could still wrap to a clean-looking total.
      if (__builtin_add_overflow(total, row.findings(), &total)) {
        return UINT64_MAX;
      }
    }
  }
  return total;
}

bool WatchSummary::failed() const {
  if (!stale_allow.empty() && stale_allow_policy == StaleAllowPolicy::kFail) {
    return true;
  }
  for (const CheckpointSummary& checkpoint : checkpoints) {
    for (const ProcessRow& row : checkpoint.processes) {
      if (row.findings() > 0 || (row.report && row.report->has_findings()) ||
          (row.entry.ok.has_value() && !*row.entry.ok)) {
        return true;
      }
    }
  }
  return false;
}

std::vector<const ProcessRow*> WatchSummary::missing_reports() const {
  std::vector<const ProcessRow*> rows;
  for (const CheckpointSummary& checkpoint : checkpoints) {
    for (const ProcessRow& row : checkpoint.processes) {
      if (!row.report) {
        rows.push_back(&row);
      }
    }
  }
  return rows;
}

WatchSummary summarize_watch(const fs::path& dir, StaleAllowPolicy stale_allow_policy) {
  WatchIndex index = read_watch_index(dir);
  std::vector<WatchEntry>& entries = index.entries;
  // Processes append to one index concurrently: its order is roughly, not exactly, by time.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const WatchEntry& a, const WatchEntry& b) { return a.time < b.time; });
  WatchSummary summary;
  summary.dir = dir.string();
  summary.stale_allow_policy = stale_allow_policy;
  summary.index_notes = std::move(index.notes);
  std::map<std::string, std::size_t> by_label;
  for (WatchEntry& entry : entries) {
    const auto [it, added] = by_label.try_emplace(entry.label, summary.checkpoints.size());
    if (added) {
      CheckpointSummary checkpoint;
      checkpoint.label = entry.label;
      summary.checkpoints.push_back(std::move(checkpoint));
    }
    ProcessRow row;
    row.entry = std::move(entry);
    summary.checkpoints[it->second].processes.push_back(std::move(row));
  }
  for (CheckpointSummary& checkpoint : summary.checkpoints) {
    std::stable_sort(checkpoint.processes.begin(), checkpoint.processes.end(), row_less);
    name_rows(checkpoint.processes);
    for (ProcessRow& row : checkpoint.processes) {
      load_report(dir, row);
      for (const std::string& note : row.entry.notes) {
        add_once(checkpoint.notes, note);
      }
      for (const std::string& skipped : row.entry.skipped) {
        add_once(checkpoint.skipped, skipped);
      }
    }
    merge_owners(checkpoint);
    merge_stale_allow(checkpoint, summary.stale_allow);
  }
  return summary;
}

}  // namespace graphcheck::cli
