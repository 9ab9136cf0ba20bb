// GraphCapture: captured (template) graphs. A stream capture's end notes its graph; the graph
// is read where a record is needed: into its exec graph's record at instantiate
// (graph_capture.cc), and into its own when `captured_graphs` or `warnings` asks. Reading it
// at capture end as well would ask the driver for every node twice, where the checks only
// ever use exec graphs' records (issue 32 §1).
#include <algorithm>
#include <utility>

#include "cupti/graph_capture.h"

namespace graphcheck::cupti {

void GraphCapture::captured(CUgraph graph) {
  const StateLock lock(*this);
  std::uint32_t id = 0;
  GRAPHCHECK_CUPTI_CHECK(api_, cupti_get_graph_id(graph, &id));
  // A second capture end into the same graph (cuStreamBeginCaptureToGraph) reads it anew.
  captured_[graph] = Captured{id, epoch_, nullptr};
  captured_unreadable_.erase(graph);
}

void GraphCapture::read_captured_locked() const {
  for (auto& [graph, captured] : captured_) {
    if (captured.record != nullptr) {
      continue;
    }
    auto record = std::make_shared<GraphRecord>();
    record->id = captured.id;
    record->epoch = captured.epoch;
    try {
      record->nodes = reader_.read(graph, nullptr);
    } catch (...) {
      // Dropped, as a capture end whose read failed was: the error goes to the caller once.
      const CUgraph failed = graph;
      captured_.erase(failed);
      throw;
    }
    captured_unreadable_[graph] = reader_.take_unreadable();
    captured.record = std::move(record);
    ++stats_.graphs_walked;
  }
}

std::vector<std::shared_ptr<const GraphRecord>> GraphCapture::captured_graphs() const {
  std::vector<std::shared_ptr<const GraphRecord>> out;
  {
    const StateLock lock(*this);
    read_captured_locked();
    for (const auto& [graph, captured] : captured_) {
      out.push_back(captured.record);
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->id < b->id; });
  return out;
}

GraphRecord GraphCapture::read_graph(CUgraph graph, std::uint64_t id) {
  const StateLock lock(*this);
  GraphRecord record;
  record.id = id;
  record.epoch = epoch_;
  record.nodes = reader_.read(graph, nullptr);
  return record;
}

}  // namespace graphcheck::cupti
