// CapturedGraph: the capture window's depth-0 ops replayed on the captured storages, with a
// CUDA graph's memory semantics (private intermediates kept, pre-existing storages only
// addressed).
#include <ATen/ATen.h>
#include <ATen/native/Resize.h>
#include <ATen/record_function.h>
#include <gmock/gmock.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/aten_capture.h>
#include <graphcheck/torch/captured_graph.h>
#include <graphcheck/torch/reference_model.h>
#include <graphcheck/torch/registry.h>
#include <graphcheck/torch/weights_arena.h>
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/thrown_message.h"

namespace graphcheck::libtorch {
namespace {

using test_support::thrown_message;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

Address address_of(const at::Tensor& t) {
  return reinterpret_cast<Address>(t.storage().data_ptr().get());
}

constexpr std::size_t kArenaBytes = std::size_t{1} << 24;

// A chain with a matmul, a view returning a tensor list, a tensor-list input, an in-place op
// and a copy: every kind of op the replay distinguishes.
at::Tensor chain(const at::Tensor& x, const at::Tensor& w) {
  const at::Tensor h = at::mm(x, w);
  const auto parts = h.chunk(3, 1);
  at::Tensor c = at::cat({parts[0], parts[2].relu()}, 1);
  c.mul_(2.0);
  return c.t().contiguous();
}

TEST(CapturedGraph, ReplayReproducesTheEagerOutputAtCapture) {
  const at::Tensor x = at::randn({4, 6});
  const at::Tensor w = at::randn({6, 6});
  CaptureWindow window;
  window.declare_input("x", x);
  const at::Tensor out = chain(x, w);
  const CaptureRecord record = window.finish();
  ASSERT_NE(record.replayable, nullptr);
  const at::Tensor eager = chain(x, w);
  out.zero_();  // so that equality proves the replay wrote the static output
  record.replayable->replay();
  EXPECT_TRUE(at::equal(out, eager));
  // Depth 0 only: no aten::t inside contiguous' neighbours, no nested ops of cat or mm.
  EXPECT_THAT(record.replayable->op_names(),
              ElementsAre("aten::mm", "aten::chunk", "aten::relu", "aten::cat", "aten::mul_",
                          "aten::t", "aten::contiguous"));
}

TEST(CapturedGraph, ReplayAfterAnInPlaceWeightChangeGivesTheNewResult) {
  const at::Tensor x = at::randn({4, 6});
  const at::Tensor w = at::randn({6, 6});
  CaptureWindow window;
  window.declare_input("x", x);
  const at::Tensor out = chain(x, w);
  const CaptureRecord record = window.finish();
  const at::Tensor before = out.clone();
  w.copy_(at::randn({6, 6}));  // a weight update in place: same storage, new values
  x.mul_(-1.5);                // the static input changes too
  record.replayable->replay();
  EXPECT_TRUE(at::equal(out, chain(x, w)));
  EXPECT_FALSE(at::equal(out, before));
}

TEST(CapturedGraph, NestedOpsRunInsideTheirParentAndUserScopesAreTransparent) {
  const at::Tensor x = at::ones({2, 3});
  const at::Tensor w = at::full({4, 3}, 0.5);
  CaptureWindow window;
  at::Tensor out;
  {
    RECORD_FUNCTION("user_block", std::vector<c10::IValue>());
    out = at::linear(x, w).add(1.0);
  }
  const CaptureRecord record = window.finish();
  // aten::linear runs aten::t and aten::addmm (recorded as nodes) inside itself.
  EXPECT_GT(record.graph.nodes.size(), 3U);
  EXPECT_THAT(record.replayable->op_names(), ElementsAre("aten::linear", "aten::add"));
  w.fill_(2.0);
  record.replayable->replay();
  EXPECT_TRUE(at::equal(out, at::full({2, 4}, 7.0)));
}

TEST(CapturedGraph, IntermediatesSurviveAsTheGraphsPrivateMemory) {
  const at::Tensor x = at::arange(8, at::kFloat);
  std::optional<CaptureRecord> record;
  std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> intermediate;
  at::Tensor out;
  {
    CaptureWindow window;
    window.declare_input("x", x);
    const at::Tensor doubled = x * 2;  // dropped right after the window: graph-private
    intermediate = doubled.storage().getWeakStorageImpl();
    out = doubled + 1;
    record = window.finish();
  }
  EXPECT_TRUE(intermediate->lock()) << "the graph keeps its intermediate alive";
  EXPECT_EQ(record->replayable->private_bytes(), sizeof(float) * 8 * 2);
  EXPECT_EQ(record->replayable->preexisting_count(), 1U);  // x
  x.fill_(3.0);
  record->replayable->replay();
  EXPECT_TRUE(at::equal(out, at::full({8}, 7.0)));
  record.reset();
  EXPECT_FALSE(intermediate->lock()) << "freed with the graph";
}

TEST(CapturedGraph, DropKeepsNoOpsAndNoIntermediates) {
  const at::Tensor x = at::arange(8, at::kFloat);
  CaptureOptions options;
  options.replay_ops = ReplayOps::kDrop;
  std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> intermediate;
  CaptureRecord record;
  {
    CaptureWindow window(options);
    const at::Tensor doubled = x * 2;
    intermediate = doubled.storage().getWeakStorageImpl();
    (void)(doubled + 1);
    record = window.finish();
  }
  EXPECT_EQ(record.replayable, nullptr);
  EXPECT_FALSE(intermediate->lock());
  std::vector<std::string> names;  // still recorded for checking
  for (const Node& node : record.graph.nodes) {
    names.push_back(node.name);
  }
  EXPECT_THAT(names, Contains("aten::mul"));
  EXPECT_THAT(names, Contains("aten::add"));
}

TEST(CapturedGraph, ReplayAfterARebindReadsTheOldStorageInTheArena) {
  WeightsArena arena(kArenaBytes);
  at::Tensor weight;
  {
    const WeightsArena::LoadScope scope(arena);
    weight = at::full({16}, 2.0);
  }
  const at::Tensor x = at::arange(16, at::kFloat);
  CaptureOptions options;
  options.arena = &arena;
  CaptureWindow window(options);
  window.declare_input("x", x);
  const at::Tensor out = x * weight;
  const CaptureRecord record = window.finish();
  const Address old_address = address_of(weight);
  const auto old_storage = weight.storage().getWeakStorageImpl();
  {
    const WeightsArena::LoadScope scope(arena);
    weight.set_data(at::full({16}, 5.0));  // a reload by rebinding: the old storage is freed
  }
  ASSERT_NE(address_of(weight), old_address);
  EXPECT_FALSE(old_storage.lock()) << "the graph must not keep a pre-existing storage alive";
  record.replayable->replay();
  EXPECT_TRUE(at::equal(out, x * 2.0)) << "the graph reads the old address";
  EXPECT_FALSE(at::equal(out, x * weight)) << "eager reads the new parameter";
}

TEST(CapturedGraph, ReplayReadsWhateverTheArenaNowHoldsAtTheOldAddress) {
  WeightsArena arena(kArenaBytes);
  at::Tensor weight;
  {
    const WeightsArena::LoadScope scope(arena);
    weight = at::full({16}, 2.0);
  }
  const at::Tensor x = at::ones({16});
  CaptureOptions options;
  options.arena = &arena;
  CaptureWindow window(options);
  const at::Tensor out = x * weight;
  const CaptureRecord record = window.finish();
  const Address old_address = address_of(weight);
  at::Tensor reuse;
  {
    const WeightsArena::LoadScope scope(arena);
    weight = at::Tensor();        // freed: the block returns to the arena
    reuse = at::full({16}, 9.0);  // first fit: the same block
  }
  ASSERT_EQ(address_of(reuse), old_address);
  record.replayable->replay();
  EXPECT_TRUE(at::equal(out, at::full({16}, 9.0)));
}

TEST(CapturedGraph, GraphKeepsTheArenaMappingAfterTheArenaObjectIsGone) {
  auto arena = std::make_unique<WeightsArena>(kArenaBytes);
  at::Tensor weight;
  {
    const WeightsArena::LoadScope scope(*arena);
    weight = at::full({16}, 2.0);
  }
  const at::Tensor x = at::ones({16});
  CaptureOptions options;
  options.arena = arena.get();
  CaptureWindow window(options);
  const at::Tensor out = x * weight;
  const CaptureRecord record = window.finish();
  weight = at::Tensor();
  arena.reset();  // only the graph holds the mapping now
  out.zero_();
  record.replayable->replay();
  EXPECT_TRUE(at::equal(out, at::full({16}, 2.0)));
}

TEST(CapturedGraph, ReplayOfAFreedStorageOutsideTheArenaFailsClearly) {
  at::Tensor weight = at::full({16}, 2.0);
  const at::Tensor x = at::ones({16});
  CaptureWindow window;  // no arena: the weight lives in the default allocator
  const at::Tensor out = x * weight;
  const CaptureRecord record = window.finish();
  const Address old_address = address_of(weight);
  weight.set_data(at::full({16}, 5.0));
  const std::string message = thrown_message([&] { record.replayable->replay(); });
  EXPECT_THAT(message,
              HasSubstr("op 0 (aten::mul) reads 64 bytes at " + format_address(old_address)));
  EXPECT_THAT(message, HasSubstr("freed or moved"));
  EXPECT_THAT(message, HasSubstr("reload with copy_, not by rebinding"));
}

TEST(CapturedGraph, ReplayWhileTheArenaSleepsIsRefused) {
  WeightsArena arena(kArenaBytes);
  at::Tensor weight;
  {
    const WeightsArena::LoadScope scope(arena);
    weight = at::full({16}, 2.0);
  }
  CaptureOptions options;
  options.arena = &arena;
  CaptureWindow window(options);
  const at::Tensor out = weight * 3;
  const CaptureRecord record = window.finish();
  arena.sleep(SleepLevel::kLevel1, Registry());
  EXPECT_THAT(thrown_message([&] { record.replayable->replay(); }),
              HasSubstr("the weights arena is asleep"));
  arena.wake_up();
  record.replayable->replay();
  EXPECT_TRUE(at::equal(out, at::full({16}, 6.0)));
}

TEST(CapturedGraph, DataDependentShapesCannotBeReplayed) {
  const at::Tensor x = at::tensor({1.0F, 0.0F, 2.0F});
  CaptureWindow window;
  window.declare_input("x", x);
  const at::Tensor nonzero = at::nonzero(x);
  const CaptureRecord record = window.finish();
  x.fill_(1.0);
  EXPECT_THAT(thrown_message([&] { record.replayable->replay(); }),
              HasSubstr("op 0 (aten::nonzero) returned shape [3, 1] where the capture returned "
                        "[2, 1]; data-dependent shapes cannot be replayed"));
}

TEST(CapturedGraph, OpsWithOperandsItCannotRebuildAreRefusedAtReplay) {
  const at::Tensor sparse = at::eye(3).to_sparse();
  CaptureWindow window;
  const at::Tensor dense = sparse.to_dense();
  const CaptureRecord record = window.finish();
  EXPECT_THAT(thrown_message([&] { record.replayable->replay(); }),
              HasSubstr("op 0 (aten::to_dense) was not recorded for replay: an operand without "
                        "readable strided storage"));
}

TEST(CapturedGraph, AQuantizedOperandIsRefusedAtReplayNotRebuiltWithoutItsQuantizer) {
  // A plain view over a quantized tensor's storage claimed to be quantized and had no
  // quantizer: the dequantize kernel crashed the process (a hostile tester's finding).
  const at::Tensor packed = at::quantize_per_tensor(at::ones({8}), 0.5, 3, at::kQInt8);
  CaptureWindow window;
  const at::Tensor out = packed.dequantize() * 2;
  const CaptureRecord record = window.finish();
  EXPECT_THAT(thrown_message([&] { record.replayable->replay(); }),
              HasSubstr("op 0 (aten::dequantize) was not recorded for replay: a quantized "
                        "operand (its quantizer is not recorded)"));
}

TEST(CapturedGraph, ReplayAfterTheOutputsStorageWasFreedFailsClearly) {
  // `resize_(0)` of an output's storage (how FSDP and engines free a tensor's memory) left
  // the graph's own storage without its bytes, and the replay wrote freed memory.
  const at::Tensor x = at::ones({1024});
  CaptureWindow window;
  window.declare_input("x", x);
  const at::Tensor out = x * 3;
  const CaptureRecord record = window.finish();
  const Address begin = address_of(out);
  at::native::resize_bytes_cpu(out.storage().unsafeGetStorageImpl(), 0);  // untyped_storage()
                                                                          // .resize_(0)
  const std::string message = thrown_message([&] { record.replayable->replay(); });
  EXPECT_THAT(message, HasSubstr("op 0 (aten::mul) uses 4096 bytes of the graph's own memory at " +
                                 format_address(begin)));
  EXPECT_THAT(message, HasSubstr("freed or resized since the capture (0 bytes now)"));
}

TEST(CapturedGraph, ConjugateViewsKeepTheirConjugateBit) {
  const at::Tensor z = at::complex(at::ones({4}), at::full({4}, 2.0));
  CaptureWindow window;
  window.declare_input("z", z);
  const at::Tensor out = z.conj() * 1.0;
  const CaptureRecord record = window.finish();
  out.zero_();
  record.replayable->replay();
  EXPECT_TRUE(at::equal(out, at::complex(at::ones({4}), at::full({4}, -2.0))));
}

// The reference model, as the graph-replay story drives it, without sleeping: an in-place
// weight update reaches the graph through the derived buffers (registered variant).
TEST(CapturedGraph, ReferenceModelReplayFollowsAnInPlaceUpdate) {
  WeightsArena arena(std::size_t{1} << 26);
  ReferenceConfig config;
  const auto model = build_reference_model(config, 5, &arena);
  const at::Tensor ids = at::arange(8, at::kLong);
  (void)model->forward(ids, ids);
  CaptureOptions options;
  options.arena = &arena;
  CaptureWindow window(options);
  window.declare_input("ids", ids);
  const at::Tensor out = model->forward(ids, ids);
  const CaptureRecord record = window.finish();
  const at::Tensor at_capture = out.clone();
  record.replayable->replay();
  EXPECT_TRUE(at::equal(out, at_capture));
  {
    const WeightsArena::LoadScope scope(arena);
    model->load_weights_in_place(make_checkpoint(*model, 6));
    model->process_weights_after_loading();
  }
  record.replayable->replay();
  EXPECT_TRUE(at::equal(out, model->forward(ids, ids)));
  EXPECT_FALSE(at::equal(out, at_capture));
}

}  // namespace
}  // namespace graphcheck::libtorch
