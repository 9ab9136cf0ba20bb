// The pointer scan: which addresses the nodes of a graph use (docs/verdicts.md,
// "Pointer scan").
#ifndef GRAPHCHECK_POINTER_SCAN_H_
#define GRAPHCHECK_POINTER_SCAN_H_

#include <graphcheck/address.h>
#include <graphcheck/address_index.h>
#include <graphcheck/graph.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

namespace graphcheck {

/// @brief One address a graph node uses.
///
/// Lifetime: `node` and `operand` point into the scanned graph, which must outlive the
/// reference.
struct Reference {
  std::uint64_t graph = 0;     ///< id of the top-level graph (bodies report their parent's)
  const Node* node = nullptr;  ///< the node (possibly inside a child or conditional body)
  /// Kernel nodes: argument index and byte offset of the word within that argument.
  std::uint32_t param = 0;
  std::uint32_t offset = 0;
  /// The operand (any node kind, kernel operands included); nullptr for kernel argument words.
  const Operand* operand = nullptr;
  Address address = 0;
};

/// @brief Where a kernel word's owner is looked up: the word itself, or, for a word one past
/// the end of a capture span where no span begins (an end pointer, docs/verdicts.md), the
/// span's last byte.
struct WordOwner {
  Address lookup = 0;
  std::uint32_t cell = AddressIndex::kNoCell;  ///< `capture.find_cell(lookup)`
  bool is_reference =
      false;  ///< inside a capture span, allocation or graph range, or an end pointer
};

/// @brief The ranges of a graph's `mem_alloc` nodes (child and conditional bodies included,
/// as the scan recurses): memory the graph owns in every epoch.
/// Lifetime: independent of the graph. Thread safety: immutable after construction.
class GraphRanges {
 public:
  /// @brief No ranges (a graph without `mem_alloc` extents).
  GraphRanges() = default;
  explicit GraphRanges(const GraphRecord& graph);
  /// @brief True if `address` lies in one of the ranges (half-open).
  [[nodiscard]] bool contains(Address address) const {
    if (address < low_ || address > high_ || merged_.empty()) {
      return false;
    }
    Address last = 0;
    return run(address, &last);
  }
  /// @brief Whether `address` lies in the ranges, with `*last` set to the last address of the
  /// run of addresses from `address` on that give the same answer.
  bool run(Address address, Address* last) const;
  /// @brief True when the graph has no `mem_alloc` ranges.
  [[nodiscard]] bool empty() const { return merged_.empty(); }
  /// @brief The first address inside any range (0 when `empty()`).
  [[nodiscard]] Address low() const { return low_; }
  /// @brief The last address inside any range (0 when `empty()`).
  [[nodiscard]] Address high() const { return high_; }

 private:
  // The union of the ranges as disjoint, sorted, inclusive [first, last] pairs (inclusive so
  // that a range reaching the top of the address space needs no special end).
  struct Run {
    Address first;
    Address last;
  };
  std::vector<Run> merged_;
  Address low_ = 0;
  Address high_ = 0;  // the last address inside any range
};

/// @brief Resolves one kernel word against the capture epoch (the scan's predicate, shared by
/// the checker and `find_references`). Inline: it runs for every argument word.
/// Thread safety: pure.
[[nodiscard]] inline WordOwner resolve_word(Address word, const AddressIndex& capture,
                                            const GraphRanges& ranges) {
  WordOwner owner;
  owner.lookup = word;
  owner.cell = capture.find_cell(word);
  // Only a word on a cell boundary (or just past the top range) can be an end pointer.
  if (capture.may_end_pointer(word, owner.cell)) [[unlikely]] {
    const std::uint32_t end = capture.end_pointer_cell(word, owner.cell);
    if (end != AddressIndex::kNoCell) {
      owner.lookup = word - 1;
      owner.cell = end;
      owner.is_reference = true;
      return owner;
    }
  }
  owner.is_reference = capture.holds(owner.cell) || ranges.contains(word);
  return owner;
}

/// @brief The nodes of `nodes`, counting child and conditional bodies (and the nodes that
/// hold them).
[[nodiscard]] std::uint64_t count_nodes(const NodeList& nodes);

namespace detail {

inline std::uint64_t load_le64(const std::uint8_t* bytes) {
  std::uint64_t word = 0;
  std::memcpy(&word, bytes, sizeof(word));
  if constexpr (std::endian::native == std::endian::big) {
    std::uint64_t swapped = 0;
    for (int i = 0; i < 8; ++i) {
      swapped = (swapped << 8) | ((word >> (8 * i)) & 0xffU);
    }
    word = swapped;
  }
  return word;
}

template <typename IsReference, typename Visit>
void scan_nodes(std::uint64_t graph_id, const NodeList& nodes, IsReference& is_reference,
                Visit& visit) {
  Reference reference;
  reference.graph = graph_id;
  for (const Node& node : nodes) {
    reference.node = &node;
    switch (node.type) {
      case NodeType::kKernel:
        reference.operand = nullptr;
        // Sizes and pointers are read once per argument: the callables may write memory,
        // which would otherwise make the compiler reload them for every word.
        for (std::size_t p = 0, params = node.params.size(); p < params; ++p) {
          const std::vector<std::uint8_t>& bytes = node.params[p].bytes;
          const std::uint8_t* const data = bytes.data();
          const std::size_t size = bytes.size();
          reference.param = static_cast<std::uint32_t>(p);
          for (std::size_t at = 0; at + 8 <= size; at += 8) {
            const Address word = load_le64(data + at);
            if (is_reference(word)) {
              reference.offset = static_cast<std::uint32_t>(at);
              reference.address = word;
              visit(reference);
            }
          }
        }
        // Then its operands, like every other node's: addresses outside the argument bytes
        // (a TMA descriptor's global address), named outright by the backend, so references
        // without the predicate.
        [[fallthrough]];
      case NodeType::kMemcpy:
      case NodeType::kMemset:
      case NodeType::kMemAlloc:
      case NodeType::kMemFree:
      case NodeType::kOp:
      case NodeType::kBatchMemOp:
        reference.param = 0;
        reference.offset = 0;
        for (const Operand& operand : node.operands) {
          reference.operand = &operand;
          reference.address = operand.begin;
          visit(reference);
        }
        break;
      case NodeType::kChildGraph:
      case NodeType::kConditional:
        for (const NodeList& body : node.bodies) {
          scan_nodes(graph_id, body, is_reference, visit);
        }
        break;
      default:  // host, empty, event, external semaphore: no references
        break;
    }
  }
}

}  // namespace detail

/// @brief Calls `visit(const Reference&)` for every reference of `graph`, in node order
/// (a body's nodes right after the node holding them).
///
/// Kernel nodes: each 8-byte word at byte offsets 0, 8, 16, ... of each argument (while
/// offset + 8 <= the argument's size), read little-endian, is a reference iff
/// `is_reference(word)` returns true; `visit` is called right after that call, so a
/// predicate may cache its lookup for the visitor; then each of the kernel's operands
/// (addresses outside its argument bytes, such as TMA descriptor targets) is a reference
/// without the predicate. Memcpy, memset, mem_alloc, mem_free and op nodes: every operand is
/// a reference (address = operand begin; the predicate is not consulted). Child and conditional
/// bodies are recursed; other node kinds hold none. Thread safety: as safe as the callables; the
/// graph is only read.
template <typename IsReference, typename Visit>
void scan_graph(const GraphRecord& graph, IsReference&& is_reference, Visit&& visit) {
  detail::scan_nodes(graph.id, graph.nodes, is_reference, visit);
}

/// @brief The references of `graph` found against its capture epoch: a kernel word is a
/// reference iff it lies inside a span or an allocation of `capture`, or in `ranges`.
/// Lifetime: the references point into `graph`.
[[nodiscard]] std::vector<Reference> find_references(const GraphRecord& graph,
                                                     const AddressIndex& capture,
                                                     const GraphRanges& ranges);

}  // namespace graphcheck

#endif  // GRAPHCHECK_POINTER_SCAN_H_
