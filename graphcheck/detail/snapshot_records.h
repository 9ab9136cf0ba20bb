// The records of the snapshot format as the streaming reader (snapshot_reader.cc) sees them:
// which member of which record is what, and the readers that type a record once its members
// are known. Private to the snapshot reader; nothing here is public API.
#ifndef GRAPHCHECK_DETAIL_SNAPSHOT_RECORDS_H_
#define GRAPHCHECK_DETAIL_SNAPSHOT_RECORDS_H_

#include <graphcheck/snapshot.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "graphcheck/detail/json_access.h"

namespace graphcheck::detail {

/// @brief What a value is in the format: a record (an object), a list (an array), a scalar
/// member (kept as JSON and typed by a reader below), or unknown (skipped).
enum class SnapshotKind : std::uint8_t {
  // records with list members, typed by `read_root` ... `read_body` when they close
  kRoot,
  kEpoch,
  kGraph,
  kNode,
  kBody,
  // records of scalar members, typed by `add_element` (or `read_root` for the producer)
  kProducer,
  kSpan,
  kAllocation,
  kParam,
  kKernelOperand,
  kExtent,
  // lists
  kEpochs,
  kSpans,
  kAllocations,
  kGraphs,
  kNodes,
  kParams,
  kKernelOperands,
  kExtents,
  kBodies,
  kAllow,
  // other values
  kScalar,
  kUnknown,
};

/// @brief True for list kinds (kEpochs ... kAllow).
[[nodiscard]] constexpr bool is_list(SnapshotKind kind) {
  return kind >= SnapshotKind::kEpochs && kind <= SnapshotKind::kAllow;
}
/// @brief True for record kinds (kRoot ... kExtent).
[[nodiscard]] constexpr bool is_record(SnapshotKind kind) { return kind <= SnapshotKind::kExtent; }
/// @brief True for records of scalar members only (kProducer ... kExtent): read as small
/// JSON objects holding their known members.
[[nodiscard]] constexpr bool is_scalar_record(SnapshotKind kind) {
  return kind >= SnapshotKind::kProducer && kind <= SnapshotKind::kExtent;
}

/// @brief The kind of member `key` of a `record`; kUnknown for keys the format does not
/// define there (they are ignored, as the format says).
[[nodiscard]] SnapshotKind member_kind(SnapshotKind record, std::string_view key);
/// @brief The kind of the elements of `list` (kScalar for `allow`).
[[nodiscard]] SnapshotKind element_kind(SnapshotKind list);

/// @brief The typed elements of one list member.
using SnapshotItems =
    std::variant<std::vector<Epoch>, std::vector<Span>, std::vector<Allocation>,
                 std::vector<GraphRecord>, NodeList, std::vector<KernelParam>, std::vector<Operand>,
                 std::vector<NodeList>, std::vector<std::string>>;

/// @brief An empty `SnapshotItems` of the type that `list` holds.
[[nodiscard]] SnapshotItems empty_items(SnapshotKind list);

/// @brief A finished list member: its elements and the message of its first bad element
/// (the elements after that one were skipped, not read).
struct SnapshotList {
  SnapshotItems items;
  std::optional<std::string> error;
};

/// @brief The finished list members of one record, by member name (the last one of a name
/// given twice wins, as for any key).
using RecordLists = std::vector<std::pair<std::string, SnapshotList>>;

/// @brief Types one element of a list and appends it to `items`. `element` is the complete
/// value: the known members of a scalar record, a string of `allow`, or a value that is not
/// an object where a record with lists belongs (always an error).
/// @param list the list's kind; @param list_key its member name ("reads" names operands).
/// @throws Error `<source>: <path>: ...` naming the bad field.
void add_element(SnapshotKind list, std::string_view list_key, const JsonField& element,
                 SnapshotItems& items);

/// @brief Type a record with lists from its scalar members (`fields`, where a finished list
/// member reads as []) and its finished lists, in the fixed order of the format's readers.
/// @throws Error for the first bad or missing member, or the first error inside a list.
[[nodiscard]] Epoch read_epoch(const JsonField& fields, RecordLists& lists);
/// @copydoc read_epoch
[[nodiscard]] GraphRecord read_graph(const JsonField& fields, RecordLists& lists);
/// @copydoc read_epoch
[[nodiscard]] Node read_node(const JsonField& fields, RecordLists& lists);
/// @copydoc read_epoch
[[nodiscard]] NodeList read_body(const JsonField& fields, RecordLists& lists);
/// @brief The top level: "format" and "version" first, then producer, epochs, graphs, allow.
/// @copydoc read_epoch
[[nodiscard]] Snapshot read_root(const JsonField& fields, RecordLists& lists);

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_SNAPSHOT_RECORDS_H_
