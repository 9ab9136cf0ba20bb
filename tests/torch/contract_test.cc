// The registration contract for C++ modules: one test per rule.
#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/contract.h>
#include <gtest/gtest.h>
#include <torch/nn/module.h>

#include <memory>
#include <string>

namespace graphcheck::libtorch {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct Toy : torch::nn::Module {
  Toy() : torch::nn::Module("Toy") {}
};

struct Parent : torch::nn::Module {
  Parent() : torch::nn::Module("Parent") {
    a = register_module("a", std::make_shared<Toy>());
    b = register_module("b", std::make_shared<Toy>());
  }
  std::shared_ptr<Toy> a;
  std::shared_ptr<Toy> b;
};

// A quantization-method-like object: not a module, keeps tensors of its own.
class Holder : public TensorHolder {
 public:
  std::vector<std::pair<std::string, at::Tensor>> persistent_tensors() const override {
    return tensors;
  }
  std::vector<std::pair<std::string, at::Tensor>> tensors;
};

const void* address_of(const at::Tensor& t) { return t.storage().data_ptr().get(); }

at::Tensor buffer(const torch::nn::Module& m, const std::string& name) {
  const auto buffers = m.named_buffers(/*recurse=*/true);
  const at::Tensor* found = buffers.find(name);
  return found == nullptr ? at::Tensor() : *found;
}

TEST(SetDerivedBuffer, FirstCallRegistersABuffer) {
  Toy m;
  const at::Tensor t = at::arange(6, at::kFloat);
  EXPECT_EQ(set_derived_buffer(m, "packed", t), DerivedUpdate::kRegistered);
  ASSERT_TRUE(buffer(m, "packed").defined());
  EXPECT_EQ(address_of(buffer(m, "packed")), address_of(t));
}

TEST(SetDerivedBuffer, SameShapeDtypeDeviceCopiesInPlaceKeepingTheAddress) {
  Toy m;
  set_derived_buffer(m, "packed", at::zeros({2, 3}));
  const void* before = address_of(buffer(m, "packed"));
  clear_rebind_log();
  EXPECT_EQ(set_derived_buffer(m, "packed", at::ones({2, 3})), DerivedUpdate::kCopiedInPlace);
  EXPECT_EQ(address_of(buffer(m, "packed")), before);
  EXPECT_TRUE(at::equal(buffer(m, "packed"), at::ones({2, 3})));
  EXPECT_THAT(rebind_log(), IsEmpty());
}

TEST(SetDerivedBuffer, OtherShapeOrDtypeRebindsAndIsLogged) {
  Toy m;
  set_derived_buffer(m, "packed", at::zeros({2, 3}));
  const at::Tensor held = buffer(m, "packed");
  clear_rebind_log();
  const at::Tensor bigger = at::ones({4, 3});
  EXPECT_EQ(set_derived_buffer(m, "packed", bigger), DerivedUpdate::kRebound);
  EXPECT_EQ(address_of(buffer(m, "packed")), address_of(bigger));
  EXPECT_EQ(held.sizes(), bigger.sizes());  // same TensorImpl: registries see the rebinding
  EXPECT_EQ(set_derived_buffer(m, "packed", at::ones({4, 3}, at::kInt)), DerivedUpdate::kRebound);
  const auto log = rebind_log();
  ASSERT_EQ(log.size(), 2U);
  EXPECT_EQ(log[0].module, "Toy");
  EXPECT_EQ(log[0].buffer, "packed");
  EXPECT_EQ(log[0].before, "float[2, 3] cpu");
  EXPECT_EQ(log[0].after, "float[4, 3] cpu");
  EXPECT_EQ(log[1].after, "int[4, 3] cpu");
}

TEST(SetDerivedBuffer, RejectsBadNamesAndParameterNames) {
  Toy m;
  m.register_parameter("weight", at::ones({2}));
  EXPECT_THAT([&] { set_derived_buffer(m, "a.b", at::ones({1})); },
              ::testing::ThrowsMessage<Error>(HasSubstr("without '.', found 'a.b'")));
  EXPECT_THAT([&] { set_derived_buffer(m, "weight", at::ones({1})); },
              ::testing::ThrowsMessage<Error>(HasSubstr("already a parameter or submodule")));
  EXPECT_THAT([&] { set_derived_buffer(m, "x", at::Tensor()); },
              ::testing::ThrowsMessage<Error>(HasSubstr("expected a defined tensor")));
}

TEST(RegisterConstantBuffer, RegistersThenCopiesInPlaceAndRefusesAChangeOfForm) {
  Toy m;
  const at::Tensor first = register_constant_buffer(m, "table", at::zeros({4}));
  const void* before = address_of(first);
  register_constant_buffer(m, "table", at::ones({4}));
  EXPECT_EQ(address_of(buffer(m, "table")), before);
  EXPECT_TRUE(at::equal(buffer(m, "table"), at::ones({4})));
  EXPECT_THAT([&] { register_constant_buffer(m, "table", at::ones({5})); },
              ::testing::ThrowsMessage<Error>(HasSubstr("a constant keeps its form")));
}

TEST(AttachHolder, ReplacesByAttributeNameAndRejectsNull) {
  auto m = std::make_shared<Toy>();
  auto h1 = std::make_shared<Holder>();
  auto h2 = std::make_shared<Holder>();
  attach_holder(*m, "quant_method", h1);
  attach_holder(*m, "rotary", h2);
  attach_holder(*m, "quant_method", h2);
  const auto holders = attached_holders(*m);
  ASSERT_EQ(holders.size(), 2U);
  EXPECT_EQ(holders[0].first, "quant_method");
  EXPECT_EQ(holders[0].second, h2);
  EXPECT_THAT([&] { attach_holder(*m, "x", nullptr); },
              ::testing::ThrowsMessage<Error>(HasSubstr("found a null pointer")));
}

TEST(RegisterHeldTensors, RegistersHeldBuffersNamedByAttributeAndName) {
  auto model = std::make_shared<Parent>();
  auto holder = std::make_shared<Holder>();
  holder->tensors = {{"w.packed", at::ones({3})}};
  attach_holder(*model->a, "quant_method", holder);
  const auto result = register_held_tensors(*model);
  EXPECT_THAT(result.registered, ElementsAre("a._held_quant_method_w_packed"));
  const at::Tensor b = buffer(*model, "a._held_quant_method_w_packed");
  ASSERT_TRUE(b.defined());
  EXPECT_EQ(address_of(b), address_of(holder->tensors[0].second));
  EXPECT_FALSE(b.is_same(holder->tensors[0].second));  // an alias, not the holder's tensor
}

TEST(RegisterHeldTensors, DeduplicatesPerStorageViewAcrossTheModel) {
  auto model = std::make_shared<Parent>();
  const at::Tensor cache = at::arange(12, at::kFloat).reshape({3, 4});
  auto shared = std::make_shared<Holder>();
  shared->tensors = {{"cache", cache},
                     {"same_view", cache.view({3, 4})},
                     {"row", cache[1]},
                     {"as_int", cache.view(at::kInt)}};
  attach_holder(*model->a, "rope", shared);
  attach_holder(*model->b, "rope", shared);
  const auto result = register_held_tensors(*model);
  // Same storage, offset, shape, stride and dtype once; other views of the storage are kept.
  EXPECT_THAT(result.registered,
              ElementsAre("a._held_rope_cache", "a._held_rope_row", "a._held_rope_as_int"));
  EXPECT_THAT(result.duplicates,
              ElementsAre("a._held_rope_same_view", "b._held_rope_cache", "b._held_rope_same_view",
                          "b._held_rope_row", "b._held_rope_as_int"));
}

TEST(RegisterHeldTensors, SkipsViewsEqualToRegisteredParameters) {
  auto model = std::make_shared<Parent>();
  const at::Tensor weight = model->a->register_parameter("weight", at::ones({2, 2}));
  auto holder = std::make_shared<Holder>();
  holder->tensors = {{"weight", weight}};
  attach_holder(*model->b, "qm", holder);
  const auto result = register_held_tensors(*model);
  EXPECT_THAT(result.registered, IsEmpty());
  EXPECT_THAT(result.duplicates, ElementsAre("b._held_qm_weight"));
}

TEST(RegisterHeldTensors, RerunReplacesEveryHeldBufferAndRetiresUnlistedOnes) {
  auto model = std::make_shared<Parent>();
  auto holder = std::make_shared<Holder>();
  holder->tensors = {{"x", at::ones({2})}, {"y", at::ones({3})}};
  attach_holder(*model->a, "qm", holder);
  register_held_tensors(*model);
  const at::Tensor fresh = at::zeros({5});
  holder->tensors = {{"x", fresh}};
  const auto result = register_held_tensors(*model);
  EXPECT_THAT(result.registered, ElementsAre("a._held_qm_x"));
  EXPECT_THAT(result.retired, ElementsAre("a._held_qm_y"));
  EXPECT_EQ(address_of(buffer(*model, "a._held_qm_x")), address_of(fresh));
  EXPECT_EQ(buffer(*model, "a._held_qm_y").numel(), 0);
}

TEST(RegisterHeldTensors, KeepsTheExistingBufferWhileTheHolderTensorIsOnMeta) {
  auto model = std::make_shared<Parent>();
  auto holder = std::make_shared<Holder>();
  const at::Tensor real = at::ones({4});
  holder->tensors = {{"x", real}};
  attach_holder(*model->a, "qm", holder);
  register_held_tensors(*model);
  holder->tensors = {{"x", at::empty({4}, at::device(at::kMeta))},
                     {"z", at::empty({2}, at::device(at::kMeta))}};
  const auto result = register_held_tensors(*model);
  EXPECT_THAT(result.kept_meta, ElementsAre("a._held_qm_x"));
  EXPECT_THAT(result.registered, IsEmpty());
  EXPECT_THAT(result.retired, IsEmpty());
  EXPECT_EQ(address_of(buffer(*model, "a._held_qm_x")), address_of(real));
  EXPECT_FALSE(buffer(*model, "a._held_qm_z").defined());  // meta with no buffer: nothing
}

TEST(RegisterHeldTensors, WorksOnARootModuleNotOwnedByASharedPtr) {
  Toy root;
  auto holder = std::make_shared<Holder>();
  holder->tensors = {{"t", at::ones({1})}};
  attach_holder(root, "qm", holder);
  EXPECT_THAT(register_held_tensors(root).registered, ElementsAre("_held_qm_t"));
}

}  // namespace
}  // namespace graphcheck::libtorch
