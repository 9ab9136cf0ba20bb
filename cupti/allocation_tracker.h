// Allocation tracking from synchronous driver-API callbacks: cuMemAlloc/cuMemFree (and the
// async and pitch/managed forms) and the VMM calls (cuMemAddressReserve/Free, cuMemCreate/
// Release, cuMemMap/Unmap) keep the live `AllocationTable`.
#ifndef GRAPHCHECK_CUPTI_ALLOCATION_TRACKER_H_
#define GRAPHCHECK_CUPTI_ALLOCATION_TRACKER_H_

#include <cuda.h>
#include <cupti.h>
#include <graphcheck/epoch.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "cupti/allocation_table.h"
#include "cupti/dispatcher.h"
#include "cupti/driver_api.h"

namespace graphcheck::cupti {

/// @brief Whether allocation labels name the call site.
enum class SiteCapture : std::uint8_t {
  kNone,       ///< labels are "<api> #<n>" (n counts tracked allocations)
  kBacktrace,  ///< "<api> #<n> from <module>(<symbol>+0x<off>)": the first frame outside
               ///< the CUDA, CUPTI and graphcheck libraries (costs a backtrace per allocation)
};

/// @brief Settings of an `AllocationTracker`.
struct TrackerOptions {
  SiteCapture site = SiteCapture::kNone;
  /// Restore policy of reservations not tagged with `tag_reservation` (vLLM level-1 sleep
  /// copies everything back: `kRestore`).
  RestorePolicy default_policy = RestorePolicy::kDiscard;
};

/// @brief Keeps the live allocation table from CUPTI driver-API callbacks.
///
/// Allocations are recorded at API EXIT when the call returned CUDA_SUCCESS (the output
/// pointer is valid only then); frees, unmaps and releases at API ENTER, so that another
/// thread's allocation at the same address, which can only follow the driver's free, is
/// never erased by a late EXIT. A failing free therefore still drops its entry (the driver
/// left it allocated; the next allocation over it replaces nothing).
/// Pools: "default" (cuMemAlloc, pitch), "managed" (cuMemAllocManaged), "async"
/// (cuMemAllocAsync), "async:<pool handle>" (cuMemAllocFromPoolAsync), "vmm" or the tag of
/// the reservation (cuMemMap), and "graph:alloc_node" for cuMemAllocAsync/FromPoolAsync on
/// a stream being captured (cuStreamBeginCapture* .. cuStreamEndCapture): that is an alloc
/// node's graph memory, a graph pool to the checker in every graph, so a later graph that
/// reads or frees it is judged `graph`.
/// "graph:capture_segment" for cuMemAlloc/cuMemAllocPitch on a thread while a capture it
/// began is open: how a caching allocator's graph pool grows (PyTorch's private and shared
/// graph pools get their segments only then, from the capturing thread), so the pool's
/// memory, which one graph produces and the next reads, is `graph` in every graph, not
/// `unregistered`. Segments a pool got before the capture and `expandable_segments` (VMM)
/// are not told apart [verify on a GPU]. cuMemFreeAsync on a capturing stream adds a free
/// node and frees nothing, so it keeps the entry (issue 18; docs/cupti.md). Streams that
/// join a capture through an event are not seen as capturing [verify on a GPU].
/// Memory mapped from elsewhere (allocation_tracker_mapped.cc): "ipc" for cuIpcOpenMemHandle
/// (its size from cuMemGetAddressRange, so only with a driver table), "host" for pinned host
/// memory a graph can address (cuMemHostAlloc, cuMemAllocHost, cuMemHostRegister at the host
/// address, which unified addressing makes the device address; a different address that
/// cuMemHostGetDevicePointer returns is the same memory there too), until cuIpcCloseMemHandle,
/// cuMemFreeHost or cuMemHostUnregister.
/// Thread safety: `on_callback` and every other member may be called from any thread (one
/// mutex; no allocation callback is on a per-launch path).
class AllocationTracker final : public CallbackHandler {
 public:
  /// `api`, when given, sizes IPC mappings (cuMemGetAddressRange at the open's EXIT, before
  /// the tracker's mutex is taken); it must outlive the tracker. Without it they are counted
  /// in `ipc_unsized()` only.
  explicit AllocationTracker(TrackerOptions options = {}, DriverApi* api = nullptr);

  [[nodiscard]] std::vector<CallbackId> callbacks() const override;
  void on_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) override;

  /// @brief Every live allocation and mapping, sorted by address.
  [[nodiscard]] std::vector<Allocation> allocations() const;
  /// @brief Names the pool of the reservation containing `address` ("weights", "kv_cache")
  /// and how its remaps behave. @throws Error if no tracked reservation contains it.
  void tag_reservation(Address address, std::string_view pool, RestorePolicy policy);
  /// @brief The owner copied the bytes of [begin, begin + size) back after a remap: the
  /// mappings there keep their pre-sleep generation. @throws Error if nothing is mapped there.
  void mark_restored(Address begin, std::uint64_t size);
  [[nodiscard]] TableStats stats() const;
  /// @brief Callbacks handled (for benchmarks and the GPU check).
  [[nodiscard]] std::uint64_t events() const { return events_.load(std::memory_order_relaxed); }
  /// @brief IPC mappings not tracked because their size could not be learnt.
  [[nodiscard]] std::uint64_t ipc_unsized() const {
    return ipc_unsized_.load(std::memory_order_relaxed);
  }

 private:
  void on_enter(CUpti_CallbackId cbid, const void* params);
  void on_exit(CUpti_CallbackId cbid, const void* params);
  // allocation_tracker_mapped.cc: IPC and pinned host memory; false for other callbacks.
  bool on_enter_mapped(CUpti_CallbackId cbid, const void* params);
  bool on_exit_mapped(CUpti_CallbackId cbid, const void* params);
  void remove_host_locked(Address begin);
  [[nodiscard]] std::string label(std::string_view api);

  TrackerOptions options_;
  DriverApi* api_ = nullptr;
  mutable std::mutex mutex_;
  AllocationTable table_;
  // "default", or the capture pool when this thread began a capture that is still open.
  [[nodiscard]] std::string_view segment_pool_locked() const;

  // Streams between begin and end of a capture, and the thread that began each.
  std::unordered_map<CUstream, std::thread::id> capturing_;
  std::uint64_t sequence_ = 0;
  std::atomic<std::uint64_t> events_{0};
  std::atomic<std::uint64_t> ipc_unsized_{0};
  std::map<Address, std::uint64_t> host_;               // pinned host ranges: begin -> size
  std::map<Address, std::vector<Address>> host_alias_;  // host begin -> other device addresses
};

namespace detail {
/// The callbacks of memory mapped from elsewhere (IPC, pinned host).
inline constexpr CUpti_CallbackId kMappedCallbacks[] = {
    CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle,
    CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2,
    CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostGetDevicePointer_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
    CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister,
};
/// The label suffix " from <module>(<symbol>+0x<off>)" of the first frame outside the CUDA,
/// CUPTI and graphcheck libraries, libc and libstdc++ (at most 32 frames deep), or "" when
/// none is found. Each return address is described once per process. Thread safety: safe
/// from any thread, also during exit (its table is never destroyed).
[[nodiscard]] std::string allocation_site();
}  // namespace detail

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_ALLOCATION_TRACKER_H_
