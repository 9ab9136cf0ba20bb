// The one narrow interface through which the CUPTI backend calls the CUDA driver and CUPTI.
//
// Nothing in graphcheck links libcuda or libcupti: `load_driver_api()` opens them at run
// time (dlopen/dlsym, cuGetProcAddress for driver symbols), so binaries start on machines
// without a driver, and the CPU tests install a fake `DriverApi` instead.
#ifndef GRAPHCHECK_CUPTI_DRIVER_API_H_
#define GRAPHCHECK_CUPTI_DRIVER_API_H_

#include <cuda.h>
#include <cupti.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cupti/status.h"

namespace graphcheck::cupti {

/// @brief The function table of every driver and CUPTI call the backend makes.
///
/// Each method has the signature of the C function it is named after (`cu_graph_get_nodes`
/// is `cuGraphGetNodes`, `cupti_subscribe_v2` is `cuptiSubscribe_v2`; where cuda.h maps a
/// name to a versioned symbol, the method calls the version cuda.h 13.0 maps to, e.g.
/// `cuGraphKernelNodeGetParams_v2`). The real table forwards to the loaded libraries; a test
/// table fabricates results in host memory. Call them through `GRAPHCHECK_CU_CHECK` /
/// `GRAPHCHECK_CUPTI_CHECK` (or the `_STATUS` forms) so failures name the call.
///
/// To add a call: add a pure virtual method here (grouped by library, same naming rule),
/// the forwarding in driver_api.cc (`RealDriverApi` and its symbol list), and the fake's
/// implementation in tests/cupti_fake/fake_driver.h.
///
/// Thread safety: the real table is safe to call from any thread (as the driver is).
/// Lifetime: the real table never unloads the libraries (CUPTI may still call back).
class DriverApi {
 public:
  DriverApi() = default;
  DriverApi(const DriverApi&) = delete;
  DriverApi& operator=(const DriverApi&) = delete;
  virtual ~DriverApi() = default;

  // --- CUDA driver -----------------------------------------------------------------------
  virtual CUresult cu_get_error_name(CUresult error, const char** name) = 0;
  virtual CUresult cu_get_error_string(CUresult error, const char** text) = 0;
  virtual CUresult cu_driver_get_version(int* version) = 0;
  virtual CUresult cu_ctx_get_current(CUcontext* context) = 0;

  virtual CUresult cu_graph_get_nodes(CUgraph graph, CUgraphNode* nodes, size_t* count) = 0;
  virtual CUresult cu_graph_node_get_type(CUgraphNode node, CUgraphNodeType* type) = 0;
  virtual CUresult cu_graph_kernel_node_get_params(CUgraphNode node,
                                                   CUDA_KERNEL_NODE_PARAMS* params) = 0;
  virtual CUresult cu_graph_memcpy_node_get_params(CUgraphNode node, CUDA_MEMCPY3D* params) = 0;
  virtual CUresult cu_graph_memset_node_get_params(CUgraphNode node,
                                                   CUDA_MEMSET_NODE_PARAMS* params) = 0;
  virtual CUresult cu_graph_mem_alloc_node_get_params(CUgraphNode node,
                                                      CUDA_MEM_ALLOC_NODE_PARAMS* params) = 0;
  virtual CUresult cu_graph_mem_free_node_get_params(CUgraphNode node, CUdeviceptr* dptr) = 0;
  virtual CUresult cu_graph_child_graph_node_get_graph(CUgraphNode node, CUgraph* child) = 0;
  /// `cuGraphBatchMemOpNodeGetParams`: `paramArray` points at storage the node owns (read
  /// it before the node changes).
  virtual CUresult cu_graph_batch_mem_op_node_get_params(CUgraphNode node,
                                                         CUDA_BATCH_MEM_OP_NODE_PARAMS* params) = 0;

  /// `cuFuncGetParamInfo` (CUDA >= 12.4): returns CUDA_ERROR_INVALID_VALUE past the last.
  virtual CUresult cu_func_get_param_info(CUfunction func, size_t index, size_t* offset,
                                          size_t* size) = 0;
  virtual CUresult cu_kernel_get_param_info(CUkernel kernel, size_t index, size_t* offset,
                                            size_t* size) = 0;
  virtual CUresult cu_func_get_name(const char** name, CUfunction func) = 0;
  virtual CUresult cu_kernel_get_name(const char** name, CUkernel kernel) = 0;

  virtual CUresult cu_pointer_get_attribute(void* data, CUpointer_attribute attribute,
                                            CUdeviceptr pointer) = 0;
  virtual CUresult cu_mem_get_address_range(CUdeviceptr* base, size_t* size,
                                            CUdeviceptr pointer) = 0;
  /// `cuStreamGetCaptureInfo` (`_v3` in CUDA 13): the graph a capturing stream captures into.
  virtual CUresult cu_stream_get_capture_info(CUstream stream, CUstreamCaptureStatus* status,
                                              cuuint64_t* id, CUgraph* graph,
                                              const CUgraphNode** dependencies,
                                              const CUgraphEdgeData** edge_data,
                                              size_t* dependency_count) = 0;

  // --- CUPTI -----------------------------------------------------------------------------
  virtual CUptiResult cupti_get_result_string(CUptiResult result, const char** text) = 0;
  virtual CUptiResult cupti_subscribe_v2(CUpti_SubscriberHandle* subscriber,
                                         CUpti_CallbackFunc callback, void* user_data,
                                         CUpti_SubscriberParams* params) = 0;
  virtual CUptiResult cupti_unsubscribe(CUpti_SubscriberHandle subscriber) = 0;
  virtual CUptiResult cupti_enable_callback(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                            CUpti_CallbackDomain domain, CUpti_CallbackId cbid) = 0;
  virtual CUptiResult cupti_enable_domain(uint32_t enable, CUpti_SubscriberHandle subscriber,
                                          CUpti_CallbackDomain domain) = 0;
  virtual CUptiResult cupti_get_graph_id(CUgraph graph, uint32_t* id) = 0;
  virtual CUptiResult cupti_get_graph_node_id(CUgraphNode node, uint64_t* id) = 0;
  virtual CUptiResult cupti_get_graph_exec_id(CUgraphExec exec, uint32_t* id) = 0;
};

/// @brief Opens shared libraries and looks up symbols; the seam that lets tests make
/// loading fail (no driver, no CUPTI, a missing symbol) on any machine.
class LibraryLoader {
 public:
  LibraryLoader() = default;
  LibraryLoader(const LibraryLoader&) = delete;
  LibraryLoader& operator=(const LibraryLoader&) = delete;
  virtual ~LibraryLoader() = default;
  /// @brief Opens `path` (a soname or a file path); nullptr on failure.
  virtual void* open(const std::string& path) = 0;
  /// @brief The address of `name` in `library`; nullptr when absent.
  virtual void* symbol(void* library, const char* name) = 0;
  /// @brief Why the last `open` failed (dlerror text), for messages.
  virtual std::string last_error() = 0;
  /// @brief The file of an already-loaded library with this soname (e.g. pip's
  /// libcudart.so.13, whose folder also holds libcupti.so.13), or "" when not loaded.
  virtual std::string loaded_path(const std::string& soname) = 0;
};

/// @brief dlopen/dlsym. Thread safety: safe from any thread. Lifetime: static.
[[nodiscard]] LibraryLoader& system_library_loader();

/// @brief Where `load_driver_api` looks, and with what.
struct LoadOptions {
  /// Null: `system_library_loader()`. Not owned; must outlive the call.
  LibraryLoader* loader = nullptr;
  /// The driver library; the default is the soname every driver installs.
  std::string driver_library = "libcuda.so.1";
  /// CUPTI candidates in order; empty: `default_cupti_candidates(loader)`.
  std::vector<std::string> cupti_candidates;
};

/// @brief CUPTI candidates, first match wins: `$GRAPHCHECK_CUPTI_LIBRARY` (a file path),
/// "libcupti.so.13" and "libcupti.so" (found through the loader's search path, or already
/// loaded, e.g. by torch), the folder of an already-loaded libcudart.so.13 (pip's
/// nvidia/cu13/lib), `$CUDA_HOME`/`$CUDA_PATH` and /usr/local/cuda, each with lib64, lib
/// and extras/CUPTI/lib64.
[[nodiscard]] std::vector<std::string> default_cupti_candidates(LibraryLoader& loader);

/// @brief The result of `load_driver_api`: `api` is set iff `status.ok()`.
struct DriverApiLoad {
  std::unique_ptr<DriverApi> api;
  Status status;
};

/// @brief Loads the driver and CUPTI and resolves every `DriverApi` call.
///
/// Never throws for a missing library or symbol: the status names what is missing (no
/// driver, no CUPTI and where it looked, which symbols; a driver older than CUDA 12.4 lacks
/// cuFuncGetParamInfo) and what to do. Does not call cuInit (the host process does).
/// Thread safety: may be called from any thread; each call returns a new table.
[[nodiscard]] DriverApiLoad load_driver_api(const LoadOptions& options = {});

namespace detail {

/// "cu_graph_get_nodes(graph, nullptr, &count)" -> "cuGraphGetNodes"; "cupti_subscribe_v2(...)"
/// -> "cuptiSubscribe_v2": the C name of the call a checked-call macro wraps.
[[nodiscard]] std::string c_api_name(std::string_view call_text);
/// One-line message: "<C name> failed with <ERROR_NAME> (<error string>) [<call text> at
/// <dir/file>:<line>]".
[[nodiscard]] std::string format_cu_error(DriverApi& api, CUresult status,
                                          std::string_view call_text, const char* file, int line);
[[nodiscard]] std::string format_cupti_error(DriverApi& api, CUptiResult status,
                                             std::string_view call_text, const char* file,
                                             int line);
[[noreturn]] void throw_cu_error(DriverApi& api, CUresult status, const char* call_text,
                                 const char* file, int line);
[[noreturn]] void throw_cupti_error(DriverApi& api, CUptiResult status, const char* call_text,
                                    const char* file, int line);
/// Success, or the formatted message (allocates only on failure).
[[nodiscard]] Status cu_status(DriverApi& api, CUresult status, const char* call_text,
                               const char* file, int line);
[[nodiscard]] Status cupti_status(DriverApi& api, CUptiResult status, const char* call_text,
                                  const char* file, int line);

}  // namespace detail
}  // namespace graphcheck::cupti

/// @brief `GRAPHCHECK_CU_CHECK(api, cu_graph_get_nodes(graph, nullptr, &count));` calls
/// `api.cu_graph_get_nodes(...)` once and throws `graphcheck::Error` naming the C call, the
/// error name and string, the call text and file:line unless it returns CUDA_SUCCESS.
#define GRAPHCHECK_CU_CHECK(api, call)                                                          \
  do {                                                                                          \
    const CUresult graphcheck_cu_status = (api).call;                                           \
    if (graphcheck_cu_status != CUDA_SUCCESS) {                                                 \
      ::graphcheck::cupti::detail::throw_cu_error((api), graphcheck_cu_status, #call, __FILE__, \
                                                  __LINE__);                                    \
    }                                                                                           \
  } while (false)

/// @brief As `GRAPHCHECK_CU_CHECK` for CUPTI calls (`CUptiResult`).
#define GRAPHCHECK_CUPTI_CHECK(api, call)                                                   \
  do {                                                                                      \
    const CUptiResult graphcheck_cupti_status = (api).call;                                 \
    if (graphcheck_cupti_status != CUPTI_SUCCESS) {                                         \
      ::graphcheck::cupti::detail::throw_cupti_error((api), graphcheck_cupti_status, #call, \
                                                     __FILE__, __LINE__);                   \
    }                                                                                       \
  } while (false)

/// @brief Non-throwing form for callback paths: evaluates to a `graphcheck::cupti::Status`
/// (success, or the same message `GRAPHCHECK_CU_CHECK` would throw).
#define GRAPHCHECK_CU_STATUS(api, call) \
  ::graphcheck::cupti::detail::cu_status((api), (api).call, #call, __FILE__, __LINE__)

/// @brief Non-throwing form of `GRAPHCHECK_CUPTI_CHECK`.
#define GRAPHCHECK_CUPTI_STATUS(api, call) \
  ::graphcheck::cupti::detail::cupti_status((api), (api).call, #call, __FILE__, __LINE__)

#endif  // GRAPHCHECK_CUPTI_DRIVER_API_H_
