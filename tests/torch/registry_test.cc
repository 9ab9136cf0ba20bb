#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/registry.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <string>
#include <vector>

#include "common/thrown_message.h"

namespace graphcheck::libtorch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Address address_of(const at::Tensor& tensor) {
  return reinterpret_cast<Address>(tensor.storage().data_ptr().get());
}

std::vector<std::string> names(const std::vector<Span>& spans) {
  std::vector<std::string> result;
  result.reserve(spans.size());
  for (const Span& span : spans) {
    result.push_back(span.name);
  }
  return result;
}

using test_support::thrown_message;

struct Block : torch::nn::Module {
  Block() {
    fc = register_module("fc", torch::nn::Linear(4, 3));
    scale = register_buffer("scale", at::ones({3}));
  }
  torch::nn::Linear fc{nullptr};
  at::Tensor scale;
};

TEST(StorageExtentTest, ExpandedViewReachesOnlyItsStorageNotNbytes) {
  const at::Tensor bias = at::zeros({8});
  const at::Tensor expanded = bias.expand({3, 8});
  ASSERT_EQ(expanded.nbytes(), 96U);  // why nbytes() is wrong for views
  const auto extent = storage_extent(expanded);
  ASSERT_TRUE(extent.has_value());
  EXPECT_EQ(extent->storage_begin, address_of(bias));
  EXPECT_EQ(extent->storage_size, 32U);
  EXPECT_EQ(extent->view_begin, address_of(bias));
  EXPECT_EQ(extent->view_end - extent->view_begin, 32U);
  EXPECT_EQ(extent->identity, bias.storage().unsafeGetStorageImpl());
}

TEST(StorageExtentTest, OffsetAndStridedViewsGiveTheirReachInsideTheWholeStorage) {
  const at::Tensor base = at::zeros({4, 6});  // 96 bytes
  const at::Tensor row = base.select(0, 2);   // offset 12 floats, 6 floats
  const auto row_extent = storage_extent(row);
  ASSERT_TRUE(row_extent.has_value());
  EXPECT_EQ(row_extent->storage_size, 96U);
  EXPECT_EQ(row_extent->view_begin - row_extent->storage_begin, 48U);
  EXPECT_EQ(row_extent->view_end - row_extent->storage_begin, 72U);

  const at::Tensor column = base.select(1, 1);  // offset 1, stride 6, 4 elements
  const auto column_extent = storage_extent(column);
  ASSERT_TRUE(column_extent.has_value());
  EXPECT_EQ(column_extent->view_begin - column_extent->storage_begin, 4U);
  EXPECT_EQ(column_extent->view_end - column_extent->storage_begin, (1U + 3U * 6U + 1U) * 4U);

  const auto transposed = storage_extent(base.t());
  ASSERT_TRUE(transposed.has_value());
  EXPECT_EQ(transposed->view_end - transposed->view_begin, 96U);
  EXPECT_EQ(transposed->identity, column_extent->identity);
}

TEST(StorageExtentTest, EmptyViewHasNoReach) {
  const at::Tensor base = at::zeros({8});
  const auto extent = storage_extent(base.narrow(0, 3, 0));
  ASSERT_TRUE(extent.has_value());
  EXPECT_EQ(extent->view_begin, extent->view_end);
}

TEST(StorageExtentTest, UndefinedMetaAndSparseTensorsHaveNoExtent) {
  EXPECT_FALSE(storage_extent(at::Tensor()).has_value());
  EXPECT_FALSE(storage_extent(at::empty({4}, at::TensorOptions().device(at::kMeta))).has_value());
  EXPECT_FALSE(storage_extent(at::eye(3).to_sparse()).has_value());
}

TEST(RegistryTest, NnModuleParametersThenBuffersNamedByModulePath) {
  Block block;
  Registry registry;
  registry.add_module(block);
  const auto spans = registry.spans();
  EXPECT_THAT(names(spans), ElementsAre("fc.weight", "fc.bias", "scale"));
  ASSERT_EQ(spans.size(), 3U);
  EXPECT_EQ(spans[0].kind, OwnerKind::kParameter);
  EXPECT_EQ(spans[0].begin, address_of(block.fc->weight));
  EXPECT_EQ(spans[0].size, 12U * 4U);
  EXPECT_EQ(spans[2].kind, OwnerKind::kBuffer);
  EXPECT_EQ(spans[2].begin, address_of(block.scale));
}

TEST(RegistryTest, PrefixIsJoinedWithADot) {
  Block block;
  Registry registry;
  registry.add_module(block, "layers.0");
  EXPECT_THAT(names(registry.spans()),
              ElementsAre("layers.0.fc.weight", "layers.0.fc.bias", "layers.0.scale"));
}

TEST(RegistryTest, TiedTensorsGiveOneSpanNamedByTheFirstRegistration) {
  struct Holder : torch::nn::Module {
    explicit Holder(const at::Tensor& weight) {
      register_parameter("weight", weight);
      register_parameter("bias", at::zeros({4}));
    }
  };
  struct Tied : torch::nn::Module {
    Tied() {
      const at::Tensor shared = at::ones({4, 4});
      register_module("embed", std::make_shared<Holder>(shared));
      register_module("head", std::make_shared<Holder>(shared));
    }
  } tied;
  Registry registry;
  registry.add_module(tied);
  EXPECT_THAT(names(registry.spans()), ElementsAre("embed.weight", "embed.bias", "head.bias"));
  EXPECT_EQ(registry.entry_count(), 4U);
}

TEST(RegistryTest, ViewsOfOneStorageShareTheWholeStorageSpan) {
  const at::Tensor base = at::zeros({4, 8});
  Registry registry;
  registry.add_named({{"packed.q", base.narrow(0, 0, 2)},
                      {"packed.k", base.narrow(0, 2, 2)},
                      {"packed.bias_expanded", base.select(0, 3).expand({5, 8})}},
                     OwnerKind::kBuffer);
  const auto spans = registry.spans();
  ASSERT_EQ(spans.size(), 1U);
  EXPECT_EQ(spans[0].name, "packed.q");
  EXPECT_EQ(spans[0].begin, address_of(base));
  EXPECT_EQ(spans[0].size, 128U);
}

TEST(RegistryTest, JitModuleParametersAndBuffersIncludingSubmodules) {
  torch::jit::Module inner("Inner");
  inner.register_parameter("weight", at::ones({2, 2}), /*is_buffer=*/false);
  torch::jit::Module outer("Outer");
  outer.register_buffer("table", at::arange(8));
  outer.register_module("inner", inner);
  Registry registry;
  registry.add_module(outer, "model");
  const auto spans = registry.spans();
  EXPECT_THAT(names(spans), ElementsAre("model.inner.weight", "model.table"));
  ASSERT_EQ(spans.size(), 2U);
  EXPECT_EQ(spans[0].kind, OwnerKind::kParameter);
  EXPECT_EQ(spans[1].kind, OwnerKind::kBuffer);
  EXPECT_EQ(spans[1].size, 8U * 8U);
}

TEST(RegistryTest, MetaTensorsAreSkipped) {
  const at::Tensor meta = at::empty({4}, at::TensorOptions().device(at::kMeta));
  const at::Tensor real = at::ones({4});
  Registry registry;
  registry.add_named({{"on_meta", meta}, {"real", real}}, OwnerKind::kParameter);
  const auto spans = registry.spans();
  EXPECT_THAT(names(spans), ElementsAre("real"));
  EXPECT_FALSE(registry.covers(meta.storage().unsafeGetStorageImpl()));
  EXPECT_EQ(registry.entry_count(), 2U);
}

TEST(RegistryTest, SpansFollowSetDataRebinding) {
  at::Tensor weight = at::ones({4});
  Registry registry;
  registry.add_named({{"w", weight}}, OwnerKind::kParameter);
  const at::Tensor fresh = at::zeros({16});
  weight.set_data(fresh);
  const auto spans = registry.spans();
  ASSERT_EQ(spans.size(), 1U);
  EXPECT_EQ(spans[0].begin, address_of(fresh));
  EXPECT_EQ(spans[0].size, 64U);
}

TEST(RegistryTest, RuntimeAndInputDeclarationsCarryTheirReasonsAfterRegisteredKinds) {
  const at::Tensor cache = at::zeros({16});
  const at::Tensor tokens = at::zeros({2}, at::kLong);
  const at::Tensor weight = at::ones({4});
  Registry registry;
  registry.declare_runtime("kv_cache.0", cache, "KV cache");
  registry.declare_input("input_ids", tokens, "static graph input");
  registry.add_named({{"w", weight}}, OwnerKind::kParameter);
  registry.declare_runtime("w_alias", weight, "also declared");
  const auto spans = registry.spans();
  ASSERT_EQ(spans.size(), 3U);
  EXPECT_EQ(spans[0].name, "w");
  EXPECT_EQ(spans[0].kind, OwnerKind::kParameter);
  EXPECT_EQ(spans[1], (Span{address_of(cache), 64, OwnerKind::kRuntime, "kv_cache.0", "KV cache"}));
  EXPECT_EQ(spans[2],
            (Span{address_of(tokens), 16, OwnerKind::kInput, "input_ids", "static graph input"}));
}

TEST(RegistryTest, SpansAfterAnotherRegistryAreThoseOfOneRegistryHoldingBoth) {
  const at::Tensor weight = at::ones({4});
  const at::Tensor scale = at::ones({2});
  const at::Tensor cache = at::zeros({16});
  const at::Tensor tokens = at::zeros({2}, at::kLong);
  Registry model;
  model.add_named({{"w", weight}}, OwnerKind::kParameter);
  model.add_named({{"scale", scale}}, OwnerKind::kBuffer);
  Registry declared;
  declared.declare_runtime("kv_cache.0", cache, "KV cache");
  declared.declare_runtime("w_alias", weight.view({2, 2}), "also declared");
  declared.declare_input("input_ids", tokens, "static graph input");
  declared.declare_input("cache_again", cache, "static graph input");
  Registry both;
  both.add_named({{"w", weight}}, OwnerKind::kParameter);
  both.add_named({{"scale", scale}}, OwnerKind::kBuffer);
  both.declare_runtime("kv_cache.0", cache, "KV cache");
  both.declare_runtime("w_alias", weight.view({2, 2}), "also declared");
  both.declare_input("input_ids", tokens, "static graph input");
  both.declare_input("cache_again", cache, "static graph input");

  std::vector<Span> spans = model.spans();
  const std::vector<Span> more = declared.spans(model.storage_identities());
  spans.insert(spans.end(), more.begin(), more.end());
  EXPECT_EQ(spans, both.spans());
  ASSERT_EQ(more.size(), 2U);  // the weight's alias is the model's, the cache declared once
  EXPECT_EQ(more[0].name, "kv_cache.0");
  EXPECT_EQ(more[1].name, "input_ids");
  EXPECT_EQ(declared.spans({}), declared.spans());
}

TEST(RegistryTest, CoversSpanOfAndIdentitiesAnswerByStorage) {
  const at::Tensor weight = at::ones({4, 4});
  const at::Tensor other = at::ones({4});
  Registry registry;
  registry.add_named({{"w", weight}}, OwnerKind::kBuffer);
  const void* identity = weight.t().storage().unsafeGetStorageImpl();
  EXPECT_TRUE(registry.covers(identity));
  EXPECT_FALSE(registry.covers(other.storage().unsafeGetStorageImpl()));
  const auto span = registry.span_of(identity);
  ASSERT_TRUE(span.has_value());
  EXPECT_EQ(span->name, "w");
  EXPECT_EQ(span->kind, OwnerKind::kBuffer);
  EXPECT_FALSE(registry.span_of(other.storage().unsafeGetStorageImpl()).has_value());
  EXPECT_EQ(registry.storage_identities().count(identity), 1U);
  EXPECT_EQ(registry.storage_identities().size(), 1U);
}

TEST(RegistryTest, DeclaringAMetaUndefinedOrUnexplainedTensorIsAnError) {
  Registry registry;
  const at::Tensor meta = at::empty({4}, at::TensorOptions().device(at::kMeta));
  EXPECT_THAT(thrown_message([&] { registry.declare_runtime("scratch", meta, "scratch"); }),
              HasSubstr("declare_runtime: tensor 'scratch' is on the meta device"));
  EXPECT_THAT(thrown_message([&] { registry.declare_input("x", at::Tensor(), "input"); }),
              HasSubstr("declare_input: tensor 'x' is undefined"));
  EXPECT_THAT(thrown_message([&] { registry.declare_runtime("ws", at::zeros({2}), ""); }),
              HasSubstr("'ws' has an empty reason"));
  EXPECT_EQ(registry.entry_count(), 0U);
}

TEST(RegistryTest, AddNamedRejectsExemptKindsAndSparseTensors) {
  Registry registry;
  EXPECT_THAT(thrown_message([&] {
                registry.add_named({{"a", at::zeros({2})}}, OwnerKind::kRuntime);
              }),
              HasSubstr("kind must be parameter or buffer, found 'runtime'"));
  EXPECT_THAT(thrown_message([&] {
                registry.add_named({{"dense", at::zeros({2})}, {"sparse", at::eye(3).to_sparse()}},
                                   OwnerKind::kBuffer);
              }),
              HasSubstr("cannot read the storage of buffer 'sparse'"));
  EXPECT_EQ(registry.entry_count(), 0U);  // all or nothing
}

TEST(RegistryTest, UndefinedTensorsAndZeroByteStoragesGiveNoSpan) {
  struct NoBias : torch::nn::Module {
    NoBias() {
      fc = register_module("fc", torch::nn::Linear(torch::nn::LinearOptions(2, 2).bias(false)));
    }
    torch::nn::Linear fc{nullptr};
  } module;
  Registry registry;
  registry.add_module(module);
  registry.add_named({{"empty", at::zeros({0})}}, OwnerKind::kBuffer);
  EXPECT_THAT(names(registry.spans()), ElementsAre("fc.weight"));
}

}  // namespace
}  // namespace graphcheck::libtorch
