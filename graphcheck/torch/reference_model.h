// A small decoder whose linear layers carry a vLLM-style quantization method, in two variants:
// `legacy` keeps weight-derived tensors, a constant table and the RoPE cache as plain members
// (the bug as engines have it), `registered` follows the registration contract (contract.h).
#ifndef GRAPHCHECK_TORCH_REFERENCE_MODEL_H_
#define GRAPHCHECK_TORCH_REFERENCE_MODEL_H_

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace graphcheck::libtorch {

class Registry;
class WeightsArena;
class ReferenceInt8Method;

namespace detail {
struct DecoderLayer;
struct RotaryEmbedding;
}  // namespace detail

/// @brief Where the model keeps its persistent non-parameter tensors.
enum class ModelVariant : std::uint8_t {
  kLegacy,      ///< plain members: invisible to registries, sleep and reloads
  kRegistered,  ///< set_derived_buffer, register_constant_buffer, register_held_tensors
};

/// @brief "legacy" or "registered".
[[nodiscard]] std::string to_string(ModelVariant variant);

/// @brief Shape of the reference model. `hidden` must be a multiple of `head_dim`.
struct ReferenceConfig {
  std::int64_t hidden = 64;
  std::int64_t layers = 2;
  std::int64_t vocab = 256;
  std::int64_t head_dim = 16;
  std::int64_t intermediate = 0;  ///< 0: 2 * hidden
  std::int64_t max_positions = 64;
  ModelVariant variant = ModelVariant::kRegistered;
  /// Where the model runs. It is built and loaded on the CPU, then moved here before
  /// `register_held_tensors` (see `ReferenceModel::move_to`). A device other than the CPU
  /// needs `arena == nullptr` in `build_reference_model`: the weights arena is CPU memory.
  torch::Device device = torch::kCPU;
};

/// @brief Checkpoint-format tensors by parameter name ("layers.0.mlp.down_proj.weight").
using Checkpoint = std::vector<std::pair<std::string, at::Tensor>>;

/// @brief The decoder: embedding, per layer RMSNorm, attention with RoPE (fused QKV
/// projection), RMSNorm, gated MLP; final RMSNorm and an LM head. Every projection inside the
/// layers is an int8 linear whose quantization method (`ReferenceInt8Method`) is not a module:
/// at build the layer has a float `weight` parameter in checkpoint format;
/// `process_weights_after_loading` turns it into int8 weights with per-channel scales, stored
/// transposed (the kernel layout), multiplied by a constant ±1 table (a Hadamard-style sign
/// table shared by all layers of one input width). Each projection dequantizes into a shared
/// runtime workspace before its matmul.
///
/// Thread safety: like any module: not synchronized.
class ReferenceModel : public torch::nn::Module {
 public:
  /// @brief Builds the modules with uninitialized parameters (load a checkpoint next).
  /// @throws graphcheck::Error if the configuration is inconsistent.
  explicit ReferenceModel(const ReferenceConfig& config);
  ~ReferenceModel() override;

  /// @brief Logits `[tokens, vocab]` for `input_ids` and `positions` (both int64 `[tokens]`).
  at::Tensor forward(const at::Tensor& input_ids, const at::Tensor& positions);

  /// @brief Copies `checkpoint` into the existing parameters (`copy_`: addresses kept).
  /// @throws graphcheck::Error naming a missing or mis-shaped parameter.
  void load_weights_in_place(const Checkpoint& checkpoint);
  /// @brief Assigns fresh tensors (clones of `checkpoint`) to the parameters (`set_data`): the
  /// bug RL engines hit: a captured graph keeps reading the old storages.
  void load_weights_by_rebinding(const Checkpoint& checkpoint);
  /// @brief Runs every layer's quantization method. `legacy` derives once (engines call it
  /// once at load; later calls are no-ops, so derived members keep their addresses and their
  /// contents); `registered` refills its buffers in place through `set_derived_buffer`.
  void process_weights_after_loading();

  /// @brief Allocates the runtime workspace (call outside any `WeightsArena::LoadScope`:
  /// runtime state is not weights). `build_reference_model` does.
  void allocate_runtime_state();

  /// @brief Moves every tensor the model keeps (parameters, buffers, the plain members of the
  /// legacy variant, the RoPE cache, the workspace) to `device` in place (`set_data`: every
  /// handle to a tensor follows it). Call before `register_held_tensors`: its aliases have
  /// their own TensorImpls and would stay behind. `build_reference_model` does.
  void move_to(torch::Device device);

  /// @brief Declares the runtime workspace (allocated outside the weights arena) in
  /// `registry`.
  void declare_runtime_state(Registry& registry) const;

  [[nodiscard]] const ReferenceConfig& config() const { return config_; }

 private:
  ReferenceConfig config_;
  at::Tensor embed_;
  at::Tensor final_norm_;
  at::Tensor lm_head_;
  std::vector<std::shared_ptr<detail::DecoderLayer>> layers_;
  std::shared_ptr<detail::RotaryEmbedding> rotary_;
  std::vector<at::Tensor> sign_tables_;  // legacy: plain members (registered: also buffers)
  at::Tensor workspace_;
};

/// @brief A deterministic checkpoint for `model`'s parameters from `seed` (no files).
[[nodiscard]] Checkpoint make_checkpoint(const ReferenceModel& model, std::uint64_t seed);

/// @brief Builds the model as an engine loads it: construction, checkpoint load and
/// `process_weights_after_loading` inside a `WeightsArena::LoadScope` of `arena` (when not
/// null), then (registered) `register_held_tensors`. The runtime workspace is allocated
/// outside the arena.
[[nodiscard]] std::shared_ptr<ReferenceModel> build_reference_model(const ReferenceConfig& config,
                                                                    std::uint64_t seed,
                                                                    WeightsArena* arena);

}  // namespace graphcheck::libtorch

#endif  // GRAPHCHECK_TORCH_REFERENCE_MODEL_H_
