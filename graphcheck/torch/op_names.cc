#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/enum_tag.h>
#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>
#include <graphcheck/torch/detail/op_names.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

namespace graphcheck::libtorch::detail {
namespace {

// An in-place view op (unsqueeze_, t_, transpose_, as_strided_, ...) changes only its tensor's
// sizes and strides: its `Tensor(a!)` return writes no memory either. Torch tags them
// inplace_view; set_ and the resize ops carry the tag too, but they may give the tensor other
// bytes, and the window notes a moved storage from their output: those stay writes.
bool changes_only_metadata(const at::RecordFunction& fn) {
  const std::optional<c10::OperatorName> name = fn.operator_name();
  if (!name || name->name == "aten::set_" || name->name.find("resize") != std::string::npos) {
    return false;
  }
  const std::optional<c10::OperatorHandle> op = c10::Dispatcher::singleton().findOp(*name);
  return op.has_value() && op->hasTag(at::Tag::inplace_view);
}

}  // namespace

std::uint32_t view_returns_of(const at::RecordFunction& fn) noexcept {
  std::uint32_t mask = 0;
  try {
    const std::optional<c10::FunctionSchema> schema = fn.operator_schema();
    if (!schema) {
      return 0;
    }
    const bool metadata_only = changes_only_metadata(fn);
    const std::vector<c10::Argument>& returns = schema->returns();
    for (std::size_t r = 0; r < returns.size() && r < 32; ++r) {
      const c10::AliasInfo* alias = returns[r].alias_info();
      if (alias != nullptr && (metadata_only || !alias->isWrite())) {
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
