#include <ATen/core/grad_mode.h>
#include <c10/util/Exception.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/contract.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>

#include <mutex>
#include <set>
#include <sstream>
#include <tuple>

namespace graphcheck::libtorch {
namespace {

constexpr const char* kHolderChild = "_graphcheck_holders";
constexpr const char* kHeldPrefix = "_held_";

// The holders of one module live in a child module so that they share its lifetime (a side
// table keyed by Module* would outlive a destroyed module and could match a new one at the
// same address). It has no parameters or buffers, so registries and state dicts ignore it.
class HolderSetImpl : public torch::nn::Cloneable<HolderSetImpl> {
 public:
  void reset() override {}
  std::vector<std::pair<std::string, std::shared_ptr<TensorHolder>>> holders;
};

std::mutex& log_mutex() {
  static std::mutex mutex;
  return mutex;
}
std::vector<RebindEvent>& log_events() {
  static std::vector<RebindEvent> events;
  return events;
}

std::string describe(const at::Tensor& tensor) {
  std::ostringstream out;
  out << tensor.dtype().name() << tensor.sizes() << ' ' << tensor.device();
  return out.str();
}

void check_name(const std::string& name, const char* what) {
  if (name.empty() || name.find('.') != std::string::npos) {
    throw Error(std::string(what) + ": expected a non-empty name without '.', found '" + name +
                "'; use a plain attribute name such as 'weight_packed'");
  }
}

// The module's own buffer `name` (sharing its TensorImpl), or an undefined tensor. Throws if
// the name is taken by a parameter or a submodule: those are not the contract's to replace.
at::Tensor own_buffer(const torch::nn::Module& module, const std::string& name) {
  if (module.named_parameters(/*recurse=*/false).contains(name) ||
      module.named_children().contains(name)) {
    throw Error("buffer '" + name + "' of module " + module.name() +
                ": the name is already a parameter or submodule; choose another buffer name");
  }
  const auto buffers = module.named_buffers(/*recurse=*/false);
  const at::Tensor* found = buffers.find(name);
  return found == nullptr ? at::Tensor() : *found;
}

bool same_form(const at::Tensor& a, const at::Tensor& b) {
  return !a.is_meta() && a.sizes() == b.sizes() && a.scalar_type() == b.scalar_type() &&
         a.device() == b.device();
}

void rebind(at::Tensor& existing, const at::Tensor& tensor, const torch::nn::Module& module,
            const std::string& name) {
  try {
    existing.set_data(tensor);
  } catch (const c10::Error&) {
    throw Error("buffer '" + name + "' of module " + module.name() + ": cannot rebind " +
                describe(existing) + " to " + describe(tensor) +
                " (set_data keeps the tensor type); move the module with .to() first");
  }
}

std::shared_ptr<HolderSetImpl> holder_set(const torch::nn::Module& module) {
  const auto children = module.named_children();
  const auto* child = children.find(kHolderChild);
  return child == nullptr ? nullptr : std::dynamic_pointer_cast<HolderSetImpl>(*child);
}

// A storage view: two tensors with equal keys read exactly the same bytes the same way.
using ViewKey = std::tuple<const void*, std::int64_t, std::vector<std::int64_t>,
                           std::vector<std::int64_t>, c10::ScalarType>;
ViewKey view_key(const at::Tensor& tensor) {
  return {tensor.storage().unsafeGetStorageImpl(), tensor.storage_offset(), tensor.sizes().vec(),
          tensor.strides().vec(), tensor.scalar_type()};
}
bool has_view(const at::Tensor& tensor) {
  return tensor.defined() && !tensor.is_meta() && tensor.has_storage();
}
bool is_held_name(const std::string& path) {
  const auto dot = path.rfind('.');
  return path.compare(dot == std::string::npos ? 0 : dot + 1, 6, kHeldPrefix) == 0;
}
std::string join(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}
std::string held_name(const std::string& attr, const std::string& name) {
  std::string out = kHeldPrefix + attr + "_" + name;
  for (char& c : out) {
    if (c == '.') {
      c = '_';
    }
  }
  return out;
}

void register_module_held(torch::nn::Module& module, const std::string& path,
                          std::set<ViewKey>& seen, HeldRegistration& result) {
  const auto set = holder_set(module);
  std::set<std::string> listed;
  if (set) {
    for (const auto& [attr, holder] : set->holders) {
      for (const auto& [name, tensor] : holder->persistent_tensors()) {
        const std::string buffer = held_name(attr, name);
        const std::string full = join(path, buffer);
        at::Tensor existing = own_buffer(module, buffer);
        if (!tensor.defined()) {
          continue;
        }
        listed.insert(buffer);
        if (tensor.is_meta()) {
          if (existing.defined()) {
            result.kept_meta.push_back(full);
          }
          continue;
        }
        if (has_view(tensor) && !seen.insert(view_key(tensor)).second) {
          listed.erase(buffer);  // an earlier buffer covers it; retire a stale one of ours
          result.duplicates.push_back(full);
          continue;
        }
        if (existing.defined()) {
          rebind(existing, tensor, module, buffer);
        } else {
          module.register_buffer(buffer, tensor.detach());
        }
        result.registered.push_back(full);
      }
    }
  }
  for (auto& item : module.named_buffers(/*recurse=*/false)) {
    if (is_held_name(item.key()) && listed.count(item.key()) == 0 && item.value().numel() > 0) {
      item.value().set_data(at::empty({0}, item.value().options()));
      result.retired.push_back(join(path, item.key()));
    }
  }
}

}  // namespace

DerivedUpdate set_derived_buffer(torch::nn::Module& module, const std::string& name,
                                 const at::Tensor& tensor) {
  check_name(name, "set_derived_buffer");
  if (!tensor.defined()) {
    throw Error("set_derived_buffer: buffer '" + name +
                "': expected a defined tensor, found an undefined one");
  }
  at::Tensor existing = own_buffer(module, name);
  if (!existing.defined()) {
    module.register_buffer(name, tensor.detach());
    return DerivedUpdate::kRegistered;
  }
  const at::NoGradGuard no_grad;
  if (same_form(existing, tensor)) {
    if (!existing.is_same(tensor)) {
      existing.copy_(tensor);
    }
    return DerivedUpdate::kCopiedInPlace;
  }
  RebindEvent event{module.name(), name, describe(existing), describe(tensor)};
  rebind(existing, tensor.detach(), module, name);
  const std::lock_guard lock(log_mutex());
  log_events().push_back(std::move(event));
  return DerivedUpdate::kRebound;
}

at::Tensor register_constant_buffer(torch::nn::Module& module, const std::string& name,
                                    const at::Tensor& tensor) {
  check_name(name, "register_constant_buffer");
  if (!tensor.defined()) {
    throw Error("register_constant_buffer: buffer '" + name +
                "': expected a defined tensor, found an undefined one");
  }
  at::Tensor existing = own_buffer(module, name);
  if (!existing.defined()) {
    return module.register_buffer(name, tensor.detach());
  }
  if (!same_form(existing, tensor)) {
    throw Error("register_constant_buffer: buffer '" + name + "' of module " + module.name() +
                ": expected " + describe(existing) + " as registered before, found " +
                describe(tensor) + "; a constant keeps its form: use set_derived_buffer");
  }
  const at::NoGradGuard no_grad;
  if (!existing.is_same(tensor)) {
    existing.copy_(tensor);
  }
  return existing;
}

std::vector<RebindEvent> rebind_log() {
  const std::lock_guard lock(log_mutex());
  return log_events();
}

void clear_rebind_log() {
  const std::lock_guard lock(log_mutex());
  log_events().clear();
}

void attach_holder(torch::nn::Module& module, const std::string& attr_name,
                   std::shared_ptr<TensorHolder> holder) {
  check_name(attr_name, "attach_holder");
  if (!holder) {
    throw Error("attach_holder: holder '" + attr_name +
                "': expected a TensorHolder, found a null pointer");
  }
  auto set = holder_set(module);
  if (!set) {
    set = module.register_module(kHolderChild, std::make_shared<HolderSetImpl>());
  }
  for (auto& [attr, existing] : set->holders) {
    if (attr == attr_name) {
      existing = std::move(holder);
      return;
    }
  }
  set->holders.emplace_back(attr_name, std::move(holder));
}

std::vector<std::pair<std::string, std::shared_ptr<TensorHolder>>> attached_holders(
    const torch::nn::Module& module) {
  const auto set = holder_set(module);
  return set ? set->holders : decltype(set->holders){};
}

HeldRegistration register_held_tensors(torch::nn::Module& model) {
  std::set<ViewKey> seen;
  // Registered parameters and ordinary buffers already restore their storage views.
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    if (has_view(item.value())) {
      seen.insert(view_key(item.value()));
    }
  }
  for (const auto& item : model.named_buffers(/*recurse=*/true)) {
    if (!is_held_name(item.key()) && has_view(item.value())) {
      seen.insert(view_key(item.value()));
    }
  }
  HeldRegistration result;
  // The root separately: named_modules(include_self) needs the root to be in a shared_ptr.
  register_module_held(model, "", seen, result);
  for (const auto& item : model.named_modules("", /*include_self=*/false)) {
    if (std::dynamic_pointer_cast<HolderSetImpl>(item.value()) == nullptr) {
      register_module_held(*item.value(), item.key(), seen, result);
    }
  }
  return result;
}

}  // namespace graphcheck::libtorch
