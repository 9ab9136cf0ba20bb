#include <ATen/ATen.h>
#include <gmock/gmock.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/detail/allocation_site.h>
#include <graphcheck/torch/registry.h>
#include <graphcheck/torch/weights_arena.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "common/thrown_message.h"

// Allocation sites with external linkage, not inlined, so the arena's labels can name them.
namespace arena_test_sites {

[[gnu::noinline]] at::Tensor load_quant_scales(std::int64_t n) {
  at::Tensor scales = at::empty({n}, at::kFloat);
  scales.fill_(0.5);
  return scales;
}

[[gnu::noinline]] torch::nn::Linear build_layer() {
  torch::nn::Linear layer(8, 4);  // allocated inside torch::nn::LinearImpl::reset()
  layer->eval();
  return layer;
}

}  // namespace arena_test_sites

namespace graphcheck::libtorch {
namespace {

using ::testing::HasSubstr;

constexpr std::size_t kCapacity = std::size_t{64} << 20;

Address address_of(const at::Tensor& tensor) {
  return reinterpret_cast<Address>(tensor.storage().data_ptr().get());
}

const Allocation* find_allocation(const std::vector<Allocation>& allocations,
                                  const at::Tensor& tensor) {
  const Address address = address_of(tensor);
  const auto it = std::find_if(allocations.begin(), allocations.end(),
                               [&](const Allocation& a) { return a.begin == address; });
  return it == allocations.end() ? nullptr : &*it;
}

bool all_bytes_are(const at::Tensor& tensor, unsigned char value) {
  const auto* bytes = static_cast<const unsigned char*>(tensor.storage().data_ptr().get());
  return std::all_of(bytes, bytes + tensor.storage().nbytes(),
                     [&](unsigned char byte) { return byte == value; });
}

using test_support::thrown_message;

TEST(WeightsArenaTest, AllocatesFromTheArenaOnlyInsideALoadScope) {
  WeightsArena arena(kCapacity);
  at::Tensor inside;
  {
    const WeightsArena::LoadScope scope(arena);
    inside = at::zeros({100});
  }
  const at::Tensor outside = at::zeros({100});
  EXPECT_TRUE(arena.contains(address_of(inside)));
  EXPECT_EQ(address_of(inside) % 64, 0U);
  EXPECT_FALSE(arena.contains(address_of(outside)));
  EXPECT_EQ(arena.used(), 400U);
  inside.reset();  // freed after the scope: still returns to the arena
  EXPECT_EQ(arena.used(), 0U);
  EXPECT_TRUE(arena.allocations().empty());
}

TEST(WeightsArenaTest, AllocationsCarryPoolGenerationAndTheAllocatingFunction) {
  WeightsArena arena(kCapacity);
  at::Tensor scales;
  {
    const WeightsArena::LoadScope scope(arena);
    scales = arena_test_sites::load_quant_scales(16);
  }
  const auto allocations = arena.allocations();
  ASSERT_EQ(allocations.size(), 1U);
  EXPECT_EQ(allocations[0].begin, address_of(scales));
  EXPECT_EQ(allocations[0].size, 64U);
  EXPECT_EQ(allocations[0].pool, "weights");
  EXPECT_EQ(allocations[0].generation, 1U);
  EXPECT_EQ(allocations[0].label, "arena_test_sites::load_quant_scales");
}

TEST(WeightsArenaTest, TorchModuleConstructionIsLabelledWithTheCallerOutsideTorch) {
  WeightsArena arena(kCapacity);
  torch::nn::Linear layer{nullptr};
  {
    const WeightsArena::LoadScope scope(arena);
    layer = arena_test_sites::build_layer();
  }
  const auto allocations = arena.allocations();
  const Allocation* weight = find_allocation(allocations, layer->weight);
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->label, "arena_test_sites::build_layer");
  EXPECT_EQ(find_allocation(allocations, layer->bias)->label, "arena_test_sites::build_layer");
}

TEST(WeightsArenaTest, FreedBlocksAreReusedAtTheSameAddress) {
  WeightsArena arena(kCapacity);
  const WeightsArena::LoadScope scope(arena);
  at::Tensor first = at::empty({1000});
  const at::Tensor keep = at::empty({10});
  const Address first_address = address_of(first);
  first.reset();
  const at::Tensor again = at::empty({500});
  EXPECT_EQ(address_of(again), first_address);
}

TEST(WeightsArenaTest, LevelOneRestoresEveryAllocationBitIdentically) {
  WeightsArena arena(kCapacity);
  Registry registry;
  at::Tensor weight;
  at::Tensor unregistered;
  {
    const WeightsArena::LoadScope scope(arena);
    weight = at::randn({64, 64});
    unregistered = at::randint(0, 100, {333}, at::kLong);
  }
  registry.add_named({{"w", weight}}, OwnerKind::kParameter);
  const at::Tensor weight_copy = weight.clone();
  const at::Tensor unregistered_copy = unregistered.clone();
  const auto before = arena.allocations();

  arena.sleep(SleepLevel::kLevel1, registry);
  EXPECT_TRUE(arena.asleep());
  EXPECT_TRUE(all_bytes_are(weight, 0x00));  // pages discarded while asleep
  arena.wake_up();

  EXPECT_FALSE(arena.asleep());
  EXPECT_EQ(std::memcmp(weight.data_ptr(), weight_copy.data_ptr(), weight.nbytes()), 0);
  EXPECT_EQ(
      std::memcmp(unregistered.data_ptr(), unregistered_copy.data_ptr(), unregistered.nbytes()), 0);
  EXPECT_EQ(arena.allocations(), before);  // addresses, sizes and generations unchanged
}

TEST(WeightsArenaTest, LevelTwoRestoresRegisteredBuffersAndPoisonsEverythingElse) {
  WeightsArena arena(kCapacity);
  at::Tensor weight;
  at::Tensor buffer;
  at::Tensor derived;
  {
    const WeightsArena::LoadScope scope(arena);
    weight = at::randn({32, 32});
    buffer = at::arange(100, at::kFloat);
    derived = arena_test_sites::load_quant_scales(32);
  }
  Registry registry;
  registry.add_named({{"w", weight}}, OwnerKind::kParameter);
  registry.add_named({{"table", buffer.narrow(0, 10, 5)}}, OwnerKind::kBuffer);
  const at::Tensor buffer_copy = buffer.clone();
  const Address weight_address = address_of(weight);

  arena.sleep(SleepLevel::kLevel2, registry);
  arena.wake_up();

  EXPECT_TRUE(at::equal(buffer, buffer_copy));  // whole storage restored, not just the view
  EXPECT_TRUE(all_bytes_are(weight, 0xFF));
  EXPECT_TRUE(all_bytes_are(derived, 0xFF));
  EXPECT_EQ(address_of(weight), weight_address);
  const auto allocations = arena.allocations();
  ASSERT_EQ(allocations.size(), 3U);
  EXPECT_EQ(find_allocation(allocations, weight)->generation, 2U);
  EXPECT_EQ(find_allocation(allocations, buffer)->generation, 1U);
  EXPECT_EQ(find_allocation(allocations, derived)->generation, 2U);
  EXPECT_EQ(find_allocation(allocations, derived)->label, "arena_test_sites::load_quant_scales");
}

TEST(WeightsArenaTest, BuffersOutsideTheArenaAreIgnoredByLevelTwo) {
  WeightsArena arena(kCapacity);
  const at::Tensor outside = at::arange(16, at::kFloat);
  Registry registry;
  registry.add_named({{"outside", outside}}, OwnerKind::kBuffer);
  arena.sleep(SleepLevel::kLevel2, registry);
  arena.wake_up();
  EXPECT_TRUE(at::equal(outside, at::arange(16, at::kFloat)));
}

TEST(WeightsArenaTest, AllocationFromSeveralThreadsIsSafe) {
  WeightsArena arena(kCapacity);
  std::vector<std::vector<at::Tensor>> per_thread(4);
  {
    const WeightsArena::LoadScope scope(arena);
    std::vector<std::thread> threads;
    threads.reserve(per_thread.size());
    for (auto& tensors : per_thread) {
      threads.emplace_back([&tensors] {
        for (int i = 0; i < 200; ++i) {
          tensors.push_back(at::empty({i + 1}));
        }
      });
    }
    for (auto& thread : threads) {
      thread.join();
    }
  }
  std::size_t expected = 0;
  for (const auto& tensors : per_thread) {
    for (const auto& tensor : tensors) {
      EXPECT_TRUE(arena.contains(address_of(tensor)));
      expected += tensor.nbytes();
    }
  }
  EXPECT_EQ(arena.used(), expected);
  EXPECT_EQ(arena.allocations().size(), 800U);
}

TEST(WeightsArenaTest, MisuseIsAnErrorNamingTheFix) {
  WeightsArena arena(1 << 20);
  const Registry registry;
  EXPECT_THAT(thrown_message([&] { arena.wake_up(); }),
              HasSubstr("the arena is not asleep; call sleep() first"));
  {
    const WeightsArena::LoadScope scope(arena);
    EXPECT_THAT(thrown_message([&] { arena.sleep(SleepLevel::kLevel1, registry); }),
                HasSubstr("a LoadScope of this arena is open"));
    EXPECT_THAT(thrown_message([] { (void)at::empty({1 << 20}); }),
                HasSubstr("exceeds the arena's capacity of 1048576 bytes"));
  }
  arena.sleep(SleepLevel::kLevel1, registry);
  EXPECT_THAT(thrown_message([&] { arena.sleep(SleepLevel::kLevel2, registry); }),
              HasSubstr("already asleep; call wake_up() first"));
  EXPECT_THAT(thrown_message([&] { const WeightsArena::LoadScope scope(arena); }),
              HasSubstr("the arena is asleep; call wake_up() before loading"));
  arena.wake_up();
  EXPECT_THAT(thrown_message([] { const WeightsArena arena_zero(0); }),
              HasSubstr("capacity is 0 bytes"));
}

TEST(WeightsArenaTest, LoadScopeRestoresThePreviousAllocator) {
  WeightsArena arena(kCapacity);
  { const WeightsArena::LoadScope scope(arena); }
  const at::Tensor after = at::zeros({10});
  EXPECT_FALSE(arena.contains(address_of(after)));
}

TEST(WeightsArenaTest, MappingKeepsTheRangeMappedAfterTheArenaAndItsTensorsAreGone) {
  EXPECT_FALSE(ArenaMapping().contains(1));
  EXPECT_FALSE(ArenaMapping().asleep());
  EXPECT_FALSE(static_cast<bool>(ArenaMapping()));
  ArenaMapping mapping;
  Address address = 0;
  {
    WeightsArena arena(kCapacity);
    mapping = arena.mapping();
    at::Tensor weight;
    {
      const WeightsArena::LoadScope scope(arena);
      weight = at::full({16}, 2.0);
    }
    address = address_of(weight);
    arena.sleep(SleepLevel::kLevel1, Registry());
    EXPECT_TRUE(mapping.asleep());
    arena.wake_up();
    EXPECT_FALSE(mapping.asleep());
  }  // the arena object and its only tensor are gone; the handle keeps the mapping
  ASSERT_TRUE(static_cast<bool>(mapping));
  EXPECT_TRUE(mapping.contains(address));
  EXPECT_FALSE(mapping.contains(address_of(at::ones({4}))));
  const auto* values = reinterpret_cast<const float*>(address);
  EXPECT_EQ(values[0], 2.0F);  // readable: the freed block keeps its last bytes
}

TEST(AllocationSiteTest, FunctionNameDropsReturnTypeArgumentsAndQualifiers) {
  using detail::function_name;
  EXPECT_EQ(function_name("ns::Quant::process_weights_after_loading(ns::Layer&)"),
            "ns::Quant::process_weights_after_loading");
  EXPECT_EQ(function_name("at::Tensor ns::make<at::Tensor (int)>(int) const"),
            "ns::make<at::Tensor (int)>");
  EXPECT_EQ(function_name("(anonymous namespace)::helper(int)"), "(anonymous namespace)::helper");
  EXPECT_EQ(function_name("ns::Foo::operator()(int) const"), "ns::Foo::operator()");
  EXPECT_EQ(function_name("ns::load()::{lambda(int)#1}::operator()(int) const"), "ns::load");
  EXPECT_EQ(function_name("plain_c_symbol"), "plain_c_symbol");
}

TEST(AllocationSiteTest, TorchStdAndArenaFramesAreInternal) {
  using detail::is_internal_frame;
  EXPECT_TRUE(is_internal_frame("at::detail::empty_cpu"));
  EXPECT_TRUE(is_internal_frame("c10::intrusive_ptr<c10::StorageImpl>::make"));
  EXPECT_TRUE(is_internal_frame("torch::nn::LinearImpl::reset"));
  EXPECT_TRUE(is_internal_frame("std::function<void ()>::operator()"));
  EXPECT_TRUE(is_internal_frame("graphcheck::libtorch::detail::ArenaAllocator::allocate"));
  EXPECT_FALSE(is_internal_frame("graphcheck::libtorch::ReferenceInt8Method::process"));
  EXPECT_FALSE(is_internal_frame("attention::rope_cache"));
}

}  // namespace
}  // namespace graphcheck::libtorch
