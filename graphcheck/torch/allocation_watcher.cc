#include <c10/util/ThreadLocalDebugInfo.h>
#include <graphcheck/torch/detail/allocation_watcher.h>

namespace graphcheck::libtorch::detail {

AllocationWatcher::AllocationWatcher()
    : ProfilerStateBase(
          torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::Disabled)),
      owner_(std::this_thread::get_id()) {}

AllocationWatcher* AllocationWatcher::in_this_thread() {
  return dynamic_cast<AllocationWatcher*>(
      c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE));
}

torch::profiler::impl::ActiveProfilerType AllocationWatcher::profilerType() {
  return torch::profiler::impl::ActiveProfilerType::NONE;
}

void AllocationWatcher::reportMemoryUsage(void* ptr, int64_t alloc_size, size_t /*total_allocated*/,
                                          size_t /*total_reserved*/, c10::Device /*device*/) {
  if (alloc_size == 0 || closed_.load(std::memory_order_acquire)) {
    return;
  }
  const auto begin = reinterpret_cast<Address>(ptr);
  if (std::this_thread::get_id() == owner_) {
    drain();
    apply(begin, alloc_size);
    return;
  }
  const std::lock_guard<std::mutex> lock(foreign_mutex_);
  foreign_.emplace_back(begin, alloc_size);
  has_foreign_.store(true, std::memory_order_release);
}

std::vector<std::pair<Address, std::uint64_t>> AllocationWatcher::take_allocated() {
  close();
  drain();
  return std::move(allocated_);
}

void AllocationWatcher::apply(Address begin, std::int64_t alloc_size) {
  if (alloc_size > 0) {
    live_.insert(begin, true);
    allocated_.emplace_back(begin, static_cast<std::uint64_t>(alloc_size));
  } else {
    live_.erase(begin);
  }
}

void AllocationWatcher::drain_foreign() {
  std::vector<std::pair<Address, std::int64_t>> events;
  {
    const std::lock_guard<std::mutex> lock(foreign_mutex_);
    events.swap(foreign_);
    has_foreign_.store(false, std::memory_order_relaxed);
  }
  for (const auto& [begin, size] : events) {
    apply(begin, size);
  }
}

}  // namespace graphcheck::libtorch::detail
