// Graph records: the nodes of a captured graph and the memory each one uses.
#ifndef GRAPHCHECK_GRAPH_H_
#define GRAPHCHECK_GRAPH_H_

#include <graphcheck/address.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace graphcheck {

/// @brief Node kinds, after CUDA's `CUgraphNodeType`, plus `kOp` for ATen dispatcher ops.
/// Snapshot spellings are given beside each value.
enum class NodeType : std::uint8_t {
  kKernel,          ///< "kernel": arguments in `Node::params`
  kMemcpy,          ///< "memcpy": operands "src" and "dst"
  kMemset,          ///< "memset": operand "dst"
  kHost,            ///< "host": no references
  kChildGraph,      ///< "child_graph": nodes in `Node::bodies[0]`
  kEmpty,           ///< "empty": no references
  kEventWait,       ///< "event_wait": no references
  kEventRecord,     ///< "event_record": no references
  kExtSemasSignal,  ///< "ext_semas_signal": no references
  kExtSemasWait,    ///< "ext_semas_wait": no references
  kMemAlloc,        ///< "mem_alloc": operand "alloc", graph-owned in every epoch
  kMemFree,         ///< "mem_free": operand "dptr"
  kBatchMemOp,      ///< "batch_mem_op": operands "reads[i]" (waits), "writes[i]" (writes)
  kConditional,     ///< "conditional": one body graph per branch in `Node::bodies`
  kOp,              ///< "op": an ATen op with read and write operands
};

/// @brief The snapshot spelling of `type` (see `NodeType`).
[[nodiscard]] std::string_view to_string(NodeType type);
/// @brief Inverse of `to_string(NodeType)`; `std::nullopt` for any other text.
[[nodiscard]] std::optional<NodeType> parse_node_type(std::string_view text);

/// @brief One kernel argument: its offset in the packed argument buffer (as
/// `cuFuncGetParamInfo` reports it) and its bytes in memory order.
struct KernelParam {
  std::uint64_t offset = 0;
  std::vector<std::uint8_t> bytes;
  friend bool operator==(const KernelParam&, const KernelParam&) = default;
};

/// @brief Whether a node reads or writes an operand, where known. `kReadWrite` is for a
/// finding on memory that one node both reads and writes (an in-place op).
enum class Access : std::uint8_t { kUnknown, kRead, kWrite, kReadWrite };

/// @brief The report spelling: "unknown", "read", "write", "read-write".
[[nodiscard]] std::string_view to_string(Access access);
/// @brief Inverse of `to_string(Access)`; `std::nullopt` for any other text.
[[nodiscard]] std::optional<Access> parse_access(std::string_view text);

/// @brief An address operand of a node (for kernels: an address outside the argument bytes,
/// such as a TMA descriptor's global address), with its extent where known.
struct Operand {
  std::string role;  ///< "src", "dst", "alloc", "dptr", "reads[0]", "writes[1]", ...
  Address begin = 0;
  std::uint64_t size = 0;  ///< bytes; 0 where unknown (mem_free)
  Access access = Access::kUnknown;
  friend bool operator==(const Operand&, const Operand&) = default;
};

struct Node;
/// @brief The nodes of one (sub)graph.
using NodeList = std::vector<Node>;

/// @brief One graph node. Which members are used depends on `type` (see `NodeType`).
struct Node {
  std::uint64_t id = 0;
  NodeType type = NodeType::kEmpty;
  std::string name;                 ///< kernel or op name; empty for other kinds
  std::vector<KernelParam> params;  ///< kernel arguments, index = argument position
  std::vector<Operand> operands;    ///< memcpy, memset, mem_alloc, mem_free, op; kernel (TMA)
  std::vector<NodeList> bodies;     ///< child graph (one body) or conditional (one per branch)
  friend bool operator==(const Node&, const Node&) = default;
};

/// @brief The `GraphRecord::reader` of a graph whose nodes were read from the CUDA graph
/// itself (its kernel, memcpy, memset, alloc and free nodes, through the driver).
inline constexpr std::string_view kReaderCudaGraph = "cuda-graph";
/// @brief The `GraphRecord::reader` of a graph whose nodes are the ATen dispatcher ops a
/// capture window recorded (kernels launched outside the dispatcher are not in it).
inline constexpr std::string_view kReaderAtenDispatcher = "aten-dispatcher";

/// @brief A captured graph: its id, the label of the epoch it was captured in, its nodes, and
/// what read them.
struct GraphRecord {
  std::uint64_t id = 0;
  std::string epoch;
  NodeList nodes;
  /// What read the nodes: `kReaderCudaGraph`, `kReaderAtenDispatcher`, or empty when the
  /// producer did not say (the snapshot's `producer.backend` did). Snapshot key `reader`.
  /// Initialized so that `GraphRecord{id, epoch, nodes}` stays a complete initializer.
  std::string reader{};
  friend bool operator==(const GraphRecord&, const GraphRecord&) = default;
};

}  // namespace graphcheck

#endif  // GRAPHCHECK_GRAPH_H_
