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
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "cupti/allocation_table.h"
#include "cupti/dispatcher.h"

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
/// reads or frees it is judged `graph`. cuMemFreeAsync on a capturing stream adds a free
/// node and frees nothing, so it keeps the entry (issue 18; docs/cupti.md). Streams that
/// join a capture through an event are not seen as capturing [verify on a GPU].
/// Thread safety: `on_callback` and every other member may be called from any thread (one
/// mutex; no allocation callback is on a per-launch path).
class AllocationTracker final : public CallbackHandler {
 public:
  explicit AllocationTracker(TrackerOptions options = {});

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

 private:
  void on_enter(CUpti_CallbackId cbid, const void* params);
  void on_exit(CUpti_CallbackId cbid, const void* params);
  [[nodiscard]] std::string label(std::string_view api);

  TrackerOptions options_;
  mutable std::mutex mutex_;
  AllocationTable table_;
  std::unordered_set<CUstream> capturing_;  // streams between begin and end of a capture
  std::uint64_t sequence_ = 0;
  std::atomic<std::uint64_t> events_{0};
};

namespace detail {
/// The label suffix " from <module>(<symbol>+0x<off>)" of the first frame outside the CUDA,
/// CUPTI and graphcheck libraries, or "" when none is found.
[[nodiscard]] std::string allocation_site();
}  // namespace detail

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_ALLOCATION_TRACKER_H_
