// The registry: which storages the registration contract knows (parameters and buffers by
// module path), plus declared runtime state and static inputs, as graphcheck spans.
#ifndef GRAPHCHECK_TORCH_REGISTRY_H_
#define GRAPHCHECK_TORCH_REGISTRY_H_

#include <ATen/core/Tensor.h>
#include <graphcheck/address.h>
#include <graphcheck/epoch.h>

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

// Forward declarations keep this header light: callers that pass a module include its header.
namespace torch::nn {
class Module;
}  // namespace torch::nn
namespace torch::jit {
struct Module;
}  // namespace torch::jit

/// LibTorch adapter. Deliberately not `graphcheck::torch`: that would shadow `::torch` inside
/// `graphcheck`.
namespace graphcheck::libtorch {

/// @brief Where a tensor's bytes live: its whole storage and the part its view can reach.
struct StorageExtent {
  Address storage_begin = 0;       ///< first byte of the storage (`storage().data_ptr().get()`)
  std::uint64_t storage_size = 0;  ///< bytes of the whole storage (`storage().nbytes()`)
  Address view_begin = 0;          ///< first byte the view can reach (storage offset applied)
  Address view_end = 0;            ///< one past the last byte the view can reach (exclusive)
  const void* identity = nullptr;  ///< the `c10::StorageImpl*`: views of one storage share it

  [[nodiscard]] Address storage_end() const { return storage_begin + storage_size; }
};

/// @brief The storage extent of `tensor`, or `std::nullopt` for undefined, meta, non-strided
/// (sparse, mkldnn, nested) or storage-less tensors, and for wrapper subclasses whose storage
/// cannot be read. The view extent comes from sizes, strides and offset
/// (`at::detail::computeStorageNbytes`), never from `nbytes()`, so expanded (stride 0) and
/// transposed views get the bytes they really reach; an empty view has `view_begin ==
/// view_end`. Never materializes copy-on-write storage.
/// Thread safety: reads `tensor` only; safe concurrently with other readers.
[[nodiscard]] std::optional<StorageExtent> storage_extent(const at::Tensor& tensor);

/// @brief Registered and declared tensors of a model, turned into spans on request.
///
/// The registry holds a reference to each tensor it is given (so the storages it names stay
/// alive while it lives) and reads the storage of each tensor when `spans()` (or `covers()`,
/// `span_of()`, `storage_identities()`) is called, not when it is added: an in-place
/// `set_data()` is seen, but a module that re-registers a parameter with a new tensor needs a
/// new registry (or `clear()` and add again).
///
/// Spans cover whole storages and are deduplicated by storage identity: tied tensors and views
/// of one storage give one span. Order and precedence: parameters, then buffers, then runtime
/// declarations, then inputs; within a kind, registration order. The first name in that order
/// wins (a storage registered as parameter `a.weight` and tied as `b.weight` is `a.weight`; one
/// both registered and declared as runtime is registered). Meta tensors, undefined tensors and
/// zero-byte storages give no span.
///
/// Every add and declare is all or nothing: on error the registry is unchanged.
///
/// Thread safety: not synchronized. Build on one thread; const members may then be called
/// concurrently as long as no thread mutates the registry or resizes the tensors' storages.
class Registry {
 public:
  Registry() = default;

  /// @brief Registers every parameter (`kParameter`) and buffer (`kBuffer`) of `module` and its
  /// submodules, named by module path ("layers.0.mlp.weight"), prefixed with `prefix + "."`
  /// when `prefix` is not empty. Undefined tensors (a Linear without bias) are skipped.
  /// @throws graphcheck::Error if the module's tensors cannot be enumerated, or a registered
  /// tensor is non-strided (sparse, mkldnn): graphcheck cannot see its bytes.
  void add_module(const torch::nn::Module& module, const std::string& prefix = {});

  /// @brief As above, for a TorchScript module (`named_parameters()`, `named_buffers()`).
  void add_module(const torch::jit::Module& module, const std::string& prefix = {});

  /// @brief Registers named tensors of one kind (`kParameter` or `kBuffer`; for the Python
  /// bindings: `list(m.named_parameters())`). Undefined tensors are skipped.
  /// @throws graphcheck::Error if `kind` is not parameter or buffer, or a tensor is
  /// non-strided.
  void add_named(const std::vector<std::pair<std::string, at::Tensor>>& named, OwnerKind kind);

  /// @brief Declares runtime state (KV cache, scratch, workspace) exempt from the contract.
  /// @throws graphcheck::Error if `tensor` is undefined, on meta or non-strided, or `reason`
  /// is empty (every exemption says why).
  void declare_runtime(std::string name, const at::Tensor& tensor, std::string reason);

  /// @brief Declares a static input or output of the graph. Same errors as `declare_runtime`.
  void declare_input(std::string name, const at::Tensor& tensor, std::string reason);

  /// @brief One span per storage (whole storage), in the order and with the precedence
  /// described on the class.
  [[nodiscard]] std::vector<Span> spans() const;

  /// @brief As `spans()`, without the storages whose identities are in `taken`: the spans a
  /// second registry adds after one whose `storage_identities()` are `taken` (a model's
  /// registry computed once, then each epoch's declarations), in the precedence of one registry
  /// holding both, the first's entries first.
  [[nodiscard]] std::vector<Span> spans(const std::unordered_set<const void*>& taken) const;

  /// @brief True if a registered or declared tensor currently uses the storage whose
  /// `StorageImpl*` is `storage_identity` (as in `StorageExtent::identity`). O(number of
  /// entries); use `storage_identities()` for many queries.
  [[nodiscard]] bool covers(const void* storage_identity) const;

  /// @brief The span `spans()` gives for that storage, or `std::nullopt` if none does.
  [[nodiscard]] std::optional<Span> span_of(const void* storage_identity) const;

  /// @brief The identities of every storage that has a span, for repeated `covers` queries.
  [[nodiscard]] std::unordered_set<const void*> storage_identities() const;

  /// @brief Number of tensors added or declared (before deduplication and skipping).
  [[nodiscard]] std::size_t entry_count() const { return entries_.size(); }

  /// @brief Forgets every tensor (and drops the references the registry held).
  void clear() { entries_.clear(); }

 private:
  struct Entry {
    std::string name;
    OwnerKind kind;
    at::Tensor tensor;
    std::string reason;
  };
  void add_checked(std::string name, const at::Tensor& tensor, OwnerKind kind, std::string reason);
  void declare(std::string name, const at::Tensor& tensor, OwnerKind kind, std::string reason);

  std::vector<Entry> entries_;
};

}  // namespace graphcheck::libtorch

#endif  // GRAPHCHECK_TORCH_REGISTRY_H_
