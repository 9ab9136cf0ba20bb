// A hash table keyed by non-zero addresses, flat (open addressing, linear probing): the ATen
// capture window looks up a storage on every tensor operand of every op, and the allocation
// watcher inserts and erases on every allocation, in the middle of a forward whose kernels
// have just evicted the caches. One probe touches one cache line; std::unordered_map chases a
// bucket and a node per lookup and allocates per insert.
//
// Layout: `slots_` holds `capacity` entries (a power of two, at least 16), an empty slot has
// key 0; the load stays at most one half, so probes end quickly. Erase shifts the following
// entries of the probe run back (no tombstones), so a run never holds a gap. Pointers to
// values are valid until the next insert or erase.
#ifndef GRAPHCHECK_DETAIL_POINTER_TABLE_H_
#define GRAPHCHECK_DETAIL_POINTER_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace graphcheck::detail {

template <typename Value>
class PointerTable {
 public:
  using Key = std::uintptr_t;

  PointerTable() : slots_(kMinCapacity) {}

  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }

  /// The value of `key`, or nullptr. `key` 0 is never present.
  [[nodiscard]] Value* find(Key key) {
    const std::size_t at = slot_of(key);
    return at == kAbsent ? nullptr : &slots_[at].value;
  }
  [[nodiscard]] const Value* find(Key key) const {
    const std::size_t at = slot_of(key);
    return at == kAbsent ? nullptr : &slots_[at].value;
  }
  [[nodiscard]] bool contains(Key key) const { return slot_of(key) != kAbsent; }

  /// Inserts `value` under `key` unless present; returns the entry and whether it was new.
  /// `key` must not be 0.
  std::pair<Value*, bool> insert(Key key, Value value) {
    if (2 * (size_ + 1) > slots_.size()) {
      grow();
    }
    std::size_t i = home(key);
    for (; slots_[i].key != 0; i = next(i)) {
      if (slots_[i].key == key) {
        return {&slots_[i].value, false};
      }
    }
    slots_[i] = Slot{key, std::move(value)};
    ++size_;
    return {&slots_[i].value, true};
  }

  /// Inserts or replaces the value under `key` (not 0).
  void assign(Key key, Value value) {
    auto [entry, inserted] = insert(key, value);
    if (!inserted) {
      *entry = std::move(value);
    }
  }

  /// Removes `key`; returns whether it was present.
  bool erase(Key key) {
    if (key == 0) {
      return false;
    }
    std::size_t hole = home(key);
    while (slots_[hole].key != key) {
      if (slots_[hole].key == 0) {
        return false;
      }
      hole = next(hole);
    }
    // Backward shift: move each later entry of the run into the hole if the hole lies on its
    // probe path (between its home and its slot, cyclically).
    for (std::size_t i = next(hole);; i = next(i)) {
      if (slots_[i].key == 0) {
        break;
      }
      const std::size_t want = home(slots_[i].key);
      if (((i - want) & mask()) >= ((i - hole) & mask())) {
        slots_[hole] = std::move(slots_[i]);
        hole = i;
      }
    }
    slots_[hole] = Slot{};
    --size_;
    return true;
  }

  void clear() {
    slots_.assign(kMinCapacity, Slot{});
    size_ = 0;
  }

  /// Calls `visit(key, value)` for every entry, in no particular order.
  template <typename Visit>
  void for_each(Visit&& visit) const {
    for (const Slot& slot : slots_) {
      if (slot.key != 0) {
        visit(slot.key, slot.value);
      }
    }
  }

 private:
  static constexpr std::size_t kMinCapacity = 16;
  static constexpr std::size_t kAbsent = ~std::size_t{0};

  struct Slot {
    Key key = 0;
    Value value{};
  };

  // The slot holding `key`, or kAbsent.
  [[nodiscard]] std::size_t slot_of(Key key) const {
    if (key == 0) {
      return kAbsent;
    }
    for (std::size_t i = home(key);; i = next(i)) {
      if (slots_[i].key == key) {
        return i;
      }
      if (slots_[i].key == 0) {
        return kAbsent;
      }
    }
  }

  [[nodiscard]] std::size_t mask() const { return slots_.size() - 1; }
  [[nodiscard]] std::size_t next(std::size_t i) const { return (i + 1) & mask(); }
  // Fibonacci hashing: addresses are aligned (low bits zero) and clustered, so the high bits
  // of the product spread them; the shift keeps as many bits as the capacity has.
  [[nodiscard]] std::size_t home(Key key) const {
    constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
    return static_cast<std::size_t>((static_cast<std::uint64_t>(key) * kGolden) >> 32U) & mask();
  }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    size_ = 0;
    for (Slot& slot : old) {
      if (slot.key != 0) {
        insert(slot.key, std::move(slot.value));
      }
    }
  }

  std::vector<Slot> slots_;
  std::size_t size_ = 0;
};

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_POINTER_TABLE_H_
