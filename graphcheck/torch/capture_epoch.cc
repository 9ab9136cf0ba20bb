// The epochs and the snapshot of an ATen capture record: what the registry, the weights arena
// and the window's record say is live at one moment. Kept apart from the window itself, which
// only records.
#include <c10/core/StorageImpl.h>
#include <graphcheck/config.h>
#include <graphcheck/torch/aten_capture.h>
#include <graphcheck/torch/registry.h>
#include <graphcheck/torch/weights_arena.h>

#include <cstdint>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace graphcheck::libtorch {
namespace {

enum class Liveness : std::uint8_t { kAsCaptured, kNow };

Epoch build_epoch(const std::string& label, std::vector<Span> registry_spans,
                  const WeightsArena* arena, const CaptureRecord& record, Liveness liveness) {
  Epoch epoch;
  epoch.label = label;
  epoch.spans = std::move(registry_spans);
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

bool ExternalStorage::alive() const {
  const auto strong = storage.lock();
  return strong && reinterpret_cast<Address>(strong->data_ptr().get()) == begin &&
         strong->nbytes() >= size;
}

Epoch make_epoch(const std::string& label, const Registry& registry, const WeightsArena* arena,
                 const CaptureRecord& record) {
  return build_epoch(label, registry.spans(), arena, record, Liveness::kNow);
}

Epoch make_epoch(const std::string& label, std::vector<Span> registry_spans,
                 const WeightsArena* arena, const CaptureRecord& record) {
  return build_epoch(label, std::move(registry_spans), arena, record, Liveness::kNow);
}

Epoch make_capture_epoch(const Registry& registry, const WeightsArena* arena,
                         const CaptureRecord& record) {
  return make_capture_epoch(registry.spans(), arena, record);
}

Epoch make_capture_epoch(std::vector<Span> registry_spans, const WeightsArena* arena,
                         const CaptureRecord& record) {
  return build_epoch(record.graph.epoch, std::move(registry_spans), arena, record,
                     Liveness::kAsCaptured);
}

Snapshot make_snapshot(const CaptureRecord& record, std::vector<Epoch> epochs) {
  Snapshot snapshot;
  snapshot.producer = Producer{"aten", "graphcheck " GRAPHCHECK_VERSION_STRING};
  snapshot.epochs = std::move(epochs);
  snapshot.graphs.push_back(record.graph);
  return snapshot;
}

}  // namespace graphcheck::libtorch
