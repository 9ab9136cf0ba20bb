// The ATen capture window's allocation watcher: which blocks were allocated while a window is
// open (graphcheck/torch/aten_capture.cc).
#ifndef GRAPHCHECK_TORCH_DETAIL_ALLOCATION_WATCHER_H_
#define GRAPHCHECK_TORCH_DETAIL_ALLOCATION_WATCHER_H_

#include <c10/core/Device.h>
#include <graphcheck/address.h>
#include <graphcheck/detail/pointer_table.h>
#include <torch/csrc/profiler/orchestration/observer.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace graphcheck::libtorch::detail {

/// @brief Learns which storages were allocated while a window is open on its thread: the CPU
/// allocator (and CUDA's caching allocator) report every allocation and free to the
/// PROFILER_STATE debug info when it says memory profiling is enabled. Torch reads that slot
/// as a profiler state (autograd.Function.apply asks `profilerEnabled()` and its config), so
/// the watcher is one: a disabled profiler whose memory reporting is on.
///
/// Torch copies the slot into the threads the window's thread hands work to (at::launch's
/// inter-op tasks, autograd's device threads), and those report their blocks here too, at the
/// same time as the owner does (the CPU allocator reports outside its lock). Their blocks are
/// the forward's, so they count; their reports queue under a mutex and the owner applies them,
/// in order, before any report or lookup of its own. A free is reported before the allocator
/// can hand the block out again, so a block's events never apply out of order. The owner's
/// path takes no lock: one atomic load.
///
/// Thread safety: `reportMemoryUsage`, `count_foreign_op` and `foreign_ops` from any thread;
/// everything else on the owner thread (the one that made it) only. Lifetime: shared with the
/// slot it is pushed into and every thread that copied that slot.
class AllocationWatcher final : public torch::profiler::impl::ProfilerStateBase {
 public:
  AllocationWatcher();

  /// @brief The watcher in this thread's profiler slot, or null (none, or a profiler's state).
  [[nodiscard]] static AllocationWatcher* in_this_thread();

  torch::profiler::impl::ActiveProfilerType profilerType() override;
  void reportMemoryUsage(void* ptr, int64_t alloc_size, size_t total_allocated,
                         size_t total_reserved, c10::Device device) override;
  [[nodiscard]] bool memoryProfilingEnabled() const override { return true; }

  /// @brief Whether a block allocated inside and not freed begins at `begin`.
  [[nodiscard]] bool allocated_inside(Address begin) {
    drain();
    return live_.contains(begin);
  }
  /// @brief Ignores later reports: a task still running on another thread, or the watcher put
  /// back in the slot by a guard pushed after the window's and popped after it (an abandoned
  /// window stops at its thread's next op, which may run inside such a guard).
  void close() { closed_.store(true, std::memory_order_release); }
  /// @brief Every block allocated inside, freed or not, in order: the graph's memory.
  /// Closes the watcher.
  [[nodiscard]] std::vector<std::pair<Address, std::uint64_t>> take_allocated();

  /// @brief Counts an op that started on another thread holding this watcher.
  void count_foreign_op() { foreign_ops_.fetch_add(1, std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t foreign_ops() const {
    return foreign_ops_.load(std::memory_order_relaxed);
  }

 private:
  void apply(Address begin, std::int64_t alloc_size);
  void drain() {
    if (has_foreign_.load(std::memory_order_acquire)) {
      drain_foreign();
    }
  }
  void drain_foreign();

  const std::thread::id owner_;
  graphcheck::detail::PointerTable<bool> live_;  // first bytes of the live blocks made inside
  std::vector<std::pair<Address, std::uint64_t>> allocated_;  // (begin, bytes)
  std::mutex foreign_mutex_;
  std::vector<std::pair<Address, std::int64_t>> foreign_;  // (begin, signed size), in order
  std::atomic<bool> has_foreign_{false};
  std::atomic<bool> closed_{false};
  std::atomic<std::uint64_t> foreign_ops_{0};
};

}  // namespace graphcheck::libtorch::detail

#endif  // GRAPHCHECK_TORCH_DETAIL_ALLOCATION_WATCHER_H_
