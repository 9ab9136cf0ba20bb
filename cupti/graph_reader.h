// Reads a CUDA graph's nodes through the driver into graphcheck::Node values.
#ifndef GRAPHCHECK_CUPTI_GRAPH_READER_H_
#define GRAPHCHECK_CUPTI_GRAPH_READER_H_

#include <cuda.h>
#include <graphcheck/graph.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cupti/created_nodes.h"
#include "cupti/driver_api.h"
#include "cupti/tensor_maps.h"

namespace graphcheck::cupti {

/// @brief A kernel's argument layout: (offset, size) per argument as cuFuncGetParamInfo /
/// cuKernelGetParamInfo report it, and its (demangled where possible) name.
struct KernelLayout {
  std::string name;
  std::vector<std::pair<std::size_t, std::size_t>> params;  // (offset, size)
};

/// @brief The kernel a node launches: `func` if set, else `kern` (CUDA_KERNEL_NODE_PARAMS).
struct KernelHandle {
  CUfunction func = nullptr;
  CUkernel kern = nullptr;
  friend bool operator==(const KernelHandle&, const KernelHandle&) = default;
};

/// @brief Where a node sits in a record: indices through `Node::bodies` (`path[0]` in the
/// top-level list, then body index and node index pairs), and the kernel it launched.
struct NodeLocation {
  std::vector<std::uint32_t> path;
  KernelHandle kernel;
};
/// @brief Template node handle -> its location in a record (for exec-graph updates).
using NodeIndex = std::unordered_map<CUgraphNode, NodeLocation>;

/// @brief The node at `path` (see `NodeLocation`) in `nodes`, or null if the path does not
/// fit. Thread safety: as the list.
[[nodiscard]] Node* locate_node(NodeList& nodes, const std::vector<std::uint32_t>& path);
[[nodiscard]] const Node* locate_node(const NodeList& nodes,
                                      const std::vector<std::uint32_t>& path);

/// @brief A kernel node whose arguments could not be read (issue 18): the record holds it
/// without arguments, so it yields no reference, and the report names it in `warnings`.
struct UnreadableNode {
  std::uint64_t id = 0;  ///< cuptiGetGraphNodeId of the node
  std::string kernel;    ///< its name, where the driver gives one
  std::string cause;     ///< why its arguments could not be read
};

/// @brief Walks graphs and decodes node parameters.
///
/// Driver calls per node: `cuptiGetGraphNodeId`, the node's parameter getter, and
/// `cuGraphNodeGetType` only for a node whose type the capture's callbacks did not give
/// (`use_created_nodes`). Per function handle, not per node: its argument layout and name
/// (`cuFuncGetParamInfo`/`cuKernelGetParamInfo`, `cuFuncGetName`/`cuKernelGetName`), kept
/// until a module or library is unloaded (a freed handle may be reused for another kernel):
/// `forget_kernels()`, or the unload count of `use_unload_count` moving on, which the owner's
/// callbacks bump without waiting for the lock that serializes this reader.
///
/// Kernel arguments: each argument's bytes are copied from `kernelParams[i]` (size from
/// the layout) or from the packed `extra` buffer (CU_LAUNCH_PARAM_BUFFER_POINTER/_SIZE, at
/// the layout's offsets); every 128-byte window at a multiple of 64 bytes from an
/// argument's start that matches a recorded TMA descriptor adds an operand
/// "param[i]+<off>:tensor_map" (read, as a snapshot spells kernel operands).
/// Memcpy: device or unified operands become "src" (read) / "dst" (write) with their
/// extent (x + y*pitch + z*height*pitch ...); host and array operands are skipped (unified
/// ones that cuPointerGetAttribute says are host memory too). Memset: "dst" (write).
/// Mem alloc: "alloc" (write). Mem free: "dptr" (size 0). Batch mem ops: "reads[k]" (waits) and
/// "writes[k]" (writes) of 4 or 8 bytes. Child graphs and conditional bodies
/// (when registered with `set_conditional_bodies`) are read recursively. A kernel whose
/// arguments cannot be read is kept without them (`take_unreadable`); other failing driver
/// calls fail the whole read.
/// Thread safety: none; the owner serializes. Failing driver calls throw graphcheck::Error.
class GraphReader {
 public:
  GraphReader(DriverApi& api, const TensorMapTable& tensor_maps);

  /// @brief Reads every node of `graph` (recursively); fills `index` if not null.
  [[nodiscard]] NodeList read(CUgraph graph, NodeIndex* index);
  /// @brief A kernel node from its parameter struct (id left 0). @throws Error when its
  /// arguments cannot be read.
  [[nodiscard]] Node read_kernel(const CUDA_KERNEL_NODE_PARAMS& params,
                                 const KernelHandle& layout_of);
  /// @brief As `read_kernel`, with id `id`; a kernel whose arguments cannot be read (a
  /// cuFuncGetParamInfo error, an unknown `extra` option, a null kernelParams entry, ...)
  /// becomes a kernel node without arguments, noted for `take_unreadable`.
  [[nodiscard]] Node read_kernel_or_unreadable(const CUDA_KERNEL_NODE_PARAMS& params,
                                               const KernelHandle& layout_of, std::uint64_t id);
  /// @brief A kernel node with id `id` and no arguments, noted for `take_unreadable` with
  /// `cause` (and `name`, empty when unknown).
  [[nodiscard]] Node unreadable_kernel(std::uint64_t id, std::string name, std::string cause);
  /// @brief The kernel nodes found unreadable since the last call (`read` starts afresh).
  [[nodiscard]] std::vector<UnreadableNode> take_unreadable() {
    return std::exchange(unreadable_, {});
  }
  [[nodiscard]] std::vector<Operand> memcpy_operands(const CUDA_MEMCPY3D& copy);
  [[nodiscard]] static Operand memset_operand(const CUDA_MEMSET_NODE_PARAMS& memset);
  /// @brief A batch mem-op node's addresses: the waits as "reads[k]" (read), then the writes
  /// as "writes[k]" (write), 4 or 8 bytes each; flushes and barriers have none.
  [[nodiscard]] static std::vector<Operand> batch_mem_op_operands(
      const CUstreamBatchMemOpParams* ops, unsigned int count);

  /// @brief The bodies of conditional node `node` of `graph` (noted at cuGraphAddNode: CUDA
  /// 13.0 has no getter). A reused handle's new bodies replace the old ones.
  void set_conditional_bodies(CUgraphNode node, CUgraph graph, std::vector<CUgraph> bodies);
  /// @brief Drops what is known about the nodes of `graph` (it is being destroyed).
  void forget_graph(CUgraph graph);
  void forget_kernels() { layouts_.clear(); }
  /// @brief Node types to take instead of asking `cuGraphNodeGetType` (not owned; null:
  /// none). Lifetime: `created` outlives the reader or is reset first.
  void use_created_nodes(const CreatedNodes* created) { created_ = created; }
  /// @brief A count of module and library unloads: when it has moved since the last layout
  /// was cached, every cached layout is dropped first. Lifetime: as `use_created_nodes`.
  void use_unload_count(const std::atomic<std::uint64_t>* unloads) { unloads_ = unloads; }

 private:
  void read_into(CUgraph graph, NodeList& out, NodeIndex* index, std::vector<std::uint32_t>& path,
                 int depth);
  Node read_node(CUgraphNode node, std::optional<CUgraphNodeType> known, NodeIndex* index,
                 std::vector<std::uint32_t>& path, int depth, KernelHandle& kernel);
  const KernelLayout& layout(const KernelHandle& kernel);
  CUresult param_info(const KernelHandle& kernel, std::size_t index, std::size_t* offset,
                      std::size_t* size);
  std::string kernel_name(const KernelHandle& kernel);
  void add_tensor_map_operands(Node& node) const;

  DriverApi& api_;
  const TensorMapTable& tensor_maps_;
  std::unordered_map<const void*, KernelLayout> layouts_;
  const CreatedNodes* created_ = nullptr;
  const std::atomic<std::uint64_t>* unloads_ = nullptr;
  std::uint64_t unloads_seen_ = 0;  // the unload count `layouts_` was cached under
  struct Conditional {
    CUgraph graph = nullptr;  // the graph holding the node
    std::vector<CUgraph> bodies;
  };
  std::unordered_map<CUgraphNode, Conditional> conditional_bodies_;
  std::vector<UnreadableNode> unreadable_;
};

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_GRAPH_READER_H_
