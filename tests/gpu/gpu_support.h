// Shared helpers of the gpu tier (owner: cupti-b): device detection (skip without one), the
// real backend behind one subscription, a small VMM allocator with sleep/wake, and snapshot
// output to $GRAPHCHECK_GPU_OUT. Ran on an H200 on 2026-12-04; see docs/gpu-check.md.
#ifndef GRAPHCHECK_TESTS_GPU_GPU_SUPPORT_H_
#define GRAPHCHECK_TESTS_GPU_GPU_SUPPORT_H_

#include <cuda.h>
#include <cuda_runtime_api.h>
#include <graphcheck/snapshot.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "common/expect_block.h"
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

/// Whether graphcheck's own injection library (CUDA_INJECTION64_PATH) attached to this
/// process. It then holds the process's one CUPTI subscription, so a test's `LiveBackend`
/// cannot subscribe (CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED); gpu-check.sh's
/// injection smoke run does exactly this.
inline bool injected_by_graphcheck() {
  const char* path = std::getenv("CUDA_INJECTION64_PATH");
  return path != nullptr && std::string_view(path).find("graphcheck") != std::string_view::npos;
}

/// The folder named by $GRAPHCHECK_GPU_OUT, created, where the gpu tests leave what they
/// recorded (gpu-check.sh's `snapshots/`); empty when the variable is unset or empty.
inline std::filesystem::path gpu_out_dir() {
  const char* out = std::getenv("GRAPHCHECK_GPU_OUT");
  if (out == nullptr || *out == '\0') {
    return {};
  }
  std::filesystem::create_directories(out);
  return out;
}

/// Skips the test when graphcheck's injection holds CUPTI, so that `live` (a LiveBackend)
/// could not subscribe: the injection smoke run runs the gpu test binary.
#define GRAPHCHECK_SKIP_WHILE_INJECTED(live)                                             \
  do {                                                                                   \
    if (!(live).status.ok() && ::graphcheck::gpu_testing::injected_by_graphcheck()) {    \
      GTEST_SKIP() << "graphcheck's injection holds CUPTI: " << (live).status.message(); \
    }                                                                                    \
  } while (false)

/// Prints `line` (ending in a newline) and appends it to <gpu_out_dir()>/callback_counts.txt:
/// what a gpu test observed of the real driver (ctest shows a passing test's output only in
/// its junit file).
inline void report_observation(const std::string& line) {
  std::cout << line << std::flush;
  if (const std::filesystem::path out = gpu_out_dir(); !out.empty()) {
    std::ofstream(out / "callback_counts.txt", std::ios::app) << line;
  }
}

/// Reports what CUPTI delivered (one line, `report_observation`): the counters answer the
/// [verify] questions of docs/gpu-check.md.
inline void print_callback_counts(cupti::Backend& backend, std::string_view label) {
  const cupti::GraphCaptureStats stats = backend.capture().stats();
  std::ostringstream line;
  line << "graphcheck-gpu: " << label << ": nodes_created=" << stats.nodes_created
       << " nodes_created_instantiating=" << stats.nodes_created_instantiating
       << " nodes_noted=" << stats.nodes_noted << " graphs_cloned=" << stats.graphs_cloned
       << " execs_created=" << stats.execs_created << " execs_destroyed=" << stats.execs_destroyed
       << " graphs_walked=" << stats.graphs_walked << " exec_updates=" << stats.exec_updates
       << " node_update_events=" << stats.node_update_events
       << " exec_templates_matched=" << stats.exec_templates_matched
       << " exec_templates_differed=" << stats.exec_templates_differed
       << " tensor_maps=" << stats.tensor_maps
       << " runtime_kernel_setters_alone=" << stats.runtime_kernel_setters_alone
       << " allocation_events=" << backend.tracker().events()
       << " launches_seen=" << backend.launch_hook().launches() << "\n";
  report_observation(line.str());
}

/// The verdict of the finding at `address` (a kernel argument word or an operand's begin),
/// or nullopt when the report has none there (an ok-class verdict is not a finding).
inline std::optional<Verdict> verdict_at(const Report& report, Address address) {
  for (const Finding& finding : report.findings) {
    if (finding.address == address) {
      return finding.verdict;
    }
  }
  return std::nullopt;
}

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

/// Writes `snapshot` as <$GRAPHCHECK_GPU_OUT>/<name>.json when the variable is set, with a
/// description and the expect blocks check() gives here, on the GPU machine: copied into
/// tests/data/gpu/ unchanged, the file is a CPU regression test (tests/data/gpu/README.md).
inline void record_snapshot(const Snapshot& snapshot, const std::string& name) {
  const std::filesystem::path out = gpu_out_dir();
  if (out.empty()) {
    return;
  }
  std::ofstream file(out / (name + ".json"), std::ios::binary);
  file << test_support::with_expect_blocks(
      snapshot, "Recorded on a GPU by the gpu tier (tests/gpu, " + name +
                    "): " + std::to_string(snapshot.graphs.size()) + " graph(s), " +
                    std::to_string(snapshot.epochs.size()) + " epoch(s).");
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
