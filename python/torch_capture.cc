// graphcheck._torch: the ATen capture window and what it recorded, for graphcheck._capture.
// Epochs are built here from the registry the Python side passes (named parameters and
// buffers, declared runtime state and inputs), with the census' runtime ranges and labels.
#include <graphcheck/check_session.h>
#include <graphcheck/epoch.h>
#include <graphcheck/error.h>
#include <graphcheck/graph.h>
#include <graphcheck/snapshot.h>
#include <graphcheck/torch/aten_capture.h>
#include <graphcheck/torch/captured_graph.h>
#include <graphcheck/torch/registry.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_set>
#include <utility>
#include <vector>

#include "python/text_arg.h"
#include "python/torch_bindings.h"

namespace graphcheck::detail {
namespace {

namespace py = pybind11;

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;
using Declared = std::vector<std::tuple<std::string, at::Tensor, std::string>>;
/// (begin, end, name, reason): runtime state the census found by attribute name.
using RuntimeRanges = std::vector<std::tuple<Address, Address, std::string, std::string>>;
/// (begin, end, path): census paths of unregistered storages, the best allocation labels.
using LabelRanges = std::vector<std::tuple<Address, Address, std::string>>;

/// A model's registry as the Python side lists it (its parameters and buffers, the runtime
/// ranges its census found, the census paths of its unregistered storages), turned into spans
/// once: every epoch of the registry's moment copies them instead of reading each tensor again
/// (the watch's captures of one unchanged model, issue 32). Holds the tensors, so their
/// storages (and the identities that deduplicate declarations against them) stay valid.
class RegistrySpans {
 public:
  RegistrySpans(const NamedTensors& parameters, const NamedTensors& buffers,
                RuntimeRanges runtime_ranges, LabelRanges labels)
      : runtime_ranges_(std::move(runtime_ranges)), labels_(std::move(labels)) {
    registry_.add_named(parameters, OwnerKind::kParameter);
    registry_.add_named(buffers, OwnerKind::kBuffer);
    spans_ = registry_.spans();
    identities_ = registry_.storage_identities();
    std::sort(labels_.begin(), labels_.end());  // census_label's order
  }

  /// The spans of an epoch: the registry's, then the declarations' whose storages it lacks.
  [[nodiscard]] std::vector<Span> with(const Declared& runtime, const Declared& inputs) const {
    std::vector<Span> spans = spans_;
    if (runtime.empty() && inputs.empty()) {
      return spans;
    }
    libtorch::Registry declared;
    for (const auto& [name, tensor, reason] : runtime) {
      declared.declare_runtime(name, tensor, reason);
    }
    for (const auto& [name, tensor, reason] : inputs) {
      declared.declare_input(name, tensor, reason);
    }
    std::vector<Span> more = declared.spans(identities_);
    spans.insert(spans.end(), std::make_move_iterator(more.begin()),
                 std::make_move_iterator(more.end()));
    return spans;
  }

  [[nodiscard]] const RuntimeRanges& runtime_ranges() const { return runtime_ranges_; }
  [[nodiscard]] const LabelRanges& labels() const { return labels_; }
  [[nodiscard]] std::size_t span_count() const { return spans_.size(); }

 private:
  libtorch::Registry registry_;
  std::vector<Span> spans_;
  std::unordered_set<const void*> identities_;
  RuntimeRanges runtime_ranges_;
  LabelRanges labels_;  // sorted by begin
};

enum class Liveness : std::uint8_t { kAsCaptured, kNow };

// The census path of the first unregistered storage that overlaps [begin, end), or nullptr.
const std::string* census_label(const LabelRanges& labels, Address begin, Address end) {
  // `labels` is sorted by begin: the candidates start before `end`; the closest one to
  // `begin` from above, else the one just below it.
  const auto after = std::lower_bound(
      labels.begin(), labels.end(), begin,
      [](const auto& label, Address address) { return std::get<0>(label) < address; });
  if (after != labels.end() && std::get<0>(*after) < end) {
    return &std::get<2>(*after);
  }
  if (after != labels.begin()) {
    const auto& below = *std::prev(after);
    if (std::get<1>(below) > begin) {
      return &std::get<2>(below);
    }
  }
  return nullptr;
}

class PyRecord {
 public:
  // `log`: the finished window whose op log holds the record's nodes (finish(Nodes::kLater)),
  // or null when the record has them.
  PyRecord(libtorch::CaptureRecord record, std::shared_ptr<PyArena> arena,
           std::unique_ptr<libtorch::CaptureWindow> log = nullptr)
      : record_(std::move(record)), arena_(std::move(arena)), log_(std::move(log)) {}
  PyRecord(const PyRecord&) = delete;
  PyRecord& operator=(const PyRecord&) = delete;
  PyRecord(PyRecord&&) = delete;
  PyRecord& operator=(PyRecord&&) = delete;

  // The kept ops may hold the last reference to a c10d ProcessGroup, whose destructor joins
  // its worker threads; one of them may be waiting for the GIL (to release a tensor's Python
  // object). Destroying the graph while holding the GIL deadlocks: drop it without.
  ~PyRecord() {
    if (record_.replayable && PyGILState_Check() != 0) {
      const py::gil_scoped_release release;
      record_.replayable.reset();
    }
  }

  [[nodiscard]] Epoch epoch(const std::string& label, const RegistrySpans& registry,
                            const Declared& runtime, const Declared& inputs,
                            Liveness liveness) const {
    const libtorch::WeightsArena* arena = arena_ ? &arena_->arena() : nullptr;
    std::vector<Span> spans = registry.with(runtime, inputs);
    Epoch epoch = liveness == Liveness::kAsCaptured
                      ? libtorch::make_capture_epoch(std::move(spans), arena, record_)
                      : libtorch::make_epoch(label, std::move(spans), arena, record_);
    // Runtime state found by the census, unless a span already starts there (registered
    // tensors take precedence, as in the registry).
    std::unordered_set<Address> starts;
    for (const Span& span : epoch.spans) {
      starts.insert(span.begin);
    }
    for (const auto& [begin, end, name, reason] : registry.runtime_ranges()) {
      if (end > begin && starts.insert(begin).second) {
        epoch.spans.push_back(Span{begin, end - begin, OwnerKind::kRuntime, name, reason});
      }
    }
    // Labels: the census path where the census reaches the storage, else the Python frame
    // that allocated it in the arena, else what the backend gave ("aten:<op>").
    if (arena_) {
      arena_->label_allocations(epoch);
    }
    for (Allocation& allocation : epoch.allocations) {
      if (const std::string* path = census_label(registry.labels(), allocation.begin,
                                                 allocation.begin + allocation.size)) {
        allocation.label = *path;
      }
    }
    return epoch;
  }

  // With the window's log, the nodes are built straight into the snapshot (a copy of the
  // graph costs as much as building it) and the log stays for the next one.
  [[nodiscard]] Snapshot snapshot(std::vector<Epoch> epochs) const {
    Snapshot snapshot = libtorch::make_snapshot(record_, std::move(epochs));
    if (log_) {
      snapshot.graphs.front().nodes = log_->nodes();
    }
    return snapshot;
  }

  // A check session over the graph, no epoch put yet; the snapshot is moved into it.
  [[nodiscard]] CheckSession check_session() const { return CheckSession(snapshot({})); }

  void replay() const {
    if (!record_.replayable) {
      throw Error("Capture.replay: the capture kept no ops to replay");
    }
    record_.replayable->replay();
  }

  // The same record with the graph's nodes read by another backend (the CUDA graph itself):
  // the owners (graph spans, inputs, external storages) stay the dispatcher's. The
  // dispatcher's own nodes are not built for it.
  [[nodiscard]] std::shared_ptr<PyRecord> with_nodes(NodeList nodes, std::string reader) const {
    if (reader.empty()) {
      throw py::value_error("CaptureRecord.with_nodes: reader must name what read the nodes");
    }
    libtorch::CaptureRecord record = record_;
    record.graph.nodes = std::move(nodes);
    record.graph.reader = std::move(reader);
    return std::make_shared<PyRecord>(std::move(record), arena_);
  }

  [[nodiscard]] std::uint64_t node_count() const {
    return log_ ? log_->op_count() : record_.graph.nodes.size();
  }
  [[nodiscard]] const std::string& reader() const { return record_.graph.reader; }
  [[nodiscard]] std::uint64_t operands() const { return record_.operands; }
  [[nodiscard]] std::uint64_t foreign_ops() const { return record_.foreign_ops; }
  [[nodiscard]] bool allocations_watched() const { return record_.allocations_watched; }
  [[nodiscard]] const libtorch::CapturedGraph* graph() const { return record_.replayable.get(); }

 private:
  libtorch::CaptureRecord record_;  // without its nodes while `log_` holds them
  std::shared_ptr<PyArena> arena_;
  // The finished window whose op log holds the nodes: built on need (a watch's CUDA graph,
  // whose reader's nodes replace them through with_nodes, never builds them).
  std::unique_ptr<libtorch::CaptureWindow> log_;
};

// "keep": the CPU twin replays its graph and keeps its private memory alive; "drop": a CUDA
// graph is replayed by CUDA, and an engine reuses the memory its captures freed.
libtorch::ReplayOps parse_replay_ops(const std::string& value) {
  if (value == "keep") {
    return libtorch::ReplayOps::kKeep;
  }
  if (value == "drop") {
    return libtorch::ReplayOps::kDrop;
  }
  throw py::value_error("CaptureWindow: replay_ops must be 'keep' or 'drop', got '" + value + "'");
}

// The window as a Python object: closed explicitly (`close`, idempotent), on the thread that
// opened it, whatever the forward did.
class PyWindow {
 public:
  PyWindow(std::shared_ptr<PyArena> arena, std::uint64_t graph_id, const TextArg& epoch,
           const TextArg& replay_ops)
      : arena_(std::move(arena)) {
    libtorch::CaptureOptions options;
    options.graph_id = graph_id;
    options.epoch = epoch.utf8("CaptureWindow epoch");
    options.replay_ops = parse_replay_ops(replay_ops.utf8("CaptureWindow replay_ops"));
    options.arena = arena_ ? &arena_->arena() : nullptr;
    window_ = std::make_unique<libtorch::CaptureWindow>(std::move(options));
  }

  void declare_input(const TextArg& name, const at::Tensor& tensor, const TextArg& reason) {
    require_open("declare_input");
    window_->declare_input(name.utf8("declare_input name"), tensor,
                           reason.utf8("declare_input reason"));
  }

  std::shared_ptr<PyRecord> finish() {
    require_open("finish");
    libtorch::CaptureRecord record = window_->finish(libtorch::Nodes::kLater);
    return std::make_shared<PyRecord>(std::move(record), arena_, std::move(window_));
  }

  void close() { window_.reset(); }
  [[nodiscard]] bool is_open() const { return window_ != nullptr; }

 private:
  void require_open(const char* what) const {
    if (!window_) {
      throw Error(std::string("CaptureWindow.") + what + ": the window is closed");
    }
  }

  std::shared_ptr<PyArena> arena_;
  std::unique_ptr<libtorch::CaptureWindow> window_;
};

}  // namespace

void bind_capture(py::module_& module) {
  py::class_<PyWindow> window(
      module, "CaptureWindow",
      "The ATen capture window of this thread (graphcheck::libtorch::CaptureWindow). "
      "graphcheck.capture opens and closes it.");
  window.def(py::init<std::shared_ptr<PyArena>, std::uint64_t, const TextArg&, const TextArg&>(),
             py::arg("arena"), py::arg("graph_id") = 1, py::arg("epoch") = "capture",
             py::arg("replay_ops") = "keep");
  window.def("declare_input", &PyWindow::declare_input, py::arg("name"), py::arg("tensor"),
             py::arg("reason"));
  window.def("finish", &PyWindow::finish);
  window.def("close", &PyWindow::close);
  window.def_property_readonly("is_open", &PyWindow::is_open);

  py::class_<PyRecord, std::shared_ptr<PyRecord>> record(
      module, "CaptureRecord",
      "What a capture window recorded: the graph of op nodes and the replayable ops.");
  py::class_<RegistrySpans, std::shared_ptr<RegistrySpans>> spans(
      module, "RegistrySpans",
      "A model's registry turned into spans once, for many epochs of one unchanged registry.");
  spans.def(py::init<const NamedTensors&, const NamedTensors&, RuntimeRanges, LabelRanges>(),
            py::arg("parameters"), py::arg("buffers"), py::arg("runtime_ranges"),
            py::arg("labels"));
  spans.def("__len__", &RegistrySpans::span_count);
  // The lists' form makes its RegistrySpans for the one epoch.
  const auto registry_of = [](const NamedTensors& parameters, const NamedTensors& buffers,
                              RuntimeRanges runtime_ranges, LabelRanges labels) {
    return RegistrySpans(parameters, buffers, std::move(runtime_ranges), std::move(labels));
  };
  record.def(
      "capture_epoch",
      [registry_of](const PyRecord& self, const NamedTensors& parameters,
                    const NamedTensors& buffers, const Declared& runtime, const Declared& inputs,
                    RuntimeRanges runtime_ranges, LabelRanges labels) {
        return self.epoch(
            {}, registry_of(parameters, buffers, std::move(runtime_ranges), std::move(labels)),
            runtime, inputs, Liveness::kAsCaptured);
      },
      py::arg("parameters"), py::arg("buffers"), py::arg("runtime"), py::arg("inputs"),
      py::arg("runtime_ranges"), py::arg("labels"));
  record.def(
      "capture_epoch_from",
      [](const PyRecord& self, const RegistrySpans& registry, const Declared& runtime,
         const Declared& inputs) {
        return self.epoch({}, registry, runtime, inputs, Liveness::kAsCaptured);
      },
      py::arg("registry"), py::arg("runtime"), py::arg("inputs"));
  record.def(
      "epoch",
      [registry_of](const PyRecord& self, const TextArg& label, const NamedTensors& parameters,
                    const NamedTensors& buffers, const Declared& runtime, const Declared& inputs,
                    RuntimeRanges runtime_ranges, LabelRanges labels) {
        return self.epoch(
            label.utf8("epoch label"),
            registry_of(parameters, buffers, std::move(runtime_ranges), std::move(labels)), runtime,
            inputs, Liveness::kNow);
      },
      py::arg("label"), py::arg("parameters"), py::arg("buffers"), py::arg("runtime"),
      py::arg("inputs"), py::arg("runtime_ranges"), py::arg("labels"));
  record.def("snapshot", &PyRecord::snapshot, py::arg("epochs"));
  record.def("check_session", &PyRecord::check_session);
  record.def("with_nodes", &PyRecord::with_nodes, py::arg("nodes"), py::arg("reader"));
  record.def_property_readonly("reader", [](const PyRecord& self) { return self.reader(); });
  record.def("replay", &PyRecord::replay, py::call_guard<py::gil_scoped_release>());
  record.def_property_readonly("node_count",
                               [](const PyRecord& self) { return self.node_count(); });
  record.def_property_readonly("operands", [](const PyRecord& self) { return self.operands(); });
  record.def_property_readonly("foreign_ops",
                               [](const PyRecord& self) { return self.foreign_ops(); });
  record.def_property_readonly("allocations_watched",
                               [](const PyRecord& self) { return self.allocations_watched(); });
  record.def_property_readonly("op_names", [](const PyRecord& self) {
    return self.graph() != nullptr ? self.graph()->op_names() : std::vector<std::string>{};
  });
  record.def_property_readonly("private_bytes", [](const PyRecord& self) {
    return self.graph() != nullptr ? self.graph()->private_bytes() : std::uint64_t{0};
  });
  record.def_property_readonly("preexisting_count", [](const PyRecord& self) {
    return self.graph() != nullptr ? self.graph()->preexisting_count() : std::size_t{0};
  });
}

}  // namespace graphcheck::detail
