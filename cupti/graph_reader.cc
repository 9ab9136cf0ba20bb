// Walking a graph: node enumeration, child graphs and conditional bodies, memcpy, memset,
// alloc and free nodes. Kernel nodes are decoded in kernel_args.cc.
#include "cupti/graph_reader.h"

#include <graphcheck/error.h>

#include <string>
#include <utility>
#include <vector>

namespace graphcheck::cupti {
namespace {

// Deeper nesting than this is a cycle in a (fake or corrupt) graph, not a real program.
constexpr int kMaxDepth = 64;

NodeType node_type(CUgraphNodeType type) {
  switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
      return NodeType::kKernel;
    case CU_GRAPH_NODE_TYPE_MEMCPY:
      return NodeType::kMemcpy;
    case CU_GRAPH_NODE_TYPE_MEMSET:
      return NodeType::kMemset;
    case CU_GRAPH_NODE_TYPE_HOST:
      return NodeType::kHost;
    case CU_GRAPH_NODE_TYPE_GRAPH:
      return NodeType::kChildGraph;
    case CU_GRAPH_NODE_TYPE_EMPTY:
      return NodeType::kEmpty;
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
      return NodeType::kEventWait;
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
      return NodeType::kEventRecord;
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
      return NodeType::kExtSemasSignal;
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT:
      return NodeType::kExtSemasWait;
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC:
      return NodeType::kMemAlloc;
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
      return NodeType::kMemFree;
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
      return NodeType::kBatchMemOp;
    case CU_GRAPH_NODE_TYPE_CONDITIONAL:
      return NodeType::kConditional;
    default:
      return NodeType::kEmpty;  // a newer kind: named "cuda_node_type_<n>" below
  }
}

// Bytes a (possibly pitched, 3D) copy touches from its first byte to its last.
std::uint64_t extent(std::size_t width, std::size_t rows, std::size_t depth, std::size_t pitch,
                     std::size_t height) {
  const std::uint64_t r = rows == 0 ? 1 : rows;
  const std::uint64_t d = depth == 0 ? 1 : depth;
  if (r == 1 && d == 1) {
    return width;
  }
  return (d - 1) * height * pitch + (r - 1) * pitch + width;
}

}  // namespace

Node* locate_node(NodeList& nodes, const std::vector<std::uint32_t>& path) {
  if (path.empty() || path[0] >= nodes.size()) {
    return nullptr;
  }
  Node* node = &nodes[path[0]];
  for (std::size_t k = 1; k + 1 < path.size(); k += 2) {
    if (path[k] >= node->bodies.size() || path[k + 1] >= node->bodies[path[k]].size()) {
      return nullptr;
    }
    node = &node->bodies[path[k]][path[k + 1]];
  }
  return node;
}

const Node* locate_node(const NodeList& nodes, const std::vector<std::uint32_t>& path) {
  return locate_node(const_cast<NodeList&>(nodes), path);  // NOLINT: only reads through it
}

GraphReader::GraphReader(DriverApi& api, const TensorMapTable& tensor_maps)
    : api_(api), tensor_maps_(tensor_maps) {}

NodeList GraphReader::read(CUgraph graph, NodeIndex* index) {
  unreadable_.clear();  // what an earlier read that threw left behind
  NodeList nodes;
  std::vector<std::uint32_t> path;
  read_into(graph, nodes, index, path, 0);
  return nodes;
}

void GraphReader::set_conditional_bodies(CUgraphNode node, CUgraph graph,
                                         std::vector<CUgraph> bodies) {
  conditional_bodies_[node] = Conditional{graph, std::move(bodies)};
}

void GraphReader::forget_graph(CUgraph graph) {
  std::erase_if(conditional_bodies_,
                [&](const auto& entry) { return entry.second.graph == graph; });
}

void GraphReader::read_into(CUgraph graph, NodeList& out, NodeIndex* index,
                            std::vector<std::uint32_t>& path, int depth) {
  if (depth > kMaxDepth) {
    throw Error("graphcheck: graph nesting (child graphs, conditional bodies) is deeper than " +
                std::to_string(kMaxDepth) + " levels; the graph refers to itself");
  }
  std::size_t count = 0;
  GRAPHCHECK_CU_CHECK(api_, cu_graph_get_nodes(graph, nullptr, &count));
  std::vector<CUgraphNode> handles(count);
  if (count > 0) {
    GRAPHCHECK_CU_CHECK(api_, cu_graph_get_nodes(graph, handles.data(), &count));
    handles.resize(count);
  }
  out.reserve(out.size() + handles.size());
  const NodeTypes types = created_ != nullptr ? created_->of(graph, handles) : NodeTypes();
  for (std::size_t i = 0; i < handles.size(); ++i) {
    path.push_back(static_cast<std::uint32_t>(out.size()));
    KernelHandle kernel;
    Node node = read_node(handles[i], types.type(i, handles[i]), index, path, depth, kernel);
    if (index != nullptr) {
      (*index)[handles[i]] = NodeLocation{path, kernel};
    }
    out.push_back(std::move(node));
    path.pop_back();
  }
}

Node GraphReader::read_node(CUgraphNode handle, std::optional<CUgraphNodeType> known,
                            NodeIndex* index, std::vector<std::uint32_t>& path, int depth,
                            KernelHandle& kernel) {
  std::uint64_t id = 0;
  GRAPHCHECK_CUPTI_CHECK(api_, cupti_get_graph_node_id(handle, &id));
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  if (known.has_value()) {
    type = *known;  // GRAPHNODE_CREATED gave it
  } else {
    GRAPHCHECK_CU_CHECK(api_, cu_graph_node_get_type(handle, &type));
  }

  Node node;
  switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      CUDA_KERNEL_NODE_PARAMS params{};
      GRAPHCHECK_CU_CHECK(api_, cu_graph_kernel_node_get_params(handle, &params));
      kernel = params.func != nullptr ? KernelHandle{params.func, nullptr}
                                      : KernelHandle{nullptr, params.kern};
      node = read_kernel_or_unreadable(params, kernel, id);
      break;
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
      CUDA_MEMCPY3D copy{};
      GRAPHCHECK_CU_CHECK(api_, cu_graph_memcpy_node_get_params(handle, &copy));
      node.operands = memcpy_operands(copy);
      break;
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      CUDA_MEMSET_NODE_PARAMS memset{};
      GRAPHCHECK_CU_CHECK(api_, cu_graph_memset_node_get_params(handle, &memset));
      node.operands.push_back(memset_operand(memset));
      break;
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
      CUDA_MEM_ALLOC_NODE_PARAMS alloc{};
      GRAPHCHECK_CU_CHECK(api_, cu_graph_mem_alloc_node_get_params(handle, &alloc));
      // Written, as the snapshot spells an alloc node (docs/snapshot-format.md): the record
      // must be what a snapshot of it reads back (the GPU run's writer refused kUnknown).
      node.operands.push_back(Operand{"alloc", alloc.dptr, alloc.bytesize, Access::kWrite});
      break;
    }
    case CU_GRAPH_NODE_TYPE_MEM_FREE: {
      CUdeviceptr dptr = 0;
      GRAPHCHECK_CU_CHECK(api_, cu_graph_mem_free_node_get_params(handle, &dptr));
      node.operands.push_back(Operand{"dptr", dptr, 0, Access::kUnknown});
      break;
    }
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: {
      CUDA_BATCH_MEM_OP_NODE_PARAMS ops{};
      GRAPHCHECK_CU_CHECK(api_, cu_graph_batch_mem_op_node_get_params(handle, &ops));
      node.operands = batch_mem_op_operands(ops.paramArray, ops.count);
      break;
    }
    case CU_GRAPH_NODE_TYPE_GRAPH: {
      CUgraph child = nullptr;
      GRAPHCHECK_CU_CHECK(api_, cu_graph_child_graph_node_get_graph(handle, &child));
      node.bodies.resize(1);
      path.push_back(0);
      read_into(child, node.bodies[0], index, path, depth + 1);
      path.pop_back();
      break;
    }
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: {
      // CUDA 13.0 has no getter for the bodies: they were noted at cuGraphAddNode EXIT.
      const auto found = conditional_bodies_.find(handle);
      if (found != conditional_bodies_.end()) {
        const std::vector<CUgraph> bodies = found->second.bodies;
        node.bodies.resize(bodies.size());
        for (std::size_t b = 0; b < bodies.size(); ++b) {
          path.push_back(static_cast<std::uint32_t>(b));
          read_into(bodies[b], node.bodies[b], index, path, depth + 1);
          path.pop_back();
        }
      }
      break;
    }
    default:
      break;
  }
  node.id = id;
  node.type = node_type(type);
  if (node.type == NodeType::kEmpty && type != CU_GRAPH_NODE_TYPE_EMPTY) {
    node.name = "cuda_node_type_" + std::to_string(static_cast<int>(type));
  }
  return node;
}

std::vector<Operand> GraphReader::memcpy_operands(const CUDA_MEMCPY3D& copy) {
  std::vector<Operand> operands;
  auto add = [&](CUmemorytype type, CUdeviceptr device, std::size_t x, std::size_t y, std::size_t z,
                 std::size_t pitch, std::size_t height, const char* role, Access access) {
    if (type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED) {
      return;  // host pointers and CUDA arrays are not device addresses a graph can go stale on
    }
    if (type == CU_MEMORYTYPE_UNIFIED) {
      // A unified address may be pinned host memory; keep it unless the driver says host.
      unsigned int memory_type = 0;
      if (api_.cu_pointer_get_attribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, device) ==
              CUDA_SUCCESS &&
          memory_type == CU_MEMORYTYPE_HOST) {
        return;
      }
    }
    const Address begin = device + x + y * pitch + z * height * pitch;
    operands.push_back(Operand{
        role, begin, extent(copy.WidthInBytes, copy.Height, copy.Depth, pitch, height), access});
  };
  add(copy.srcMemoryType, copy.srcDevice, copy.srcXInBytes, copy.srcY, copy.srcZ, copy.srcPitch,
      copy.srcHeight, "src", Access::kRead);
  add(copy.dstMemoryType, copy.dstDevice, copy.dstXInBytes, copy.dstY, copy.dstZ, copy.dstPitch,
      copy.dstHeight, "dst", Access::kWrite);
  return operands;
}

Operand GraphReader::memset_operand(const CUDA_MEMSET_NODE_PARAMS& memset) {
  const std::uint64_t row = static_cast<std::uint64_t>(memset.width) * memset.elementSize;
  const std::uint64_t size = memset.height <= 1 ? row : (memset.height - 1) * memset.pitch + row;
  return Operand{"dst", memset.dst, size, Access::kWrite};
}

std::vector<Operand> GraphReader::batch_mem_op_operands(const CUstreamBatchMemOpParams* ops,
                                                        unsigned int count) {
  // Reads (waits) first, then writes, each numbered in its own list: the order and roles
  // an op node's operands have (docs/snapshot-format.md).
  std::vector<Operand> reads;
  std::vector<Operand> writes;
  for (unsigned int i = 0; ops != nullptr && i < count; ++i) {
    const CUstreamBatchMemOpParams& op = ops[i];
    switch (op.operation) {
      case CU_STREAM_MEM_OP_WAIT_VALUE_32:
      case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        reads.push_back(Operand{"reads[" + std::to_string(reads.size()) + "]", op.waitValue.address,
                                op.operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 ? 4U : 8U,
                                Access::kRead});
        break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_32:
      case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        writes.push_back(
            Operand{"writes[" + std::to_string(writes.size()) + "]", op.writeValue.address,
                    op.operation == CU_STREAM_MEM_OP_WRITE_VALUE_32 ? 4U : 8U, Access::kWrite});
        break;
      default:
        break;  // flushes and barriers name no address
    }
  }
  reads.insert(reads.end(), writes.begin(), writes.end());
  return reads;
}

}  // namespace graphcheck::cupti
