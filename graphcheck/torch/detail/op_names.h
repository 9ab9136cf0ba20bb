// The ATen capture window's op names and what each op's schema says of its returns
// (graphcheck/torch/aten_capture.cc).
#ifndef GRAPHCHECK_TORCH_DETAIL_OP_NAMES_H_
#define GRAPHCHECK_TORCH_DETAIL_OP_NAMES_H_

#include <ATen/record_function.h>
#include <graphcheck/detail/pointer_table.h>

#include <cstdint>
#include <string>
#include <vector>

namespace graphcheck::libtorch::detail {

/// @brief Bit r set: return r of `fn`'s op is a view of an argument the op does not write
/// (its schema's `Tensor(a)`: view, select, as_strided, transpose, ...). Such an output
/// touches no memory, so the window does not log it as a write (a read-only buffer read
/// "read-write" on the twin before). So is the `Tensor(a!)` return of an in-place view op
/// (torch's inplace_view tag: unsqueeze_, t_, as_strided_, ...), which changes only sizes and
/// strides, but not of set_ and the resize ops (they may move the bytes); another in-place
/// op's `Tensor(a!)` is a write. A view op that must copy (reshape, contiguous) does it in a
/// nested op, which logs its own output. 0 for a function without a dispatcher schema (a user
/// scope) and for returns past the 32nd. Never throws.
std::uint32_t view_returns_of(const at::RecordFunction& fn) noexcept;

/// @brief True when `fn`'s op touches no memory of its own, so that its node logs no operand
/// (a CUDA graph has no kernel for it): a view op (every return a view of an argument, no
/// argument written, or an in-place view op, which changes only sizes and strides), and an
/// op implemented only as a decomposition (a CompositeImplicitAutograd kernel and none for
/// CPU, CUDA or CompositeExplicitAutograd: `aten::linear`, `aten::matmul`), whose nested ops
/// do the reads and writes and log them. Counting both read one weight six times per GEMM on
/// the CPU twin (linear, t, transpose, as_strided, matmul, mm). Only for torch's `aten`
/// ops (a custom op's bare kernel is a CompositeImplicitAutograd one and may read data
/// itself); false for a function without a dispatcher schema and whenever torch cannot say.
/// Never throws.
bool touches_nothing_of(const at::RecordFunction& fn) noexcept;

/// @brief The op names one window saw, each stored once with its `view_returns_of` and
/// `touches_nothing_of`. Keyed by
/// the pointer RecordFunction hands out (a dispatcher op's schema name, stable while the op is
/// registered) and checked by content, since a string-named function's pointer may be reused
/// for another name. A dispatcher op's schema is read once per operator (name and overload)
/// in the process (a cache all windows share, emptied when an op is deregistered), not per op
/// or per window. Not thread-safe: the window's thread only (the shared cache is).
class OpNames {
 public:
  OpNames();
  /// @brief The index of `fn`'s name, added with its view returns when first seen.
  std::uint32_t intern(const at::RecordFunction& fn) {
    const char* name = fn.name();
    const auto key = reinterpret_cast<std::uintptr_t>(name);
    if (const std::uint32_t* index = by_pointer_.find(key);
        index != nullptr && names_[*index] == name) {
      return *index;
    }
    return add(fn, key);
  }
  /// @brief The name of index `index` (from `intern`); valid until this object is destroyed.
  [[nodiscard]] const std::string& operator[](std::uint32_t index) const { return names_[index]; }
  /// @brief `view_returns_of` the op of index `index`.
  [[nodiscard]] std::uint32_t view_returns(std::uint32_t index) const {
    return traits_[index].view_returns;
  }
  /// @brief `touches_nothing_of` the op of index `index`.
  [[nodiscard]] bool touches_nothing(std::uint32_t index) const {
    return traits_[index].touches_nothing;
  }

  /// @brief What the window needs of an op's schema, read once per operator.
  struct Traits {
    std::uint32_t view_returns = 0;
    bool touches_nothing = false;
  };

 private:
  std::uint32_t add(const at::RecordFunction& fn, std::uintptr_t key);

  graphcheck::detail::PointerTable<std::uint32_t> by_pointer_;
  std::vector<std::string> names_;
  std::vector<Traits> traits_;  // per name
};

}  // namespace graphcheck::libtorch::detail

#endif  // GRAPHCHECK_TORCH_DETAIL_OP_NAMES_H_
