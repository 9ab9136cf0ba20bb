#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <graphcheck/detail/pointer_table.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/aten_capture.h>
#include <graphcheck/torch/detail/allocation_watcher.h>
#include <graphcheck/torch/detail/op_names.h>
#include <graphcheck/torch/registry.h>
#include <graphcheck/torch/weights_arena.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace graphcheck::libtorch {
namespace detail {

using graphcheck::detail::PointerTable;

enum class Origin : std::uint8_t { kGraph, kInput, kExternal };

struct StorageInfo {
  Origin origin = Origin::kExternal;
  Address begin = 0;
  std::uint64_t size = 0;
};

// One op as the window logs it while the forward runs: its inputs are operands
// [inputs, inputs + input_count), its outputs [outputs, outputs + output_count) of the log
// (nested ops log theirs in between). Its node, with its name and role strings, is built by
// finish (Nodes::kBuild) or nodes(): nothing is allocated per op inside the forward but the
// log's amortized growth.
struct OpEntry {
  std::uint32_t name = 0;
  std::uint32_t inputs = 0;
  std::uint32_t input_count = 0;
  std::uint32_t outputs = 0;
  std::uint32_t output_count = 0;
};

struct LoggedOperand {
  Address begin = 0;
  std::uint64_t size = 0;
};

struct CaptureState {
  CaptureOptions options;
  std::thread::id thread;
  at::CallbackHandle handle = 0;
  std::shared_ptr<AllocationWatcher> watcher;
  std::unique_ptr<c10::DebugInfoGuard> memory_guard;
  // The storages from outside the window (external, inputs) and those only an op's output
  // says are the graph's, keyed by StorageImpl*: each one's weak reference keeps its
  // StorageImpl object (not its bytes) allocated, so no key is reused by another storage
  // meanwhile. A storage over memory allocated inside the window is not kept here: the
  // allocation watcher logged its block, and one table entry per intermediate made every
  // operand's lookup a cache miss in a deep forward (thousands of intermediates).
  PointerTable<StorageInfo> storages;
  std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> keep_keys;
  std::vector<std::pair<Address, std::uint64_t>> graph_extents;  // extents a storage left
  std::vector<std::size_t> open;  // indices of the ops whose op has not ended (nesting)
  OpNames names;
  std::vector<OpEntry> ops;
  std::vector<LoggedOperand> operands;
  std::vector<std::uint32_t> external_names;  // per record.external entry: its op's name
  std::unique_ptr<GraphRecorder> recorder;    // null with ReplayOps::kDrop
  CaptureRecord record;
  bool finished = false;
  // Set by a destructor on another thread, which then gives the state up to its own thread
  // (the only thread that may remove its callback and restore its debug info).
  std::atomic<bool> abandoned{false};
};

namespace {

thread_local CaptureState* t_active = nullptr;

const std::string& role(Access access, std::size_t index) {
  // Interned: each node copies a short string instead of formatting one.
  thread_local std::vector<std::string> reads;
  thread_local std::vector<std::string> writes;
  auto& table = access == Access::kRead ? reads : writes;
  while (table.size() <= index) {
    table.push_back((access == Access::kRead ? "reads[" : "writes[") +
                    std::to_string(table.size()) + "]");
  }
  return table[index];
}

std::uintptr_t key_of(const void* impl) { return reinterpret_cast<std::uintptr_t>(impl); }

void add_external(CaptureState& state, const at::Tensor& tensor, const StorageExtent& extent,
                  std::uint32_t op) {
  // The label ("aten:<op>") is written at finish, from the op's name.
  state.record.external.push_back(ExternalStorage{
      extent.storage_begin, extent.storage_size, {}, tensor.storage().getWeakStorageImpl()});
  state.external_names.push_back(op);
}

// A storage first seen whose memory was not allocated inside the window: the graph's if an op
// wrote it as an output, else external.
void classify_new(CaptureState& state, const at::Tensor& tensor, const StorageExtent& extent,
                  Access access, std::uint32_t op) {
  StorageInfo info{Origin::kExternal, extent.storage_begin, extent.storage_size};
  if (access == Access::kWrite) {
    info.origin = Origin::kGraph;
    state.keep_keys.push_back(tensor.storage().getWeakStorageImpl());
  } else {
    add_external(state, tensor, extent, op);
  }
  state.storages.insert(key_of(extent.identity), info);
}

// A storage seen before whose bytes moved (resize_, set_): remember the extent it left.
void note_moved(CaptureState& state, StorageInfo& info, const at::Tensor& tensor,
                const StorageExtent& extent, std::uint32_t op) {
  if (info.origin == Origin::kGraph) {
    state.graph_extents.emplace_back(info.begin, info.size);
  } else if (info.origin == Origin::kExternal) {
    add_external(state, tensor, extent, op);
  }
  info.begin = extent.storage_begin;
  info.size = extent.storage_size;
}

// Classifies the tensor's storage, and logs it as an operand of the op unless `log` is false
// (an op that touches no memory of its own: OpNames::touches_nothing).
void note_tensor(CaptureState& state, const at::Tensor& tensor, Access access, std::uint32_t op,
                 bool log) {
  if (!tensor.defined()) {
    return;
  }
  const auto extent = storage_extent(tensor);
  if (!extent || extent->view_end <= extent->view_begin || extent->storage_begin == 0) {
    return;
  }
  StorageInfo* found = state.storages.find(key_of(extent->identity));
  if (found == nullptr) {
    if (!state.watcher->allocated_inside(extent->storage_begin)) {
      classify_new(state, tensor, *extent, access, op);
    }  // else the graph's memory, logged at its allocation
  } else if (found->begin != extent->storage_begin || found->size != extent->storage_size) {
    note_moved(state, *found, tensor, *extent, op);
  }
  if (log) {
    state.operands.push_back(
        LoggedOperand{extent->view_begin, extent->view_end - extent->view_begin});
  }
}

void note_value(CaptureState& state, const c10::IValue& value, Access access, std::uint32_t op,
                bool log) {
  if (value.isTensor()) {
    note_tensor(state, value.toTensor(), access, op, log);
  } else if (value.isList()) {
    // Tensor lists, optional tensor lists and generic lists are all boxed as lists.
    for (const c10::IValue& element : value.toListRef()) {
      note_value(state, element, access, op, log);
    }
  } else if (value.isTuple()) {
    for (const c10::IValue& element : value.toTupleRef().elements()) {
      note_value(state, element, access, op, log);
    }
  }
}

// Where a storage the recorder sees came from, by the window's classification (the tensor
// was noted just before: its storage is in the map, or over memory allocated inside, unless it
// has no extent).
StorageOrigin origin_of(const CaptureState& state, const at::Tensor& tensor) {
  const c10::Storage& storage = tensor.storage();
  const StorageInfo* found = state.storages.find(key_of(storage.unsafeGetStorageImpl()));
  if (found == nullptr) {
    // Only the storage's first byte is needed, not the view's extent note_tensor computed
    // (reading it may throw where storage_extent caught it: a storage with inaccessible data).
    try {
      const auto begin = reinterpret_cast<Address>(storage.data_ptr().get());
      return state.watcher->allocated_inside(begin) ? StorageOrigin::kGraph
                                                    : StorageOrigin::kUnknown;
    } catch (const std::exception&) {
      return StorageOrigin::kUnknown;
    }
  }
  return found->origin == Origin::kGraph ? StorageOrigin::kGraph : StorageOrigin::kPreexisting;
}

bool reclaim_abandoned();

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  CaptureState* state = t_active;
  if (state == nullptr) {
    // An op on a thread without a window, which runs this callback only because torch copied
    // the window thread's callbacks into it (at::launch, autograd's threads): counted, not
    // recorded.
    if (AllocationWatcher* watcher = AllocationWatcher::in_this_thread(); watcher != nullptr) {
      watcher->count_foreign_op();
    }
    return nullptr;
  }
  if (reclaim_abandoned()) {
    return nullptr;
  }
  const std::uint32_t name = state->names.intern(fn);
  const auto first = static_cast<std::uint32_t>(state->operands.size());
  state->open.push_back(state->ops.size());
  state->ops.push_back(OpEntry{name, first, 0, 0, 0});
  // Storages are classified whatever the op (the first op to see one names it), but an op
  // that touches no memory of its own logs no operand: its nested ops log theirs.
  const bool log = !state->names.touches_nothing(name);
  for (const c10::IValue& input : fn.inputs()) {
    note_value(*state, input, Access::kRead, name, log);
  }
  state->ops[state->open.back()].input_count =
      static_cast<std::uint32_t>(state->operands.size()) - first;
  if (state->recorder) {
    const auto classify = [state](const at::Tensor& tensor) { return origin_of(*state, tensor); };
    state->recorder->on_start(fn, classify);
  }
  return nullptr;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* /*context*/) {
  CaptureState* state = t_active;
  if (state == nullptr || state->open.empty()) {
    return;
  }
  const std::size_t op = state->open.back();
  state->open.pop_back();
  const auto first = static_cast<std::uint32_t>(state->operands.size());
  const std::uint32_t name = state->ops[op].name;
  const std::uint32_t views = state->names.view_returns(name);
  const bool log = !state->names.touches_nothing(name);
  const auto& outputs = fn.outputs();
  for (std::size_t r = 0; r < outputs.size(); ++r) {
    if (r >= 32 || (views & (std::uint32_t{1} << r)) == 0) {
      note_value(*state, outputs[r], Access::kWrite, name, log);
    }
  }
  state->ops[op].outputs = first;
  state->ops[op].output_count = static_cast<std::uint32_t>(state->operands.size()) - first;
  if (state->recorder) {  // after the outputs are classified above
    const auto classify = [state](const at::Tensor& tensor) { return origin_of(*state, tensor); };
    state->recorder->on_end(fn, classify);
  }
}

void stop(CaptureState& state) {
  if (state.finished) {
    return;
  }
  state.finished = true;
  at::removeCallback(state.handle);
  state.watcher->close();
  state.memory_guard.reset();
  t_active = nullptr;
}

bool reclaim_abandoned() {
  CaptureState* state = t_active;
  if (state == nullptr || !state->abandoned.load(std::memory_order_acquire)) {
    return false;
  }
  stop(*state);  // on its own thread, as a window's stop must be
  delete state;  // NOLINT(cppcoreguidelines-owning-memory): released by ~CaptureWindow
  return true;
}

// Frees a window abandoned on a thread that exits before its next op. First touched after the
// thread's RecordFunction callback is added, so it is destroyed before torch's thread-local
// callback registry is (thread-local objects are destroyed in reverse order of construction).
struct AbandonedAtExit {
  AbandonedAtExit() = default;
  AbandonedAtExit(const AbandonedAtExit&) = delete;
  AbandonedAtExit& operator=(const AbandonedAtExit&) = delete;
  AbandonedAtExit(AbandonedAtExit&&) = delete;
  AbandonedAtExit& operator=(AbandonedAtExit&&) = delete;
  ~AbandonedAtExit() {
    if (armed) {
      (void)reclaim_abandoned();
    }
  }
  bool armed = false;
};
thread_local AbandonedAtExit t_at_exit;

// The op nodes of the log: "reads[i]" for the inputs, "writes[i]" for the outputs.
NodeList build_nodes(const CaptureState& state) {
  NodeList nodes(state.ops.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const OpEntry& op = state.ops[i];
    Node& node = nodes[i];
    node.id = i;
    node.type = NodeType::kOp;
    node.name = state.names[op.name];
    node.operands.reserve(std::size_t{op.input_count} + op.output_count);
    const auto add = [&](std::uint32_t first, std::uint32_t count, Access access) {
      for (std::uint32_t k = 0; k < count; ++k) {
        const LoggedOperand& operand = state.operands[first + k];
        node.operands.push_back(Operand{role(access, k), operand.begin, operand.size, access});
      }
    };
    add(op.inputs, op.input_count, Access::kRead);
    add(op.outputs, op.output_count, Access::kWrite);
  }
  return nodes;
}

std::vector<Span> merge_graph_extents(std::vector<std::pair<Address, std::uint64_t>> extents) {
  std::sort(extents.begin(), extents.end());
  std::vector<Span> spans;
  for (const auto& [begin, size] : extents) {
    if (!spans.empty() && begin <= spans.back().end()) {
      spans.back().size = std::max(spans.back().end(), begin + size) - spans.back().begin;
    } else {
      spans.push_back(Span{begin, size, OwnerKind::kGraph, "aten:capture intermediates", ""});
    }
  }
  return spans;
}

}  // namespace
}  // namespace detail

CaptureWindow::CaptureWindow(CaptureOptions options)
    : state_(std::make_unique<detail::CaptureState>()) {
  (void)detail::reclaim_abandoned();
  if (detail::t_active != nullptr) {
    throw Error(
        "CaptureWindow: this thread already has an open capture window; finish it first "
        "(one window per thread)");
  }
  state_->options = std::move(options);
  state_->thread = std::this_thread::get_id();
  state_->record.graph.id = state_->options.graph_id;
  state_->record.graph.epoch = state_->options.epoch;
  state_->record.graph.reader = std::string(kReaderAtenDispatcher);
  state_->ops.reserve(1024);
  state_->operands.reserve(4096);
  if (state_->options.replay_ops == ReplayOps::kKeep) {
    state_->recorder = std::make_unique<detail::GraphRecorder>(
        state_->options.arena != nullptr ? state_->options.arena->mapping() : ArenaMapping());
  }
  state_->watcher = std::make_shared<detail::AllocationWatcher>();
  // A profiler running on this thread holds the slot, and every torch profiler reads whatever
  // the slot holds as its own state, unchecked in a release build (a static_cast): pushing
  // the watcher over it made the profiler's callbacks read past the watcher (SIGSEGV, SIGBUS,
  // a glibc mutex assertion, a hang). The window then goes without the watcher.
  if (c10::ThreadLocalDebugInfo::get(c10::DebugInfoKind::PROFILER_STATE) == nullptr) {
    state_->memory_guard =
        std::make_unique<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE, state_->watcher);
  } else {
    state_->record.allocations_watched = false;
  }
  detail::t_active = state_.get();
  state_->handle =
      at::addThreadLocalCallback(at::RecordFunctionCallback(&detail::on_start, &detail::on_end)
                                     .needsInputs(true)
                                     .needsOutputs(true)
                                     .scopes({at::RecordScope::FUNCTION}));
  detail::t_at_exit.armed = true;  // constructed now, after the callback registry (see there)
}

CaptureWindow::~CaptureWindow() {
  if (!state_ || state_->finished) {
    return;
  }
  if (std::this_thread::get_id() == state_->thread) {
    detail::stop(*state_);
    return;
  }
  // Another thread: the constructing thread's callback and t_active still point at the state,
  // and only that thread may remove them; it frees the state at its next op or window.
  state_->abandoned.store(true, std::memory_order_release);
  (void)state_.release();
}

void CaptureWindow::declare_input(std::string name, const at::Tensor& tensor, std::string reason) {
  if (state_->finished) {
    throw Error("CaptureWindow::declare_input: input '" + name +
                "' declared after finish(); declare inputs while the window is open");
  }
  const auto extent = storage_extent(tensor);
  if (!extent || extent->storage_size == 0) {
    throw Error("CaptureWindow::declare_input: input '" + name +
                "': expected a tensor with readable storage (strided, not meta), found none");
  }
  state_->storages.assign(
      detail::key_of(extent->identity),
      detail::StorageInfo{detail::Origin::kInput, extent->storage_begin, extent->storage_size});
  state_->keep_keys.push_back(tensor.storage().getWeakStorageImpl());
  state_->record.input_spans.push_back(Span{extent->storage_begin, extent->storage_size,
                                            OwnerKind::kInput, std::move(name), std::move(reason)});
}

CaptureRecord CaptureWindow::finish(Nodes nodes) {
  if (state_->finished) {
    throw Error("CaptureWindow::finish: called twice; the record was already returned");
  }
  if (std::this_thread::get_id() != state_->thread) {
    throw Error("CaptureWindow::finish: called on another thread than the one that opened it");
  }
  detail::stop(*state_);
  auto extents = std::move(state_->graph_extents);
  const auto allocated = state_->watcher->take_allocated();
  state_->record.foreign_ops = state_->watcher->foreign_ops();
  extents.insert(extents.end(), allocated.begin(), allocated.end());
  state_->storages.for_each([&extents](std::uintptr_t /*impl*/, const detail::StorageInfo& info) {
    if (info.origin == detail::Origin::kGraph) {
      extents.emplace_back(info.begin, info.size);
    }
  });
  state_->record.graph_spans = detail::merge_graph_extents(std::move(extents));
  state_->record.operands = state_->operands.size();
  if (nodes == Nodes::kBuild) {
    state_->record.graph.nodes = detail::build_nodes(*state_);
  }
  for (std::size_t i = 0; i < state_->record.external.size(); ++i) {
    state_->record.external[i].label = "aten:" + state_->names[state_->external_names[i]];
  }
  if (state_->recorder) {
    state_->record.replayable = state_->recorder->finish();
    state_->recorder.reset();
  }
  CaptureRecord record = std::move(state_->record);
  // What only the open window needed; a window finished with Nodes::kLater keeps its log
  // (op names, ops, operands) for nodes() as long as its record lives.
  state_->storages.clear();
  state_->keep_keys.clear();
  state_->external_names.clear();
  state_->watcher.reset();
  if (nodes == Nodes::kBuild) {
    state_->ops.clear();
    state_->operands.clear();
  }
  return record;
}

NodeList CaptureWindow::nodes() const {
  if (!state_->finished) {
    throw Error("CaptureWindow::nodes: the window is still open; call finish(Nodes::kLater) first");
  }
  return detail::build_nodes(*state_);
}

std::uint64_t CaptureWindow::op_count() const { return state_->ops.size(); }

}  // namespace graphcheck::libtorch
