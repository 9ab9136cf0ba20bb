// The registration contract for C++ modules: weight-derived tensors and constants become
// buffers of their owning module, and tensors kept by non-module objects (quantization
// methods, rotary caches) are listed by those objects and registered as `_held_*` buffers.
// Whatever the contract registers, sleep/wake and reloads restore (DESIGN.md, "The problem").
#ifndef GRAPHCHECK_TORCH_CONTRACT_H_
#define GRAPHCHECK_TORCH_CONTRACT_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace graphcheck::libtorch {

/// @brief What `set_derived_buffer` did.
enum class DerivedUpdate : std::uint8_t {
  kRegistered,     ///< first call: the tensor became a new buffer
  kCopiedInPlace,  ///< same shape, dtype and device: copied into the buffer, address kept
  kRebound,        ///< anything else: the buffer now uses the new tensor's storage (logged)
};

/// @brief One rebinding `set_derived_buffer` had to do: the captured address of the old
/// storage is no longer the buffer's, so a graph captured before reads stale memory.
struct RebindEvent {
  std::string module;  ///< `Module::name()` of the owning module (its type name)
  std::string buffer;  ///< the buffer name
  std::string before;  ///< "float[4, 8] cpu" of the old buffer
  std::string after;   ///< the same for the new tensor
};

/// @brief Registers `tensor` as buffer `name` of `module` on the first call; later calls with
/// a tensor of the same shape, dtype and device copy it into the existing buffer in place (the
/// address a captured graph uses stays valid); any other later call rebinds the buffer to
/// `tensor`'s storage (`set_data`) and appends a `RebindEvent` to the rebind log.
/// @return what was done.
/// @throws graphcheck::Error if `tensor` is undefined, `name` is empty or contains '.', `name`
/// is a parameter or submodule of `module`, or a rebinding changes the tensor type (CPU to
/// CUDA) which `set_data` cannot do.
/// Thread safety: mutates `module`; callers serialize access to it. The log is synchronized.
DerivedUpdate set_derived_buffer(torch::nn::Module& module, const std::string& name,
                                 const at::Tensor& tensor);

/// @brief Registers a constant (a table that does not derive from weights) as buffer `name`.
/// A repeated call with the same shape, dtype and device copies in place.
/// @return the registered buffer.
/// @throws graphcheck::Error as `set_derived_buffer`, and if a repeated call changes shape,
/// dtype or device (a constant does not change form).
at::Tensor register_constant_buffer(torch::nn::Module& module, const std::string& name,
                                    const at::Tensor& tensor);

/// @brief Every rebinding `set_derived_buffer` did in this process, oldest first.
/// Thread safety: synchronized.
[[nodiscard]] std::vector<RebindEvent> rebind_log();
/// @brief Empties the rebind log. Thread safety: synchronized.
void clear_rebind_log();

/// @brief A non-module object that keeps persistent tensors (a quantization method, a rotary
/// cache) lists them here so `register_held_tensors` can register them.
class TensorHolder {
 public:
  virtual ~TensorHolder() = default;
  /// @brief (name, tensor) of every tensor a captured graph may read. Names are unique per
  /// holder; '.' in a name becomes '_' in the buffer name. Meta tensors are allowed (not yet
  /// materialized).
  [[nodiscard]] virtual std::vector<std::pair<std::string, at::Tensor>> persistent_tensors()
      const = 0;

 protected:
  TensorHolder() = default;
  TensorHolder(const TensorHolder&) = default;
  TensorHolder& operator=(const TensorHolder&) = default;
};

/// @brief Attaches `holder` to `module` under `attr_name` (the attribute name the Python
/// contract would find by reflection). Attaching the same name again replaces the holder.
/// The holders live in a child module named `_graphcheck_holders` (no parameters or buffers),
/// so they share the module's lifetime and may be attached from its constructor.
/// @throws graphcheck::Error if `holder` is null or `attr_name` is empty or contains '.'.
void attach_holder(torch::nn::Module& module, const std::string& attr_name,
                   std::shared_ptr<TensorHolder> holder);

/// @brief The holders attached to `module` (not its submodules), in attach order.
[[nodiscard]] std::vector<std::pair<std::string, std::shared_ptr<TensorHolder>>> attached_holders(
    const torch::nn::Module& module);

/// @brief What `register_held_tensors` did, by full buffer path ("layers.0.attn._held_...").
struct HeldRegistration {
  std::vector<std::string> registered;  ///< buffers now holding a holder's tensor
  std::vector<std::string> duplicates;  ///< skipped: the same storage view is registered
  std::vector<std::string> kept_meta;   ///< holder tensor on meta: existing buffer kept
  std::vector<std::string> retired;     ///< earlier `_held_*` buffers no holder lists now
};

/// @brief For every module of `model` (itself included) with attached holders, registers each
/// listed tensor as buffer `_held_<attr>_<name>` of that module (an alias of the holder's
/// tensor: same storage view, its own TensorImpl).
///
/// Rules: views are deduplicated per storage view (storage, offset, shape, stride, dtype)
/// across the whole model, and a view equal to an already registered parameter or non-held
/// buffer is not registered again; a rerun replaces every `_held_*` buffer (rebinding it to the
/// holder's current tensor); a holder tensor still on meta keeps the existing buffer of that
/// name (and registers nothing when there is none); a `_held_*` buffer that no holder lists any
/// more is retired: C++ modules cannot drop a buffer, so it is rebound to an empty tensor,
/// which has no storage bytes and no span.
/// @throws graphcheck::Error if a `_held_*` name is already a parameter or submodule.
HeldRegistration register_held_tensors(torch::nn::Module& model);

}  // namespace graphcheck::libtorch

#endif  // GRAPHCHECK_TORCH_CONTRACT_H_
