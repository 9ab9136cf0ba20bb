// Reads one CUDA graph into graphcheck nodes on demand, outside a CUPTI subscription: the graph
// a stream is capturing into, or a graph by handle. What `graphcheck._cuda` calls for the Python
// watch (issue 18: the server flag reads what the graph captured, not only dispatcher ops).
#ifndef GRAPHCHECK_CUPTI_CAPTURE_READER_H_
#define GRAPHCHECK_CUPTI_CAPTURE_READER_H_

#include <cuda.h>
#include <graphcheck/graph.h>

#include <cstdint>
#include <string>
#include <vector>

#include "cupti/driver_api.h"
#include "cupti/graph_reader.h"

namespace graphcheck::cupti {

/// @brief The nodes read from one graph and what could not be read in it.
struct ReadGraph {
  std::uint64_t capture_id = 0;  ///< the capture sequence's id (`cuStreamGetCaptureInfo`); 0
                                 ///< for a graph read by handle
  NodeList nodes;                ///< as `GraphReader::read` returns them (child graphs nested)
  /// Kernel nodes kept without their arguments (they yield no reference).
  std::vector<UnreadableNode> unreadable;
  /// Conditional nodes whose bodies are not read: CUDA 13.0 has no getter for them, and only
  /// the CUPTI backend sees them where they are added (`cuGraphAddNode`). Node ids.
  std::vector<std::uint64_t> conditionals_without_bodies;
};

/// @brief Reads every node of `graph` (child graphs recursively) with a `GraphReader` of its
/// own: no TMA descriptor is known (none was recorded), so kernels get no tensor-map operands.
/// Node ids are `cuptiGetGraphNodeId`.
/// @throws graphcheck::Error when a graph query fails (a kernel whose arguments cannot be
/// read is not an error: it is listed in `unreadable`).
/// Thread safety: CUDA forbids concurrent access to one graph object; the caller serializes
/// reads of one graph with everything else that uses it. Lifetime: `graph` must stay alive
/// for the call; nothing refers to it afterwards.
[[nodiscard]] ReadGraph read_graph_nodes(DriverApi& api, CUgraph graph);

/// @brief Reads the graph `stream` is capturing into (`cuStreamGetCaptureInfo`), as
/// `read_graph_nodes` does. Call it before the capture ends: the graph is complete then, and
/// every operation other than destroying it or removing nodes is permitted during a capture
/// (cuda.h, `cuStreamGetCaptureInfo`).
/// @throws graphcheck::Error naming the stream's capture status when it is not capturing, or
/// the failing call.
/// Thread safety: as `read_graph_nodes`; call it on the capturing thread (nothing else may
/// end the capture meanwhile).
[[nodiscard]] ReadGraph read_capturing_stream(DriverApi& api, CUstream stream);

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_CAPTURE_READER_H_
