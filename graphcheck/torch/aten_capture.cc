#include <ATen/record_function.h>
#include <c10/core/Allocator.h>
#include <c10/util/ThreadLocalDebugInfo.h>
#include <graphcheck/config.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/aten_capture.h>
#include <graphcheck/torch/registry.h>
#include <graphcheck/torch/weights_arena.h>
#include <torch/csrc/profiler/orchestration/observer.h>

#include <algorithm>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace graphcheck::libtorch {
namespace detail {

// Learns which storages were allocated while the window is open on this thread: the CPU
// allocator (and CUDA's caching allocator) report every allocation and free to the
// PROFILER_STATE debug info when it says memory profiling is enabled. Torch reads that slot as
// a profiler state (autograd.Function.apply asks `profilerEnabled()` and its config), so the
// watcher is one: a disabled profiler whose memory reporting is on.
class AllocationWatcher final : public torch::profiler::impl::ProfilerStateBase {
 public:
  AllocationWatcher()
      : ProfilerStateBase(
            torch::profiler::impl::ProfilerConfig(torch::profiler::impl::ProfilerState::Disabled)) {
  }
  torch::profiler::impl::ActiveProfilerType profilerType() override {
    return torch::profiler::impl::ActiveProfilerType::NONE;
  }
  void reportMemoryUsage(void* ptr, int64_t alloc_size, size_t /*total_allocated*/,
                         size_t /*total_reserved*/, c10::Device /*device*/) override {
    if (alloc_size > 0) {
      live_.insert(reinterpret_cast<Address>(ptr));
    } else if (alloc_size < 0) {
      live_.erase(reinterpret_cast<Address>(ptr));
    }
  }
  [[nodiscard]] bool memoryProfilingEnabled() const override { return true; }
  [[nodiscard]] bool allocated_inside(Address begin) const { return live_.count(begin) != 0; }

 private:
  std::unordered_set<Address> live_;
};

enum class Origin : std::uint8_t { kGraph, kInput, kExternal };

struct StorageInfo {
  Origin origin = Origin::kExternal;
  Address begin = 0;
  std::uint64_t size = 0;
};

struct CaptureState {
  CaptureOptions options;
  std::thread::id thread;
  at::CallbackHandle handle = 0;
  std::shared_ptr<AllocationWatcher> watcher;
  std::unique_ptr<c10::DebugInfoGuard> memory_guard;
  // Keyed by StorageImpl*: each external storage's weak reference keeps its StorageImpl
  // object (not its bytes) allocated, so no key is reused by another storage meanwhile; graph
  // storages are held weakly for the same reason.
  std::unordered_map<const c10::StorageImpl*, StorageInfo> storages;
  std::vector<c10::weak_intrusive_ptr<c10::StorageImpl>> keep_keys;
  std::vector<std::pair<Address, std::uint64_t>> graph_extents;  // extents a storage left
  std::vector<std::size_t> open;            // indices of the nodes whose op has not ended (nesting)
  std::unique_ptr<GraphRecorder> recorder;  // null with ReplayOps::kDrop
  CaptureRecord record;
  bool finished = false;
};

namespace {

thread_local CaptureState* t_active = nullptr;

const std::string& role(Access access, std::size_t index) {
  // Interned: the hot path copies a short string instead of formatting one.
  thread_local std::vector<std::string> reads;
  thread_local std::vector<std::string> writes;
  auto& table = access == Access::kRead ? reads : writes;
  while (table.size() <= index) {
    table.push_back((access == Access::kRead ? "reads[" : "writes[") +
                    std::to_string(table.size()) + "]");
  }
  return table[index];
}

void classify_new(CaptureState& state, const at::Tensor& tensor, const StorageExtent& extent,
                  Access access, const char* op) {
  const auto* impl = static_cast<const c10::StorageImpl*>(extent.identity);
  StorageInfo info{Origin::kExternal, extent.storage_begin, extent.storage_size};
  if (access == Access::kWrite || state.watcher->allocated_inside(extent.storage_begin)) {
    info.origin = Origin::kGraph;
    state.keep_keys.push_back(tensor.storage().getWeakStorageImpl());
  } else {
    state.record.external.push_back(ExternalStorage{extent.storage_begin, extent.storage_size,
                                                    std::string("aten:") + op,
                                                    tensor.storage().getWeakStorageImpl()});
  }
  state.storages.emplace(impl, info);
}

// A storage seen before whose bytes moved (resize_, set_): remember the extent it left.
void note_moved(CaptureState& state, StorageInfo& info, const at::Tensor& tensor,
                const StorageExtent& extent, const char* op) {
  if (info.origin == Origin::kGraph) {
    state.graph_extents.emplace_back(info.begin, info.size);
  } else if (info.origin == Origin::kExternal) {
    state.record.external.push_back(ExternalStorage{extent.storage_begin, extent.storage_size,
                                                    std::string("aten:") + op,
                                                    tensor.storage().getWeakStorageImpl()});
  }
  info.begin = extent.storage_begin;
  info.size = extent.storage_size;
}

void note_tensor(CaptureState& state, Node& node, const at::Tensor& tensor, Access access,
                 std::size_t& index, const char* op) {
  if (!tensor.defined()) {
    return;
  }
  const auto extent = storage_extent(tensor);
  if (!extent || extent->view_end <= extent->view_begin || extent->storage_begin == 0) {
    return;
  }
  const auto* impl = static_cast<const c10::StorageImpl*>(extent->identity);
  const auto found = state.storages.find(impl);
  if (found == state.storages.end()) {
    classify_new(state, tensor, *extent, access, op);
  } else if (found->second.begin != extent->storage_begin ||
             found->second.size != extent->storage_size) {
    note_moved(state, found->second, tensor, *extent, op);
  }
  node.operands.push_back(Operand{role(access, index++), extent->view_begin,
                                  extent->view_end - extent->view_begin, access});
}

void note_value(CaptureState& state, Node& node, const c10::IValue& value, Access access,
                std::size_t& index, const char* op) {
  if (value.isTensor()) {
    note_tensor(state, node, value.toTensor(), access, index, op);
  } else if (value.isList()) {
    // Tensor lists, optional tensor lists and generic lists are all boxed as lists.
    for (const c10::IValue& element : value.toListRef()) {
      note_value(state, node, element, access, index, op);
    }
  } else if (value.isTuple()) {
    for (const c10::IValue& element : value.toTupleRef().elements()) {
      note_value(state, node, element, access, index, op);
    }
  }
}

// Where a storage the recorder sees came from, by the window's classification (the tensor
// was noted just before, so its storage is in the map unless it has no extent).
StorageOrigin origin_of(const CaptureState& state, const at::Tensor& tensor) {
  const auto found = state.storages.find(tensor.storage().unsafeGetStorageImpl());
  if (found == state.storages.end()) {
    return StorageOrigin::kUnknown;
  }
  return found->second.origin == Origin::kGraph ? StorageOrigin::kGraph
                                                : StorageOrigin::kPreexisting;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  CaptureState* state = t_active;
  if (state == nullptr) {
    return nullptr;
  }
  auto& nodes = state->record.graph.nodes;
  Node& node = nodes.emplace_back();
  node.id = nodes.size() - 1;
  node.type = NodeType::kOp;
  node.name = fn.name();
  state->open.push_back(nodes.size() - 1);
  std::size_t index = 0;
  for (const c10::IValue& input : fn.inputs()) {
    note_value(*state, node, input, Access::kRead, index, fn.name());
  }
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
  Node& node = state->record.graph.nodes[state->open.back()];
  state->open.pop_back();
  std::size_t index = 0;
  for (const c10::IValue& output : fn.outputs()) {
    note_value(*state, node, output, Access::kWrite, index, fn.name());
  }
  state->record.operands += node.operands.size();
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
  state.memory_guard.reset();
  t_active = nullptr;
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

enum class Liveness : std::uint8_t { kAsCaptured, kNow };

Epoch build_epoch(const std::string& label, const Registry& registry, const WeightsArena* arena,
                  const CaptureRecord& record, Liveness liveness) {
  Epoch epoch;
  epoch.label = label;
  epoch.spans = registry.spans();
  epoch.spans.insert(epoch.spans.end(), record.input_spans.begin(), record.input_spans.end());
  epoch.spans.insert(epoch.spans.end(), record.graph_spans.begin(), record.graph_spans.end());
  if (arena != nullptr) {
    epoch.allocations = arena->allocations();
  }
  std::unordered_set<Address> emitted;
  for (const ExternalStorage& storage : record.external) {
    if ((arena != nullptr && arena->contains(storage.begin)) ||
        (liveness == Liveness::kNow && !storage.alive()) || !emitted.insert(storage.begin).second) {
      continue;
    }
    epoch.allocations.push_back(
        Allocation{storage.begin, storage.size, "default", 1, storage.label});
  }
  return epoch;
}

}  // namespace
}  // namespace detail

bool ExternalStorage::alive() const {
  const auto strong = storage.lock();
  return strong && reinterpret_cast<Address>(strong->data_ptr().get()) == begin &&
         strong->nbytes() >= size;
}

CaptureWindow::CaptureWindow(CaptureOptions options)
    : state_(std::make_unique<detail::CaptureState>()) {
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
  state_->record.graph.nodes.reserve(1024);
  if (state_->options.replay_ops == ReplayOps::kKeep) {
    state_->recorder = std::make_unique<detail::GraphRecorder>(
        state_->options.arena != nullptr ? state_->options.arena->mapping() : ArenaMapping());
  }
  state_->watcher = std::make_shared<detail::AllocationWatcher>();
  state_->memory_guard =
      std::make_unique<c10::DebugInfoGuard>(c10::DebugInfoKind::PROFILER_STATE, state_->watcher);
  detail::t_active = state_.get();
  state_->handle =
      at::addThreadLocalCallback(at::RecordFunctionCallback(&detail::on_start, &detail::on_end)
                                     .needsInputs(true)
                                     .needsOutputs(true)
                                     .scopes({at::RecordScope::FUNCTION}));
}

CaptureWindow::~CaptureWindow() {
  if (state_ && !state_->finished && std::this_thread::get_id() == state_->thread) {
    detail::stop(*state_);
  }
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
  state_->storages[static_cast<const c10::StorageImpl*>(extent->identity)] =
      detail::StorageInfo{detail::Origin::kInput, extent->storage_begin, extent->storage_size};
  state_->keep_keys.push_back(tensor.storage().getWeakStorageImpl());
  state_->record.input_spans.push_back(Span{extent->storage_begin, extent->storage_size,
                                            OwnerKind::kInput, std::move(name), std::move(reason)});
}

CaptureRecord CaptureWindow::finish() {
  if (state_->finished) {
    throw Error("CaptureWindow::finish: called twice; the record was already returned");
  }
  if (std::this_thread::get_id() != state_->thread) {
    throw Error("CaptureWindow::finish: called on another thread than the one that opened it");
  }
  detail::stop(*state_);
  auto extents = std::move(state_->graph_extents);
  for (const auto& [impl, info] : state_->storages) {
    if (info.origin == detail::Origin::kGraph) {
      extents.emplace_back(info.begin, info.size);
    }
  }
  state_->record.graph_spans = detail::merge_graph_extents(std::move(extents));
  if (state_->recorder) {
    state_->record.replayable = state_->recorder->finish();
    state_->recorder.reset();
  }
  CaptureRecord record = std::move(state_->record);
  state_->storages.clear();
  state_->keep_keys.clear();
  return record;
}

std::uint64_t CaptureWindow::op_count() const { return state_->record.graph.nodes.size(); }

Epoch make_epoch(const std::string& label, const Registry& registry, const WeightsArena* arena,
                 const CaptureRecord& record) {
  return detail::build_epoch(label, registry, arena, record, detail::Liveness::kNow);
}

Epoch make_capture_epoch(const Registry& registry, const WeightsArena* arena,
                         const CaptureRecord& record) {
  return detail::build_epoch(record.graph.epoch, registry, arena, record,
                             detail::Liveness::kAsCaptured);
}

Snapshot make_snapshot(const CaptureRecord& record, std::vector<Epoch> epochs) {
  Snapshot snapshot;
  snapshot.producer = Producer{"aten", "graphcheck " GRAPHCHECK_VERSION_STRING};
  snapshot.epochs = std::move(epochs);
  snapshot.graphs.push_back(record.graph);
  return snapshot;
}

}  // namespace graphcheck::libtorch
