// A fake DriverApi for the cupti-fake tier: graphs, nodes, kernels and exec graphs are
// fabricated in host memory, handles are pointers to them, and any call can be made to fail.
#ifndef GRAPHCHECK_TESTS_CUPTI_FAKE_FAKE_DRIVER_H_
#define GRAPHCHECK_TESTS_CUPTI_FAKE_FAKE_DRIVER_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cupti/dispatcher.h"
#include "cupti/driver_api.h"

namespace graphcheck::cupti::testing {

/// One fabricated graph node; which member is used depends on `type`.
struct FakeNode {
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  std::uint64_t id = 0;
  CUDA_KERNEL_NODE_PARAMS kernel{};
  CUDA_MEMCPY3D memcpy{};
  CUDA_MEMSET_NODE_PARAMS memset{};
  CUDA_MEM_ALLOC_NODE_PARAMS alloc{};
  CUdeviceptr freed = 0;
  CUgraph child = nullptr;
  std::vector<CUstreamBatchMemOpParams> mem_ops;  // CU_GRAPH_NODE_TYPE_BATCH_MEM_OP
};

struct FakeGraph {
  std::uint32_t id = 0;
  std::vector<CUgraphNode> nodes;
};

/// A kernel (CUfunction or CUkernel): its mangled name and argument layout (offset, size).
struct FakeKernel {
  std::string name;
  std::vector<std::pair<std::size_t, std::size_t>> params;
};

struct FakeExec {
  std::uint32_t id = 0;
};

/// The fake. Tests build graphs with the `add_*` helpers, set `fail` to make a call return
/// an error, and read `calls` / `enabled` / `subscriber_name` to see what the backend did.
/// Storage is in deques, so handles stay valid for the fake's lifetime.
class FakeDriver : public DriverApi {
 public:
  // --- building ---------------------------------------------------------------------------
  CUgraph add_graph(std::uint32_t id) {
    graphs_.push_back(FakeGraph{id, {}});
    return reinterpret_cast<CUgraph>(&graphs_.back());
  }
  CUgraphNode add_node(CUgraph graph, FakeNode node) {
    nodes_.push_back(std::move(node));
    auto handle = reinterpret_cast<CUgraphNode>(&nodes_.back());
    graph_of(graph).nodes.push_back(handle);
    return handle;
  }
  CUfunction add_function(std::string name,
                          std::vector<std::pair<std::size_t, std::size_t>> params) {
    kernels_.push_back(FakeKernel{std::move(name), std::move(params)});
    return reinterpret_cast<CUfunction>(&kernels_.back());
  }
  CUkernel add_kernel(std::string name, std::vector<std::pair<std::size_t, std::size_t>> params) {
    kernels_.push_back(FakeKernel{std::move(name), std::move(params)});
    return reinterpret_cast<CUkernel>(&kernels_.back());
  }
  CUgraphExec add_exec(std::uint32_t id) {
    execs_.push_back(FakeExec{id});
    return reinterpret_cast<CUgraphExec>(&execs_.back());
  }
  /// Makes `stream` a stream capturing into `graph` (`cuStreamGetCaptureInfo` reports it
  /// active); `graph` null: not capturing.
  void set_capturing(CUstream stream, CUgraph graph) { capturing_[stream] = graph; }
  static FakeGraph& graph_of(CUgraph graph) { return *reinterpret_cast<FakeGraph*>(graph); }
  static FakeNode& node_of(CUgraphNode node) { return *reinterpret_cast<FakeNode*>(node); }

  // --- configuration and observation ------------------------------------------------------
  std::map<std::string, CUresult> fail;              // driver method name -> result to return
  std::map<std::string, CUptiResult> fail_cupti;     // CUPTI method name -> result to return
  std::string other_subscriber;                      // reported with MULTIPLE_SUBSCRIBERS
  std::map<CUdeviceptr, unsigned int> memory_types;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
  // cuMemGetAddressRange: allocation begin -> size; any address inside one answers.
  std::map<CUdeviceptr, std::size_t> address_ranges;
  std::map<std::string, int> calls;
  // Called with the method name at the start of every driver call (before `fail`): lets a
  // test stand for what the real driver does meanwhile, e.g. another thread's callback.
  std::function<void(const std::string&)> on_call;
  std::vector<CallbackId> enabled;
  std::string subscriber_name;
  bool subscribed = false;
  CUpti_CallbackFunc callback = nullptr;
  void* user_data = nullptr;

  /// Delivers a callback the way CUPTI would, through the registered C function.
  void deliver(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) const {
    if (subscribed && callback != nullptr) {
      callback(user_data, domain, cbid, data);
    }
  }

  // --- DriverApi --------------------------------------------------------------------------
  CUresult cu_get_error_name(CUresult error, const char** name) override {
    const auto* entry = error_entry(error);
    if (entry == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *name = entry->first;
    return CUDA_SUCCESS;
  }
  CUresult cu_get_error_string(CUresult error, const char** text) override {
    const auto* entry = error_entry(error);
    if (entry == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *text = entry->second;
    return CUDA_SUCCESS;
  }
  CUresult cu_driver_get_version(int* version) override {
    if (auto r = injected("cu_driver_get_version")) return *r;
    *version = 13000;
    return CUDA_SUCCESS;
  }
  CUresult cu_ctx_get_current(CUcontext* context) override {
    if (auto r = injected("cu_ctx_get_current")) return *r;
    *context = nullptr;
    return CUDA_SUCCESS;
  }
  CUresult cu_graph_get_nodes(CUgraph graph, CUgraphNode* nodes, size_t* count) override {
    if (auto r = injected("cu_graph_get_nodes")) return *r;
    if (graph == nullptr || count == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;  // as the real driver does for a null handle
    }
    const auto& list = graph_of(graph).nodes;
    if (nodes != nullptr) {
      const std::size_t n = std::min(*count, list.size());
      std::copy_n(list.begin(), n, nodes);
      *count = n;
    } else {
      *count = list.size();
    }
    return CUDA_SUCCESS;
  }
  CUresult cu_graph_node_get_type(CUgraphNode node, CUgraphNodeType* type) override {
    if (auto r = injected("cu_graph_node_get_type")) return *r;
    *type = node_of(node).type;
    return CUDA_SUCCESS;
  }
  CUresult cu_graph_kernel_node_get_params(CUgraphNode node,
                                           CUDA_KERNEL_NODE_PARAMS* params) override {
    if (auto r = injected("cu_graph_kernel_node_get_params")) return *r;
    *params = node_of(node).kernel;
    return CUDA_SUCCESS;
  }
  CUresult cu_graph_memcpy_node_get_params(CUgraphNode node, CUDA_MEMCPY3D* params) override {
    if (auto r = injected("cu_graph_memcpy_node_get_params")) return *r;
    *params = node_of(node).memcpy;
    return CUDA_SUCCESS;
  }
  CUresult cu_graph_memset_node_get_params(CUgraphNode node,
                                           CUDA_MEMSET_NODE_PARAMS* params) override {
    if (auto r = injected("cu_graph_memset_node_get_params")) return *r;
    *params = node_of(node).memset;
    return CUDA_SUCCESS;
  }
  CUresult cu_graph_mem_alloc_node_get_params(CUgraphNode node,
                                              CUDA_MEM_ALLOC_NODE_PARAMS* params) override {
    if (auto r = injected("cu_graph_mem_alloc_node_get_params")) return *r;
    *params = node_of(node).alloc;
    return CUDA_SUCCESS;
  }
  CUresult cu_graph_mem_free_node_get_params(CUgraphNode node, CUdeviceptr* dptr) override {
    if (auto r = injected("cu_graph_mem_free_node_get_params")) return *r;
    *dptr = node_of(node).freed;
    return CUDA_SUCCESS;
  }
  CUresult cu_graph_child_graph_node_get_graph(CUgraphNode node, CUgraph* child) override {
    if (auto r = injected("cu_graph_child_graph_node_get_graph")) return *r;
    *child = node_of(node).child;
    return CUDA_SUCCESS;
  }
  CUresult cu_graph_batch_mem_op_node_get_params(CUgraphNode node,
                                                 CUDA_BATCH_MEM_OP_NODE_PARAMS* params) override {
    if (auto r = injected("cu_graph_batch_mem_op_node_get_params")) return *r;
    FakeNode& fake = node_of(node);
    *params = CUDA_BATCH_MEM_OP_NODE_PARAMS{};
    params->count = static_cast<unsigned int>(fake.mem_ops.size());
    params->paramArray = fake.mem_ops.data();
    return CUDA_SUCCESS;
  }
  CUresult cu_func_get_param_info(CUfunction func, size_t index, size_t* offset,
                                  size_t* size) override {
    if (auto r = injected("cu_func_get_param_info")) return *r;
    return param_info(reinterpret_cast<const FakeKernel*>(func), index, offset, size);
  }
  CUresult cu_kernel_get_param_info(CUkernel kernel, size_t index, size_t* offset,
                                    size_t* size) override {
    if (auto r = injected("cu_kernel_get_param_info")) return *r;
    return param_info(reinterpret_cast<const FakeKernel*>(kernel), index, offset, size);
  }
  CUresult cu_func_get_name(const char** name, CUfunction func) override {
    if (auto r = injected("cu_func_get_name")) return *r;
    *name = reinterpret_cast<const FakeKernel*>(func)->name.c_str();
    return CUDA_SUCCESS;
  }
  CUresult cu_kernel_get_name(const char** name, CUkernel kernel) override {
    if (auto r = injected("cu_kernel_get_name")) return *r;
    *name = reinterpret_cast<const FakeKernel*>(kernel)->name.c_str();
    return CUDA_SUCCESS;
  }
  CUresult cu_pointer_get_attribute(void* data, CUpointer_attribute attribute,
                                    CUdeviceptr pointer) override {
    if (auto r = injected("cu_pointer_get_attribute")) return *r;
    const auto found = memory_types.find(pointer);
    if (attribute != CU_POINTER_ATTRIBUTE_MEMORY_TYPE || found == memory_types.end()) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    std::memcpy(data, &found->second, sizeof(found->second));
    return CUDA_SUCCESS;
  }
  CUresult cu_mem_get_address_range(CUdeviceptr* base, size_t* size, CUdeviceptr pointer) override {
    if (auto r = injected("cu_mem_get_address_range")) return *r;
    auto found = address_ranges.upper_bound(pointer);
    if (found == address_ranges.begin() ||
        pointer >= std::prev(found)->first + std::prev(found)->second) {
      return CUDA_ERROR_NOT_FOUND;
    }
    --found;
    *base = found->first;
    *size = found->second;
    return CUDA_SUCCESS;
  }
  CUresult cu_stream_get_capture_info(CUstream stream, CUstreamCaptureStatus* status,
                                      cuuint64_t* id, CUgraph* graph,
                                      const CUgraphNode** dependencies,
                                      const CUgraphEdgeData** edge_data,
                                      size_t* dependency_count) override {
    if (auto r = injected("cu_stream_get_capture_info")) return *r;
    if (status == nullptr) {
      return CUDA_ERROR_INVALID_VALUE;  // the only required output
    }
    const auto found = capturing_.find(stream);
    const CUgraph captured = found == capturing_.end() ? nullptr : found->second;
    *status = captured != nullptr ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    if (captured == nullptr) {
      return CUDA_SUCCESS;  // the other outputs are valid only for an active capture
    }
    if (id != nullptr) {
      *id = graph_of(captured).id;
    }
    if (graph != nullptr) {
      *graph = captured;
    }
    if (dependencies != nullptr) {
      *dependencies = nullptr;
    }
    if (edge_data != nullptr) {
      *edge_data = nullptr;
    }
    if (dependency_count != nullptr) {
      *dependency_count = 0;
    }
    return CUDA_SUCCESS;
  }

  CUptiResult cupti_get_result_string(CUptiResult result, const char** text) override {
    switch (result) {
      case CUPTI_SUCCESS:
        *text = "CUPTI_SUCCESS";
        return CUPTI_SUCCESS;
      case CUPTI_ERROR_INVALID_PARAMETER:
        *text = "CUPTI_ERROR_INVALID_PARAMETER";
        return CUPTI_SUCCESS;
      case CUPTI_ERROR_NOT_INITIALIZED:
        *text = "CUPTI_ERROR_NOT_INITIALIZED";
        return CUPTI_SUCCESS;
      case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        *text = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
        return CUPTI_SUCCESS;
      default:
        return CUPTI_ERROR_INVALID_PARAMETER;
    }
  }
  CUptiResult cupti_subscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc fn,
                                 void* data, CUpti_SubscriberParams* params) override {
    if (auto r = injected_cupti("cupti_subscribe_v2")) {
      if (*r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && params != nullptr &&
          params->oldSubscriberName != nullptr && params->oldSubscriberSize > 0) {
        const std::size_t n = std::min(other_subscriber.size(), params->oldSubscriberSize - 1);
        std::memcpy(params->oldSubscriberName, other_subscriber.data(), n);
        params->oldSubscriberName[n] = '\0';
      }
      return *r;
    }
    if (params == nullptr || params->structSize != CUpti_SubscriberParams_STRUCT_SIZE) {
      return CUPTI_ERROR_INVALID_PARAMETER;
    }
    subscriber_name = params->subscriberName != nullptr ? params->subscriberName : "";
    subscribed = true;
    callback = fn;
    user_data = data;
    *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(this);
    return CUPTI_SUCCESS;
  }
  CUptiResult cupti_unsubscribe(CUpti_SubscriberHandle /*subscriber*/) override {
    if (auto r = injected_cupti("cupti_unsubscribe")) return *r;
    subscribed = false;
    enabled.clear();
    return CUPTI_SUCCESS;
  }
  CUptiResult cupti_enable_callback(uint32_t enable, CUpti_SubscriberHandle /*subscriber*/,
                                    CUpti_CallbackDomain domain, CUpti_CallbackId cbid) override {
    if (auto r = injected_cupti("cupti_enable_callback")) return *r;
    if (enable != 0) {
      enabled.push_back({domain, cbid});
    }
    return CUPTI_SUCCESS;
  }
  CUptiResult cupti_enable_domain(uint32_t /*enable*/, CUpti_SubscriberHandle /*subscriber*/,
                                  CUpti_CallbackDomain /*domain*/) override {
    if (auto r = injected_cupti("cupti_enable_domain")) return *r;
    return CUPTI_SUCCESS;
  }
  CUptiResult cupti_get_graph_id(CUgraph graph, uint32_t* id) override {
    if (auto r = injected_cupti("cupti_get_graph_id")) return *r;
    *id = graph_of(graph).id;
    return CUPTI_SUCCESS;
  }
  CUptiResult cupti_get_graph_node_id(CUgraphNode node, uint64_t* id) override {
    if (auto r = injected_cupti("cupti_get_graph_node_id")) return *r;
    *id = node_of(node).id;
    return CUPTI_SUCCESS;
  }
  CUptiResult cupti_get_graph_exec_id(CUgraphExec exec, uint32_t* id) override {
    if (auto r = injected_cupti("cupti_get_graph_exec_id")) return *r;
    *id = reinterpret_cast<FakeExec*>(exec)->id;
    return CUPTI_SUCCESS;
  }

 protected:
  std::optional<CUresult> injected(const std::string& name) {
    if (on_call) {
      on_call(name);
    }
    ++calls[name];
    const auto found = fail.find(name);
    return found == fail.end() ? std::nullopt : std::optional<CUresult>(found->second);
  }
  std::optional<CUptiResult> injected_cupti(const std::string& name) {
    ++calls[name];
    const auto found = fail_cupti.find(name);
    return found == fail_cupti.end() ? std::nullopt : std::optional<CUptiResult>(found->second);
  }

 private:
  static const std::pair<const char*, const char*>* error_entry(CUresult error) {
    static const std::map<CUresult, std::pair<const char*, const char*>> kErrors = {
        {CUDA_SUCCESS, {"CUDA_SUCCESS", "no error"}},
        {CUDA_ERROR_INVALID_VALUE, {"CUDA_ERROR_INVALID_VALUE", "invalid argument"}},
        {CUDA_ERROR_INVALID_HANDLE, {"CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"}},
        {CUDA_ERROR_NOT_FOUND, {"CUDA_ERROR_NOT_FOUND", "named symbol not found"}},
        {CUDA_ERROR_NOT_SUPPORTED, {"CUDA_ERROR_NOT_SUPPORTED", "operation not supported"}},
        {CUDA_ERROR_ILLEGAL_ADDRESS,
         {"CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"}},
    };
    const auto found = kErrors.find(error);
    return found == kErrors.end() ? nullptr : &found->second;
  }
  static CUresult param_info(const FakeKernel* kernel, size_t index, size_t* offset, size_t* size) {
    if (index >= kernel->params.size()) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    *offset = kernel->params[index].first;
    *size = kernel->params[index].second;
    return CUDA_SUCCESS;
  }

  std::deque<FakeGraph> graphs_;
  std::deque<FakeNode> nodes_;
  std::deque<FakeKernel> kernels_;
  std::deque<FakeExec> execs_;
  std::map<CUstream, CUgraph> capturing_;
};

// --- constructed CUPTI callback data ---------------------------------------------------

/// API callback data for `params` at `site`; `result` (CUresult or cudaError_t as int) is
/// what functionReturnValue points at (EXIT only).
inline CUpti_CallbackData api_data(const void* params, CUpti_ApiCallbackSite site, int* result) {
  CUpti_CallbackData data{};
  data.callbackSite = site;
  data.functionName = "fake";
  data.functionParams = params;
  data.functionReturnValue = site == CUPTI_API_EXIT ? result : nullptr;
  return data;
}

/// Resource callback data whose descriptor is `graph`.
inline CUpti_ResourceData resource_data(CUpti_GraphData* graph) {
  CUpti_ResourceData data{};
  data.resourceDescriptor = graph;
  return data;
}

}  // namespace graphcheck::cupti::testing

#endif  // GRAPHCHECK_TESTS_CUPTI_FAKE_FAKE_DRIVER_H_
