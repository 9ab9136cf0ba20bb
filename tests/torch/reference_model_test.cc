// The reference model: both variants compute the same numbers; the registered variant
// registers what the legacy one keeps as plain members; reloads keep or move addresses.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/reference_model.h>
#include <graphcheck/torch/registry.h>
#include <graphcheck/torch/weights_arena.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

namespace graphcheck::libtorch {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

ReferenceConfig config_for(ModelVariant variant) {
  ReferenceConfig config;
  config.variant = variant;
  return config;
}

at::Tensor run(ReferenceModel& model) {
  const at::Tensor ids = at::arange(8, at::kLong).mul(13).remainder(model.config().vocab);
  return model.forward(ids, at::arange(8, at::kLong));
}

std::vector<std::string> buffer_names(const ReferenceModel& model) {
  std::vector<std::string> names;
  for (const auto& item : model.named_buffers(/*recurse=*/true)) {
    names.push_back(item.key());
  }
  return names;
}

std::map<std::string, const void*> addresses(const ReferenceModel& model) {
  std::map<std::string, const void*> out;
  for (const auto& item : model.named_parameters(/*recurse=*/true)) {
    out[item.key()] = item.value().storage().data_ptr().get();
  }
  for (const auto& item : model.named_buffers(/*recurse=*/true)) {
    out[item.key()] = item.value().storage().data_ptr().get();
  }
  return out;
}

TEST(ReferenceModel, BothVariantsComputeTheSameNumbersForTheSameWeights) {
  auto legacy = build_reference_model(config_for(ModelVariant::kLegacy), 7, nullptr);
  auto registered = build_reference_model(config_for(ModelVariant::kRegistered), 7, nullptr);
  const at::Tensor a = run(*legacy);
  const at::Tensor b = run(*registered);
  EXPECT_EQ(a.sizes(), (std::vector<std::int64_t>{8, 256}));
  EXPECT_TRUE(at::equal(a, b));
  EXPECT_TRUE(at::isfinite(a).all().item<bool>());
  auto other = build_reference_model(config_for(ModelVariant::kRegistered), 8, nullptr);
  EXPECT_FALSE(at::equal(a, run(*other)));  // the seed matters: the comparison is not vacuous
}

TEST(ReferenceModel, RegisteredVariantRegistersDerivedConstantAndHeldTensors) {
  auto registered = build_reference_model(config_for(ModelVariant::kRegistered), 1, nullptr);
  const auto names = buffer_names(*registered);
  EXPECT_THAT(names, Contains("layers.0.self_attn.qkv_proj.weight_packed"));
  EXPECT_THAT(names, Contains("layers.1.mlp.down_proj.weight_scale"));
  EXPECT_THAT(names, Contains("layers.0.mlp.gate_up_proj.sign_table"));
  EXPECT_THAT(names, Contains("layers.0.self_attn._held_rotary_emb_cos_sin_cache"));
  // One RoPE cache for all layers: registered once (deduplicated per storage view).
  EXPECT_THAT(names, Not(Contains("layers.1.self_attn._held_rotary_emb_cos_sin_cache")));
  auto legacy = build_reference_model(config_for(ModelVariant::kLegacy), 1, nullptr);
  EXPECT_TRUE(buffer_names(*legacy).empty());
}

TEST(ReferenceModel, InPlaceReloadKeepsEveryAddressAndTakesTheNewNumbers) {
  auto model = build_reference_model(config_for(ModelVariant::kRegistered), 3, nullptr);
  const at::Tensor before = run(*model);
  const auto where = addresses(*model);
  // Another checkpoint (seed 4): a reload that wrote nothing would keep seed 3's output.
  model->load_weights_in_place(make_checkpoint(*model, 4));
  model->process_weights_after_loading();
  EXPECT_EQ(addresses(*model), where);
  const at::Tensor after = run(*model);
  EXPECT_FALSE(at::equal(after, before));
  auto fresh = build_reference_model(config_for(ModelVariant::kRegistered), 4, nullptr);
  EXPECT_TRUE(at::equal(after, run(*fresh)));  // the derived buffers were refilled in place
}

TEST(ReferenceModel, RebindingReloadMovesParametersButKeepsDerivedBuffers) {
  auto model = build_reference_model(config_for(ModelVariant::kRegistered), 3, nullptr);
  const auto where = addresses(*model);
  model->load_weights_by_rebinding(make_checkpoint(*model, 3));
  model->process_weights_after_loading();
  const auto after = addresses(*model);
  EXPECT_NE(after.at("embed_tokens.weight"), where.at("embed_tokens.weight"));
  EXPECT_EQ(after.at("layers.0.self_attn.qkv_proj.weight_packed"),
            where.at("layers.0.self_attn.qkv_proj.weight_packed"));
}

TEST(ReferenceModel, RuntimeWorkspaceIsDeclared) {
  auto model = build_reference_model(config_for(ModelVariant::kLegacy), 1, nullptr);
  Registry registry;
  model->declare_runtime_state(registry);
  const auto spans = registry.spans();
  ASSERT_EQ(spans.size(), 1U);
  EXPECT_EQ(spans[0].kind, OwnerKind::kRuntime);
  EXPECT_EQ(spans[0].name, "workspace");
}

TEST(ReferenceModel, DeviceModelRefusesTheCpuWeightsArenaBeforeBuildingAnything) {
  ReferenceConfig config;
  config.device = torch::Device(torch::kCUDA, 0);  // never touched: the check comes first
  WeightsArena arena(std::size_t{1} << 20);
  EXPECT_THAT([&] { static_cast<void>(build_reference_model(config, 1, &arena)); },
              ::testing::ThrowsMessage<Error>(HasSubstr("arena holds CPU memory only")));
}

}  // namespace
}  // namespace graphcheck::libtorch
