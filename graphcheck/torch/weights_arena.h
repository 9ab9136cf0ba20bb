// A CPU stand-in for vLLM's tagged "weights" pool: model loading allocates from one reserved
// mapping whose pages sleep can discard while the virtual addresses stay valid.
#ifndef GRAPHCHECK_TORCH_WEIGHTS_ARENA_H_
#define GRAPHCHECK_TORCH_WEIGHTS_ARENA_H_

#include <graphcheck/address.h>
#include <graphcheck/epoch.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace c10 {
struct Allocator;
}  // namespace c10

namespace graphcheck::libtorch {

class Registry;

namespace detail {
struct ArenaState;
}  // namespace detail

/// @brief What `WeightsArena::sleep` keeps (vLLM's sleep levels).
enum class SleepLevel : std::uint8_t {
  kLevel1 = 1,  ///< copy every live allocation aside and restore it on wake
  kLevel2 = 2,  ///< copy registered buffers only; the weights need a reload after wake
};

/// @brief A shared handle on one arena's reserved address range, for whatever keeps raw
/// addresses into it (a captured graph bakes them, see `CapturedGraph`): the range stays
/// mapped while a handle lives, also after the `WeightsArena` object is destroyed. The bytes
/// are whatever the arena left there (freed blocks keep their last contents until reused).
/// A default-constructed handle names no arena.
/// Thread safety: as `WeightsArena::contains` and `asleep`.
class ArenaMapping {
 public:
  ArenaMapping() = default;

  /// @brief True if `address` lies inside the reserved range (false for an empty handle).
  [[nodiscard]] bool contains(Address address) const;
  /// @brief True while the arena sleeps (its pages are discarded).
  [[nodiscard]] bool asleep() const;
  /// @brief False for a default-constructed handle.
  [[nodiscard]] explicit operator bool() const { return state_ != nullptr; }

 private:
  friend class WeightsArena;
  explicit ArenaMapping(std::shared_ptr<detail::ArenaState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::ArenaState> state_;
};

/// @brief A CPU allocator backed by ONE reserved mapping (`mmap` of `capacity` bytes,
/// `PROT_NONE` until committed), used as torch's CPU allocator only inside a `LoadScope`.
///
/// Allocation is first-fit over a free list with 64-byte alignment; pages are committed as
/// the high-water mark grows. Every allocation is labelled with its allocation site: the first
/// stack frame outside torch (`c10`, `at`, `torch`), the standard library and the arena
/// itself, symbolized with `dladdr` and demangled, argument list stripped (e.g.
/// `graphcheck::libtorch::ReferenceInt8Method::process_weights_after_loading`). Symbols of the
/// executable are visible only with `-rdynamic` (linking `graphcheck::torch` adds it);
/// functions with internal linkage and inlined frames are not, so the next caller is named.
///
/// Sleep and wake (DESIGN.md, "The ATen backend"): `sleep` copies aside what the level keeps
/// and discards every committed page (`madvise(MADV_DONTNEED)`: same addresses, contents
/// gone, reads give zeros while asleep). `wake_up` fills every discarded page with 0xFF, so
/// zeros cannot look right by accident, copies back what was kept, and bumps the generation
/// of every allocation that was not restored whole. Level 1 restores every allocation (no
/// generation changes). Level 2 restores the storages of registered buffers inside the arena
/// only; parameters and unregistered tensors read 0xFF until reloaded.
///
/// Lifetime: allocations outlive the `LoadScope` that made them and may outlive the arena
/// object: the mapping is released when the arena and its last allocation are gone. Freeing
/// a tensor returns its block to the arena at any time (also while asleep).
///
/// Thread safety: allocation, free, `allocations()`, `contains()` and `asleep()` are
/// serialized by a mutex and safe from any thread. `sleep` and `wake_up` take the same mutex
/// but must not race with threads that read or write the tensors' bytes. Installing the
/// allocator is process-wide (torch's CPU allocator is global): while a `LoadScope` is open,
/// every CPU tensor allocated by any thread comes from the arena.
class WeightsArena {
 public:
  /// @brief Reserves `capacity` bytes of address space (rounded up to pages; nothing is
  /// committed yet). `pool` names the allocations' pool in epochs.
  /// @throws graphcheck::Error if `capacity` is 0 or the reservation fails.
  explicit WeightsArena(std::size_t capacity, std::string pool = "weights");
  /// Not copyable or movable: allocations refer to the arena's shared state.
  WeightsArena(const WeightsArena&) = delete;
  WeightsArena& operator=(const WeightsArena&) = delete;
  ~WeightsArena();

  /// @brief RAII: installs the arena as torch's CPU allocator
  /// (`c10::SetAllocator(DeviceType::CPU, ...)`) and restores the previous one on exit.
  /// Scopes of one arena may nest; scopes of two arenas may nest if closed in reverse order.
  /// The arena must outlive the scope.
  class LoadScope {
   public:
    /// @throws graphcheck::Error if the arena is asleep, or torch kept its allocator (a
    /// higher-priority CPU allocator is registered).
    explicit LoadScope(WeightsArena& arena);
    LoadScope(const LoadScope&) = delete;
    LoadScope& operator=(const LoadScope&) = delete;
    ~LoadScope();

   private:
    c10::Allocator* previous_;
    std::shared_ptr<detail::ArenaState> state_;
  };

  /// @brief The live allocations, ordered by address: pool as given at construction,
  /// generation (starts at 1), label = allocation site.
  [[nodiscard]] std::vector<Allocation> allocations() const;

  /// @brief Discards the arena's pages after copying aside what `level` keeps (see the class).
  /// Level 2 keeps the whole storage of each `kBuffer` span of `registry` that lies inside the
  /// arena; spans of other kinds and spans outside the arena are ignored.
  /// @throws graphcheck::Error if already asleep or a `LoadScope` of this arena is open.
  void sleep(SleepLevel level, const Registry& registry);

  /// @brief Poisons the discarded pages with 0xFF, restores the copies and bumps the
  /// generation of allocations not restored whole.
  /// @throws graphcheck::Error if the arena is not asleep.
  void wake_up();

  /// @brief True if `address` lies inside the reserved range.
  [[nodiscard]] bool contains(Address address) const;
  [[nodiscard]] bool asleep() const;

  /// @brief A handle that keeps the reserved range mapped while it lives.
  [[nodiscard]] ArenaMapping mapping() const;

  [[nodiscard]] Address begin() const;
  [[nodiscard]] std::size_t capacity() const;
  /// @brief Bytes currently allocated (sum of live allocation sizes, before alignment).
  [[nodiscard]] std::size_t used() const;

  /// @brief The arena as a torch allocator, for callers that allocate from it directly
  /// (`at::empty` with a custom allocator, `c10::Storage`). Valid while the arena lives.
  [[nodiscard]] c10::Allocator* allocator();

 private:
  std::shared_ptr<detail::ArenaState> state_;
  std::unique_ptr<c10::Allocator> allocator_;
};

}  // namespace graphcheck::libtorch

#endif  // GRAPHCHECK_TORCH_WEIGHTS_ARENA_H_
