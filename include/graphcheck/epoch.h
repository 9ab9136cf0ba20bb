// Spans, allocations and epochs: what owns the memory at one moment.
#ifndef GRAPHCHECK_EPOCH_H_
#define GRAPHCHECK_EPOCH_H_

#include <graphcheck/address.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace graphcheck {

/// @brief Who owns a span (DESIGN.md, "Vocabulary").
enum class OwnerKind : std::uint8_t {
  kParameter,  ///< a registered parameter, named by module path
  kBuffer,     ///< a registered buffer, named by module path
  kRuntime,    ///< declared runtime state (KV cache, scratch), with a reason
  kGraph,      ///< memory the graph owns (private pool, alloc nodes, capture intermediates)
  kInput,      ///< a declared static input or output of the graph
};

/// @brief The snapshot spelling: "parameter", "buffer", "runtime", "graph", "input".
[[nodiscard]] std::string_view to_string(OwnerKind kind);
/// @brief Inverse of `to_string(OwnerKind)`; `std::nullopt` for any other text.
[[nodiscard]] std::optional<OwnerKind> parse_owner_kind(std::string_view text);
/// @brief True for `kParameter` and `kBuffer`: what the registration contract restores.
[[nodiscard]] constexpr bool is_registered(OwnerKind kind) {
  return kind == OwnerKind::kParameter || kind == OwnerKind::kBuffer;
}

/// @brief An address range `[begin, begin + size)` with an owner. Half-open: an address equal
/// to `end()` is one past the span and not inside it (so a kernel's `end` pointer argument is
/// not attributed to the tensor before it).
struct Span {
  Address begin = 0;
  std::uint64_t size = 0;
  OwnerKind kind = OwnerKind::kParameter;
  std::string name;    ///< module path ("layers.0.mlp.weight") or a declared name
  std::string reason;  ///< why runtime or input memory is exempt; may be empty otherwise

  [[nodiscard]] Address end() const { return begin + size; }
  [[nodiscard]] bool contains(Address address) const {
    return address >= begin && address - begin < size;
  }
  friend bool operator==(const Span&, const Span&) = default;
};

/// @brief A live allocation known to a backend (allocator segment or block, VMM mapping).
struct Allocation {
  Address begin = 0;
  std::uint64_t size = 0;
  std::string pool;  ///< "default", "weights", "graph" (or "graph:<id>": graph-private), ...
  /// Changes whenever the bytes behind the address were discarded and not restored.
  std::uint64_t generation = 0;
  std::string label;  ///< attribute path or allocation site; may be empty

  [[nodiscard]] Address end() const { return begin + size; }
  [[nodiscard]] bool contains(Address address) const {
    return address >= begin && address - begin < size;
  }
  /// True for pools named "graph" or "graph:<anything>": memory a graph owns.
  [[nodiscard]] bool is_graph_pool() const;
  friend bool operator==(const Allocation&, const Allocation&) = default;
};

/// @brief The spans and allocations at one moment ("capture", "after_wake", ...).
struct Epoch {
  std::string label;
  std::vector<Span> spans;
  std::vector<Allocation> allocations;
  friend bool operator==(const Epoch&, const Epoch&) = default;
};

}  // namespace graphcheck

#endif  // GRAPHCHECK_EPOCH_H_
