#include "cupti/allocation_table.h"

#include <graphcheck/error.h>

#include <iterator>
#include <string>
#include <utility>

namespace graphcheck::cupti {

void AllocationTable::add(Address begin, std::uint64_t size, std::string_view pool,
                          std::string label) {
  // A free we missed (made before attach, or through an API we do not trace) must not leave
  // a phantom entry overlapping the new one: the driver says this range is new memory.
  erase_overlapping(begin, begin + size, EraseMode::kReplace);
  Entry entry;
  entry.size = size;
  entry.pool = std::string(pool);
  entry.generation = next_generation_++;
  entry.label = std::move(label);
  live_.insert_or_assign(begin, std::move(entry));
}

bool AllocationTable::remove(Address begin) {
  const auto it = live_.find(begin);
  if (it == live_.end() || it->second.is_mapping) {
    ++stats_.unknown_frees;
    return false;
  }
  live_.erase(it);
  return true;
}

void AllocationTable::reserve(Address begin, std::uint64_t size) {
  Reservation reservation;
  reservation.size = size;
  reservations_.insert_or_assign(begin, std::move(reservation));
}

void AllocationTable::free_reservation(Address begin, std::uint64_t size) {
  reservations_.erase(begin);
  // The VA range may be handed out again by a later reserve: its old history means nothing.
  history_.erase(history_.lower_bound(begin), history_.lower_bound(begin + size));
}

void AllocationTable::tag_reservation(Address address, std::string_view pool,
                                      RestorePolicy policy) {
  auto* reservation = find_reservation(address);
  if (reservation == nullptr) {
    throw Error("tag_reservation: no reserved VA range contains " + format_address(address) +
                "; call it after cuMemAddressReserve has returned the range");
  }
  reservation->pool = std::string(pool);
  reservation->policy = policy;
  // Mappings made before the tag belong to the same owner.
  const auto range_begin = std::prev(reservations_.upper_bound(address))->first;
  const auto range_end = range_begin + reservation->size;
  for (auto it = live_.lower_bound(range_begin); it != live_.end() && it->first < range_end; ++it) {
    if (it->second.is_mapping) {
      it->second.pool = reservation->pool;
    }
  }
}

void AllocationTable::create_handle(std::uint64_t handle, std::uint64_t size) {
  handles_.insert_or_assign(handle, size);
}

void AllocationTable::release_handle(std::uint64_t handle) { handles_.erase(handle); }

void AllocationTable::map(Address begin, std::uint64_t size, std::uint64_t /*handle*/,
                          std::string label) {
  erase_overlapping(begin, begin + size, EraseMode::kReplace);
  const auto* reservation = find_reservation(begin);
  if (reservation == nullptr) {
    ++stats_.untagged_maps;
  }
  const RestorePolicy policy = reservation != nullptr && reservation->policy.has_value()
                                   ? *reservation->policy
                                   : default_policy_;
  Entry entry;
  entry.size = size;
  entry.pool = reservation != nullptr ? reservation->pool : std::string("vmm");
  entry.label = std::move(label);
  entry.is_mapping = true;
  if (auto it = history_.find(begin); it != history_.end()) {
    entry.previous_generation = it->second.generation;
    entry.label = std::move(it->second.label);
    history_.erase(it);
  }
  entry.generation = policy == RestorePolicy::kRestore && entry.previous_generation.has_value()
                         ? *entry.previous_generation
                         : next_generation_++;
  live_.insert_or_assign(begin, std::move(entry));
}

void AllocationTable::unmap(Address begin, std::uint64_t size) {
  if (erase_overlapping(begin, begin + size, EraseMode::kUnmap) == 0) {
    ++stats_.unknown_unmaps;
  }
}

void AllocationTable::mark_restored(Address begin, std::uint64_t size) {
  std::size_t mappings = 0;
  const Address end = begin + size;
  auto it = live_.upper_bound(begin);
  if (it != live_.begin()) {
    --it;
  }
  for (; it != live_.end() && it->first < end; ++it) {
    Entry& entry = it->second;
    if (!entry.is_mapping || it->first + entry.size <= begin) {
      continue;
    }
    ++mappings;
    if (entry.previous_generation.has_value()) {
      entry.generation = *entry.previous_generation;
    }
  }
  if (mappings == 0) {
    throw Error("mark_restored(" + format_address(begin) + ", " + std::to_string(size) +
                "): no live VMM mapping overlaps this range; call it after the range is "
                "mapped again (cuMemMap) and its bytes are copied back");
  }
}

std::vector<Allocation> AllocationTable::allocations() const {
  std::vector<Allocation> result;
  result.reserve(live_.size());
  for (const auto& [begin, entry] : live_) {
    result.push_back(Allocation{begin, entry.size, entry.pool, entry.generation, entry.label});
  }
  return result;
}

std::optional<std::uint64_t> AllocationTable::handle_size(std::uint64_t handle) const {
  const auto it = handles_.find(handle);
  if (it == handles_.end()) {
    return std::nullopt;
  }
  return it->second;
}

void AllocationTable::clear() {
  live_.clear();
  reservations_.clear();
  history_.clear();
  handles_.clear();
  stats_ = {};
}

std::size_t AllocationTable::erase_overlapping(Address begin, Address end, EraseMode mode) {
  auto it = live_.upper_bound(begin);
  if (it != live_.begin()) {
    --it;
  }
  std::size_t erased = 0;
  std::vector<std::pair<Address, Entry>> remainders;
  while (it != live_.end() && it->first < end) {
    const Address entry_begin = it->first;
    const Address entry_end = entry_begin + it->second.size;
    if (entry_end <= begin) {
      ++it;
      continue;
    }
    ++erased;
    if (mode == EraseMode::kUnmap) {
      const Address cut = entry_begin < begin ? begin : entry_begin;
      history_.insert_or_assign(cut, History{it->second.generation, it->second.label});
      if (entry_begin < begin) {
        Entry left = it->second;
        left.size = begin - entry_begin;
        remainders.emplace_back(entry_begin, std::move(left));
      }
      if (entry_end > end) {
        Entry right = it->second;
        right.size = entry_end - end;
        remainders.emplace_back(end, std::move(right));
      }
    }
    it = live_.erase(it);
  }
  for (auto& [address, entry] : remainders) {
    live_.insert_or_assign(address, std::move(entry));
  }
  return erased;
}

const AllocationTable::Reservation* AllocationTable::find_reservation(Address address) const {
  auto it = reservations_.upper_bound(address);
  if (it == reservations_.begin()) {
    return nullptr;
  }
  --it;
  return address - it->first < it->second.size ? &it->second : nullptr;
}

AllocationTable::Reservation* AllocationTable::find_reservation(Address address) {
  return const_cast<Reservation*>(std::as_const(*this).find_reservation(address));
}

}  // namespace graphcheck::cupti
