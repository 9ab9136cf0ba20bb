// Repeated checks of the same graphs: epoch indexes and per-graph reference tables kept
// between checks, so that a check in an unchanged epoch returns the last report and one
// after a sleep and wake (new generations, same ranges) decides again only the references
// whose verdict can change (docs/verdicts.md, "Repeated checks").
#ifndef GRAPHCHECK_CHECK_SESSION_H_
#define GRAPHCHECK_CHECK_SESSION_H_

#include <graphcheck/checker.h>
#include <graphcheck/epoch.h>
#include <graphcheck/graph.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace graphcheck {

/// @brief What `CheckSession::put_epoch` did with the epoch it was given.
enum class EpochChange : std::uint8_t {
  kAdded,      ///< a new label: the epoch was appended
  kUnchanged,  ///< equal to the session's epoch of that label (and in place): nothing to redo
  kReplaced,   ///< the session's epoch of that label was replaced (or moved last)
};

/// @brief Where `CheckSession::put_epoch` puts an epoch whose label the session has.
enum class EpochPlace : std::uint8_t {
  kKeep,  ///< where the old one was
  kLast,  ///< last (the default epoch of a check), as a "now" epoch checked last
};

/// @brief What the last `CheckSession::check` did, for benchmarks, tests and logs.
struct SessionCheckStats {
  /// Nothing changed since a check with the same options and graphs: its report was
  /// returned as it was.
  bool reused_report = false;
  std::uint64_t graphs_scanned = 0;   ///< graphs whose argument words were read
  std::uint64_t graphs_replayed = 0;  ///< graphs decided from their reference tables
  /// References decided again from tables (those whose verdict a later epoch with the
  /// same ranges may change); the others were counted by their cell at the first scan.
  std::uint64_t references_replayed = 0;
};

/// @brief A snapshot kept between checks, with what makes repeated checks cheap.
///
/// The session holds epochs, graphs and allowlist globs as a snapshot does, and
/// `check(options)` returns exactly what `graphcheck::check(snapshot(), options)` returns
/// (the same report, byte for byte in JSON and text). Between checks it keeps:
/// - each epoch's `AddressIndex` (an epoch put with the same ranges as one indexed before,
///   position by position, as after a sleep and wake, shares its cells);
/// - per graph, a reference table made at its first scan: the references a cell alone
///   decides in any epoch that shares the capture's cells are counted there once; the
///   others (no sole registered span: allocations, inputs, gaps, end pointers, operands
///   across owners) are listed;
/// - the last reports, by options and graphs.
///
/// Costs: a check with the same options and graphs after no change (every `put_epoch`
/// answered `kUnchanged`) returns the same report object: a few comparisons. A check in an
/// epoch that shares the capture's cells (and, with allowlist globs, where every epoch
/// does) decides each graph's listed references again (memoized per cell), not its words.
/// Anything else (an epoch with other ranges: a reload that rebound tensors, frees) scans
/// the graphs again, with the indexes kept. `put_epoch` compares the epoch with the one
/// of the same label, O(spans + allocations).
///
/// Memory: the indexes (`AddressIndex::table_bytes`, shared among epochs with the same
/// ranges) and the tables (about 64 bytes per listed reference); see `table_bytes()`.
///
/// Lifetime: reports are shared (`std::shared_ptr<const Report>`) and outlive the session.
/// `find_epoch` and `find_graph` results are valid until that epoch or graph is replaced
/// or removed (graphs are shared, so a caller's `shared_ptr` stays valid regardless).
/// Thread safety: none inside: one thread at a time (callers serialise, as
/// `cupti::CheckerSession` does with its mutex); returned reports are immutable and may be
/// read from any thread.
class CheckSession {
 public:
  /// @brief An empty session (no epochs, no graphs, no globs).
  CheckSession();
  /// @brief A session holding `snapshot`'s epochs, graphs (in order) and allowlist.
  explicit CheckSession(Snapshot snapshot);
  CheckSession(CheckSession&&) noexcept;
  CheckSession& operator=(CheckSession&&) noexcept;
  CheckSession(const CheckSession&) = delete;
  CheckSession& operator=(const CheckSession&) = delete;
  ~CheckSession();

  /// @brief Adds `epoch`, or replaces the session's epoch with its label (at `place`).
  /// An epoch equal to the one it replaces (all fields), in place, changes nothing.
  /// @throws Error for an empty label.
  EpochChange put_epoch(Epoch epoch, EpochPlace place = EpochPlace::kKeep);
  /// @brief Removes the epoch labelled `label`. @return false when there is none.
  bool remove_epoch(std::string_view label);

  /// @brief Adds `graph`, or replaces the session's graph with its id (in place). A graph
  /// equal to the one it replaces changes nothing (the comparison reads every node; pass
  /// a shared record to skip it).
  void put_graph(GraphRecord graph);
  /// @brief As `put_graph(GraphRecord)`, sharing the record: the same record as the one
  /// held changes nothing, without a comparison. @throws Error for a null record.
  void put_graph(std::shared_ptr<const GraphRecord> graph);
  /// @brief Removes the graph with id `id`. @return false when there is none.
  bool remove_graph(std::uint64_t id);

  /// @brief Replaces the allowlist globs (`Snapshot::allow`).
  void set_allow(std::vector<std::string> globs);
  /// @brief Sets who wrote the snapshot (`snapshot().producer`); no effect on checks.
  void set_producer(Producer producer);

  /// @brief The epoch labelled `label`, or nullptr.
  [[nodiscard]] const Epoch* find_epoch(std::string_view label) const;
  /// @brief The graph with id `id`, or null.
  [[nodiscard]] std::shared_ptr<const GraphRecord> find_graph(std::uint64_t id) const;
  /// @brief The epoch labels, in order.
  [[nodiscard]] std::vector<std::string> epoch_labels() const;
  /// @brief The graph ids, in order.
  [[nodiscard]] std::vector<std::uint64_t> graph_ids() const;

  /// @brief The session's contents as a snapshot (copies).
  [[nodiscard]] Snapshot snapshot() const;
  /// @brief As `snapshot()`, with only the graphs whose ids are listed (in session order).
  /// @throws Error naming an id the session lacks.
  [[nodiscard]] Snapshot snapshot(const std::vector<std::uint64_t>& graph_ids) const;

  /// @brief `graphcheck::check(snapshot(), options)`, reusing what the session kept.
  /// @throws Error as `graphcheck::check`.
  [[nodiscard]] std::shared_ptr<const Report> check(const CheckOptions& options = {});
  /// @brief `graphcheck::check(snapshot(graph_ids), options)`: only the graphs listed
  /// (in session order; the allowlist's use is over their references alone).
  /// @throws Error naming an id the session lacks, or as `graphcheck::check`.
  [[nodiscard]] std::shared_ptr<const Report> check(const CheckOptions& options,
                                                    const std::vector<std::uint64_t>& graph_ids);

  /// @brief What the last `check` did.
  [[nodiscard]] const SessionCheckStats& last_stats() const;
  /// @brief Bytes held for repeated checks: indexes (each shared table once) and
  /// reference tables; the epochs and graphs themselves are not counted.
  [[nodiscard]] std::size_t table_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace graphcheck

#endif  // GRAPHCHECK_CHECK_SESSION_H_
