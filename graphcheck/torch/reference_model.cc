#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/contract.h>
#include <graphcheck/torch/reference_model.h>
#include <graphcheck/torch/registry.h>
#include <graphcheck/torch/weights_arena.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <unordered_set>

// Allocation-site labels (weights_arena.h) name the function that allocated: the functions
// that allocate the planted tensors must keep their own frames.
#define GRAPHCHECK_ALLOCATION_SITE __attribute__((noinline))

namespace graphcheck::libtorch {

/// The vLLM-style quantization method of one linear layer: not a module, so whatever it keeps
/// as plain members is invisible to the registration contract.
class ReferenceInt8Method {
 public:
  ReferenceInt8Method(ModelVariant variant, at::Tensor sign_table)
      : variant_(variant), sign_table_(std::move(sign_table)) {}

  void create_weights(torch::nn::Module& layer, std::int64_t in, std::int64_t out) {
    weight_ = layer.register_parameter("weight", at::empty({out, in}), /*requires_grad=*/false);
    if (variant_ == ModelVariant::kRegistered) {
      sign_table_ = register_constant_buffer(layer, "sign_table", sign_table_);
    }
  }

  // int8 per-output-channel quantization of the sign-rotated weight, stored transposed
  // ([in, out], the layout the matmul reads) with its scales.
  GRAPHCHECK_ALLOCATION_SITE void process_weights_after_loading(torch::nn::Module& layer) {
    if (variant_ == ModelVariant::kLegacy && packed_.defined()) {
      return;  // legacy methods derive once, at load, as engines call them
    }
    const at::NoGradGuard no_grad;
    const at::Tensor rotated = weight_ * sign_table_;
    at::Tensor scale = rotated.abs().amax({1}).clamp_min(1e-8).div_(127.0);
    const at::Tensor packed =
        (rotated / scale.unsqueeze(1)).round_().clamp_(-127, 127).to(at::kChar).t().contiguous();
    if (variant_ == ModelVariant::kLegacy) {
      packed_ = packed;
      scale_ = scale;
      return;
    }
    set_derived_buffer(layer, "weight_packed", packed);
    set_derived_buffer(layer, "weight_scale", scale);
    // The buffers keep their TensorImpl across copies and rebinds: hold handles to them.
    const auto buffers = layer.named_buffers(/*recurse=*/false);
    packed_ = buffers["weight_packed"];
    scale_ = buffers["weight_scale"];
  }

  // Every tensor the method keeps (for ReferenceModel::move_to).
  [[nodiscard]] std::vector<at::Tensor> tensors() const {
    return {sign_table_, weight_, packed_, scale_};
  }

  // y = ((x * signs) @ dequant(packed)) * scale, dequantizing into the runtime workspace.
  [[nodiscard]] at::Tensor apply(const at::Tensor& x, const at::Tensor& workspace) const {
    const std::int64_t in = packed_.size(0);
    const std::int64_t out = packed_.size(1);
    at::Tensor dequant = workspace.narrow(0, 0, in * out).view({in, out});
    dequant.copy_(packed_);
    return at::mm(x * sign_table_, dequant).mul_(scale_);
  }

 private:
  ModelVariant variant_;
  at::Tensor sign_table_;
  at::Tensor weight_;
  at::Tensor packed_;
  at::Tensor scale_;
};

namespace detail {

// Legacy engines keep this cache in a module-global dict; here, one object shared by layers.
struct RotaryEmbedding : TensorHolder {
  at::Tensor cos_sin_cache;  // [max_positions, head_dim]: cos half, then sin half
  [[nodiscard]] std::vector<std::pair<std::string, at::Tensor>> persistent_tensors()
      const override {
    return {{"cos_sin_cache", cos_sin_cache}};
  }
};

}  // namespace detail

GRAPHCHECK_ALLOCATION_SITE at::Tensor compute_cos_sin_cache(std::int64_t max_positions,
                                                            std::int64_t head_dim) {
  const at::Tensor inv_freq =
      at::pow(10000.0, at::arange(0, head_dim, 2, at::kFloat) / static_cast<double>(head_dim))
          .reciprocal();
  const at::Tensor angles = at::outer(at::arange(max_positions, at::kFloat), inv_freq);
  return at::cat({angles.cos(), angles.sin()}, 1);
}

// A ±1 table (fixed pattern, independent of the weights): a constant every layer reads.
GRAPHCHECK_ALLOCATION_SITE at::Tensor make_sign_table(std::int64_t width) {
  at::Tensor index = at::arange(width, at::kLong);
  return at::where((index * 7 + 3).remainder(5) < 2, -1.0, 1.0).to(at::kFloat);
}

namespace detail {

struct RmsNorm : torch::nn::Module {
  explicit RmsNorm(std::int64_t width) {
    weight = register_parameter("weight", at::empty({width}), /*requires_grad=*/false);
  }
  [[nodiscard]] at::Tensor forward(const at::Tensor& x) const {
    return x * at::rsqrt(x.pow(2).mean({-1}, /*keepdim=*/true) + 1e-6) * weight;
  }
  at::Tensor weight;
};

struct QuantLinear : torch::nn::Module {
  QuantLinear(ModelVariant variant, std::int64_t in, std::int64_t out, at::Tensor sign_table)
      : method(std::make_shared<ReferenceInt8Method>(variant, std::move(sign_table))) {
    method->create_weights(*this, in, out);
  }
  std::shared_ptr<ReferenceInt8Method> method;
};

inline std::int64_t sign_index(std::int64_t width, const ReferenceConfig& config) {
  return width == config.hidden ? 0 : 1;
}

struct DecoderLayer : torch::nn::Module {
  DecoderLayer(const ReferenceConfig& layer_config, const std::vector<at::Tensor>& signs,
               const std::shared_ptr<RotaryEmbedding>& shared_rotary)
      : config(layer_config), rotary(shared_rotary) {
    const std::int64_t h = config.hidden;
    const std::int64_t inter = config.intermediate;
    const auto linear = [&](std::int64_t in, std::int64_t out) {
      return std::make_shared<QuantLinear>(config.variant, in, out,
                                           signs[static_cast<std::size_t>(sign_index(in, config))]);
    };
    input_norm = register_module("input_layernorm", std::make_shared<RmsNorm>(h));
    attn = register_module("self_attn", std::make_shared<torch::nn::Module>("Attention"));
    qkv = attn->register_module("qkv_proj", linear(h, 3 * h));
    o = attn->register_module("o_proj", linear(h, h));
    post_norm = register_module("post_attention_layernorm", std::make_shared<RmsNorm>(h));
    mlp = register_module("mlp", std::make_shared<torch::nn::Module>("MLP"));
    gate_up = mlp->register_module("gate_up_proj", linear(h, 2 * inter));
    down = mlp->register_module("down_proj", linear(inter, h));
    if (config.variant == ModelVariant::kRegistered) {
      attach_holder(*attn, "rotary_emb", rotary);
    }
  }

  [[nodiscard]] at::Tensor rope(const at::Tensor& x, const at::Tensor& cos,
                                const at::Tensor& sin) const {
    const std::int64_t half = config.head_dim / 2;
    const at::Tensor x1 = x.narrow(-1, 0, half);
    const at::Tensor x2 = x.narrow(-1, half, half);
    return at::cat({x1 * cos - x2 * sin, x2 * cos + x1 * sin}, -1);
  }

  at::Tensor forward(const at::Tensor& x, const at::Tensor& positions,
                     const at::Tensor& workspace) {
    const std::int64_t tokens = x.size(0);
    const std::int64_t heads = config.hidden / config.head_dim;
    const std::int64_t half = config.head_dim / 2;
    const at::Tensor qkv_out = qkv->method->apply(input_norm->forward(x), workspace);
    const auto parts = qkv_out.view({tokens, 3, heads, config.head_dim}).unbind(1);
    const at::Tensor cs = rotary->cos_sin_cache.index_select(0, positions).unsqueeze(1);
    const at::Tensor cos = cs.narrow(-1, 0, half);
    const at::Tensor sin = cs.narrow(-1, half, half);
    const at::Tensor q = rope(parts[0], cos, sin).transpose(0, 1);
    const at::Tensor k = rope(parts[1], cos, sin).transpose(0, 1);
    const at::Tensor v = parts[2].transpose(0, 1);
    const at::Tensor attended =
        at::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, /*is_causal=*/true)
            .transpose(0, 1)
            .reshape({tokens, config.hidden});
    const at::Tensor h = x + o->method->apply(attended, workspace);
    const auto gu = gate_up->method->apply(post_norm->forward(h), workspace).chunk(2, -1);
    return h + down->method->apply(at::silu(gu[0]) * gu[1], workspace);
  }

  void process_weights_after_loading() {
    for (const auto& layer : {qkv, o, gate_up, down}) {
      layer->method->process_weights_after_loading(*layer);
    }
  }

  ReferenceConfig config;
  std::shared_ptr<RotaryEmbedding> rotary;
  std::shared_ptr<RmsNorm> input_norm;
  std::shared_ptr<RmsNorm> post_norm;
  std::shared_ptr<torch::nn::Module> attn;
  std::shared_ptr<torch::nn::Module> mlp;
  std::shared_ptr<QuantLinear> qkv;
  std::shared_ptr<QuantLinear> o;
  std::shared_ptr<QuantLinear> gate_up;
  std::shared_ptr<QuantLinear> down;
};

}  // namespace detail

std::string to_string(ModelVariant variant) {
  return variant == ModelVariant::kLegacy ? "legacy" : "registered";
}

ReferenceModel::ReferenceModel(const ReferenceConfig& config)
    : torch::nn::Module("ReferenceModel"), config_(config) {
  if (config_.intermediate == 0) {
    config_.intermediate = 2 * config_.hidden;
  }
  if (config_.hidden <= 0 || config_.head_dim <= 0 || config_.head_dim % 2 != 0 ||
      config_.hidden % config_.head_dim != 0 || config_.layers <= 0 || config_.vocab <= 0 ||
      config_.max_positions <= 0) {
    throw Error(
        "ReferenceConfig: expected positive sizes with hidden a multiple of an even "
        "head_dim, found hidden " +
        std::to_string(config_.hidden) + ", head_dim " + std::to_string(config_.head_dim) +
        "; fix the configuration");
  }
  embed_ = register_module("embed_tokens", std::make_shared<torch::nn::Module>("Embedding"))
               ->register_parameter("weight", at::empty({config_.vocab, config_.hidden}), false);
  rotary_ = std::make_shared<detail::RotaryEmbedding>();
  rotary_->cos_sin_cache = compute_cos_sin_cache(config_.max_positions, config_.head_dim);
  sign_tables_ = {make_sign_table(config_.hidden), make_sign_table(config_.intermediate)};
  auto layers = register_module("layers", std::make_shared<torch::nn::Module>("Layers"));
  for (std::int64_t i = 0; i < config_.layers; ++i) {
    layers_.push_back(layers->register_module(
        std::to_string(i), std::make_shared<detail::DecoderLayer>(config_, sign_tables_, rotary_)));
  }
  final_norm_ = register_module("norm", std::make_shared<detail::RmsNorm>(config_.hidden))->weight;
  lm_head_ = register_module("lm_head", std::make_shared<torch::nn::Module>("LMHead"))
                 ->register_parameter("weight", at::empty({config_.vocab, config_.hidden}), false);
}

ReferenceModel::~ReferenceModel() = default;

at::Tensor ReferenceModel::forward(const at::Tensor& input_ids, const at::Tensor& positions) {
  const at::NoGradGuard no_grad;
  at::Tensor x = at::embedding(embed_, input_ids);
  for (const auto& layer : layers_) {
    x = layer->forward(x, positions, workspace_);
  }
  x = x * at::rsqrt(x.pow(2).mean({-1}, /*keepdim=*/true) + 1e-6) * final_norm_;
  return at::linear(x, lm_head_);
}

void ReferenceModel::load_weights_in_place(const Checkpoint& checkpoint) {
  const at::NoGradGuard no_grad;
  auto parameters = named_parameters(/*recurse=*/true);
  for (const auto& [name, tensor] : checkpoint) {
    at::Tensor* target = parameters.find(name);
    if (target == nullptr || target->sizes() != tensor.sizes()) {
      throw Error("ReferenceModel::load_weights: checkpoint tensor '" + name +
                  "' has no parameter of that name and shape; use make_checkpoint(model)");
    }
    target->copy_(tensor);
  }
}

void ReferenceModel::load_weights_by_rebinding(const Checkpoint& checkpoint) {
  const at::NoGradGuard no_grad;
  auto parameters = named_parameters(/*recurse=*/true);
  for (const auto& [name, tensor] : checkpoint) {
    at::Tensor* target = parameters.find(name);
    if (target == nullptr) {
      throw Error("ReferenceModel::load_weights_by_rebinding: checkpoint tensor '" + name +
                  "' has no parameter of that name; use make_checkpoint(model)");
    }
    // A fresh copy on the parameter's device (a clone on the CPU).
    target->set_data(tensor.to(target->options(), /*non_blocking=*/false, /*copy=*/true));
  }
}

void ReferenceModel::process_weights_after_loading() {
  for (const auto& layer : layers_) {
    layer->process_weights_after_loading();
  }
}

void ReferenceModel::allocate_runtime_state() {
  const std::int64_t h = config_.hidden;
  const std::int64_t largest = std::max({3 * h * h, 2 * config_.intermediate * h});
  workspace_ = at::empty({largest}, at::TensorOptions().dtype(at::kFloat).device(config_.device));
}

void ReferenceModel::move_to(torch::Device device) {
  const at::NoGradGuard no_grad;
  std::vector<at::Tensor> tensors = parameters(/*recurse=*/true);
  for (const at::Tensor& buffer : buffers(/*recurse=*/true)) {
    tensors.push_back(buffer);
  }
  tensors.insert(tensors.end(), sign_tables_.begin(), sign_tables_.end());
  tensors.push_back(rotary_->cos_sin_cache);
  tensors.push_back(workspace_);
  for (const auto& layer : layers_) {
    for (const auto& linear : {layer->qkv, layer->o, layer->gate_up, layer->down}) {
      const auto held = linear->method->tensors();
      tensors.insert(tensors.end(), held.begin(), held.end());
    }
  }
  // Handles share TensorImpls (a method's weight is its layer's parameter, the legacy sign
  // table is shared by layers): move each TensorImpl once, so they keep sharing one storage.
  std::unordered_set<const c10::TensorImpl*> moved;
  for (at::Tensor& tensor : tensors) {
    if (tensor.defined() && moved.insert(tensor.unsafeGetTensorImpl()).second) {
      tensor.set_data(tensor.to(device));
    }
  }
}

void ReferenceModel::declare_runtime_state(Registry& registry) const {
  registry.declare_runtime("workspace", workspace_,
                           "dequantization scratch, rewritten before every read");
}

Checkpoint make_checkpoint(const ReferenceModel& model, std::uint64_t seed) {
  auto generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  Checkpoint checkpoint;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    at::Tensor noise = at::randn(item.value().sizes(), generator, at::kFloat);
    const bool is_norm = name.find("norm") != std::string::npos;
    checkpoint.emplace_back(name, is_norm ? noise.mul_(0.1).add_(1.0) : noise.mul_(0.05));
  }
  return checkpoint;
}

std::shared_ptr<ReferenceModel> build_reference_model(const ReferenceConfig& config,
                                                      std::uint64_t seed, WeightsArena* arena) {
  if (!config.device.is_cpu() && arena != nullptr) {
    throw Error("build_reference_model: ReferenceConfig::device is " + config.device.str() +
                " but a WeightsArena was given; the arena holds CPU memory only: pass nullptr");
  }
  std::shared_ptr<ReferenceModel> model;
  {
    std::optional<WeightsArena::LoadScope> scope;
    if (arena != nullptr) {
      scope.emplace(*arena);
    }
    model = std::make_shared<ReferenceModel>(config);
    model->load_weights_in_place(make_checkpoint(*model, seed));
    model->process_weights_after_loading();
    if (!config.device.is_cpu()) {
      model->move_to(config.device);  // before register_held_tensors: its aliases would stay
    }
    if (config.variant == ModelVariant::kRegistered) {
      register_held_tensors(*model);
    }
  }
  model->allocate_runtime_state();
  return model;
}

}  // namespace graphcheck::libtorch
