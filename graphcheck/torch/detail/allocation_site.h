// Allocation sites for the weights arena: capture a call stack cheaply, name it later.
#ifndef GRAPHCHECK_TORCH_DETAIL_ALLOCATION_SITE_H_
#define GRAPHCHECK_TORCH_DETAIL_ALLOCATION_SITE_H_

#include <array>
#include <string>
#include <string_view>

namespace graphcheck::libtorch::detail {

/// @brief Raw return addresses of one call stack (innermost first), as `backtrace()` gives.
struct CallStack {
  static constexpr int kMaxFrames = 48;
  std::array<void*, kMaxFrames> frames{};
  int size = 0;
};

/// @brief Captures the current call stack. Thread safety: safe from any thread.
[[nodiscard]] CallStack capture_call_stack();

/// @brief The qualified function name of a demangled symbol: leading return type, argument
/// list and trailing qualifiers removed ("void ns::f<int>(int) const" -> "ns::f<int>").
[[nodiscard]] std::string function_name(std::string_view demangled);

/// @brief True for frames that are allocation machinery rather than the allocating site:
/// torch (`c10::`, `at::`, `torch::`, `caffe2::`), the standard library and graphcheck's own
/// arena internals. `name` is a `function_name()` result.
[[nodiscard]] bool is_internal_frame(std::string_view name);

/// @brief Names the allocation site of `stack`: the first frame outside torch's and the C++
/// runtime's libraries whose function is not internal. "<unknown allocation site>" if none
/// resolves. Symbolization results are cached per address. Thread safety: safe from any
/// thread (the cache is mutex-protected).
[[nodiscard]] std::string allocation_site(const CallStack& stack);

}  // namespace graphcheck::libtorch::detail

#endif  // GRAPHCHECK_TORCH_DETAIL_ALLOCATION_SITE_H_
