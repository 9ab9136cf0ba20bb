// Reading one graph on demand (cupti/capture_reader.h): a GraphReader of its own, no CUPTI
// subscription, no TMA table.
#include "cupti/capture_reader.h"

#include <graphcheck/error.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cupti/tensor_maps.h"

namespace graphcheck::cupti {
namespace {

std::string status_name(CUstreamCaptureStatus status) {
  switch (status) {
    case CU_STREAM_CAPTURE_STATUS_NONE:
      return "not capturing";
    case CU_STREAM_CAPTURE_STATUS_ACTIVE:
      return "capturing";
    case CU_STREAM_CAPTURE_STATUS_INVALIDATED:
      return "its capture was invalidated by an error";
    default:
      return "capture status " + std::to_string(static_cast<int>(status));
  }
}

void find_bodiless_conditionals(const NodeList& nodes, std::vector<std::uint64_t>& out) {
  for (const Node& node : nodes) {
    if (node.type == NodeType::kConditional && node.bodies.empty()) {
      out.push_back(node.id);
    }
    for (const NodeList& body : node.bodies) {
      find_bodiless_conditionals(body, out);
    }
  }
}

}  // namespace

ReadGraph read_graph_nodes(DriverApi& api, CUgraph graph) {
  const TensorMapTable no_tensor_maps;
  GraphReader reader(api, no_tensor_maps);
  ReadGraph out;
  out.nodes = reader.read(graph, nullptr);
  out.unreadable = reader.take_unreadable();
  find_bodiless_conditionals(out.nodes, out.conditionals_without_bodies);
  return out;
}

ReadGraph read_capturing_stream(DriverApi& api, CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t capture_id = 0;
  CUgraph graph = nullptr;
  GRAPHCHECK_CU_CHECK(api, cu_stream_get_capture_info(stream, &status, &capture_id, &graph, nullptr,
                                                      nullptr, nullptr));
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || graph == nullptr) {
    throw Error("graphcheck: stream " + std::to_string(reinterpret_cast<std::uintptr_t>(stream)) +
                " has no graph to read: " + status_name(status) +
                " (read it before its capture ends, on the stream the capture began on)");
  }
  ReadGraph out = read_graph_nodes(api, graph);
  out.capture_id = capture_id;
  return out;
}

}  // namespace graphcheck::cupti
