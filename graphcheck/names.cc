// Text spellings of the enums, shared by the snapshot and report formats.
#include <graphcheck/epoch.h>
#include <graphcheck/graph.h>
#include <graphcheck/verdict.h>

#include <array>
#include <string_view>

namespace graphcheck {
namespace {

constexpr std::array<std::string_view, 5> kOwnerKindNames = {"parameter", "buffer", "runtime",
                                                             "graph", "input"};
constexpr std::array<std::string_view, 15> kNodeTypeNames = {
    "kernel",           "memcpy",         "memset",     "host",
    "child_graph",      "empty",          "event_wait", "event_record",
    "ext_semas_signal", "ext_semas_wait", "mem_alloc",  "mem_free",
    "batch_mem_op",     "conditional",    "op"};
constexpr std::array<std::string_view, 4> kAccessNames = {"unknown", "read", "write", "read-write"};
constexpr std::array<std::string_view, kVerdictCount> kVerdictNames = {
    "registered",   "runtime",  "graph", "input", "allowed",
    "unregistered", "dangling", "stale", "lost"};

template <typename Enum, std::size_t N>
std::optional<Enum> parse_name(const std::array<std::string_view, N>& names,
                               std::string_view text) {
  for (std::size_t i = 0; i < N; ++i) {
    if (names[i] == text) {
      return static_cast<Enum>(i);
    }
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(OwnerKind kind) {
  return kOwnerKindNames.at(static_cast<std::size_t>(kind));
}
std::optional<OwnerKind> parse_owner_kind(std::string_view text) {
  return parse_name<OwnerKind>(kOwnerKindNames, text);
}

std::string_view to_string(NodeType type) {
  return kNodeTypeNames.at(static_cast<std::size_t>(type));
}
std::optional<NodeType> parse_node_type(std::string_view text) {
  return parse_name<NodeType>(kNodeTypeNames, text);
}

std::string_view to_string(Access access) {
  return kAccessNames.at(static_cast<std::size_t>(access));
}
std::optional<Access> parse_access(std::string_view text) {
  return parse_name<Access>(kAccessNames, text);
}

std::string_view to_string(Verdict verdict) {
  return kVerdictNames.at(static_cast<std::size_t>(verdict));
}
std::optional<Verdict> parse_verdict(std::string_view text) {
  return parse_name<Verdict>(kVerdictNames, text);
}

bool Allocation::is_graph_pool() const {
  constexpr std::string_view kGraph = "graph";
  return pool == kGraph ||
         (pool.size() > kGraph.size() && pool.starts_with(kGraph) && pool[kGraph.size()] == ':');
}

}  // namespace graphcheck
