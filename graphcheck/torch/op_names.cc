#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>
#include <graphcheck/torch/detail/op_names.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <vector>

namespace graphcheck::libtorch::detail {

std::uint32_t view_returns_of(const at::RecordFunction& fn) noexcept {
  std::uint32_t mask = 0;
  try {
    const std::optional<c10::FunctionSchema> schema = fn.operator_schema();
    if (!schema) {
      return 0;
    }
    const std::vector<c10::Argument>& returns = schema->returns();
    for (std::size_t r = 0; r < returns.size() && r < 32; ++r) {
      const c10::AliasInfo* alias = returns[r].alias_info();
      if (alias != nullptr && !alias->isWrite()) {
        mask |= std::uint32_t{1} << r;
      }
    }
  } catch (const std::exception&) {
    return 0;  // no schema torch can give: the outputs are logged as writes
  }
  return mask;
}

std::uint32_t OpNames::add(const at::RecordFunction& fn, std::uintptr_t key) {
  names_.emplace_back(fn.name());
  view_returns_.push_back(view_returns_of(fn));
  const auto index = static_cast<std::uint32_t>(names_.size() - 1);
  by_pointer_.assign(key, index);
  return index;
}

}  // namespace graphcheck::libtorch::detail
