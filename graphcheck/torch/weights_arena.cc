#include <c10/core/Allocator.h>
#include <c10/core/DeviceType.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/detail/allocation_site.h>
#include <graphcheck/torch/registry.h>
#include <graphcheck/torch/weights_arena.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace graphcheck::libtorch {
namespace detail {

constexpr std::size_t kAlignment = 64;

std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

std::size_t page_size() { return static_cast<std::size_t>(sysconf(_SC_PAGESIZE)); }

struct Block {
  std::size_t size = 0;  // requested bytes
  std::uint64_t generation = 1;
  CallStack stack;
  std::string label;  // symbolized lazily from `stack`
};

// Everything an allocation needs after the WeightsArena object is gone: allocations hold a
// shared_ptr to it, so the mapping lives until the arena and its last allocation are gone.
struct ArenaState {
  mutable std::mutex mutex;
  std::byte* base = nullptr;
  std::size_t capacity = 0;  // reserved bytes (page multiple)
  std::string pool;

  std::size_t committed = 0;                 // [0, committed) is readable and writable
  std::size_t high_water = 0;                // bump pointer
  std::map<std::size_t, std::size_t> holes;  // offset -> size, free space below high_water
  std::map<std::size_t, Block> live;         // offset -> block
  std::size_t used = 0;
  int open_scopes = 0;

  bool asleep = false;
  std::map<std::size_t, std::vector<std::byte>> saved;  // offset -> bytes kept by sleep

  ArenaState() = default;
  ArenaState(const ArenaState&) = delete;
  ArenaState& operator=(const ArenaState&) = delete;
  ~ArenaState() {
    if (base != nullptr) {
      munmap(base, capacity);
    }
  }

  // Takes `aligned` bytes from the first hole that fits, else from the top. Caller holds mutex.
  std::size_t take(std::size_t aligned) {
    for (auto it = holes.begin(); it != holes.end(); ++it) {
      if (it->second >= aligned) {
        const std::size_t offset = it->first;
        const std::size_t rest = it->second - aligned;
        holes.erase(it);
        if (rest != 0) {
          holes.emplace(offset + aligned, rest);
        }
        return offset;
      }
    }
    if (aligned > capacity - high_water) {
      throw Error("WeightsArena: allocating " + std::to_string(aligned) + " bytes exceeds the " +
                  "arena's capacity of " + std::to_string(capacity) + " bytes (" +
                  std::to_string(used) + " in use); construct the WeightsArena with a larger " +
                  "capacity (it only reserves address space)");
    }
    const std::size_t offset = high_water;
    high_water += aligned;
    if (high_water > committed) {
      const std::size_t target = round_up(high_water, page_size());
      if (mprotect(base + committed, target - committed, PROT_READ | PROT_WRITE) != 0) {
        high_water = offset;
        throw Error("WeightsArena: committing " + std::to_string(target - committed) +
                    " bytes failed: " + std::strerror(errno) +
                    "; free memory or reduce the model size");
      }
      committed = target;
    }
    return offset;
  }

  // Returns [offset, offset + aligned) to the free space, merging neighbours. Caller holds mutex.
  void give_back(std::size_t offset, std::size_t aligned) {
    auto next = holes.lower_bound(offset);
    if (next != holes.end() && next->first == offset + aligned) {
      aligned += next->second;
      next = holes.erase(next);
    }
    if (next != holes.begin()) {
      auto previous = std::prev(next);
      if (previous->first + previous->second == offset) {
        offset = previous->first;
        aligned += previous->second;
        holes.erase(previous);
      }
    }
    if (offset + aligned == high_water) {
      high_water = offset;  // the top shrinks; committed pages stay committed
    } else {
      holes.emplace(offset, aligned);
    }
  }
};

struct AllocationContext {
  std::shared_ptr<ArenaState> state;
  std::size_t offset = 0;
};

void free_allocation(void* context) {
  const std::unique_ptr<AllocationContext> allocation(static_cast<AllocationContext*>(context));
  ArenaState& state = *allocation->state;
  const std::lock_guard lock(state.mutex);
  const auto it = state.live.find(allocation->offset);
  if (it == state.live.end()) {
    return;  // cannot happen: every context names one live block
  }
  state.used -= it->second.size;
  state.give_back(allocation->offset, round_up(it->second.size, kAlignment));
  state.live.erase(it);
}

class ArenaAllocator final : public c10::Allocator {
 public:
  explicit ArenaAllocator(std::shared_ptr<ArenaState> state) : state_(std::move(state)) {}

  c10::DataPtr allocate(std::size_t n) override {
    const c10::Device device(c10::DeviceType::CPU);
    if (n == 0) {
      return {nullptr, nullptr, nullptr, device};
    }
    // Capture the stack before locking: backtrace() may allocate on its first call.
    Block block;
    block.size = n;
    block.stack = capture_call_stack();
    auto context = std::make_unique<AllocationContext>();
    context->state = state_;
    {
      const std::lock_guard lock(state_->mutex);
      if (state_->asleep) {
        throw Error("WeightsArena: allocating " + std::to_string(n) +
                    " bytes while the arena is asleep; call wake_up() first");
      }
      context->offset = state_->take(round_up(n, kAlignment));
      state_->used += n;
      state_->live.emplace(context->offset, std::move(block));
    }
    void* data = state_->base + context->offset;
    return {data, context.release(), &free_allocation, device};
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

 private:
  std::shared_ptr<ArenaState> state_;
};

}  // namespace detail

WeightsArena::WeightsArena(std::size_t capacity, std::string pool)
    : state_(std::make_shared<detail::ArenaState>()) {
  if (capacity == 0) {
    throw Error("WeightsArena: capacity is 0 bytes; pass the bytes the model's weights need");
  }
  const std::size_t reserved = detail::round_up(capacity, detail::page_size());
  void* base =
      mmap(nullptr, reserved, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    throw Error("WeightsArena: reserving " + std::to_string(reserved) +
                " bytes of address space failed: " + std::strerror(errno) +
                "; pass a smaller capacity");
  }
  state_->base = static_cast<std::byte*>(base);
  state_->capacity = reserved;
  state_->pool = std::move(pool);
  allocator_ = std::make_unique<detail::ArenaAllocator>(state_);
}

WeightsArena::~WeightsArena() = default;

WeightsArena::LoadScope::LoadScope(WeightsArena& arena)
    : previous_(c10::GetAllocator(c10::DeviceType::CPU)) {
  detail::ArenaState& state = *arena.state_;
  {
    const std::lock_guard lock(state.mutex);
    if (state.asleep) {
      throw Error("WeightsArena::LoadScope: the arena is asleep; call wake_up() before loading");
    }
    ++state.open_scopes;
  }
  state_ = arena.state_;
  c10::SetAllocator(c10::DeviceType::CPU, arena.allocator_.get());
  if (c10::GetAllocator(c10::DeviceType::CPU) != arena.allocator_.get()) {
    const std::lock_guard lock(state.mutex);
    --state.open_scopes;
    throw Error(
        "WeightsArena::LoadScope: torch kept its CPU allocator (one was registered "
        "with a priority above 0); the arena cannot be installed in this process");
  }
}

WeightsArena::LoadScope::~LoadScope() {
  c10::SetAllocator(c10::DeviceType::CPU, previous_);
  const std::lock_guard lock(state_->mutex);
  --state_->open_scopes;
}

std::vector<Allocation> WeightsArena::allocations() const {
  const std::lock_guard lock(state_->mutex);
  std::vector<Allocation> result;
  result.reserve(state_->live.size());
  for (auto& [offset, block] : state_->live) {
    if (block.label.empty()) {
      block.label = detail::allocation_site(block.stack);
    }
    result.push_back(Allocation{reinterpret_cast<Address>(state_->base + offset), block.size,
                                state_->pool, block.generation, block.label});
  }
  return result;
}

void WeightsArena::sleep(SleepLevel level, const Registry& registry) {
  // Read the registry before locking: it may call into torch, which never allocates from us
  // here, but the lock should not be held longer than needed.
  const std::vector<Span> spans =
      level == SleepLevel::kLevel2 ? registry.spans() : std::vector<Span>{};
  detail::ArenaState& state = *state_;
  const std::lock_guard lock(state.mutex);
  if (state.asleep) {
    throw Error("WeightsArena::sleep: the arena is already asleep; call wake_up() first");
  }
  if (state.open_scopes != 0) {
    throw Error("WeightsArena::sleep: a LoadScope of this arena is open; close it first");
  }
  state.saved.clear();
  const auto keep = [&state](std::size_t offset, std::size_t size) {
    const std::byte* from = state.base + offset;
    state.saved.emplace(offset, std::vector<std::byte>(from, from + size));
  };
  if (level == SleepLevel::kLevel1) {
    for (const auto& [offset, block] : state.live) {
      keep(offset, block.size);
    }
  } else {
    const auto begin = reinterpret_cast<Address>(state.base);
    const Address end = begin + state.committed;
    for (const Span& span : spans) {
      if (span.kind != OwnerKind::kBuffer || span.end() <= begin || span.begin >= end) {
        continue;
      }
      const Address from = std::max(span.begin, begin);
      const Address to = std::min(span.end(), end);
      keep(static_cast<std::size_t>(from - begin), static_cast<std::size_t>(to - from));
    }
  }
  if (state.committed != 0 && madvise(state.base, state.committed, MADV_DONTNEED) != 0) {
    state.saved.clear();
    throw Error(std::string("WeightsArena::sleep: discarding the pages failed: ") +
                std::strerror(errno));
  }
  state.asleep = true;
}

void WeightsArena::wake_up() {
  detail::ArenaState& state = *state_;
  const std::lock_guard lock(state.mutex);
  if (!state.asleep) {
    throw Error("WeightsArena::wake_up: the arena is not asleep; call sleep() first");
  }
  std::memset(state.base, 0xFF, state.committed);
  for (const auto& [offset, bytes] : state.saved) {
    std::memcpy(state.base + offset, bytes.data(), bytes.size());
  }
  for (auto& [offset, block] : state.live) {
    // Restored whole if one kept range contains the block.
    auto it = state.saved.upper_bound(offset);
    const bool restored =
        it != state.saved.begin() && (--it, it->first + it->second.size() >= offset + block.size);
    if (!restored) {
      ++block.generation;
    }
  }
  state.saved.clear();
  state.asleep = false;
}

bool ArenaMapping::contains(Address address) const {
  if (state_ == nullptr) {
    return false;
  }
  const auto begin = reinterpret_cast<Address>(state_->base);
  return address >= begin && address - begin < state_->capacity;
}

bool ArenaMapping::asleep() const {
  if (state_ == nullptr) {
    return false;
  }
  const std::lock_guard lock(state_->mutex);
  return state_->asleep;
}

bool WeightsArena::contains(Address address) const {
  const auto begin = reinterpret_cast<Address>(state_->base);
  return address >= begin && address - begin < state_->capacity;
}

bool WeightsArena::asleep() const {
  const std::lock_guard lock(state_->mutex);
  return state_->asleep;
}

ArenaMapping WeightsArena::mapping() const { return ArenaMapping(state_); }

Address WeightsArena::begin() const { return reinterpret_cast<Address>(state_->base); }

std::size_t WeightsArena::capacity() const { return state_->capacity; }

std::size_t WeightsArena::used() const {
  const std::lock_guard lock(state_->mutex);
  return state_->used;
}

c10::Allocator* WeightsArena::allocator() { return allocator_.get(); }

}  // namespace graphcheck::libtorch
