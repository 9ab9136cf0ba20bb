// The text and JSON forms of a watch folder's summary (watch_summary.h; docs/cli.md,
// "graphcheck report").
#include <fmt/format.h>
#include <graphcheck/detail/text_groups.h>
#include <graphcheck/report.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "graphcheck/cli/watch_summary.h"

namespace graphcheck::cli {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kFormat = "graphcheck-report-summary";
constexpr int kVersion = 1;
constexpr std::string_view kNoOwner = "<no owner or label>";

// "1 process", "2 processes", "3 references".
std::string plural(std::uint64_t count, std::string_view noun) {
  const std::string_view suffix = noun.ends_with('s') ? "es" : "s";
  return fmt::format("{} {}{}", count, noun, count == 1 ? "" : suffix);
}

std::string upper(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](char c) {
    return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c;
  });
  return out;
}

// Items of the summary are names (roles, labels, owners) that may hold any bytes: each is
// printed through `printable`, so that a terminal gets no control byte.
std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) {
      out += separator;
    }
    out += printable(item);
  }
  return out;
}

std::string utc_time(double seconds) {
  // A time far outside any calendar (or NaN) would not convert to time_t: print it as is.
  constexpr double kLimit = 1e15;
  if (!(seconds > -kLimit && seconds < kLimit)) {
    return fmt::format("{} s", seconds);
  }
  const auto whole = static_cast<std::time_t>(seconds);
  std::tm tm{};
  if (gmtime_r(&whole, &tm) == nullptr) {
    return fmt::format("{} s", seconds);
  }
  std::array<char, 32> text{};
  const std::size_t size = std::strftime(text.data(), text.size(), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return {text.data(), size};
}

// "592 references: unregistered 3, lost 2", "592 references, no findings"; a census check
// point's findings as the watch's log line counts them ("unregistered (census) 2").
std::string counts(const ProcessRow& row) {
  const Summary& summary = row.summary();
  std::vector<std::string> found;
  // Most urgent first, as the text report and the pages order them (a review diffed
  // "unregistered 30, stale 2" here against "stale 2, unregistered 30" there).
  for (const Verdict verdict : detail::kFindingsByUrgency) {
    if (summary.count(verdict) > 0) {
      found.push_back(fmt::format("{} {}", to_string(verdict), summary.count(verdict)));
    }
  }
  if (!row.entry.census.empty()) {
    found.push_back(fmt::format("unregistered (census) {}", row.entry.census.size()));
  }
  const std::string references = plural(summary.references, "reference");
  return found.empty() ? references + ", no findings"
                       : fmt::format("{}: {}", references, join(found, ", "));
}

// The owner rows in families, in the order of each family's first row: rows of one verdict and
// source found on the same processes whose owners differ only in their numbers
// ("layers.3.x", "layers.4.x"), printed as one line ("layers.{0-31}.x: 32 owners"). A model
// of 32 layers listed 32 lines per site; the text report compacts them so too.
std::vector<std::vector<const OwnerRow*>> owner_families(const std::vector<OwnerRow>& owners) {
  std::vector<std::vector<const OwnerRow*>> families;
  std::map<std::tuple<OwnerSource, Verdict, std::string, std::vector<std::string>, bool>,
           std::size_t>
      index;
  for (const OwnerRow& owner : owners) {
    const auto [it, added] = index.try_emplace(
        std::make_tuple(owner.source, owner.verdict, detail::owner_family(owner.owner),
                        owner.processes, owner.everywhere),
        families.size());
    if (added) {
      families.emplace_back();
    }
    families[it->second].push_back(&owner);
  }
  return families;
}

std::string verdict_name(const OwnerRow& owner) {
  return owner.source == OwnerSource::kCensus ? "census" : std::string(to_string(owner.verdict));
}

std::string file_name(const std::string& path) {
  return printable(std::filesystem::path(path).filename().string());
}

// Whether a row's name says its pid already ("pid 1788", "worker rank 0 (pid 1788)" when two
// pids share the role): only a name that is the role alone does not.
bool name_has_pid(const ProcessRow& row) {
  return row.entry.role.empty() || row.name != row.entry.role;
}

void append_checkpoint(std::string& out, const CheckpointSummary& checkpoint) {
  double first = checkpoint.processes.front().entry.time;
  std::size_t width = 0;
  std::size_t with_findings = 0;
  // Who each row is: its name, then its pid unless the name says it already ("pid 1788", a
  // role shared by two pids), so that a process without a role is not "pid 1788  pid 1788".
  std::vector<std::string> names;
  for (const ProcessRow& row : checkpoint.processes) {
    first = std::min(first, row.entry.time);
    names.push_back(printable(row.name) +
                    (name_has_pid(row) ? std::string() : fmt::format("  pid {}", row.entry.pid)));
    width = std::max(width, names.back().size());
    if (row.findings() > 0) {
      ++with_findings;
    }
  }
  // A row is one check point of one process: a process that captures its graphs one at a
  // time has a row per graph under one label, which is not that many processes (a review
  // read "no findings on 10 processes" for one).
  std::set<std::pair<std::string, std::uint64_t>> distinct;
  for (const ProcessRow& row : checkpoint.processes) {
    distinct.emplace(row.entry.role, row.entry.pid);
  }
  const std::size_t rows = checkpoint.processes.size();
  const std::string processes = plural(distinct.size(), "process");
  std::string verdict = with_findings == 0
                            ? "no findings on " + processes
                            : fmt::format("findings on {} of {}", with_findings, processes);
  if (distinct.size() != rows) {
    const std::string points = plural(rows, "check point");
    verdict = with_findings == 0
                  ? fmt::format("no findings at {} of {}", points, processes)
                  : fmt::format("findings at {} of {} ({})", with_findings, points, processes);
  }
  out += fmt::format("\ncheck point \"{}\" at {}: {}\n", printable(checkpoint.label),
                     utc_time(first), verdict);
  for (std::size_t i = 0; i < checkpoint.processes.size(); ++i) {
    const ProcessRow& row = checkpoint.processes[i];
    out += fmt::format("  {:<{}}  #{}  {}{}\n", names[i], width, row.entry.seq, counts(row),
                       row.report ? "" : " (report missing: counts from index.jsonl)");
    const std::string& readable = row.text_path.empty() ? row.report_path : row.text_path;
    if (row.findings() > 0 && !readable.empty()) {
      out += fmt::format("      report: {}\n", file_name(readable));
    }
  }
  if (!checkpoint.owners.empty()) {
    // Owners come from the reports read; say whose are missing rather than imply "nowhere".
    std::vector<std::string> unread;
    for (const ProcessRow& row : checkpoint.processes) {
      if (!row.report) {
        unread.push_back(row.name);
      }
    }
    out += fmt::format("  findings by owner ({}{}):\n", checkpoint.owners.size(),
                       unread.empty() ? "" : "; no report from " + join(unread, ", "));
  }
  for (const std::vector<const OwnerRow*>& family : owner_families(checkpoint.owners)) {
    const OwnerRow& owner = *family.front();
    std::string where = "on " + join(owner.processes, ", ");
    if (!owner.everywhere) {
      std::vector<std::string> absent;
      for (const std::string& name : owner.source == OwnerSource::kCensus
                                         ? checkpoint.all_processes
                                         : checkpoint.read_processes) {
        if (std::find(owner.processes.begin(), owner.processes.end(), name) ==
            owner.processes.end()) {
          absent.push_back(name);
        }
      }
      where = fmt::format("found {} only (not on {})", where, join(absent, ", "));
    }
    // A census line is one storage per process: its count would only repeat `where`.
    std::uint64_t references = 0;
    std::vector<std::string_view> owner_names;
    for (const OwnerRow* member : family) {
      references += member->references;
      owner_names.emplace_back(member->owner);
    }
    std::string count = family.size() > 1 ? plural(family.size(), "owner") + ", " : "";
    if (owner.source != OwnerSource::kCensus) {
      count += plural(references, "reference") + ", ";
    }
    out +=
        fmt::format("    {} {}: {}{}\n", upper(verdict_name(owner)),
                    owner.owner.empty() ? std::string(kNoOwner) : detail::family_name(owner_names),
                    count, where);
  }
  for (const std::string& skipped : checkpoint.skipped) {
    out += fmt::format("  skipped: {}\n", printable(skipped));
  }
  for (const std::string& note : checkpoint.notes) {
    out += fmt::format("  note: {}\n", printable(note));
  }
}

Json summary_json(const Summary& summary) {
  Json json = Json::object();
  json["graphs"] = summary.graphs;
  json["nodes"] = summary.nodes;
  json["references"] = summary.references;
  for (std::size_t i = 0; i < kVerdictCount; ++i) {
    json[std::string(to_string(static_cast<Verdict>(i)))] = summary.counts[i];
  }
  return json;
}

Json process_json(const ProcessRow& row) {
  return Json{{"name", row.name},
              {"role", row.entry.role},
              {"pid", row.entry.pid},
              {"seq", row.entry.seq},
              {"time", row.entry.time},
              {"summary", summary_json(row.summary())},
              {"report", row.report ? Json(row.report_path) : Json(nullptr)}};
}

Json checkpoint_json(const CheckpointSummary& checkpoint) {
  Json processes = Json::array();
  for (const ProcessRow& row : checkpoint.processes) {
    processes.push_back(process_json(row));
  }
  Json owners = Json::array();
  for (const OwnerRow& owner : checkpoint.owners) {
    owners.push_back(Json{{"verdict", verdict_name(owner)},
                          {"owner", owner.owner},
                          {"references", owner.references},
                          {"roles", owner.processes},
                          {"everywhere", owner.everywhere}});
  }
  return Json{{"label", checkpoint.label},
              {"processes", std::move(processes)},
              {"owners", std::move(owners)},
              {"notes", checkpoint.notes},
              {"skipped", checkpoint.skipped}};
}

}  // namespace

std::string to_text(const WatchSummary& summary) {
  std::size_t entries = 0;
  std::vector<std::pair<std::string, std::uint64_t>> processes;
  for (const CheckpointSummary& checkpoint : summary.checkpoints) {
    entries += checkpoint.processes.size();
    for (const ProcessRow& row : checkpoint.processes) {
      const std::pair<std::string, std::uint64_t> key(row.entry.role, row.entry.pid);
      if (std::find(processes.begin(), processes.end(), key) == processes.end()) {
        processes.push_back(key);
      }
    }
  }
  std::string out =
      fmt::format("graphcheck watch summary: {}\n{} from {}, {}\n", printable(summary.dir),
                  plural(entries, "check point"), plural(processes.size(), "process"),
                  plural(summary.checkpoints.size(), "label"));
  if (!summary.index_notes.empty()) {
    out += fmt::format("\nindex lines not read ({}): every other line is reported\n",
                       summary.index_notes.size());
    for (const std::string& note : summary.index_notes) {
      out += fmt::format("  {}\n", printable(note));
    }
  }
  for (const CheckpointSummary& checkpoint : summary.checkpoints) {
    append_checkpoint(out, checkpoint);
  }

  const bool stale_fails =
      !summary.stale_allow.empty() && summary.stale_allow_policy == StaleAllowPolicy::kFail;
  if (!summary.stale_allow.empty()) {
    out += fmt::format(
        "\nstale allowlist entries ({}): these globs matched the owner of no reference; remove "
        "them from the allowlist ({})\n",
        summary.stale_allow.size(),
        stale_fails ? "they fail the check; --keep-stale-allow keeps them"
                    : "kept on purpose: --keep-stale-allow");
  }
  for (const StaleAllowRow& row : summary.stale_allow) {
    std::vector<std::string> where;
    for (const StaleWhere& at : row.where) {
      where.push_back(fmt::format("{} on {}", printable(at.label), join(at.processes, ", ")));
    }
    out += fmt::format("  {}: stale at {}\n", printable(row.glob), fmt::join(where, "; "));
  }

  const std::vector<const ProcessRow*> missing = summary.missing_reports();
  if (!missing.empty()) {
    out += fmt::format(
        "\nreports missing ({}): their rows show the counts of index.jsonl, their owners are "
        "not listed\n",
        missing.size());
  }
  for (const ProcessRow* row : missing) {
    // Named as its row is, its pid once.
    const std::string who =
        name_has_pid(*row)
            ? fmt::format("{} (#{})", printable(row->name), row->entry.seq)
            : fmt::format("{} (pid {}, #{})", printable(row->name), row->entry.pid, row->entry.seq);
    out +=
        fmt::format("  {} on {}: {}\n", printable(row->entry.label), who, printable(row->missing));
  }

  // Each check point counts what it found: the total adds up an owner found at several.
  std::set<std::string_view> owners;
  for (const CheckpointSummary& checkpoint : summary.checkpoints) {
    for (const OwnerRow& row : checkpoint.owners) {
      owners.insert(row.owner);
    }
  }
  const std::string across =
      summary.checkpoints.size() > 1 && !owners.empty()
          ? fmt::format(
                "\nover {} check points: {} distinct {} (an owner found at several "
                "check points is counted at each)",
                summary.checkpoints.size(), owners.size(), owners.size() == 1 ? "owner" : "owners")
          : std::string();
  out +=
      fmt::format("{}\nfindings: {}{}\n", across, summary.findings(),
                  stale_fails ? fmt::format(" (the check fails: {} stale allowlist {})",
                                            summary.stale_allow.size(),
                                            summary.stale_allow.size() == 1 ? "entry" : "entries")
                              : "");
  return out;
}

std::string to_json(const WatchSummary& summary) {
  Json checkpoints = Json::array();
  for (const CheckpointSummary& checkpoint : summary.checkpoints) {
    checkpoints.push_back(checkpoint_json(checkpoint));
  }
  Json stale = Json::array();
  for (const StaleAllowRow& row : summary.stale_allow) {
    Json where = Json::array();
    for (const StaleWhere& at : row.where) {
      where.push_back(Json{{"label", at.label}, {"roles", at.processes}});
    }
    stale.push_back(Json{{"glob", row.glob}, {"where", std::move(where)}});
  }
  Json missing = Json::array();
  for (const ProcessRow* row : summary.missing_reports()) {
    missing.push_back(Json{{"label", row->entry.label},
                           {"name", row->name},
                           {"role", row->entry.role},
                           {"pid", row->entry.pid},
                           {"seq", row->entry.seq},
                           {"report_json", row->entry.report_json},
                           {"reason", row->missing}});
  }
  const Json json{{"format", kFormat},
                  {"version", kVersion},
                  {"dir", summary.dir},
                  {"findings", summary.findings()},
                  {"checkpoints", std::move(checkpoints)},
                  {"stale_allow", std::move(stale)},
                  {"missing_reports", std::move(missing)},
                  {"index_notes", summary.index_notes}};
  // The folder name comes from the command line and need not be UTF-8; everything else was
  // validated by the JSON readers.
  return json.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

}  // namespace graphcheck::cli
