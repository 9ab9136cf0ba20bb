// Shared helpers of the gpu tier (owner: cupti-b): device detection (skip without one), the
// real backend behind one subscription, a small VMM allocator with sleep/wake, and snapshot
// output to $GRAPHCHECK_GPU_OUT. UNVERIFIED: written without a GPU; see docs/gpu-check.md.
#ifndef GRAPHCHECK_TESTS_GPU_GPU_SUPPORT_H_
#define GRAPHCHECK_TESTS_GPU_GPU_SUPPORT_H_

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <graphcheck/snapshot.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "cupti/backend.h"
#include "cupti/driver_api.h"

namespace graphcheck::gpu_testing {

/// Why the gpu tests cannot run here ("" when a device is usable): the driver or CUPTI
/// cannot be loaded, or the runtime sees no device.
inline std::string skip_reason() {
  const cupti::DriverApiLoad load = cupti::load_driver_api();
  if (!load.status.ok()) {
    return load.status.message();
  }
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    return std::string("cudaGetDeviceCount failed: ") + cudaGetErrorString(status);
  }
  return count == 0 ? std::string("no CUDA device") : std::string();
}

#define GRAPHCHECK_SKIP_WITHOUT_GPU()                                             \
  do {                                                                            \
    const std::string graphcheck_skip = ::graphcheck::gpu_testing::skip_reason(); \
    if (!graphcheck_skip.empty()) {                                               \
      GTEST_SKIP() << graphcheck_skip;                                            \
    }                                                                             \
  } while (false)

#define GRAPHCHECK_CUDA_OK(call)                                        \
  do {                                                                  \
    const cudaError_t graphcheck_cuda_status = (call);                  \
    ASSERT_EQ(graphcheck_cuda_status, cudaSuccess)                      \
        << #call << ": " << cudaGetErrorString(graphcheck_cuda_status); \
  } while (false)

/// The real driver table and a subscribed backend (capture, tracking, session).
struct LiveBackend {
  explicit LiveBackend(cupti::BackendOptions options = {}) {
    load = cupti::load_driver_api();
    if (load.status.ok()) {
      backend = std::make_unique<cupti::Backend>(*load.api, std::move(options));
      status = backend->enable();
    } else {
      status = load.status;
    }
  }
  ~LiveBackend() {
    if (backend != nullptr) {
      static_cast<void>(backend->disable());
    }
  }
  cupti::DriverApiLoad load;
  std::unique_ptr<cupti::Backend> backend;
  cupti::Status status;
};

/// Writes `snapshot` as <$GRAPHCHECK_GPU_OUT>/<name>.json when the variable is set.
inline void record_snapshot(const Snapshot& snapshot, const std::string& name) {
  const char* out = std::getenv("GRAPHCHECK_GPU_OUT");
  if (out == nullptr || *out == '\0') {
    return;
  }
  std::filesystem::create_directories(out);
  write_snapshot(snapshot, std::filesystem::path(out) / (name + ".json"));
}

/// A VMM allocator in the style of vLLM's CuMemAllocator: one reserved range; sleep unmaps
/// and releases the physical memory (the VA stays reserved), wake creates and maps fresh
/// memory at the same address. Driver entry points come through the runtime
/// (cudaGetDriverEntryPointByVersion), so the binary does not link libcuda.
class VmmAllocator {
 public:
  /// Reserves and maps `size` bytes (rounded up to the granularity) on `device`.
  /// `error()` is non-empty on failure.
  VmmAllocator(int device, std::size_t size);
  ~VmmAllocator();
  VmmAllocator(const VmmAllocator&) = delete;
  VmmAllocator& operator=(const VmmAllocator&) = delete;

  void sleep();  ///< cuMemUnmap + cuMemRelease
  void wake();   ///< cuMemCreate + cuMemMap + cuMemSetAccess at the same address
  [[nodiscard]] CUdeviceptr base() const { return base_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  void create_and_map();
  bool ok(CUresult result, const char* call);

  int device_ = 0;
  std::size_t size_ = 0;
  CUdeviceptr base_ = 0;
  CUmemGenericAllocationHandle handle_ = 0;
  bool mapped_ = false;
  std::string error_;
};

}  // namespace graphcheck::gpu_testing

#endif  // GRAPHCHECK_TESTS_GPU_GPU_SUPPORT_H_
