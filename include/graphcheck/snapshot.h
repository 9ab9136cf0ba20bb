// The snapshot: epochs, graphs and an allowlist, and its JSON form (format version 1,
// specified field by field in docs/snapshot-format.md).
#ifndef GRAPHCHECK_SNAPSHOT_H_
#define GRAPHCHECK_SNAPSHOT_H_

#include <graphcheck/epoch.h>
#include <graphcheck/graph.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace graphcheck {

/// @brief The snapshot format version this build reads and writes.
inline constexpr int kSnapshotVersion = 1;

/// @brief Who wrote a snapshot.
struct Producer {
  std::string backend = "synthetic";  ///< "cupti", "aten" or "synthetic"
  std::string tool;                   ///< "graphcheck 0.1.0"
  friend bool operator==(const Producer&, const Producer&) = default;
};

/// @brief Everything the checker reads: epochs in order, graphs, allowlist globs.
///
/// Invariants after `parse_snapshot` (and required by `to_json`): epoch labels are unique,
/// graph ids are unique, every graph names an existing epoch, every size is positive.
/// Thread safety: a value type; concurrent reads are safe, writes need external locking.
struct Snapshot {
  Producer producer;
  std::vector<Epoch> epochs;
  std::vector<GraphRecord> graphs;
  std::vector<std::string> allow;

  /// @brief The epoch labelled `label`, or nullptr. The pointer lives as long as `epochs`
  /// is not modified.
  [[nodiscard]] const Epoch* find_epoch(std::string_view label) const;
  friend bool operator==(const Snapshot&, const Snapshot&) = default;
};

/// @brief Parses and validates snapshot JSON.
/// @param json the document text.
/// @param source a name for messages (a path, "<stdin>").
/// @throws Error with a one-line message naming the JSON path of the bad field, what was
/// expected and what was found (e.g. `graphs[0].nodes[3].params[1].hex: expected ...`).
[[nodiscard]] Snapshot parse_snapshot(std::string_view json, std::string_view source = "snapshot");

/// @brief Reads and parses a snapshot file. @throws Error naming the path on I/O failure.
[[nodiscard]] Snapshot read_snapshot(const std::filesystem::path& path);

/// @brief The snapshot as JSON text (version 1). @throws Error if an invariant is broken.
[[nodiscard]] std::string to_json(const Snapshot& snapshot);

/// @brief Writes `to_json(snapshot)` to `path`. @throws Error naming the path on failure.
void write_snapshot(const Snapshot& snapshot, const std::filesystem::path& path);

}  // namespace graphcheck

#endif  // GRAPHCHECK_SNAPSHOT_H_
