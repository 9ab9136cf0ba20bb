// The TMA descriptor table.
#include "cupti/tensor_maps.h"

#include <cstring>

namespace graphcheck::cupti {
namespace {

std::uint64_t fnv1a(const void* bytes) {
  const auto* p = static_cast<const unsigned char*>(bytes);
  std::uint64_t hash = 14695981039346656037ULL;
  for (std::size_t i = 0; i < TensorMapTable::kDescriptorSize; ++i) {
    hash = (hash ^ p[i]) * 1099511628211ULL;
  }
  return hash;
}

}  // namespace

void TensorMapTable::record(const void* bytes, Address global) {
  if (!slots_) {
    slots_ = std::make_unique<Slot[]>(kSlots);
  }
  const std::uint64_t hash = fnv1a(bytes);
  Slot& slot = slots_[hash % kSlots];
  if (!slot.used) {
    ++count_;
  }
  slot.used = true;
  slot.hash = hash;
  slot.global = global;
  std::memcpy(slot.bytes, bytes, kDescriptorSize);
}

std::optional<Address> TensorMapTable::find(const void* bytes) const {
  if (count_ == 0) {
    return std::nullopt;
  }
  const std::uint64_t hash = fnv1a(bytes);
  const Slot& slot = slots_[hash % kSlots];
  if (slot.used && slot.hash == hash && std::memcmp(slot.bytes, bytes, kDescriptorSize) == 0) {
    return slot.global;
  }
  return std::nullopt;
}

}  // namespace graphcheck::cupti
