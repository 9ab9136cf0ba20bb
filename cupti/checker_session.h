// The checker session of the CUPTI backend: turns the live state (a span registry, the
// allocation table, recorded graphs) into epochs, snapshots and reports, on demand or at
// every graph launch (debug mode).
#ifndef GRAPHCHECK_CUPTI_CHECKER_SESSION_H_
#define GRAPHCHECK_CUPTI_CHECKER_SESSION_H_

#include <graphcheck/check_session.h>
#include <graphcheck/checker.h>
#include <graphcheck/epoch.h>
#include <graphcheck/graph.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cupti/lock_order.h"
#include "cupti/status.h"

namespace graphcheck::cupti {

/// @brief What a check with findings does.
enum class FindingPolicy : std::uint8_t {
  kWarn,   ///< print the report and continue
  kError,  ///< print the report, then act per `ErrorAction`
};

/// @brief What `FindingPolicy::kError` does after printing.
enum class ErrorAction : std::uint8_t {
  kReturnStatus,  ///< return a failing `Status` (library use; the caller decides)
  kExitProcess,   ///< `std::_Exit(1)` (1 = findings, as the CLI's exit code)
  kAbort,         ///< `std::abort()` (a core dump at the offending launch)
};

/// @brief Whether graph launches are checked (a debug mode: each check costs a snapshot).
enum class LaunchCheck : std::uint8_t { kOff, kEveryLaunch };

/// @brief Session settings.
struct SessionOptions {
  LaunchCheck launch_check = LaunchCheck::kOff;
  FindingPolicy policy = FindingPolicy::kWarn;
  ErrorAction error_action = ErrorAction::kReturnStatus;
  std::vector<std::string> allow;  ///< allowlist globs (written into every snapshot)
  /// When set, snapshots and reports are written there as `<file_prefix>-<tag>-....json`.
  std::filesystem::path out_dir;
  std::string file_prefix = "graphcheck";  ///< the injection library adds the pid
  /// Whether `check_destroyed` checks (the backend calls it as each exec graph is
  /// destroyed): off, a graph destroyed before `check_now` is in no report.
  bool check_at_destroy = true;
  /// Where reports are printed; default: stderr.
  std::function<void(std::string_view)> log;
};

/// @brief Where the allocations of an extra source (`CheckerSession::add_allocations`) get
/// their generations.
enum class SourceGenerations : std::uint8_t {
  kOwn,  ///< as the source gives them
  /// The generation of the innermost allocation of `SessionSources::allocations` (the
  /// tracker's table: cuMemAlloc, VMM mappings) holding the allocation's first byte, else 1.
  /// For an allocator's blocks (torch's caching allocator, an arena): the allocator knows
  /// which tensor a block holds, the driver's table whether its bytes survived (a block over
  /// a VMM mapping mapped again after a sleep is `lost` when unregistered).
  kInherit,
};

/// @brief The state sources a session reads. Each is called without the session's lock held
/// (cupti/lock_order.h): a source may take the capture's lock, which a driver call may hold.
struct SessionSources {
  /// The live allocations (the allocation table; more sources via `add_allocations`).
  std::function<std::vector<Allocation>()> allocations;
  /// Every recorded graph (epoch labels are assigned by the session; see
  /// `note_graph_capture`).
  std::function<std::vector<GraphRecord>()> graphs;
  /// The record of the graph an exec handle launches, or nullopt when unknown.
  std::function<std::optional<GraphRecord>(std::uint64_t exec)> graph_for_exec;
  /// Optional, preferred over `graph_for_exec` when set: the shared, immutable record of the
  /// graph an exec handle launches (null when unknown). The same record as at the last
  /// launch is known unchanged without comparing it.
  std::function<std::shared_ptr<const GraphRecord>(std::uint64_t exec)> shared_graph_for_exec;
  /// Optional: lines the report of graph `id` adds to its `warnings` (kernel nodes recorded
  /// without arguments because they could not be read: `GraphCapture::exec_warnings`).
  std::function<std::vector<std::string>(std::uint64_t id)> graph_warnings;
};

/// @brief A graph checked as its exec graph was destroyed (`CheckerSession::check_destroyed`).
struct DestroyedCheck {
  std::uint64_t graph = 0;  ///< the record's id (CUPTI's graph-exec id)
  std::uint64_t exec = 0;   ///< the exec handle, as a number
  std::string epoch;        ///< the label of the state it was checked in ("destroy", ...)
  std::shared_ptr<const Report> report;
};

/// @brief Builds epochs, snapshots and reports from a span registry, allocations and graphs.
///
/// Epochs: `note_graph_capture` records a capture epoch ("capture", "capture.1", ...) when
/// the state differs from the last one; `record_epoch` records a named moment
/// ("after_wake"); a check adds the current state under its own label.
///
/// Checks go through `graphcheck::CheckSession`s kept between calls (one for `check_now`,
/// one per capture epoch for launch checks), so that a launch check in a state that did not
/// change since the last one returns the last report, and one after a sleep and wake (new
/// generations, the same ranges) decides again only the references whose verdict can
/// change; each call still gathers the current state from the sources and compares it with
/// the last one (O(spans + allocations)), and a graph record from `graph_for_exec` with
/// the last one (O(its size); `shared_graph_for_exec` avoids that). Reports are the ones
/// `graphcheck::check` gives for the same snapshot.
/// Thread safety: every member may be called from any thread; a mutex serialises them.
/// The sources are called before that mutex is taken, never under it (the one lock order of
/// cupti/lock_order.h: the mutex is a leaf but for the allocation tracker's), so a driver
/// callback that waits for the mutex never waits for a driver call.
class CheckerSession {
 public:
  CheckerSession(SessionOptions options, SessionSources sources);

  /// @brief Replaces the span registry (parameters, buffers, runtime state, inputs).
  void set_spans(std::vector<Span> spans);
  /// @brief Adds another allocation source (the caching allocator's snapshot: every live
  /// block, so that a word at a block's first byte is that block's and not the end pointer of
  /// the tensor before it; `add_torch_allocator`, cupti/torch_allocator_snapshot.h).
  void add_allocations(std::function<std::vector<Allocation>()> source,
                       SourceGenerations generations = SourceGenerations::kOwn);

  /// @brief Binds graph `graph_id` to a capture epoch of the current state, recording one
  /// if the state changed since the last capture epoch. @return the epoch label.
  std::string note_graph_capture(std::uint64_t graph_id);
  /// @brief Records the current state as epoch `label` (made unique with ".1", ".2", ...).
  /// @return the label used.
  std::string record_epoch(std::string_view label);

  /// @brief The recorded epochs, the current state as `current_label`, every graph, and the
  /// allowlist; producer backend "cupti".
  [[nodiscard]] Snapshot snapshot(std::string_view current_label = "now");
  /// @brief Checks every graph in the current state (epoch `label`); prints the report when
  /// it has findings or nodes not checked (`SessionSources::graph_warnings`) and writes
  /// snapshot and report under `out_dir` when set. The report also holds the findings and
  /// counts of the graphs checked as they were destroyed (`check_destroyed`), named in a
  /// `note: ` line of `warnings`; a check that had no graph at all says so in another (and
  /// logs it): a process that ended without any check is told from a clean one.
  /// Files that cannot be written are logged, not thrown: the report is returned anyway.
  [[nodiscard]] Report check_now(std::string_view label = "now");
  /// @brief Checks `graph` (the record of exec graph `exec`, which is being destroyed) in
  /// the current state, epoch "destroy", against its capture epoch, and keeps the result for
  /// `check_now` (issue 18: the injection library's exit check runs after PyTorch has
  /// destroyed its graphs). `warnings`: the graph's "not checked: " lines. A report with
  /// findings is logged and written (tag "destroy") at once. Does nothing unless
  /// `SessionOptions::check_at_destroy`. Never throws. @return failing status when the
  /// check itself failed.
  Status check_destroyed(const std::shared_ptr<const GraphRecord>& graph,
                         const std::vector<std::string>& warnings, std::uint64_t exec) noexcept;
  /// @brief The graphs checked by `check_destroyed`, in order.
  [[nodiscard]] std::vector<DestroyedCheck> destroyed_checks() const;
  /// @brief Debug mode: checks the graph `exec` launches, at cuGraphLaunch entry. A report
  /// is logged and written once per distinct finding set of an exec graph; launches that
  /// find the same ones again are counted, and the count is logged when the findings change
  /// and at the next `check_now`. Never throws. @return failing status on findings under
  /// `FindingPolicy::kError` with `ErrorAction::kReturnStatus` (the other actions end the
  /// process); ok otherwise, including when launch checks are off or the graph is unknown.
  Status on_graph_launch(std::uint64_t exec) noexcept;

  /// @brief Launch checks done and launch checks with findings.
  [[nodiscard]] std::uint64_t launches_checked() const;
  [[nodiscard]] std::uint64_t launches_with_findings() const;
  [[nodiscard]] const SessionOptions& options() const { return options_; }

 private:
  // A launch check's session: the graph's capture epoch, the launch state, the graphs of
  // that capture epoch launched so far.
  struct LaunchSession {
    graphcheck::CheckSession session;
    std::string launch_label;
  };
  // The findings last reported at a launch of one exec graph, and how many later launches
  // had the same ones (reported once, counted: launch mode would log every replay).
  struct LaunchFindings {
    std::uint64_t graph = 0;
    std::vector<Finding> findings;
    std::uint64_t repeats = 0;
  };
  // A launched graph's record as the session labels it, and the source record it came from.
  struct LaunchGraph {
    std::shared_ptr<const GraphRecord> source;
    std::shared_ptr<const GraphRecord> labelled;
  };
  // The warnings line (and log line) of a check that had no graph to check.
  static constexpr std::string_view kNothingChecked =
      "note: no graph was recorded while graphcheck was attached, so nothing was checked "
      "(graphs instantiated before graphcheck attached are not recorded)";
  // What the sources returned, read before locking (cupti/lock_order.h).
  struct Gathered {
    std::vector<Allocation> allocations;                         // sized, sorted by begin
    std::vector<GraphRecord> graphs;                             // when asked for
    std::map<std::uint64_t, std::vector<std::string>> warnings;  // by graph id
  };
  // Calls the sources (graphs and their warnings only when `graphs`). Locks the mutex only
  // to copy the list of extra allocation sources, never while calling one.
  [[nodiscard]] Gathered gather(bool graphs) const;
  // Holds mutex_ and marks it held on this thread (detail::SessionLockScope).
  class Lock {
   public:
    explicit Lock(const CheckerSession& session) : lock_(session.mutex_) {}

   private:
    std::scoped_lock<std::mutex> lock_;
    detail::SessionLockScope held_;  // after lock_: marked only while locked
  };
  [[nodiscard]] std::shared_ptr<const GraphRecord> launch_graph_locked(
      std::uint64_t exec, const std::shared_ptr<const GraphRecord>& source);
  [[nodiscard]] std::shared_ptr<const Report> check_now_locked(const std::string& label,
                                                               Gathered& gathered);
  [[nodiscard]] Epoch current_epoch_locked(std::string label, const Gathered& gathered) const;
  /// `label`, or `label.N` with the first N no recorded epoch's label has.
  [[nodiscard]] std::string unique_label_locked(std::string_view label) const;
  /// As `unique_label_locked`, and the label is taken: the caller records an epoch under it.
  std::string take_label_locked(std::string_view label);
  [[nodiscard]] GraphRecord with_epoch_locked(GraphRecord graph) const;
  [[nodiscard]] Snapshot snapshot_locked(std::string_view current_label, Gathered& gathered) const;
  // `report` with `lines` added to its warnings (the same object when none).
  [[nodiscard]] static std::shared_ptr<const Report> with_warnings(
      std::shared_ptr<const Report> report, const std::vector<std::string>& lines);
  // `report` with the destroyed graphs' findings and counts, and the note lines.
  [[nodiscard]] std::shared_ptr<const Report> with_destroyed_locked(
      std::shared_ptr<const Report> report) const;
  void emit_locked(const Snapshot& snapshot, const Report& report, std::string_view tag);
  void log(std::string_view text) const;
  // Logs how often the findings last reported for `exec` recurred, if they did, and resets.
  void log_repeats_locked(std::uint64_t exec, LaunchFindings& last);

  SessionOptions options_;
  SessionSources sources_;
  mutable std::mutex mutex_;
  std::vector<Span> spans_;
  struct ExtraSource {
    std::function<std::vector<Allocation>()> source;
    SourceGenerations generations = SourceGenerations::kOwn;
  };
  std::vector<ExtraSource> extra_allocations_;
  std::vector<Epoch> epochs_;                     // recorded, in order
  std::unordered_set<std::string> epoch_labels_;  // their labels
  // Per base label, the N of the last `base.N` taken: `base.1` to `base.N` are all taken, so
  // a search starts past it. It scanned every recorded epoch per suffix tried before: the
  // 8,000th instantiate of a long run took 117 ms (a review, on the fake driver).
  std::unordered_map<std::string, int> taken_suffix_;
  std::optional<std::size_t> last_capture_;            // index into epochs_
  std::map<std::uint64_t, std::string> graph_epochs_;  // graph id -> capture epoch label
  std::uint64_t launches_checked_ = 0;
  std::uint64_t launches_with_findings_ = 0;
  std::set<std::string> used_tags_;       // file tags already written to out_dir
  graphcheck::CheckSession now_session_;  // check_now: recorded epochs, the current state
  std::size_t now_epochs_ = 0;            // recorded epochs put into now_session_
  std::string now_label_;                 // its current state's label
  // By whether the graph was noted at capture, and its capture (or launch) epoch label.
  std::map<std::pair<bool, std::string>, LaunchSession> launch_sessions_;
  std::map<std::uint64_t, LaunchGraph> launch_graphs_;       // by exec handle
  std::map<std::uint64_t, LaunchFindings> launch_findings_;  // by exec handle
  std::vector<DestroyedCheck> destroyed_;                    // check_destroyed, in order
};

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_CHECKER_SESSION_H_
