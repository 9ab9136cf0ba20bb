// The ATen capture window: op nodes with view extents, graph-owned intermediates, declared
// inputs, unknown tensors as unregistered allocations, epochs at later moments.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/CPUAllocator.h>
#include <gmock/gmock.h>
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/aten_capture.h>
#include <graphcheck/torch/registry.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/library.h>

#include <algorithm>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace graphcheck::libtorch {
namespace {

using ::testing::HasSubstr;

Address address_of(const at::Tensor& t) {
  return reinterpret_cast<Address>(t.storage().data_ptr().get());
}

const Node* find_op(const CaptureRecord& record, const std::string& name) {
  for (const Node& node : record.graph.nodes) {
    if (node.name == name) {
      return &node;
    }
  }
  return nullptr;
}

bool covered_by(const std::vector<Span>& spans, Address address) {
  return std::any_of(spans.begin(), spans.end(),
                     [&](const Span& s) { return s.contains(address); });
}

TEST(CaptureWindow, RecordsOpsWithReadAndWriteViewExtents) {
  const at::Tensor a = at::ones({4, 8});
  const at::Tensor b = at::ones({8, 2});
  CaptureWindow window;
  const at::Tensor c = at::mm(a.narrow(0, 1, 2), b);
  const CaptureRecord record = window.finish();
  const Node* mm = find_op(record, "aten::mm");
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->type, NodeType::kOp);
  ASSERT_EQ(mm->operands.size(), 3U);
  EXPECT_EQ(mm->operands[0].role, "reads[0]");
  EXPECT_EQ(mm->operands[0].access, Access::kRead);
  EXPECT_EQ(mm->operands[0].begin, address_of(a) + 8 * sizeof(float));  // the view, not a
  EXPECT_EQ(mm->operands[0].size, 2 * 8 * sizeof(float));
  EXPECT_EQ(mm->operands[2].role, "writes[0]");
  EXPECT_EQ(mm->operands[2].access, Access::kWrite);
  EXPECT_EQ(mm->operands[2].begin, address_of(c));
  EXPECT_EQ(mm->operands[2].size, 2 * 2 * sizeof(float));
}

// A view op's output touches no memory, so a read-only buffer read through views reads
// "read", not "read-write" (as_strided and select logged their output views as writes); an
// in-place view op (unsqueeze_) changes only sizes and strides. Nor does a view op read its
// input: torch's view ops log no operand at all (a CUDA graph has no kernel for them; the
// twin counted one read per view before). An in-place op's output is still a write, and so
// are resize_'s and the copy a reshape of a non-contiguous view makes (its nested op writes
// new memory).
TEST(CaptureWindow, AViewOpsOutputIsNoWrite) {
  const at::Tensor cache = at::arange(32, at::kFloat).reshape({4, 8});
  CaptureWindow window;
  const at::Tensor row = cache.select(0, 1);
  const at::Tensor cols = cache.t().reshape({32});  // not viewable: copied
  at::Tensor scaled = at::ones({8});
  scaled.mul_(row);
  at::Tensor flat = cache.view({32});
  flat.unsqueeze_(0);  // an in-place view op: sizes and strides only
  at::Tensor grown = at::empty({2});
  grown.resize_({64});  // may move the bytes: still a write
  const CaptureRecord record = window.finish();
  const Node* unsqueeze = find_op(record, "aten::unsqueeze_");
  ASSERT_NE(unsqueeze, nullptr);
  EXPECT_TRUE(unsqueeze->operands.empty());
  const Node* resize = find_op(record, "aten::resize_");
  ASSERT_NE(resize, nullptr);
  ASSERT_EQ(resize->operands.size(), 2U);
  EXPECT_EQ(resize->operands[1].access, Access::kWrite);
  EXPECT_EQ(resize->operands[1].begin, address_of(grown));
  for (const char* view : {"aten::select", "aten::t", "aten::view"}) {
    const Node* node = find_op(record, view);
    ASSERT_NE(node, nullptr) << view;
    EXPECT_TRUE(node->operands.empty()) << view;
  }
  const Node* mul = find_op(record, "aten::mul_");
  ASSERT_NE(mul, nullptr);
  ASSERT_EQ(mul->operands.size(), 3U);
  EXPECT_EQ(mul->operands[2].access, Access::kWrite);
  EXPECT_EQ(mul->operands[2].begin, address_of(scaled));
  const bool copied =
      std::any_of(record.graph.nodes.begin(), record.graph.nodes.end(), [&](const Node& node) {
        return std::any_of(node.operands.begin(), node.operands.end(), [&](const Operand& o) {
          return o.access == Access::kWrite && o.begin == address_of(cols);
        });
      });
  EXPECT_TRUE(copied) << "the reshape's copy is written by a nested op";
  for (const Node& node : record.graph.nodes) {
    for (const Operand& operand : node.operands) {
      if (operand.begin == address_of(cache)) {
        EXPECT_EQ(operand.access, Access::kRead) << node.name << " " << operand.role;
      }
    }
  }
}

// The operands of `op` (overload `overload`, Tensor -> Tensor) called on `source` in a window
// of its own.
std::vector<Operand> operands_in_a_window(const char* op, const char* overload,
                                          const at::Tensor& source) {
  CaptureWindow window;
  const at::Tensor out = c10::Dispatcher::singleton()
                             .findSchemaOrThrow(op, overload)
                             .typed<at::Tensor(const at::Tensor&)>()
                             .call(source);
  const CaptureRecord record = window.finish();
  const Node* node = find_op(record, op);
  EXPECT_NE(node, nullptr) << op;
  return node == nullptr ? std::vector<Operand>{} : node->operands;
}

// What an op's schema says of its returns is read once per operator in the process and
// shared by later windows; an op deregistered and defined again under its name with other
// returns is read again.
TEST(CaptureWindow, AnOpDefinedAgainWithOtherReturnsIsReadAgain) {
  const at::Tensor source = at::ones({8});
  const auto pick_in_a_window = [&source] {
    return operands_in_a_window("graphcheck_test::pick", "", source);
  };
  auto library = std::make_unique<torch::Library>(torch::Library::DEF, "graphcheck_test",
                                                  std::nullopt, __FILE__, __LINE__);
  library->def("pick(Tensor(a) x) -> Tensor(a)", [](const at::Tensor& x) { return x.alias(); });
  for (int window = 0; window < 2; ++window) {  // the second from the shared cache
    const std::vector<Operand> view = pick_in_a_window();
    ASSERT_EQ(view.size(), 1U) << "a view's output is no write";
    EXPECT_EQ(view[0].access, Access::kRead);
  }
  library.reset();  // deregisters the op
  library = std::make_unique<torch::Library>(torch::Library::DEF, "graphcheck_test", std::nullopt,
                                             __FILE__, __LINE__);
  library->def("pick(Tensor x) -> Tensor", [](const at::Tensor& x) { return x.clone(); });
  const std::vector<Operand> copy = pick_in_a_window();
  ASSERT_EQ(copy.size(), 2U) << "a new tensor's output is a write";
  EXPECT_EQ(copy[1].access, Access::kWrite);
  EXPECT_NE(copy[1].begin, address_of(source));
}

// Two overloads of one op name may return otherwise (RecordFunction's name has no overload):
// each is read on its own (found by a review: a cache by name gave the second the first's).
TEST(CaptureWindow, OverloadsWithOtherReturnsAreReadApart) {
  const at::Tensor source = at::ones({8});
  torch::Library library(torch::Library::DEF, "graphcheck_overloads", std::nullopt, __FILE__,
                         __LINE__);
  library.def("pick(Tensor(a) x) -> Tensor(a)", [](const at::Tensor& x) { return x.alias(); });
  library.def("pick.copy(Tensor x) -> Tensor", [](const at::Tensor& x) { return x.clone(); });
  const auto pick_in_a_window = [&source](const char* overload) {
    return operands_in_a_window("graphcheck_overloads::pick", overload, source);
  };
  EXPECT_EQ(pick_in_a_window("").size(), 1U) << "the view overload's output is no write";
  const std::vector<Operand> copy = pick_in_a_window("copy");
  ASSERT_EQ(copy.size(), 2U) << "the copy overload's new tensor is a write";
  EXPECT_EQ(copy[1].access, Access::kWrite);
  EXPECT_EQ(pick_in_a_window("").size(), 1U) << "and the view overload's is still none";
}

TEST(CaptureWindow, WalksTensorListsAndRecordsNestedOps) {
  const at::Tensor a = at::ones({2});
  const at::Tensor b = at::zeros({3});
  CaptureWindow window;
  const at::Tensor c = at::cat({a, b});
  const at::Tensor l = at::linear(at::ones({1, 3}), at::ones({2, 3}));
  const CaptureRecord record = window.finish();
  const Node* cat = find_op(record, "aten::cat");
  ASSERT_NE(cat, nullptr);
  ASSERT_EQ(cat->operands.size(), 3U);
  EXPECT_EQ(cat->operands[0].begin, address_of(a));
  EXPECT_EQ(cat->operands[1].begin, address_of(b));
  EXPECT_NE(find_op(record, "aten::linear"), nullptr);
  EXPECT_NE(find_op(record, "aten::t"), nullptr);  // recorded inside aten::linear
}

// An aten op implemented only as a decomposition (linear, matmul) logs no operand: its nested
// ops read and write, and log that (each weight read once per GEMM, as a CUDA graph's kernel
// reads it, not once per layer of the decomposition). Its storages are still classified: an
// external tensor first seen by it is named by it.
TEST(CaptureWindow, ADecompositionLogsNothingItsNestedOpsDo) {
  const at::Tensor x = at::ones({4, 3});
  const at::Tensor w = at::ones({2, 3});
  CaptureWindow window;
  const at::Tensor y = at::linear(x, w);
  const CaptureRecord record = window.finish();
  const Node* linear = find_op(record, "aten::linear");
  ASSERT_NE(linear, nullptr);
  EXPECT_TRUE(linear->operands.empty());
  int weight_reads = 0;
  for (const Node& node : record.graph.nodes) {
    for (const Operand& operand : node.operands) {
      if (operand.access == Access::kRead && operand.begin == address_of(w)) {
        ++weight_reads;
        EXPECT_TRUE(node.name == "aten::mm" || node.name == "aten::addmm") << node.name;
      }
    }
  }
  EXPECT_EQ(weight_reads, 1);
  ASSERT_EQ(record.external.size(), 2U);
  EXPECT_EQ(record.external[0].label, "aten:aten::linear");
}

TEST(CaptureWindow, IntermediatesAreGraphOwnedAndInputsDeclared) {
  const at::Tensor input = at::ones({16});
  const at::Tensor weight = at::full({16}, 2.0);
  CaptureWindow window;
  window.declare_input("x", input);
  const at::Tensor out = (input * weight).relu();
  const CaptureRecord record = window.finish();
  EXPECT_TRUE(covered_by(record.graph_spans, address_of(out)));
  EXPECT_FALSE(covered_by(record.graph_spans, address_of(weight)));
  ASSERT_EQ(record.input_spans.size(), 1U);
  EXPECT_EQ(record.input_spans[0].name, "x");
  EXPECT_EQ(record.input_spans[0].begin, address_of(input));
  ASSERT_EQ(record.external.size(), 1U);
  EXPECT_EQ(record.external[0].begin, address_of(weight));
  EXPECT_EQ(record.external[0].label, "aten:aten::mul");
  EXPECT_GT(record.operands, 0U);
}

TEST(CaptureWindow, EveryBlockAllocatedInsideIsTheGraphsWhetherAnOpReadItOrNot) {
  const at::Tensor input = at::ones({64});
  CaptureWindow window;
  window.declare_input("x", input);
  at::Tensor chain = input;
  std::vector<Address> freed;  // intermediates that die inside the window
  for (int i = 0; i < 200; ++i) {
    chain = chain * 1.5;
    freed.push_back(address_of(chain));
  }
  // A kernel's own workspace: a block from the allocator that no op returns or reads.
  const c10::DataPtr workspace = c10::GetCPUAllocator()->allocate(256);
  const CaptureRecord record = window.finish();
  for (const Address address : freed) {
    EXPECT_TRUE(covered_by(record.graph_spans, address)) << address;
  }
  EXPECT_TRUE(covered_by(record.graph_spans, reinterpret_cast<Address>(workspace.get())));
  EXPECT_FALSE(covered_by(record.graph_spans, address_of(input)));
  EXPECT_TRUE(record.external.empty());
}

// Torch hands the window's thread-local state (its allocation watcher and its op callback)
// to the tasks at::launch runs, and those allocate while this thread does. Before, their
// reports wrote the watcher's tables with no lock, racing this thread's (a lost or corrupt
// entry, or a crash of the watched program); now their blocks are the graph's like this
// thread's, and their ops are counted as not recorded.
TEST(CaptureWindow, BlocksAllocatedByLaunchedTasksAreTheGraphsAndTheirOpsAreCounted) {
  constexpr std::size_t kTasks = 4;
  constexpr int kAllocations = 20000;
  const at::Tensor input = at::ones({16});
  CaptureWindow window;
  std::vector<at::Tensor> kept(kTasks);
  std::vector<std::promise<void>> done(kTasks);
  for (std::size_t task = 0; task < kTasks; ++task) {
    at::launch([&, task] {
      for (int i = 0; i < kAllocations; ++i) {
        (void)at::empty({8 + (i % 7)});
      }
      kept[task] = input.add(static_cast<double>(task));
      done[task].set_value();
    });
  }
  at::Tensor chain = input;
  for (int i = 0; i < kAllocations; ++i) {
    chain = at::empty({8 + (i % 5)});
  }
  for (auto& promise : done) {
    promise.get_future().wait();
  }
  at::Tensor sum = chain.narrow(0, 0, 8);
  for (const at::Tensor& tensor : kept) {
    sum = sum + tensor.narrow(0, 0, 8);  // read here: each is over memory allocated inside
  }
  const CaptureRecord record = window.finish();
  for (const at::Tensor& tensor : kept) {
    EXPECT_TRUE(covered_by(record.graph_spans, address_of(tensor))) << address_of(tensor);
  }
  EXPECT_THAT(record.external, ::testing::IsEmpty());  // `input` was not read on this thread
  EXPECT_GE(record.foreign_ops, kTasks);               // each task's add
  EXPECT_NE(find_op(record, "aten::empty"), nullptr);  // this thread's ops are recorded
}

// Every torch profiler reads the thread's profiler slot as its own state without a check in
// a release build. Before, the window pushed its allocation watcher over a running profiler's
// state, whose callbacks then read past the watcher: a watched capture inside
// torch.profiler.profile() died (SIGSEGV, SIGBUS, a mutex assertion) or hung. Now the window
// leaves the slot to the profiler, says it watched no allocation, and records its ops.
TEST(CaptureWindow, AProfilerOnTheThreadKeepsItsSlotAndTheWindowWatchesNoAllocation) {
  namespace prof = torch::profiler::impl;
  const prof::ProfilerConfig config(prof::ProfilerState::KINETO, /*report_input_shapes=*/false,
                                    /*profile_memory=*/true);
  torch::autograd::profiler::prepareProfiler(config, {prof::ActivityType::CPU});
  torch::autograd::profiler::enableProfiler(config, {prof::ActivityType::CPU});
  CaptureRecord record;
  {
    CaptureWindow window;
    at::Tensor chain = at::ones({64});
    for (int i = 0; i < 50; ++i) {
      chain = chain * 1.5;
    }
    record = window.finish();
  }
  const auto result = torch::autograd::profiler::disableProfiler();
  EXPECT_FALSE(record.allocations_watched);
  EXPECT_NE(find_op(record, "aten::mul"), nullptr);
  ASSERT_NE(result, nullptr);
  const auto& events = result->events();
  EXPECT_GE(std::count_if(events.begin(), events.end(),
                          [](const auto& e) { return e.name() == "aten::mul"; }),
            50);
  EXPECT_TRUE(std::any_of(events.begin(), events.end(),  // the profiler's own memory events
                          [](const auto& e) { return e.name() == "[memory]"; }));
  CaptureWindow after;  // no profiler now: the window watches allocations again
  (void)at::ones({8}).add(1);
  EXPECT_TRUE(after.finish().allocations_watched);
}

TEST(CaptureWindow, AStorageMadeInsideOverOutsideBytesIsExternal) {
  std::vector<float> outside(32, 2.0F);  // bytes no allocator handed out inside the window
  CaptureWindow window;
  at::Tensor chain = at::ones({32});
  for (int i = 0; i < 100; ++i) {  // intermediates freed inside: their StorageImpls too
    chain = chain + 1.0;
  }
  const at::Tensor view = at::from_blob(outside.data(), {32});
  const at::Tensor sum = chain + view;
  const CaptureRecord record = window.finish();
  const auto begin = reinterpret_cast<Address>(outside.data());
  EXPECT_FALSE(covered_by(record.graph_spans, begin));
  ASSERT_EQ(record.external.size(), 1U);
  EXPECT_EQ(record.external[0].begin, begin);
  EXPECT_EQ(record.external[0].size, 32 * sizeof(float));
  EXPECT_EQ(record.external[0].label, "aten:aten::add");
}

TEST(CaptureWindow, EpochsFromARegistrysSpansEqualThoseFromTheRegistry) {
  Registry registry;
  const at::Tensor weight = at::full({32}, 3.0);
  registry.add_named({{"w", weight}}, OwnerKind::kParameter);
  const at::Tensor hidden = at::full({32}, 5.0);
  const at::Tensor x = at::ones({32});
  CaptureWindow window;
  window.declare_input("x", x);
  const at::Tensor y = x * weight + hidden;
  const CaptureRecord record = window.finish();
  const Epoch from_registry = make_capture_epoch(registry, nullptr, record);
  const Epoch from_spans = make_capture_epoch(registry.spans(), nullptr, record);
  EXPECT_EQ(from_spans.label, "capture");
  EXPECT_EQ(from_spans.spans, from_registry.spans);
  EXPECT_EQ(from_spans.allocations, from_registry.allocations);
  ASSERT_FALSE(from_spans.allocations.empty());  // the unregistered `hidden`, at least
  const Epoch now = make_epoch("after", registry.spans(), nullptr, record);
  EXPECT_EQ(now.label, "after");
  EXPECT_EQ(now.spans, make_epoch("after", registry, nullptr, record).spans);
  EXPECT_EQ(now.allocations, make_epoch("after", registry, nullptr, record).allocations);
}

TEST(CaptureWindow, UnknownTensorIsUnregisteredNeverDangling) {
  Registry registry;
  const at::Tensor weight = at::full({32}, 3.0);
  registry.add_named({{"w", weight}}, OwnerKind::kParameter);
  at::Tensor hidden = at::full({32}, 5.0);  // a plain member nobody registered
  const at::Tensor x = at::ones({32});
  CaptureWindow window;
  window.declare_input("x", x);
  const at::Tensor y = x * weight + hidden;
  const CaptureRecord record = window.finish();
  Snapshot snapshot = make_snapshot(record, {make_capture_epoch(registry, nullptr, record)});
  Report report = check(snapshot);
  EXPECT_EQ(report.summary.count(Verdict::kUnregistered), 1U);
  EXPECT_EQ(report.summary.count(Verdict::kDangling), 0U);
  ASSERT_EQ(report.findings.size(), 1U);
  EXPECT_EQ(report.findings[0].address, address_of(hidden));
  EXPECT_EQ(report.findings[0].owner, "aten:aten::add");
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1U);
  EXPECT_EQ(report.summary.count(Verdict::kInput), 1U);

  // Once the hidden tensor dies, a later epoch no longer lists it as an allocation.
  hidden = at::Tensor();
  snapshot.epochs.push_back(make_epoch("later", registry, nullptr, record));
  CheckOptions options;
  options.epoch = "later";
  report = check(snapshot, options);
  EXPECT_EQ(report.summary.count(Verdict::kDangling), 1U);
}

TEST(CaptureWindow, OneWindowPerThreadAndFinishOnce) {
  CaptureWindow window;
  EXPECT_THAT([] { CaptureWindow second; },
              ::testing::ThrowsMessage<Error>(HasSubstr("already has an open capture window")));
  (void)window.finish();
  EXPECT_THAT([&] { (void)window.finish(); },
              ::testing::ThrowsMessage<Error>(HasSubstr("called twice")));
  CaptureWindow after;  // the first one is closed: a new one may open
  EXPECT_EQ(after.op_count(), 0U);
}

// A window destroyed on another thread (a capture that ended elsewhere, a watch closed from
// another thread) is abandoned, not freed under its own thread, whose callback still points at
// it: that thread frees it at its next window or op and records nothing in it meanwhile.
// Before, the next window there was refused ("already has an open capture window") and the
// thread's next op wrote into freed memory.
TEST(CaptureWindow, AWindowDestroyedOnAnotherThreadIsFreedByItsOwnThread) {
  for (const bool op_between : {false, true}) {
    auto window = std::make_unique<CaptureWindow>();
    (void)at::ones({2}).add(1);
    EXPECT_GT(window->op_count(), 0U);
    std::thread([&window] { window.reset(); }).join();
    if (op_between) {
      (void)at::ones({2}).sub(1);  // frees the abandoned window; recorded nowhere
    }
    CaptureWindow next;
    EXPECT_EQ(next.op_count(), 0U) << op_between;
    (void)at::ones({2}).mul(2);
    const CaptureRecord record = next.finish();
    EXPECT_NE(find_op(record, "aten::mul"), nullptr) << op_between;
    EXPECT_EQ(find_op(record, "aten::add"), nullptr) << op_between;
    EXPECT_EQ(find_op(record, "aten::sub"), nullptr) << op_between;
  }
}

TEST(CaptureWindow, StopsRecordingAtFinish) {
  CaptureWindow window;
  (void)at::ones({2}).add(1);
  const CaptureRecord record = window.finish();
  const auto count = record.graph.nodes.size();
  (void)at::ones({2}).add(1);
  EXPECT_EQ(window.op_count(), 0U);  // moved out
  EXPECT_GT(count, 0U);
}

// The same ops in two windows, one building its nodes at finish, one later from its log:
// the same nodes (names, roles, extents, accesses, nesting order), the same owners.
TEST(CaptureWindow, NodesBuiltLaterAreTheNodesBuiltAtFinish) {
  const at::Tensor a = at::ones({4, 8});
  const at::Tensor b = at::ones({8, 2});
  const auto forward = [&] {
    const at::Tensor c = at::linear(a.narrow(0, 1, 2), b.t());
    return at::cat({c, c.relu()});
  };
  CaptureWindow now;
  at::Tensor out_now = forward();
  const CaptureRecord built = now.finish();

  CaptureWindow later;
  at::Tensor out_later = forward();
  const CaptureRecord deferred = later.finish(Nodes::kLater);
  EXPECT_TRUE(deferred.graph.nodes.empty());
  EXPECT_EQ(later.op_count(), built.graph.nodes.size());
  EXPECT_EQ(deferred.operands, built.operands);
  const NodeList nodes = later.nodes();
  ASSERT_EQ(nodes.size(), built.graph.nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    EXPECT_EQ(nodes[i].id, i);
    EXPECT_EQ(nodes[i].name, built.graph.nodes[i].name);
    ASSERT_EQ(nodes[i].operands.size(), built.graph.nodes[i].operands.size()) << nodes[i].name;
    for (std::size_t k = 0; k < nodes[i].operands.size(); ++k) {
      EXPECT_EQ(nodes[i].operands[k].role, built.graph.nodes[i].operands[k].role);
      EXPECT_EQ(nodes[i].operands[k].access, built.graph.nodes[i].operands[k].access);
      EXPECT_EQ(nodes[i].operands[k].size, built.graph.nodes[i].operands[k].size);
    }
  }
  EXPECT_EQ(later.nodes(), nodes);  // built again, the same
  ASSERT_EQ(deferred.external.size(), built.external.size());
  for (std::size_t i = 0; i < built.external.size(); ++i) {
    EXPECT_EQ(deferred.external[i].label, built.external[i].label);
  }
  EXPECT_THAT([] { return CaptureWindow().nodes(); },
              ::testing::ThrowsMessage<Error>(HasSubstr("still open")));
}

TEST(CaptureWindow, SnapshotIsVersionOneFromTheAtenBackend) {
  const at::Tensor a = at::ones({4});
  CaptureWindow window;
  window.declare_input("a", a);
  (void)(a + 1);
  const CaptureRecord record = window.finish();
  Registry registry;
  const Snapshot snapshot = make_snapshot(record, {make_capture_epoch(registry, nullptr, record)});
  const Snapshot parsed = parse_snapshot(to_json(snapshot));
  EXPECT_EQ(parsed.producer.backend, "aten");
  EXPECT_EQ(parsed, snapshot);
}

}  // namespace
}  // namespace graphcheck::libtorch
