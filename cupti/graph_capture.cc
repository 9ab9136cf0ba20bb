// GraphCapture: callback routing, capture end and instantiate. Exec-graph updates are in
// graph_capture_updates.cc.
#include "cupti/graph_capture.h"

#include <algorithm>
#include <string>
#include <thread>
#include <utility>

#include "cupti/lock_order.h"

namespace graphcheck::cupti {
namespace {

// The graph this thread last read at a driver-level capture end. The runtime's
// cudaStreamEndCapture calls cuStreamEndCapture inside, so its EXIT comes right after the
// driver's for the same graph; this avoids reading the graph twice.
thread_local CUgraph t_last_captured = nullptr;

template <typename Params>
const Params& params_of(const CUpti_CallbackData& data) {
  return *static_cast<const Params*>(data.functionParams);
}

// Whether the call succeeded (functionReturnValue points at a CUresult or cudaError_t,
// both 0 on success; it is only valid at EXIT).
bool succeeded(const CUpti_CallbackData& data) {
  return data.callbackSite == CUPTI_API_EXIT && data.functionReturnValue != nullptr &&
         *static_cast<const int*>(data.functionReturnValue) == 0;
}

// Driver instantiate calls in progress on this thread (between their ENTER and EXIT). The
// driver fires GRAPHNODE_CREATED for the nodes it makes inside one (the H200 counted two
// callbacks for a one-node capture): nodes of the exec graph's own copy, under a graph the
// headers do not name. The reader never reads that graph, and nothing said its notes would
// ever be forgotten (a graph handle noted per instantiation, kept for the process's life).
thread_local int t_instantiating = 0;

bool is_driver_instantiate(CUpti_CallbackId cbid) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz:
      return true;
    default:
      return false;
  }
}

}  // namespace

GraphCapture::GraphCapture(DriverApi& api, GraphCaptureOptions options)
    : api_(api),
      epoch_(std::move(options.epoch)),
      keep_retired_(options.keep_retired),
      reader_(api, tensor_maps_) {
  pending_execs_.reserve(16);
  reader_.use_created_nodes(&created_);
  reader_.use_unload_count(&unloads_);
}

std::vector<CallbackId> GraphCapture::callbacks() const {
  std::vector<CallbackId> ids;
  for (const CUpti_CallbackId cbid :
       // Not GRAPHNODE_CLONED nor GRAPHNODE_DESTROY_STARTING: they fire once per node of
       // every instantiation and graph destroy, and nothing needs them (issue 32).
       {CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING, CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING,
        CUPTI_CBID_RESOURCE_GRAPH_CLONED, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED,
        CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING,
        CUPTI_CBID_RESOURCE_GRAPH_NODE_UPDATED, CUPTI_CBID_RESOURCE_GRAPH_NODE_SET_PARAMS}) {
    ids.push_back({CUPTI_CB_DOMAIN_RESOURCE, cbid});
  }
  for (const CUpti_CallbackId cbid : {CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture,
                                      CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode_v2,
                                      CUPTI_DRIVER_TRACE_CBID_cuModuleUnload,
                                      CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphExecNodeSetParams,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemcpyNodeSetParams,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphExecMemsetNodeSetParams,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphExecChildGraphNodeSetParams,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphExecBatchMemOpNodeSetParams,
                                      CUPTI_DRIVER_TRACE_CBID_cuGraphNodeSetEnabled,
                                      CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeTiled,
                                      CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeIm2col,
                                      CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeIm2colWide,
                                      CUPTI_DRIVER_TRACE_CBID_cuTensorMapReplaceAddress}) {
    ids.push_back({CUPTI_CB_DOMAIN_DRIVER_API, cbid});
  }
  for (const CUpti_CallbackId cbid :
       {CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000,
        CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithFlags_v11040,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_v12000,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_ptsz_v12000,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecKernelNodeSetParams_v10010,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecNodeSetParams_v12020,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphExecUpdate_v10020,
        CUPTI_RUNTIME_TRACE_CBID_cudaGraphNodeSetEnabled_v11060}) {
    ids.push_back({CUPTI_CB_DOMAIN_RUNTIME_API, cbid});
  }
  return ids;
}

void GraphCapture::on_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                               const void* data) {
  switch (domain) {
    case CUPTI_CB_DOMAIN_RESOURCE:
      on_resource(cbid, *static_cast<const CUpti_ResourceData*>(data));
      break;
    case CUPTI_CB_DOMAIN_DRIVER_API:
      on_driver_api(cbid, *static_cast<const CUpti_CallbackData*>(data));
      break;
    case CUPTI_CB_DOMAIN_RUNTIME_API:
      on_runtime_api(cbid, *static_cast<const CUpti_CallbackData*>(data));
      break;
    default:
      break;
  }
}

void GraphCapture::on_resource(CUpti_CallbackId cbid, const CUpti_ResourceData& data) {
  // Only handles and counters here: the CUPTI guide does not support driver calls inside
  // callbacks, and these run inside every captured launch.
  if (cbid == CUPTI_CBID_RESOURCE_MODULE_UNLOAD_STARTING) {
    // Counted at once, lock or no lock: a read in progress drops its cached layouts at its
    // next kernel (the unloading module's handles may be reused right after).
    unloads_.fetch_add(1, std::memory_order_acq_rel);
    return;
  }
  const auto* graph = static_cast<const CUpti_GraphData*>(data.resourceDescriptor);
  if (graph == nullptr) {
    return;
  }
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED) {
    if (t_instantiating > 0) {  // the exec graph's copy (see t_instantiating): counted only
      created_.count_unnoted();
      return;
    }
    // Once per node of every capture: a note under CreatedNodes' own lock, never the state
    // lock nor its queue (issue 32: the callback costs what the bare dispatch costs, plus this).
    created_.note(graph->graph, graph->node, graph->nodeType);
    return;
  }
  if (cbid == CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING) {
    created_.forget(graph->graph);  // at once, in order with the notes of a graph reusing it
  }
  ResourceEvent event;
  event.cbid = cbid;
  event.graph = graph->graph;
  event.node = graph->node;
  event.exec = graph->graphExec;
  event.thread = std::this_thread::get_id();
  if (cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING && event.exec != nullptr) {
    // Retired now, whoever holds mutex_: the backend checks the record in this callback.
    const std::lock_guard<std::mutex> queue_lock(queue_mutex_);
    if (const auto found = published_.find(event.exec); found != published_.end()) {
      if (keep_retired_) {
        retired_.push_back(std::move(found->second));
      }
      published_.erase(found);
    }
  }
  // The driver fires this from inside one of its calls; a reader on another thread may hold
  // mutex_ while it waits for that call's driver lock. Never wait for mutex_ here.
  const StateLock lock(*this, std::try_to_lock);
  if (!lock.owns()) {
    const std::lock_guard<std::mutex> queue_lock(queue_mutex_);
    queued_.push_back(event);
    queued_any_.store(true, std::memory_order_release);
    return;
  }
  apply_locked(event);
}

void GraphCapture::apply_locked(const ResourceEvent& event) {
  switch (event.cbid) {
    case CUPTI_CBID_RESOURCE_GRAPH_CLONED:
      ++stats_.graphs_cloned;
      break;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED:
      ++stats_.execs_created;
      pending_execs_.push_back(PendingExec{event.exec, event.graph, event.thread});
      break;
    case CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING: {
      ++stats_.execs_destroyed;
      execs_.erase(event.exec);
      std::erase_if(pending_execs_, [&](const PendingExec& p) { return p.exec == event.exec; });
      const std::lock_guard<std::mutex> queue_lock(queue_mutex_);
      published_.erase(event.exec);  // one an update published after the destroy callback
      break;
    }
    case CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING:
      captured_.erase(event.graph);
      captured_unreadable_.erase(event.graph);
      reader_.forget_graph(event.graph);
      std::erase_if(pending_execs_, [&](const PendingExec& p) { return p.graph == event.graph; });
      break;
    case CUPTI_CBID_RESOURCE_GRAPH_NODE_UPDATED:
    case CUPTI_CBID_RESOURCE_GRAPH_NODE_SET_PARAMS:
      ++stats_.node_update_events;  // the API EXIT of the setter carries the new parameters
      break;
    default:
      break;
  }
}

void GraphCapture::drain_locked() {
  // Twice per lock holder: the flag spares an empty queue its mutex (the resource callbacks
  // of a capture come once per node).
  if (!queued_any_.load(std::memory_order_acquire)) {
    return;
  }
  std::vector<ResourceEvent> events;
  {
    const std::lock_guard<std::mutex> queue_lock(queue_mutex_);
    events.swap(queued_);
    queued_any_.store(false, std::memory_order_relaxed);
  }
  for (const ResourceEvent& event : events) {
    apply_locked(event);
  }
}

GraphCapture::StateLock::StateLock(const GraphCapture& capture)
    : capture_(const_cast<GraphCapture&>(capture)) {  // NOLINT: see the declaration
  // Its holder may call the driver: never wait for it with the session mutex held.
  detail::check_not_under_session_lock("waiting for GraphCapture's lock");
  capture_.mutex_.lock();
  capture_.drain_locked();
}

GraphCapture::StateLock::StateLock(const GraphCapture& capture, std::try_to_lock_t /*unused*/)
    : capture_(const_cast<GraphCapture&>(capture)),  // NOLINT: see the declaration
      owns_(capture_.mutex_.try_lock()) {
  if (owns_) {
    capture_.drain_locked();
  }
}

GraphCapture::StateLock::~StateLock() {
  if (!owns_) {
    return;
  }
  try {
    capture_.drain_locked();
  } catch (...) {  // NOLINT(bugprone-empty-catch): only bad_alloc; the events stay queued
  }
  capture_.mutex_.unlock();
}

void GraphCapture::on_driver_api(CUpti_CallbackId cbid, const CUpti_CallbackData& data) {
  if (is_driver_instantiate(cbid)) {
    if (data.callbackSite == CUPTI_API_ENTER) {
      ++t_instantiating;
      return;
    }
    t_instantiating = t_instantiating > 0 ? t_instantiating - 1 : 0;  // failed or not
  }
  if (!succeeded(data) || data.functionParams == nullptr) {
    return;  // everything is read at EXIT, and only from calls that did what they said
  }
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz: {
      const auto& p = params_of<cuStreamEndCapture_params>(data);
      if (p.phGraph != nullptr && *p.phGraph != nullptr) {
        captured(*p.phGraph);
        t_last_captured = *p.phGraph;
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate: {
      const auto& p = params_of<cuGraphInstantiate_params>(data);
      instantiated(p.phGraphExec != nullptr ? *p.phGraphExec : nullptr, p.hGraph);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiate_v2: {
      const auto& p = params_of<cuGraphInstantiate_v2_params>(data);
      instantiated(p.phGraphExec != nullptr ? *p.phGraphExec : nullptr, p.hGraph);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags: {
      const auto& p = params_of<cuGraphInstantiateWithFlags_params>(data);
      instantiated(p.phGraphExec != nullptr ? *p.phGraphExec : nullptr, p.hGraph);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams:
    case CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithParams_ptsz: {
      const auto& p = params_of<cuGraphInstantiateWithParams_params>(data);
      instantiated(p.phGraphExec != nullptr ? *p.phGraphExec : nullptr, p.hGraph);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode: {
      const auto& p = params_of<cuGraphAddNode_params>(data);
      if (p.phGraphNode != nullptr && p.nodeParams != nullptr) {
        conditional_added(*p.phGraphNode, p.hGraph, *p.nodeParams);
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode_v2: {
      const auto& p = params_of<cuGraphAddNode_v2_params>(data);
      if (p.phGraphNode != nullptr && p.nodeParams != nullptr) {
        conditional_added(*p.phGraphNode, p.hGraph, *p.nodeParams);
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuModuleUnload:
    case CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload:
      // Its function handles may be reused from now on: cached layouts are dropped.
      unloads_.fetch_add(1, std::memory_order_acq_rel);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeTiled:
      tensor_map_encoded(params_of<cuTensorMapEncodeTiled_params>(data).tensorMap,
                         params_of<cuTensorMapEncodeTiled_params>(data).globalAddress);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeIm2col:
      tensor_map_encoded(params_of<cuTensorMapEncodeIm2col_params>(data).tensorMap,
                         params_of<cuTensorMapEncodeIm2col_params>(data).globalAddress);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuTensorMapEncodeIm2colWide:
      tensor_map_encoded(params_of<cuTensorMapEncodeIm2colWide_params>(data).tensorMap,
                         params_of<cuTensorMapEncodeIm2colWide_params>(data).globalAddress);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuTensorMapReplaceAddress:
      tensor_map_encoded(params_of<cuTensorMapReplaceAddress_params>(data).tensorMap,
                         params_of<cuTensorMapReplaceAddress_params>(data).globalAddress);
      break;
    default:
      on_driver_exec_update(cbid, data);
      break;
  }
}

void GraphCapture::on_runtime_api(CUpti_CallbackId cbid, const CUpti_CallbackData& data) {
  // A kernel setter notes its start at ENTER and its end at every EXIT, failed or not: a
  // failed one left its nesting depth up, and every later runtime setter on the thread was
  // then taken for one nested inside it.
  if (data.callbackSite == CUPTI_API_ENTER || !succeeded(data) || data.functionParams == nullptr) {
    on_runtime_exec_update(cbid, data);
    return;
  }
  switch (cbid) {
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_ptsz_v10000: {
      const auto& p = params_of<cudaStreamEndCapture_v10000_params>(data);
      if (p.pGraph != nullptr && *p.pGraph != nullptr && *p.pGraph != t_last_captured) {
        captured(*p.pGraph);  // no driver-level EXIT was seen for it
      }
      t_last_captured = nullptr;
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiate_v12000: {
      const auto& p = params_of<cudaGraphInstantiate_v12000_params>(data);
      instantiated(p.pGraphExec != nullptr ? *p.pGraphExec : nullptr, p.graph);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithFlags_v11040: {
      const auto& p = params_of<cudaGraphInstantiateWithFlags_v11040_params>(data);
      instantiated(p.pGraphExec != nullptr ? *p.pGraphExec : nullptr, p.graph);
      break;
    }
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_v12000:
    case CUPTI_RUNTIME_TRACE_CBID_cudaGraphInstantiateWithParams_ptsz_v12000: {
      const auto& p = params_of<cudaGraphInstantiateWithParams_v12000_params>(data);
      instantiated(p.pGraphExec != nullptr ? *p.pGraphExec : nullptr, p.graph);
      break;
    }
    default:
      on_runtime_exec_update(cbid, data);
      break;
  }
}

void GraphCapture::instantiated(CUgraphExec exec, CUgraph graph) {
  const StateLock lock(*this);
  if (exec != nullptr && graph != nullptr) {
    instantiated_locked(exec, graph);
  }
  // Exec graphs announced by GRAPHEXEC_CREATED but made by an instantiate variant not
  // intercepted above; their templates are alive (destroy callbacks drop them). Only this
  // thread's: another thread's GRAPHEXEC_CREATED fires inside its instantiate call, which
  // may still be using the template, and CUDA forbids using one graph from two threads at
  // once; that thread reads its own at its EXIT. The CUPTI headers do not say which
  // CUpti_GraphData fields GRAPHEXEC_CREATED fills in [verify]: an entry without both
  // handles cannot be read, and must not fail the read of the others.
  const std::thread::id self = std::this_thread::get_id();
  for (std::size_t k = pending_execs_.size(); k-- > 0;) {
    if (k >= pending_execs_.size() || pending_execs_[k].thread != self) {
      continue;
    }
    const PendingExec pending = pending_execs_[k];
    pending_execs_.erase(pending_execs_.begin() + static_cast<std::ptrdiff_t>(k));
    if (pending.exec != nullptr && pending.graph != nullptr) {
      instantiated_locked(pending.exec, pending.graph);
    }
  }
}

void GraphCapture::instantiated_locked(CUgraphExec exec, CUgraph graph) {
  for (const PendingExec& pending : pending_execs_) {
    if (pending.exec == exec) {
      ++(pending.graph == graph ? stats_.exec_templates_matched : stats_.exec_templates_differed);
    }
  }
  std::erase_if(pending_execs_, [&](const PendingExec& p) { return p.exec == exec; });
  if (execs_.contains(exec)) {
    return;  // the driver-level EXIT inside a runtime instantiate already read it
  }
  std::uint32_t id = 0;
  GRAPHCHECK_CUPTI_CHECK(api_, cupti_get_graph_exec_id(exec, &id));
  ExecState state;
  state.source = graph;
  auto record = std::make_shared<GraphRecord>();
  record->id = id;
  record->epoch = epoch_;
  record->nodes = reader_.read(graph, &state.index);
  for (UnreadableNode& node : reader_.take_unreadable()) {
    state.unreadable[node.id] = std::move(node);
  }
  state.record = std::move(record);
  publish_locked(exec, state);
  execs_[exec] = std::move(state);
  ++stats_.graphs_walked;
}

void GraphCapture::conditional_added(CUgraphNode node, CUgraph graph,
                                     const CUgraphNodeParams& params) {
  if (params.type != CU_GRAPH_NODE_TYPE_CONDITIONAL || node == nullptr) {
    return;
  }
  const CUDA_CONDITIONAL_NODE_PARAMS& conditional = params.conditional;
  std::vector<CUgraph> bodies;
  if (conditional.phGraph_out != nullptr) {
    bodies.assign(conditional.phGraph_out, conditional.phGraph_out + conditional.size);
  }
  const StateLock lock(*this);
  reader_.set_conditional_bodies(node, graph, std::move(bodies));
}

void GraphCapture::tensor_map_encoded(const CUtensorMap* map, const void* global) {
  if (map == nullptr) {
    return;
  }
  static_assert(sizeof(CUtensorMap) == TensorMapTable::kDescriptorSize);
  const StateLock lock(*this);
  tensor_maps_.record(map, reinterpret_cast<Address>(global));
  ++stats_.tensor_maps;
}

std::shared_ptr<const GraphRecord> GraphCapture::exec_graph(CUgraphExec exec) const {
  const StateLock lock(*this);
  const auto found = execs_.find(exec);
  return found == execs_.end() ? nullptr : found->second.checked;
}

std::vector<std::shared_ptr<const GraphRecord>> GraphCapture::exec_graphs() const {
  std::vector<std::shared_ptr<const GraphRecord>> out;
  {
    const StateLock lock(*this);
    for (const auto& [exec, state] : execs_) {
      out.push_back(state.checked);
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->id < b->id; });
  return out;
}

void GraphCapture::set_epoch(std::string label) {
  const StateLock lock(*this);
  epoch_ = std::move(label);
}

GraphCaptureStats GraphCapture::stats() const {
  const StateLock lock(*this);
  GraphCaptureStats stats = stats_;
  stats.nodes_created = created_.created();
  stats.nodes_created_instantiating = created_.unnoted();
  stats.nodes_noted = created_.size();
  return stats;
}

}  // namespace graphcheck::cupti
