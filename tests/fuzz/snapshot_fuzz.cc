// Fuzz target: a snapshot, parsed, written and checked every way the project checks one.
// An input is refused with graphcheck::Error (one line), or it parses, and then:
// - the writer's JSON parses again to the same snapshot;
// - each epoch's check is the same report (or the same one-line Error) on one thread and on
//   three, and from one CheckSession that checks every epoch in turn (its replay paths);
// - each report is of its epoch, its verdict counts add up to its references and count its
//   findings; its JSON parses back to it, and its text and HTML pages are made.
// Anything else (a crash, a sanitizer report, another exception, an Error of several lines, two
// answers that differ) is a finding.
#include <graphcheck/check_session.h>
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/report.h>
#include <graphcheck/report_html.h>
#include <graphcheck/snapshot.h>

#include <cstdint>
#include <cstdio>
#include <numeric>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "tests/fuzz/fuzz_support.h"

namespace graphcheck::fuzz {
namespace {

// A check's answer: its report, or the message of the Error that refused the snapshot.
struct Answer {
  std::optional<Report> report;
  std::string refusal;
};

template <typename Check>
Answer answer(Check&& run) {
  try {
    return {run(), {}};
  } catch (const Error& error) {
    require_one_line(error);
    return {std::nullopt, error.what()};
  }
}

// A report that agrees with itself: its epoch, and counts that add up.
void require_consistent(const Report& report, const CheckOptions& options) {
  require(options.epoch.empty() || report.epoch == options.epoch, "a report of another epoch");
  const Summary& summary = report.summary;
  require(std::accumulate(summary.counts.begin(), summary.counts.end(), std::uint64_t{0}) ==
              summary.references,
          "verdict counts that do not add up to the references");
  require(report.findings.size() == summary.findings(), "findings that are not counted");
}

// Checks of one epoch, three ways, which must agree; the one-thread check's report, if any.
std::optional<Report> check_three_ways(const Snapshot& snapshot, CheckSession& session,
                                       const CheckOptions& options) {
  CheckOptions one = options;
  one.threads = 1;
  CheckOptions three = options;
  three.threads = 3;
  Answer first = answer([&] { return check(snapshot, one); });
  const Answer threads = answer([&] { return check(snapshot, three); });
  const Answer kept = answer([&] { return *session.check(options); });
  require(threads.report == first.report && threads.refusal == first.refusal,
          "check() on 3 threads differs from 1 thread");
  require(kept.report == first.report && kept.refusal == first.refusal,
          "CheckSession::check differs from check()");
  if (first.report) {
    require_consistent(*first.report, options);
  }
  return std::move(first.report);
}

void write_every_way(const Report& report, const Snapshot& snapshot) {
  const std::string json = to_json(report);
  require(parse_report(json) == report, "a report's JSON does not parse back to it");
  const std::string compact = to_json(report, -1);
  require(to_json(parse_report(compact), -1) == compact, "compact report JSON is not stable");
  static_cast<void>(to_text(report));
  HtmlOptions html;
  html.other_epochs = false;  // every epoch is checked here anyway
  static_cast<void>(to_html(report, &snapshot, html));
}

}  // namespace

void snapshot_input(std::string_view text) {
  Snapshot snapshot;
  try {
    snapshot = parse_snapshot(text, "fuzz");
  } catch (const Error& error) {
    require_one_line(error);
    return;
  }
  const std::string written = to_json(snapshot);
  Snapshot again;
  try {
    again = parse_snapshot(written, "written");
  } catch (const Error& error) {
    std::fprintf(stderr, "%s\n", error.what());
    require(false, "the writer's JSON is refused by the reader");
  }
  require(again == snapshot, "a written snapshot does not read back to itself");

  CheckSession session(snapshot);
  for (const Epoch& epoch : snapshot.epochs) {
    CheckOptions options;
    options.epoch = epoch.label;
    options.stale_allow = StaleAllowPolicy::kKeep;
    if (const std::optional<Report> report = check_three_ways(snapshot, session, options)) {
      write_every_way(*report, snapshot);
    }
  }
  if (snapshot.epochs.size() > 1) {
    // The last epoch against the first as baseline (not each graph's own capture epoch).
    CheckOptions options;
    options.baseline = snapshot.epochs.front().label;
    static_cast<void>(check_three_ways(snapshot, session, options));
  }
  CheckOptions missing;
  missing.epoch = "\x01no such epoch";
  if (snapshot.find_epoch(missing.epoch) == nullptr) {
    try {
      static_cast<void>(check(snapshot, missing));
      require(false, "a check in an epoch the snapshot lacks was not refused");
    } catch (const Error& error) {
      require_one_line(error);
    }
  }
}

}  // namespace graphcheck::fuzz
