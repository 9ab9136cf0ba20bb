#include <graphcheck/torch/registry.h>

// torch is built with NDEBUG and RecordFunction (among others) changes its layout without it.
#ifndef NDEBUG
#error \
    "graphcheck's LibTorch adapter must be compiled with NDEBUG, as torch is: build with \
CMAKE_BUILD_TYPE=Release or RelWithDebInfo (cmake --preset release), or add -DNDEBUG."
#endif

#include <ATen/EmptyTensor.h>
#include <c10/core/Storage.h>
#include <c10/util/Exception.h>
#include <graphcheck/error.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/nn/module.h>

#include <exception>
#include <sstream>
#include <unordered_set>

namespace graphcheck::libtorch {
namespace {

std::string join_name(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

std::string describe(const at::Tensor& tensor) {
  std::ostringstream out;
  out << "device " << tensor.device() << ", layout " << tensor.layout();
  return out.str();
}

// Precedence of kinds in spans(): registered before declared (epoch.h order).
constexpr OwnerKind kKindOrder[] = {OwnerKind::kParameter, OwnerKind::kBuffer, OwnerKind::kRuntime,
                                    OwnerKind::kInput};

// The whole storage only (no view reach): what spans() needs, cheaper than storage_extent().
struct WholeStorage {
  Address begin = 0;
  std::uint64_t size = 0;
  const void* identity = nullptr;
};

std::optional<WholeStorage> whole_storage(const at::Tensor& tensor) {
  try {
    if (!tensor.defined() || tensor.is_meta() || tensor.layout() != at::kStrided ||
        !tensor.has_storage()) {
      return std::nullopt;
    }
    const c10::Storage& storage = tensor.storage();
    if (storage.nbytes() == 0) {
      return std::nullopt;
    }
    return WholeStorage{reinterpret_cast<Address>(storage.data_ptr().get()), storage.nbytes(),
                        storage.unsafeGetStorageImpl()};
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

}  // namespace

std::optional<StorageExtent> storage_extent(const at::Tensor& tensor) {
  try {
    if (!tensor.defined() || tensor.is_meta() || tensor.layout() != at::kStrided ||
        !tensor.has_storage()) {
      return std::nullopt;
    }
    const c10::Storage& storage = tensor.storage();
    // storage().data_ptr().get() returns void* in every torch version and never materializes
    // copy-on-write storage (TensorBase::data_ptr() does in 2.x).
    const auto begin = reinterpret_cast<Address>(storage.data_ptr().get());
    const auto itemsize = tensor.itemsize();
    const auto offset = static_cast<std::size_t>(tensor.storage_offset());
    StorageExtent extent;
    extent.storage_begin = begin;
    extent.storage_size = storage.nbytes();
    extent.view_begin = begin + offset * itemsize;
    // computeStorageNbytes is (offset + max reachable index + 1) * itemsize, or 0 when the view
    // is empty; it handles stride-0 expands and transposes where nbytes() does not.
    const std::size_t reach =
        at::detail::computeStorageNbytes(tensor.sizes(), tensor.strides(), itemsize, offset);
    extent.view_end = reach == 0 ? extent.view_begin : begin + reach;
    extent.identity = storage.unsafeGetStorageImpl();
    return extent;
  } catch (const std::exception&) {
    // Wrapper subclasses and tensors with inaccessible storage throw c10::Error here.
    return std::nullopt;
  }
}

void Registry::add_module(const torch::nn::Module& module, const std::string& prefix) {
  const std::size_t before = entries_.size();
  try {
    for (const auto& item : module.named_parameters(/*recurse=*/true)) {
      if (item.value().defined()) {
        add_checked(join_name(prefix, item.key()), item.value(), OwnerKind::kParameter, {});
      }
    }
    for (const auto& item : module.named_buffers(/*recurse=*/true)) {
      if (item.value().defined()) {
        add_checked(join_name(prefix, item.key()), item.value(), OwnerKind::kBuffer, {});
      }
    }
  } catch (const Error&) {
    entries_.resize(before);
    throw;
  } catch (const std::exception& error) {
    entries_.resize(before);
    throw Error("Registry::add_module: cannot enumerate the tensors of torch::nn::Module '" +
                module.name() + "': " + error.what() +
                "; pass its tensors with add_named() instead");
  }
}

void Registry::add_module(const torch::jit::Module& module, const std::string& prefix) {
  const std::size_t before = entries_.size();
  try {
    for (const auto& item : module.named_parameters(/*recurse=*/true)) {
      if (item.value.defined()) {
        add_checked(join_name(prefix, item.name), item.value, OwnerKind::kParameter, {});
      }
    }
    for (const auto& item : module.named_buffers(/*recurse=*/true)) {
      if (item.value.defined()) {
        add_checked(join_name(prefix, item.name), item.value, OwnerKind::kBuffer, {});
      }
    }
  } catch (const Error&) {
    entries_.resize(before);
    throw;
  } catch (const std::exception& error) {
    entries_.resize(before);
    throw Error(std::string("Registry::add_module: cannot enumerate the tensors of a ") +
                "torch::jit::Module: " + error.what() +
                "; pass its tensors with add_named() instead");
  }
}

void Registry::add_named(const std::vector<std::pair<std::string, at::Tensor>>& named,
                         OwnerKind kind) {
  if (!is_registered(kind)) {
    throw Error("Registry::add_named: kind must be parameter or buffer, found '" +
                std::string(to_string(kind)) +
                "'; use declare_runtime() or declare_input() for exempt tensors");
  }
  const std::size_t before = entries_.size();
  entries_.reserve(before + named.size());
  try {
    for (const auto& [name, tensor] : named) {
      if (tensor.defined()) {
        add_checked(name, tensor, kind, {});
      }
    }
  } catch (const Error&) {
    entries_.resize(before);  // all or nothing
    throw;
  }
}

void Registry::declare_runtime(std::string name, const at::Tensor& tensor, std::string reason) {
  declare(std::move(name), tensor, OwnerKind::kRuntime, std::move(reason));
}

void Registry::declare_input(std::string name, const at::Tensor& tensor, std::string reason) {
  declare(std::move(name), tensor, OwnerKind::kInput, std::move(reason));
}

void Registry::declare(std::string name, const at::Tensor& tensor, OwnerKind kind,
                       std::string reason) {
  const std::string what = kind == OwnerKind::kRuntime ? "declare_runtime" : "declare_input";
  if (!tensor.defined()) {
    throw Error("Registry::" + what + ": tensor '" + name +
                "' is undefined; declare it after it is allocated");
  }
  if (tensor.is_meta()) {
    throw Error("Registry::" + what + ": tensor '" + name +
                "' is on the meta device and has no memory; declare it after it is "
                "materialized on its real device");
  }
  if (reason.empty()) {
    throw Error("Registry::" + what + ": tensor '" + name +
                "' has an empty reason; say why it is exempt (e.g. \"KV cache\")");
  }
  add_checked(std::move(name), tensor, kind, std::move(reason));
}

void Registry::add_checked(std::string name, const at::Tensor& tensor, OwnerKind kind,
                           std::string reason) {
  if (!tensor.is_meta() && !(tensor.layout() == at::kStrided && tensor.has_storage())) {
    throw Error("Registry: cannot read the storage of " + std::string(to_string(kind)) + " '" +
                name + "' (" + describe(tensor) +
                "): graphcheck sees only strided tensors with storage; register its dense "
                "components instead");
  }
  // Meta tensors are kept: spans() skips them while they are on meta.
  entries_.push_back(Entry{std::move(name), kind, tensor, std::move(reason)});
}

std::vector<Span> Registry::spans() const { return spans({}); }

std::vector<Span> Registry::spans(const std::unordered_set<const void*>& taken) const {
  std::vector<Span> result;
  result.reserve(entries_.size());
  std::unordered_set<const void*> seen;
  seen.reserve(entries_.size());
  for (const OwnerKind kind : kKindOrder) {
    for (const Entry& entry : entries_) {
      if (entry.kind != kind) {
        continue;
      }
      const auto storage = whole_storage(entry.tensor);
      if (!storage || taken.contains(storage->identity) || !seen.insert(storage->identity).second) {
        continue;
      }
      result.push_back(Span{storage->begin, storage->size, kind, entry.name, entry.reason});
    }
  }
  return result;
}

std::optional<Span> Registry::span_of(const void* storage_identity) const {
  for (const OwnerKind kind : kKindOrder) {
    for (const Entry& entry : entries_) {
      if (entry.kind != kind) {
        continue;
      }
      const auto storage = whole_storage(entry.tensor);
      if (storage && storage->identity == storage_identity) {
        return Span{storage->begin, storage->size, kind, entry.name, entry.reason};
      }
    }
  }
  return std::nullopt;
}

bool Registry::covers(const void* storage_identity) const {
  for (const Entry& entry : entries_) {
    const auto storage = whole_storage(entry.tensor);
    if (storage && storage->identity == storage_identity) {
      return true;
    }
  }
  return false;
}

std::unordered_set<const void*> Registry::storage_identities() const {
  std::unordered_set<const void*> result;
  result.reserve(entries_.size());
  for (const Entry& entry : entries_) {
    if (const auto storage = whole_storage(entry.tensor)) {
      result.insert(storage->identity);
    }
  }
  return result;
}

}  // namespace graphcheck::libtorch
