// GraphCapture: updates of instantiated graphs. There is no getter for an exec node's
// parameters and the template node keeps its old ones, so each setter's own arguments are
// read at its API EXIT (still valid there: the call has not returned to its caller), and
// only when it returned success, so a rejected update never changes a record.
#include <graphcheck/error.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cupti/graph_capture.h"

namespace graphcheck::cupti {
namespace {

template <typename Params>
const Params& params_of(const CUpti_CallbackData& data) {
  return *static_cast<const Params*>(data.functionParams);
}

bool succeeded(const CUpti_CallbackData& data) {
  return data.callbackSite == CUPTI_API_EXIT && data.functionReturnValue != nullptr &&
         *static_cast<const int*>(data.functionReturnValue) == 0;
}

// Nodes in `nodes`, bodies included (what a NodeIndex of a read holds).
std::size_t count_nodes(const NodeList& nodes) {
  std::size_t count = nodes.size();
  for (const Node& node : nodes) {
    for (const NodeList& body : node.bodies) {
      count += count_nodes(body);
    }
  }
  return count;
}

// The (exec graph, node) of the kernel setter whose driver-level EXIT this thread saw last
// since its outermost runtime kernel setter's ENTER. The runtime's
// cudaGraphExec(Kernel)NodeSetParams calls a driver setter inside, so that EXIT, which read
// the arguments with the new function's layout, comes between the runtime call's ENTER and
// EXIT. `depth` counts the runtime kernel setters open on the thread (one inside another, if
// CUPTI reported that, is judged at the outermost's EXIT: found by a review).
struct DriverKernelSet {
  CUgraphExec exec = nullptr;
  CUgraphNode node = nullptr;
  int depth = 0;
};
thread_local DriverKernelSet t_driver_kernel_set;

bool is_runtime_kernel_setter(CUpti_CallbackId cbid) {
  return cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecKernelNodeSetParams_v10010 ||
         cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecNodeSetParams_v12020;
}

template <typename DriverKernelParams>
CUDA_KERNEL_NODE_PARAMS from_driver(const DriverKernelParams& params) {
  CUDA_KERNEL_NODE_PARAMS out{};
  out.func = params.func;
  out.kernelParams = params.kernelParams;
  out.extra = params.extra;
  return out;
}

}  // namespace

void GraphCapture::on_driver_exec_update(CUpti_CallbackId cbid, const CUpti_CallbackData& data) {
  if (!succeeded(data) || data.functionParams == nullptr) {
    return;
  }
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams: {
      const auto& p = params_of<cuGraphExecKernelNodeSetParams_params>(data);  // v1 struct
      if (p.nodeParams != nullptr) {
        exec_kernel_updated(p.hGraphExec, p.hNode, from_driver(*p.nodeParams));
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2: {
      const auto& p = params_of<cuGraphExecKernelNodeSetParams_v2_params>(data);
      if (p.nodeParams != nullptr) {
        exec_kernel_updated(p.hGraphExec, p.hNode, *p.nodeParams);
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecNodeSetParams: {
      const auto& p = params_of<cuGraphExecNodeSetParams_params>(data);
      if (p.nodeParams == nullptr) {
        break;
      }
      const CUgraphNodeParams& params = *p.nodeParams;
      switch (params.type) {
        case CU_GRAPH_NODE_TYPE_KERNEL: {
          CUDA_KERNEL_NODE_PARAMS kernel = from_driver(params.kernel);
          kernel.kern = params.kernel.kern;
          kernel.ctx = params.kernel.ctx;
          exec_kernel_updated(p.hGraphExec, p.hNode, kernel);
          break;
        }
        case CU_GRAPH_NODE_TYPE_MEMCPY:
          exec_memcpy_updated(p.hGraphExec, p.hNode, params.memcpy.copyParams);
          break;
        case CU_GRAPH_NODE_TYPE_MEMSET: {
          CUDA_MEMSET_NODE_PARAMS memset{};
          memset.dst = params.memset.dst;
          memset.pitch = params.memset.pitch;
          memset.value = params.memset.value;
          memset.elementSize = params.memset.elementSize;
          memset.width = params.memset.width;
          memset.height = params.memset.height;
          exec_memset_updated(p.hGraphExec, p.hNode, memset);
          break;
        }
        case CU_GRAPH_NODE_TYPE_GRAPH:
          exec_child_updated(p.hGraphExec, p.hNode, params.graph.graph);
          break;
        case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP:
          exec_batch_mem_op_updated(p.hGraphExec, p.hNode, params.memOp.paramArray,
                                    params.memOp.count);
          break;
        default:
          break;  // no address operands graphcheck reads
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemcpyNodeSetParams: {
      const auto& p = params_of<cuGraphExecMemcpyNodeSetParams_params>(data);
      if (p.copyParams != nullptr) {
        exec_memcpy_updated(p.hGraphExec, p.hNode, *p.copyParams);
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemsetNodeSetParams: {
      const auto& p = params_of<cuGraphExecMemsetNodeSetParams_params>(data);
      if (p.memsetParams != nullptr) {
        exec_memset_updated(p.hGraphExec, p.hNode, *p.memsetParams);
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecBatchMemOpNodeSetParams: {
      const auto& p = params_of<cuGraphExecBatchMemOpNodeSetParams_params>(data);
      if (p.nodeParams != nullptr) {
        exec_batch_mem_op_updated(p.hGraphExec, p.hNode, p.nodeParams->paramArray,
                                  p.nodeParams->count);
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphNodeSetEnabled: {
      const auto& p = params_of<cuGraphNodeSetEnabled_params>(data);
      node_enabled(p.hGraphExec, p.hNode, p.isEnabled != 0);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecChildGraphNodeSetParams: {
      const auto& p = params_of<cuGraphExecChildGraphNodeSetParams_params>(data);
      exec_child_updated(p.hGraphExec, p.hNode, p.childGraph);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate: {
      const auto& p = params_of<cuGraphExecUpdate_params>(data);
      exec_updated(p.hGraphExec, p.hGraph);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2: {
      const auto& p = params_of<cuGraphExecUpdate_v2_params>(data);
      exec_updated(p.hGraphExec, p.hGraph);
      break;
    }
    default:
      break;
  }
}

void GraphCapture::on_runtime_exec_update(CUpti_CallbackId cbid, const CUpti_CallbackData& data) {
  if (is_runtime_kernel_setter(cbid)) {
    DriverKernelSet& set = t_driver_kernel_set;
    if (data.callbackSite == CUPTI_API_ENTER) {
      if (set.depth++ == 0) {
        set.exec = nullptr;  // only a driver EXIT inside this call counts
        set.node = nullptr;
      }
      return;
    }
    if (set.depth > 0 && --set.depth > 0) {
      return;  // inside another runtime setter: judged at the outermost's EXIT
    }
  }
  if (!succeeded(data) || data.functionParams == nullptr) {
    return;
  }
  // The runtime forwards these to the driver calls above, whose EXIT comes first and already
  // applied them. Kernel setters are not applied again: the runtime's `func` is a host stub,
  // which names no driver function, so the arguments' layout is unknown here (the kernel may
  // have changed; reading `kernelParams` with the old kernel's layout could read past the
  // caller's array). If CUPTI reported no driver setter inside, the node is kept without
  // arguments and reported as not checked. The other updates are idempotent and applied again.
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecKernelNodeSetParams_v10010: {
      const auto& p = params_of<cudaGraphExecKernelNodeSetParams_v10010_params>(data);
      if (p.pNodeParams != nullptr) {
        runtime_kernel_updated(p.hGraphExec, p.node, "cudaGraphExecKernelNodeSetParams");
      }
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecNodeSetParams_v12020: {
      const auto& p = params_of<cudaGraphExecNodeSetParams_v12020_params>(data);
      if (p.nodeParams != nullptr && p.nodeParams->type == cudaGraphNodeTypeKernel) {
        runtime_kernel_updated(p.graphExec, p.node, "cudaGraphExecNodeSetParams");
      }
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphNodeSetEnabled_v11060: {
      const auto& p = params_of<cudaGraphNodeSetEnabled_v11060_params>(data);
      node_enabled(p.hGraphExec, p.hNode, p.isEnabled != 0);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecUpdate_v10020: {
      const auto& p = params_of<cudaGraphExecUpdate_v10020_params>(data);
      exec_updated(p.hGraphExec, p.hGraph);
      break;
    }
    default:
      break;
  }
}

template <typename Update>
void GraphCapture::update_exec_node(CUgraphExec exec, CUgraphNode node, Update&& update) {
  const StateLock lock(*this);
  const auto found = execs_.find(exec);
  if (found == execs_.end()) {
    return;  // instantiated while graphcheck was not enabled: nothing recorded to update
  }
  ExecState& state = found->second;
  (void)reader_.take_unreadable();  // only this update's findings below
  const auto at = state.index.find(node);
  Node* target = nullptr;
  // Copy on write: readers holding the old record keep a consistent one.
  auto copy = std::make_shared<GraphRecord>(*state.record);
  if (at != state.index.end()) {
    target = locate_node(copy->nodes, at->second.path);
  }
  if (target == nullptr) {
    throw Error("graphcheck: exec graph " + std::to_string(state.record->id) +
                " had a node updated that its record does not hold (a conditional body created "
                "before graphcheck was enabled?); that node's addresses in the record are stale");
  }
  const std::uint64_t id = target->id;
  update(*target, at->second);
  state.unreadable.erase(id);  // the node's new parameters decide
  for (UnreadableNode& unreadable : reader_.take_unreadable()) {
    state.unreadable[unreadable.id] = std::move(unreadable);
  }
  state.record = std::move(copy);
  publish_locked(exec, state);
  ++stats_.exec_updates;
}

void GraphCapture::exec_kernel_updated(CUgraphExec exec, CUgraphNode node,
                                       const CUDA_KERNEL_NODE_PARAMS& p) {
  t_driver_kernel_set.exec = exec;
  t_driver_kernel_set.node = node;
  update_exec_node(exec, node, [&](Node& target, NodeLocation& location) {
    const KernelHandle handle =
        p.func != nullptr ? KernelHandle{p.func, nullptr} : KernelHandle{nullptr, p.kern};
    target = reader_.read_kernel_or_unreadable(p, handle, target.id);
    location.kernel = handle;
  });
}

void GraphCapture::runtime_kernel_updated(CUgraphExec exec, CUgraphNode node, const char* call) {
  const DriverKernelSet seen = std::exchange(t_driver_kernel_set, {});  // depth is 0 here
  if (seen.exec == exec && seen.node == node) {
    return;  // applied at the driver setter's EXIT, with the new kernel's own layout
  }
  {
    const StateLock lock(*this);
    ++stats_.runtime_kernel_setters_alone;
  }
  update_exec_node(exec, node, [&](Node& target, NodeLocation& location) {
    target = reader_.unreadable_kernel(
        target.id, "",
        std::string("updated by ") + call +
            ", and CUPTI reported no driver setter inside it: the runtime names the kernel by "
            "a host stub, so its argument layout is unknown");
    location.kernel = {};
  });
}

void GraphCapture::exec_memcpy_updated(CUgraphExec exec, CUgraphNode node,
                                       const CUDA_MEMCPY3D& copy) {
  update_exec_node(exec, node, [&](Node& target, NodeLocation& /*location*/) {
    target.operands = reader_.memcpy_operands(copy);
  });
}

void GraphCapture::exec_memset_updated(CUgraphExec exec, CUgraphNode node,
                                       const CUDA_MEMSET_NODE_PARAMS& memset) {
  update_exec_node(exec, node, [&](Node& target, NodeLocation& /*location*/) {
    target.operands = {GraphReader::memset_operand(memset)};
  });
}

void GraphCapture::exec_batch_mem_op_updated(CUgraphExec exec, CUgraphNode node,
                                             const CUstreamBatchMemOpParams* ops,
                                             unsigned int count) {
  update_exec_node(exec, node, [&](Node& target, NodeLocation& /*location*/) {
    target.operands = GraphReader::batch_mem_op_operands(ops, count);
  });
}

void GraphCapture::node_enabled(CUgraphExec exec, CUgraphNode node, bool enabled) {
  const StateLock lock(*this);
  const auto found = execs_.find(exec);
  if (found == execs_.end()) {
    return;  // instantiated while graphcheck was not enabled
  }
  ExecState& state = found->second;
  const auto at = state.index.find(node);
  if (at == state.index.end()) {
    throw Error("graphcheck: exec graph " + std::to_string(state.record->id) + " had a node " +
                (enabled ? "enabled" : "disabled") +
                " that its record does not hold; it is checked as recorded");
  }
  const bool changed = enabled ? state.disabled.erase(at->second.path) != 0
                               : state.disabled.insert(at->second.path).second;
  if (changed) {
    publish_locked(exec, state);
  }
}

void GraphCapture::exec_child_updated(CUgraphExec exec, CUgraphNode node, CUgraph child) {
  if (child == nullptr) {
    return;
  }
  update_exec_node(exec, node, [&](Node& target, NodeLocation& /*location*/) {
    // The new child graph's nodes are not in the exec graph's index; later updates address
    // the nodes the exec graph was instantiated with, which keep their old paths.
    target.bodies.assign(1, reader_.read(child, nullptr));
  });
}

void GraphCapture::exec_updated(CUgraphExec exec, CUgraph graph) {
  if (graph == nullptr) {
    return;
  }
  const StateLock lock(*this);
  const auto found = execs_.find(exec);
  if (found == execs_.end()) {
    return;
  }
  ExecState& state = found->second;
  NodeIndex update_index;
  auto record = std::make_shared<GraphRecord>();
  record->id = state.record->id;
  record->epoch = epoch_;
  record->nodes = reader_.read(graph, &update_index);
  // cuGraphExecUpdate keeps the exec graph's nodes and gives each the parameters of the node
  // of `graph` it pairs with. Later per-node setters still name nodes of the graph the exec
  // graph was instantiated from (cuda.h, cuGraphExecKernelNodeSetParams: "from the graph
  // from which graphExec was instantiated"), so the index keeps those keys and each key's
  // node takes the update graph's node at the same position. CUDA pairs by topology (edge
  // order); graphs built the same way (a recapture of the same code) list their nodes in
  // the same order, which is what position pairing assumes [verify on a GPU]. The exec
  // graph's nodes keep their ids.
  std::vector<UnreadableNode> unreadable = reader_.take_unreadable();
  std::map<std::uint64_t, std::uint64_t> ids;  // update graph's node id -> exec graph's
  std::map<std::vector<std::uint32_t>, KernelHandle> kernels;
  for (const auto& [node, location] : update_index) {
    kernels.emplace(location.path, location.kernel);
  }
  const std::size_t before = count_nodes(state.record->nodes);
  std::size_t unpaired = 0;
  for (auto at = state.index.begin(); at != state.index.end();) {
    const Node* old_node = locate_node(state.record->nodes, at->second.path);
    Node* new_node = locate_node(record->nodes, at->second.path);
    const auto kernel = kernels.find(at->second.path);
    if (old_node == nullptr || new_node == nullptr || old_node->type != new_node->type ||
        kernel == kernels.end()) {
      at = state.index.erase(at);  // a later setter of this node is reported
      ++unpaired;
      continue;
    }
    ids[new_node->id] = old_node->id;
    new_node->id = old_node->id;
    at->second.kernel = kernel->second;
    ++at;
  }
  // The update graph's own handles are not keys: on an H200 (driver 580) a setter naming
  // one failed (cudaErrorInvalidValue) and one naming the instantiated graph's succeeded
  // (docs/cupti.md). A setter the record cannot place is reported.
  state.unreadable.clear();
  for (UnreadableNode& node : unreadable) {
    if (const auto original = ids.find(node.id); original != ids.end()) {
      node.id = original->second;
    }
    state.unreadable[node.id] = std::move(node);
  }
  state.record = std::move(record);
  publish_locked(exec, state);
  ++stats_.exec_updates;
  if (unpaired != 0 || update_index.size() != before) {
    throw Error("graphcheck: exec graph " + std::to_string(state.record->id) +
                " was updated (cuGraphExecUpdate) from a graph whose " +
                std::to_string(update_index.size()) + " nodes do not pair by position with " +
                "the instantiated graph's " + std::to_string(before) + "; the record holds " +
                "the update graph's nodes, and per-node updates of the " +
                std::to_string(unpaired) + " unpaired node handles cannot be followed. Build " +
                "the update graph in the same order as the instantiated one (capture the " +
                "same code)");
  }
}

}  // namespace graphcheck::cupti
