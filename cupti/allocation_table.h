// The live allocation table of the CUPTI backend, on plain integers (no CUDA types), so the
// bookkeeping of cuMemAlloc/cuMemFree and of VMM reserve/create/map/unmap is testable alone.
#ifndef GRAPHCHECK_CUPTI_ALLOCATION_TABLE_H_
#define GRAPHCHECK_CUPTI_ALLOCATION_TABLE_H_

#include <graphcheck/address.h>
#include <graphcheck/epoch.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace graphcheck::cupti {

/// @brief What happens to the generation of a VMM range that is unmapped and mapped again
/// at the same address.
enum class RestorePolicy : std::uint8_t {
  /// The bytes were discarded (vLLM sleep level 2, torch_memory_saver without backup): the
  /// new mapping gets a new generation unless `AllocationTable::mark_restored` says otherwise.
  kDiscard,
  /// The owner copies the bytes back after every remap (vLLM sleep level 1): a mapping at
  /// the same address as an earlier one keeps that mapping's generation.
  kRestore,
};

/// @brief Counters of events the table could not match (allocations made before attach).
struct TableStats {
  std::uint64_t unknown_frees = 0;   ///< cuMemFree of an address the table never saw
  std::uint64_t unknown_unmaps = 0;  ///< cuMemUnmap of a range with no known mapping
  std::uint64_t untagged_maps = 0;   ///< cuMemMap outside every known reservation
  friend bool operator==(const TableStats&, const TableStats&) = default;
};

/// @brief The live device allocations of one process: plain allocations (cuMemAlloc and its
/// async forms) and VMM mappings (cuMemMap inside reserved ranges), each with a pool and a
/// generation (DESIGN.md, "Allocation").
///
/// Generations come from one counter per table, starting at 1: every new allocation or
/// mapping takes the next value, so a range unmapped and mapped again differs from its
/// capture-time self unless the reservation's policy is `kRestore` or the owner calls
/// `mark_restored`.
/// Thread safety: none; `AllocationTracker` serialises access with its own mutex.
class AllocationTable {
 public:
  /// @brief A plain allocation [begin, begin + size) in `pool`; replaces any entry it
  /// overlaps (a free the table missed).
  void add(Address begin, std::uint64_t size, std::string_view pool, std::string label);
  /// @brief Removes the plain allocation starting at `begin`; counts unknown addresses.
  /// @return true if an allocation was removed.
  bool remove(Address begin);

  /// @brief Records a reserved VA range (cuMemAddressReserve). Mappings inside it take its
  /// pool ("vmm" until `tag_reservation`) and restore policy.
  void reserve(Address begin, std::uint64_t size);
  /// @brief Forgets the reservation at `begin` and the remap history inside it
  /// (cuMemAddressFree).
  void free_reservation(Address begin, std::uint64_t size);
  /// @brief Names the pool of the reservation containing `address` and sets its policy.
  /// @throws Error if no known reservation contains `address`.
  void tag_reservation(Address address, std::string_view pool, RestorePolicy policy);
  /// @brief Records a physical allocation handle (cuMemCreate).
  void create_handle(std::uint64_t handle, std::uint64_t size);
  /// @brief Forgets a handle (cuMemRelease). Mappings of it stay live until unmapped, as in
  /// the driver.
  void release_handle(std::uint64_t handle);
  /// @brief Maps [begin, begin + size) (cuMemMap). The mapping gets a new generation, or
  /// the previous mapping's generation at the same address under `RestorePolicy::kRestore`.
  /// A mapping at an address where one was unmapped is that allocation mapped again (a
  /// sleep and wake): it keeps the earlier label, and `label` is ignored, so that the checker
  /// sees the same allocation with another generation (docs/verdicts.md).
  void map(Address begin, std::uint64_t size, std::uint64_t handle, std::string label);
  /// @brief Unmaps every mapping overlapping [begin, begin + size) (cuMemUnmap); parts of a
  /// mapping outside the range stay mapped. The generation of each removed mapping is kept
  /// as the history of its address for a later remap.
  void unmap(Address begin, std::uint64_t size);
  /// @brief The owner of the range says the bytes of every mapping overlapping
  /// [begin, begin + size) were restored: each takes back the generation the mapping at its
  /// address had before the last unmap (a first mapping keeps its own).
  /// @throws Error if no live mapping overlaps the range.
  void mark_restored(Address begin, std::uint64_t size);

  /// @brief The policy for reservations that were never tagged (default `kDiscard`).
  void set_default_policy(RestorePolicy policy) { default_policy_ = policy; }

  /// @brief Every live allocation and mapping, sorted by address.
  [[nodiscard]] std::vector<Allocation> allocations() const;
  /// @brief Size of a known handle, or nullopt.
  [[nodiscard]] std::optional<std::uint64_t> handle_size(std::uint64_t handle) const;
  [[nodiscard]] const TableStats& stats() const { return stats_; }
  /// @brief Number of live entries (allocations plus mappings).
  [[nodiscard]] std::size_t size() const { return live_.size(); }
  /// @brief Forgets everything except the generation counter.
  void clear();

 private:
  struct Entry {
    std::uint64_t size = 0;
    std::string pool;
    std::uint64_t generation = 0;
    std::string label;
    bool is_mapping = false;
    std::optional<std::uint64_t> previous_generation;  // of the last mapping at this address
  };
  struct Reservation {
    std::uint64_t size = 0;
    std::string pool = "vmm";
    std::optional<RestorePolicy> policy;
  };

  // How `erase_overlapping` treats what it removes.
  enum class EraseMode : std::uint8_t {
    kReplace,  // a fresh allocation replaces stale entries the table missed a free for
    kUnmap,    // cuMemUnmap: remainders outside the range stay, generations go to history_
  };
  // Erases entries overlapping [begin, end) according to `mode`; returns how many.
  std::size_t erase_overlapping(Address begin, Address end, EraseMode mode);
  [[nodiscard]] const Reservation* find_reservation(Address address) const;
  [[nodiscard]] Reservation* find_reservation(Address address);

  std::map<Address, Entry> live_;
  std::map<Address, Reservation> reservations_;
  // What a mapping unmapped at an address leaves behind: a later mapping at that address is
  // the same allocation mapped again (the checker then compares generations), so it keeps
  // the label too.
  struct History {
    std::uint64_t generation = 0;
    std::string label;
  };
  std::map<Address, History> history_;              // address -> the last mapping unmapped there
  std::map<std::uint64_t, std::uint64_t> handles_;  // handle -> size
  std::uint64_t next_generation_ = 1;
  RestorePolicy default_policy_ = RestorePolicy::kDiscard;
  TableStats stats_;
};

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_ALLOCATION_TABLE_H_
