// The checker: every reference of every graph, one verdict per reference in one epoch.
#ifndef GRAPHCHECK_CHECKER_H_
#define GRAPHCHECK_CHECKER_H_

#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>

#include <cstddef>
#include <string>
#include <vector>

namespace graphcheck {

/// @brief What to check against what.
struct CheckOptions {
  /// The epoch to check in; empty means the snapshot's last epoch.
  std::string epoch;
  /// The epoch to compare against for `stale` and `lost`; empty means each graph's own
  /// capture epoch. References are always found in each graph's capture epoch.
  std::string baseline;
  /// Allowlist globs (`*` within a path component, `**` across: docs/verdicts.md) added to
  /// the snapshot's own `allow` list.
  std::vector<std::string> allow;
  /// Whether globs that match the owner of no reference in any epoch fail the check.
  StaleAllowPolicy stale_allow = StaleAllowPolicy::kFail;
  /// Threads that read the graphs' argument words at once (a check point of many graphs):
  /// 0 means one per core the process may run on (its CPU affinity; at most 8), while each
  /// has at least 16,384 nodes to read; 1 reads them on the calling thread. References are
  /// decided on the calling thread, graph after graph, so the report is the same whatever
  /// the count. The threads are started and joined within the check.
  std::size_t threads = 0;
};

/// @brief The most threads the command line (`--threads`) and the Python `threads` argument
/// accept: more is a typo, not a machine.
inline constexpr std::size_t kMaxCheckThreads = 256;

/// @brief Checks every graph of `snapshot` in one epoch (DESIGN.md, "Verdicts").
///
/// Findings are data in the report, never exceptions. The snapshot is not modified.
/// @throws Error if `options` names an epoch the snapshot lacks (the message lists the
/// labels it has).
/// Thread safety: reentrant; concurrent calls on the same snapshot are safe.
[[nodiscard]] Report check(const Snapshot& snapshot, const CheckOptions& options = {});

/// @brief The largest allowlist file `read_allowlist` reads (4 MiB: tens of thousands of
/// globs; anything larger is a wrong path, not an allowlist).
inline constexpr std::size_t kMaxAllowlistBytes = std::size_t{4} << 20U;

/// @brief Reads allowlist globs from a file: one per line; blank lines and lines starting
/// with '#' are skipped; surrounding whitespace is trimmed; a UTF-8 byte order mark is
/// skipped. The file must be UTF-8 text: a line with bytes that are not UTF-8 or a NUL
/// refuses the whole file. Never blocks: a FIFO or any other file that is not a regular
/// file is refused without being opened for reading in blocking mode.
/// @throws Error naming the path (control bytes escaped) when it cannot be opened, is not a
/// regular file, or is larger than kMaxAllowlistBytes; naming `path:line`, the byte, its
/// offset in the file and its column for a line that is not text.
[[nodiscard]] std::vector<std::string> read_allowlist(const std::string& path);

}  // namespace graphcheck

#endif  // GRAPHCHECK_CHECKER_H_
