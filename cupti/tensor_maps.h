// TMA descriptors (CUtensorMap) seen being encoded, so that a kernel argument holding one can
// be attributed to the global address it was encoded for.
#ifndef GRAPHCHECK_CUPTI_TENSOR_MAPS_H_
#define GRAPHCHECK_CUPTI_TENSOR_MAPS_H_

#include <graphcheck/address.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

namespace graphcheck::cupti {

/// @brief A fixed-size, direct-mapped table from the 128 bytes of an encoded `CUtensorMap`
/// to the `globalAddress` it was encoded with (cuTensorMapEncodeTiled/Im2col/Im2colWide) or
/// re-pointed to (cuTensorMapReplaceAddress).
///
/// Why bytes: the encoded format is opaque (the address is not stored as a plain word), and
/// the descriptor reaches the kernel by value (a `__grid_constant__` argument or a field of
/// a parameter struct), so the bytes are the only key both sides share. The table holds at
/// most `kSlots` descriptors; a newer descriptor whose hash lands on the same slot evicts
/// the older one (eager code may encode one per launch; memory stays bounded, and a
/// recording never allocates after the first).
/// Thread safety: none; the owner (GraphCapture) serializes access.
class TensorMapTable {
 public:
  static constexpr std::size_t kDescriptorSize = 128;  // sizeof(CUtensorMap)
  static constexpr std::size_t kSlots = 16384;

  /// @brief Remembers that the descriptor `bytes` (kDescriptorSize bytes) points at `global`.
  void record(const void* bytes, Address global);
  /// @brief The global address of the descriptor `bytes` (kDescriptorSize bytes), if known.
  [[nodiscard]] std::optional<Address> find(const void* bytes) const;
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  /// @brief Descriptors currently held.
  [[nodiscard]] std::size_t size() const noexcept { return count_; }

 private:
  struct Slot {
    std::uint64_t hash = 0;
    Address global = 0;
    bool used = false;
    unsigned char bytes[kDescriptorSize] = {};
  };
  std::unique_ptr<Slot[]> slots_;  // allocated on the first record
  std::size_t count_ = 0;
};

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_TENSOR_MAPS_H_
