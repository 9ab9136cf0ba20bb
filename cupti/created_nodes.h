// The nodes the capture's resource callbacks named, with their types: GRAPHNODE_CREATED
// carries each node's graph, handle and type, so a graph read asks the driver for none of
// them (issue 32 §1: nothing per node that the capture already gave).
#ifndef GRAPHCHECK_CUPTI_CREATED_NODES_H_
#define GRAPHCHECK_CUPTI_CREATED_NODES_H_

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace graphcheck::cupti {

/// @brief One GRAPHNODE_CREATED: the node and its type.
struct CreatedNode {
  CUgraphNode node = nullptr;
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
};

/// @brief The types of one graph's nodes as the callbacks named them (`CreatedNodes::of`).
///
/// Layout: the graph's notes in creation order. `cuGraphGetNodes` lists a graph's nodes in
/// that order when none was destroyed, so the common case compares each handle with the note
/// at its position; otherwise (a node destroyed, created before the subscription, or an
/// order the driver does not promise) a table by handle answers, the latest note of a handle
/// winning (a destroyed node's handle may be reused, its new note comes later).
class NodeTypes {
 public:
  NodeTypes() = default;
  NodeTypes(const std::vector<CreatedNode>* notes, const std::vector<CUgraphNode>& handles);
  /// @brief The type of `handles[i]` (the list given to the constructor), or nullopt when no
  /// callback named that node.
  [[nodiscard]] std::optional<CUgraphNodeType> type(std::size_t i, CUgraphNode handle) const;

 private:
  const std::vector<CreatedNode>* notes_ = nullptr;
  bool positional_ = false;
  std::unordered_map<CUgraphNode, CUgraphNodeType> by_handle_;
};

/// @brief Every graph's created nodes, noted in the GRAPHNODE_CREATED callback (a push onto
/// the graph's list under a lock of its own: no driver call, no lookup when the previous note
/// was for the same graph, as in a stream capture) and dropped with the graph
/// (GRAPH_DESTROY_STARTING). Nodes cloned into a graph (GRAPHNODE_CLONED: cuGraphClone,
/// child graphs, instantiation) are not noted; a read asks the driver for their type.
///
/// Memory: 16 bytes per node noted in each live graph. Node destroys are not seen (their
/// callback would fire for every node of every graph destroyed), so a graph whose nodes are
/// added and removed again and again would grow its list: past `kMaxNotes` notes a graph is
/// no longer noted (its list freed; reads ask the driver for its nodes' types).
/// Thread safety: every member may be called from any thread. The list `of` points into may
/// change only by `note` or `forget` of that same graph, which CUDA forbids while another
/// thread reads the graph (graphs are not internally synchronized).
class CreatedNodes {
 public:
  /// Notes kept per graph, at most (16 MiB).
  static constexpr std::size_t kMaxNotes = std::size_t{1} << 20U;

  void note(CUgraph graph, CUgraphNode node, CUgraphNodeType type);
  /// @brief Counts a GRAPHNODE_CREATED without noting it (one of an exec graph's own copy).
  void count_unnoted();
  void forget(CUgraph graph);
  /// @brief What the callbacks said of the nodes `handles` of `graph` (valid until the next
  /// `note` or `forget` of `graph`).
  [[nodiscard]] NodeTypes of(CUgraph graph, const std::vector<CUgraphNode>& handles) const;
  /// @brief GRAPHNODE_CREATED callbacks seen (noted or not).
  [[nodiscard]] std::uint64_t created() const;
  /// @brief Of those, the ones `count_unnoted` counted.
  [[nodiscard]] std::uint64_t unnoted() const;
  /// @brief Nodes noted, over every graph.
  [[nodiscard]] std::size_t size() const;

 private:
  struct Notes {
    std::vector<CreatedNode> nodes;
    bool overflowed = false;  // past kMaxNotes: no longer noted
  };
  mutable std::mutex mutex_;
  std::unordered_map<CUgraph, Notes> by_graph_;
  // The notes of the graph noted last (element pointers survive a rehash).
  CUgraph last_graph_ = nullptr;
  Notes* last_ = nullptr;
  std::uint64_t created_ = 0;
  std::uint64_t unnoted_ = 0;
};

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_CREATED_NODES_H_
