// The real DriverApi: libcuda and libcupti opened at run time.
#include "cupti/driver_api.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace graphcheck::cupti {
namespace {

class SystemLoader final : public LibraryLoader {
 public:
  void* open(const std::string& path) override {
    // RTLD_LOCAL: graphcheck must not change which symbols the host process binds to.
    return dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  void* symbol(void* library, const char* name) override { return dlsym(library, name); }
  std::string last_error() override {
    const char* error = dlerror();
    return error == nullptr ? std::string("unknown dlopen error") : std::string(error);
  }
  std::string loaded_path(const std::string& soname) override {
    void* handle = dlopen(soname.c_str(), RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) {
      return {};
    }
    std::string path;
    link_map* map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
      path = map->l_name;
    }
    dlclose(handle);  // drops the reference RTLD_NOLOAD took; the library stays loaded
    return path;
  }
};

// X-macros: (method, C function as declared in cuda.h, symbol for dlsym when
// cuGetProcAddress is unavailable). cuGetProcAddress takes the unversioned name and returns
// the version matching CUDA_VERSION of the headers we compiled against.
#define GRAPHCHECK_DRIVER_FUNCTIONS(X)                                                             \
  X(cu_get_error_name, cuGetErrorName, "cuGetErrorName")                                           \
  X(cu_get_error_string, cuGetErrorString, "cuGetErrorString")                                     \
  X(cu_driver_get_version, cuDriverGetVersion, "cuDriverGetVersion")                               \
  X(cu_ctx_get_current, cuCtxGetCurrent, "cuCtxGetCurrent")                                        \
  X(cu_graph_get_nodes, cuGraphGetNodes, "cuGraphGetNodes")                                        \
  X(cu_graph_node_get_type, cuGraphNodeGetType, "cuGraphNodeGetType")                              \
  X(cu_graph_kernel_node_get_params, cuGraphKernelNodeGetParams, "cuGraphKernelNodeGetParams_v2")  \
  X(cu_graph_memcpy_node_get_params, cuGraphMemcpyNodeGetParams, "cuGraphMemcpyNodeGetParams")     \
  X(cu_graph_memset_node_get_params, cuGraphMemsetNodeGetParams, "cuGraphMemsetNodeGetParams")     \
  X(cu_graph_mem_alloc_node_get_params, cuGraphMemAllocNodeGetParams,                              \
    "cuGraphMemAllocNodeGetParams")                                                                \
  X(cu_graph_mem_free_node_get_params, cuGraphMemFreeNodeGetParams, "cuGraphMemFreeNodeGetParams") \
  X(cu_graph_child_graph_node_get_graph, cuGraphChildGraphNodeGetGraph,                            \
    "cuGraphChildGraphNodeGetGraph")                                                               \
  X(cu_graph_batch_mem_op_node_get_params, cuGraphBatchMemOpNodeGetParams,                         \
    "cuGraphBatchMemOpNodeGetParams")                                                              \
  X(cu_func_get_param_info, cuFuncGetParamInfo, "cuFuncGetParamInfo")                              \
  X(cu_kernel_get_param_info, cuKernelGetParamInfo, "cuKernelGetParamInfo")                        \
  X(cu_func_get_name, cuFuncGetName, "cuFuncGetName")                                              \
  X(cu_kernel_get_name, cuKernelGetName, "cuKernelGetName")                                        \
  X(cu_pointer_get_attribute, cuPointerGetAttribute, "cuPointerGetAttribute")                      \
  X(cu_mem_get_address_range, cuMemGetAddressRange, "cuMemGetAddressRange_v2")                     \
  X(cu_stream_get_capture_info, cuStreamGetCaptureInfo, "cuStreamGetCaptureInfo_v3")

// (method, C function): looked up by name in libcupti.
#define GRAPHCHECK_CUPTI_FUNCTIONS(X)              \
  X(cupti_get_result_string, cuptiGetResultString) \
  X(cupti_subscribe_v2, cuptiSubscribe_v2)         \
  X(cupti_unsubscribe, cuptiUnsubscribe)           \
  X(cupti_enable_callback, cuptiEnableCallback)    \
  X(cupti_enable_domain, cuptiEnableDomain)        \
  X(cupti_get_graph_id, cuptiGetGraphId)           \
  X(cupti_get_graph_node_id, cuptiGetGraphNodeId)  \
  X(cupti_get_graph_exec_id, cuptiGetGraphExecId)

class RealDriverApi final : public DriverApi {
 public:
  // Resolved pointers; public so the loader can fill them (the class is private to this file).
#define GRAPHCHECK_DECLARE_DRIVER(method, function, fallback) \
  decltype(&::function) method##_fn = nullptr;
#define GRAPHCHECK_DECLARE_CUPTI(method, function) decltype(&::function) method##_fn = nullptr;
  GRAPHCHECK_DRIVER_FUNCTIONS(GRAPHCHECK_DECLARE_DRIVER)
  GRAPHCHECK_CUPTI_FUNCTIONS(GRAPHCHECK_DECLARE_CUPTI)
#undef GRAPHCHECK_DECLARE_DRIVER
#undef GRAPHCHECK_DECLARE_CUPTI

  CUresult cu_get_error_name(CUresult error, const char** name) override {
    return cu_get_error_name_fn(error, name);
  }
  CUresult cu_get_error_string(CUresult error, const char** text) override {
    return cu_get_error_string_fn(error, text);
  }
  CUresult cu_driver_get_version(int* version) override {
    return cu_driver_get_version_fn(version);
  }
  CUresult cu_ctx_get_current(CUcontext* context) override {
    return cu_ctx_get_current_fn(context);
  }
  CUresult cu_graph_get_nodes(CUgraph graph, CUgraphNode* nodes, size_t* count) override {
    return cu_graph_get_nodes_fn(graph, nodes, count);
  }
  CUresult cu_graph_node_get_type(CUgraphNode node, CUgraphNodeType* type) override {
    return cu_graph_node_get_type_fn(node, type);
  }
  CUresult cu_graph_kernel_node_get_params(CUgraphNode node,
                                           CUDA_KERNEL_NODE_PARAMS* params) override {
    return cu_graph_kernel_node_get_params_fn(node, params);
  }
  CUresult cu_graph_memcpy_node_get_params(CUgraphNode node, CUDA_MEMCPY3D* params) override {
    return cu_graph_memcpy_node_get_params_fn(node, params);
  }
  CUresult cu_graph_memset_node_get_params(CUgraphNode node,
                                           CUDA_MEMSET_NODE_PARAMS* params) override {
    return cu_graph_memset_node_get_params_fn(node, params);
  }
  CUresult cu_graph_mem_alloc_node_get_params(CUgraphNode node,
                                              CUDA_MEM_ALLOC_NODE_PARAMS* params) override {
    return cu_graph_mem_alloc_node_get_params_fn(node, params);
  }
  CUresult cu_graph_mem_free_node_get_params(CUgraphNode node, CUdeviceptr* dptr) override {
    return cu_graph_mem_free_node_get_params_fn(node, dptr);
  }
  CUresult cu_graph_child_graph_node_get_graph(CUgraphNode node, CUgraph* child) override {
    return cu_graph_child_graph_node_get_graph_fn(node, child);
  }
  CUresult cu_graph_batch_mem_op_node_get_params(CUgraphNode node,
                                                 CUDA_BATCH_MEM_OP_NODE_PARAMS* params) override {
    return cu_graph_batch_mem_op_node_get_params_fn(node, params);
  }
  CUresult cu_func_get_param_info(CUfunction func, size_t index, size_t* offset,
                                  size_t* size) override {
    return cu_func_get_param_info_fn(func, index, offset, size);
  }
  CUresult cu_kernel_get_param_info(CUkernel kernel, size_t index, size_t* offset,
                                    size_t* size) override {
    return cu_kernel_get_param_info_fn(kernel, index, offset, size);
  }
  CUresult cu_func_get_name(const char** name, CUfunction func) override {
    return cu_func_get_name_fn(name, func);
  }
  CUresult cu_kernel_get_name(const char** name, CUkernel kernel) override {
    return cu_kernel_get_name_fn(name, kernel);
  }
  CUresult cu_pointer_get_attribute(void* data, CUpointer_attribute attribute,
                                    CUdeviceptr pointer) override {
    return cu_pointer_get_attribute_fn(data, attribute, pointer);
  }
  CUresult cu_mem_get_address_range(CUdeviceptr* base, size_t* size, CUdeviceptr pointer) override {
    return cu_mem_get_address_range_fn(base, size, pointer);
  }
  CUresult cu_stream_get_capture_info(CUstream stream, CUstreamCaptureStatus* status,
                                      cuuint64_t* id, CUgraph* graph,
                                      const CUgraphNode** dependencies,
                                      const CUgraphEdgeData** edge_data,
                                      size_t* dependency_count) override {
    return cu_stream_get_capture_info_fn(stream, status, id, graph, dependencies, edge_data,
                                         dependency_count);
  }

  CUptiResult cupti_get_result_string(CUptiResult result, const char** text) override {
    return cupti_get_result_string_fn(result, text);
  }
  CUptiResult cupti_subscribe_v2(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                 void* user_data, CUpti_SubscriberParams* params) override {
    return cupti_subscribe_v2_fn(subscriber, callback, user_data, params);
  }
  CUptiResult cupti_unsubscribe(CUpti_SubscriberHandle subscriber) override {
    return cupti_unsubscribe_fn(subscriber);
  }
  CUptiResult cupti_enable_callback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                    CUpti_CallbackDomain domain, CUpti_CallbackId cbid) override {
    return cupti_enable_callback_fn(enable, subscriber, domain, cbid);
  }
  CUptiResult cupti_enable_domain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                  CUpti_CallbackDomain domain) override {
    return cupti_enable_domain_fn(enable, subscriber, domain);
  }
  CUptiResult cupti_get_graph_id(CUgraph graph, uint32_t* id) override {
    return cupti_get_graph_id_fn(graph, id);
  }
  CUptiResult cupti_get_graph_node_id(CUgraphNode node, uint64_t* id) override {
    return cupti_get_graph_node_id_fn(node, id);
  }
  CUptiResult cupti_get_graph_exec_id(CUgraphExec exec, uint32_t* id) override {
    return cupti_get_graph_exec_id_fn(exec, id);
  }
};

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    out += out.empty() ? "" : ", ";
    out += item;
  }
  return out;
}

// Converts a data pointer from dlsym/cuGetProcAddress to the function pointer type `Fn`.
template <typename Fn>
Fn as_function(void* symbol) {
  Fn fn = nullptr;
  static_assert(sizeof(fn) == sizeof(symbol));
  __builtin_memcpy(&fn, &symbol, sizeof(fn));
  return fn;
}

}  // namespace

LibraryLoader& system_library_loader() {
  static SystemLoader loader;
  return loader;
}

std::vector<std::string> default_cupti_candidates(LibraryLoader& loader) {
  std::vector<std::string> candidates;
  auto add = [&](std::string path) {
    if (!path.empty() &&
        std::find(candidates.begin(), candidates.end(), path) == candidates.end()) {
      candidates.push_back(std::move(path));
    }
  };
  if (const char* explicit_path = std::getenv("GRAPHCHECK_CUPTI_LIBRARY")) {
    add(explicit_path);
  }
  add("libcupti.so.13");
  add("libcupti.so");
  // pip's nvidia-cuda-runtime and nvidia-cuda-cupti (cu13) share nvidia/cu13/lib.
  const std::string cudart = loader.loaded_path("libcudart.so.13");
  if (const std::size_t slash = cudart.rfind('/'); slash != std::string::npos) {
    add(cudart.substr(0, slash) + "/libcupti.so.13");
  }
  std::vector<std::string> roots;
  for (const char* variable : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* root = std::getenv(variable); root != nullptr && *root != '\0') {
      roots.emplace_back(root);
    }
  }
  roots.emplace_back("/usr/local/cuda");
  for (const std::string& root : roots) {
    for (const char* sub : {"/lib64/", "/lib/", "/extras/CUPTI/lib64/"}) {
      add(root + sub + "libcupti.so.13");
    }
  }
  return candidates;
}

DriverApiLoad load_driver_api(const LoadOptions& options) {
  LibraryLoader& loader = options.loader != nullptr ? *options.loader : system_library_loader();
  DriverApiLoad result;

  void* driver = loader.open(options.driver_library);
  if (driver == nullptr) {
    result.status = Status::error(
        "graphcheck: no CUDA driver: could not load " + options.driver_library + " (" +
        loader.last_error() +
        "). The CUPTI backend needs an NVIDIA driver and GPU; without one, use the ATen "
        "backend or `graphcheck check` on a recorded snapshot.");
    return result;
  }

  const std::vector<std::string> candidates = options.cupti_candidates.empty()
                                                  ? default_cupti_candidates(loader)
                                                  : options.cupti_candidates;
  void* cupti = nullptr;
  std::string cupti_path;
  std::string cupti_error;
  for (const std::string& candidate : candidates) {
    cupti = loader.open(candidate);
    if (cupti != nullptr) {
      cupti_path = candidate;
      break;
    }
    cupti_error = loader.last_error();
  }
  if (cupti == nullptr) {
    result.status = Status::error(
        "graphcheck: no CUPTI: tried " + join(candidates) + " (last error: " + cupti_error +
        "). Install CUPTI for CUDA 13 (the CUDA toolkit, or pip's nvidia-cuda-cupti for cu13) "
        "or set GRAPHCHECK_CUPTI_LIBRARY to the full path of libcupti.so.13.");
    return result;
  }

  auto api = std::make_unique<RealDriverApi>();
  std::vector<std::string> missing_driver;
  std::vector<std::string> missing_cupti;
  using GetProcAddress = decltype(&::cuGetProcAddress);
  const auto get_proc = as_function<GetProcAddress>(loader.symbol(driver, "cuGetProcAddress_v2"));
  auto resolve_driver = [&](const char* name, const char* fallback) -> void* {
    void* fn = nullptr;
    if (get_proc != nullptr) {
      CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      if (get_proc(name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
          found != CU_GET_PROC_ADDRESS_SUCCESS) {
        fn = nullptr;
      }
    }
    if (fn == nullptr) {
      fn = loader.symbol(driver, fallback);
    }
    return fn;
  };
#define GRAPHCHECK_RESOLVE_DRIVER(method, function, fallback)                                      \
  api->method##_fn = as_function<decltype(api->method##_fn)>(resolve_driver(#function, fallback)); \
  if (api->method##_fn == nullptr) {                                                               \
    missing_driver.emplace_back(#function);                                                        \
  }
#define GRAPHCHECK_RESOLVE_CUPTI(method, function)                                             \
  api->method##_fn = as_function<decltype(api->method##_fn)>(loader.symbol(cupti, #function)); \
  if (api->method##_fn == nullptr) {                                                           \
    missing_cupti.emplace_back(#function);                                                     \
  }
  GRAPHCHECK_DRIVER_FUNCTIONS(GRAPHCHECK_RESOLVE_DRIVER)
  GRAPHCHECK_CUPTI_FUNCTIONS(GRAPHCHECK_RESOLVE_CUPTI)
#undef GRAPHCHECK_RESOLVE_DRIVER
#undef GRAPHCHECK_RESOLVE_CUPTI

  std::string problems;
  if (!missing_driver.empty()) {
    int version = 0;
    if (api->cu_driver_get_version_fn != nullptr) {
      (void)api->cu_driver_get_version_fn(&version);
    }
    problems += "the CUDA driver (" + options.driver_library + ", reports CUDA " +
                std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10) +
                ") lacks " + join(missing_driver) +
                "; graphcheck needs a driver for CUDA 12.4 or newer (update the driver)";
  }
  if (!missing_cupti.empty()) {
    problems += problems.empty() ? "" : "; ";
    problems += cupti_path + " lacks " + join(missing_cupti) +
                "; graphcheck needs CUPTI from CUDA 13.0 or newer (set GRAPHCHECK_CUPTI_LIBRARY)";
  }
  if (!problems.empty()) {
    result.status = Status::error("graphcheck: " + problems + ".");
    return result;
  }
  // The libraries are never closed: CUPTI may still hold our callback, and the host
  // process owns the driver's lifetime anyway.
  result.api = std::move(api);
  return result;
}

}  // namespace graphcheck::cupti
