#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/enum_tag.h>
#include <ATen/core/function_schema.h>
#include <ATen/record_function.h>
#include <graphcheck/torch/detail/op_names.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
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

bool touches_nothing_of(const at::RecordFunction& fn) noexcept {
  try {
    const std::optional<c10::FunctionSchema> schema = fn.operator_schema();
    // torch's own ops only: a custom op defined with a bare function (`m.def(schema, fn)`)
    // has only a CompositeImplicitAutograd kernel and may read its tensors' data itself, and
    // its schema's aliases are its author's word, not torch's.
    if (!schema || schema->name().rfind("aten::", 0) != 0) {
      return false;
    }
    const std::optional<c10::OperatorHandle> op =
        c10::Dispatcher::singleton().findOp(schema->operator_name());
    if (!op) {
      return false;
    }
    if (op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
        !op->hasKernelForAnyDispatchKey(
            c10::DispatchKeySet({c10::DispatchKey::CPU, c10::DispatchKey::CUDA,
                                 c10::DispatchKey::CompositeExplicitAutograd,
                                 c10::DispatchKey::CompositeExplicitAutogradNonFunctional}))) {
      return true;  // a decomposition: its nested ops log what they touch
    }
    const std::vector<c10::Argument>& returns = schema->returns();
    if (returns.empty()) {
      return false;
    }
    if (changes_only_metadata(fn)) {
      return true;
    }
    for (const c10::Argument& argument : schema->arguments()) {
      const c10::AliasInfo* alias = argument.alias_info();
      if (alias != nullptr && alias->isWrite()) {
        return false;
      }
    }
    return std::all_of(returns.begin(), returns.end(), [](const c10::Argument& ret) {
      const c10::AliasInfo* alias = ret.alias_info();
      return alias != nullptr && !alias->isWrite();
    });
  } catch (const std::exception&) {
    return false;  // logged as any op
  }
}

namespace {

// view_returns_of and touches_nothing_of per operator (name and overload: `fn.name()` has no
// overload, and two overloads may return otherwise), process-wide: each capture opens a window of
// its own, which otherwise read every op's schema again (a copy of its arguments and a
// Dispatcher::findOp per name: 9% of a window's cost in a profile of back-to-back captures of
// the reference model). A function without a schema (a string-named scope) is not kept: its
// mask is 0, and its names are not bounded. Emptied whenever an op is deregistered, since
// one registered again under its name (a torch.library op defined anew) may have other
// returns; a mask read while that happened is not kept either (the generation moved).
class ViewReturnsCache {
 public:
  static ViewReturnsCache& instance() {
    // Never destroyed: a window may finish on a thread that outlives static destruction.
    static auto* const cache = new ViewReturnsCache;  // NOLINT(cppcoreguidelines-owning-memory)
    return *cache;
  }
  OpNames::Traits traits(const at::RecordFunction& fn) {
    const std::optional<c10::OperatorName> op = fn.operator_name();
    if (!op) {
      return {};  // as view_returns_of and touches_nothing_of: no schema
    }
    std::string key = op->overload_name.empty() ? op->name : op->name + "." + op->overload_name;
    std::uint64_t generation = 0;
    {
      const std::scoped_lock lock(mutex_);
      if (const auto found = by_op_.find(key); found != by_op_.end()) {
        return found->second;
      }
      generation = generation_;
    }
    // Outside the lock (it reads the dispatcher, whose listener below takes the lock).
    const OpNames::Traits traits{view_returns_of(fn), touches_nothing_of(fn)};
    const std::scoped_lock lock(mutex_);
    if (generation == generation_) {
      by_op_.emplace(std::move(key), traits);
    }
    return traits;
  }

 private:
  class Listener final : public c10::OpRegistrationListener {
   public:
    explicit Listener(ViewReturnsCache& cache) : cache_(cache) {}
    void onOperatorRegistered(const c10::OperatorHandle& /*op*/) override {}
    void onOperatorDeregistered(const c10::OperatorHandle& /*op*/) override {
      const std::scoped_lock lock(cache_.mutex_);
      cache_.by_op_.clear();
      ++cache_.generation_;
    }

   private:
    ViewReturnsCache& cache_;
  };

  ViewReturnsCache()
      : registration_(c10::Dispatcher::singleton().addRegistrationListener(
            std::make_unique<Listener>(*this))) {}

  std::mutex mutex_;
  std::unordered_map<std::string, OpNames::Traits> by_op_;  // by "name" or "name.overload"
  std::uint64_t generation_ = 0;                            // deregistrations seen
  c10::RegistrationHandleRAII registration_;
};

}  // namespace

OpNames::OpNames() {
  (void)ViewReturnsCache::instance();  // listening before the window's first op
}

std::uint32_t OpNames::add(const at::RecordFunction& fn, std::uintptr_t key) {
  names_.emplace_back(fn.name());
  traits_.push_back(ViewReturnsCache::instance().traits(fn));
  const auto index = static_cast<std::uint32_t>(names_.size() - 1);
  by_pointer_.assign(key, index);
  return index;
}

}  // namespace graphcheck::libtorch::detail
