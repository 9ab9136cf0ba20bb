// graphcheck._cuda: reads the CUDA graph a stream is capturing (or a graph by handle) into
// graphcheck nodes, through the CUPTI backend's GraphReader on the real driver table, for the
// Python watch (issue 18; docs/server.md, "Which backend read a graph"). Built only where the
// CUDA and CUPTI headers are found (cupti/); links neither libcuda nor libcupti: the driver
// table is loaded with dlopen on first use (`load_driver_api`), so the module imports on a
// machine without a driver, and its calls then raise graphcheck.GraphcheckError saying why.
#include <graphcheck/config.h>
#include <graphcheck/error.h>
#include <graphcheck/graph.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cupti/capture_reader.h"
#include "cupti/driver_api.h"
#include "python/core_error.h"

namespace graphcheck::detail {
namespace {

namespace py = pybind11;

/// The driver table, loaded once (the first call that needs it) and never unloaded
/// (docs/cupti.md: CUPTI may still hold it). Function-local static: thread-safe to start.
struct LoadedDriver {
  std::unique_ptr<cupti::DriverApi> api;
  std::string problem;  ///< why the table is missing; empty when loaded
};

LoadedDriver& loaded_driver() {
  static LoadedDriver driver = [] {
    cupti::DriverApiLoad load = cupti::load_driver_api();
    LoadedDriver out;
    if (load.status.ok()) {
      out.api = std::move(load.api);
    } else {
      out.problem = load.status.message();
    }
    return out;
  }();
  return driver;
}

cupti::DriverApi& driver_api() {
  LoadedDriver& driver = loaded_driver();
  if (!driver.api) {
    throw Error("graphcheck._cuda: cannot read CUDA graphs: " + driver.problem);
  }
  return *driver.api;
}

/// What Python gets: the nodes as _core.Node values, the rest as plain values.
struct PyReadGraph {
  cupti::ReadGraph read;
};

template <typename Read>
PyReadGraph read_without_gil(Read&& read) {
  cupti::DriverApi& api = driver_api();
  // Driver calls only: other Python threads run meanwhile. The result is converted with the
  // GIL held again (the return value).
  const py::gil_scoped_release release;
  return PyReadGraph{read(api)};
}

void bind_read_graph(py::module_& m) {
  py::class_<PyReadGraph>(m, "ReadGraph",
                          "The nodes read from one CUDA graph and what could not be read in it.")
      .def_property_readonly(
          "nodes", [](const PyReadGraph& self) { return self.read.nodes; },
          "The graph's nodes (list[graphcheck.Node]; child graphs nested; a copy on read).")
      .def_property_readonly(
          "capture_id", [](const PyReadGraph& self) { return self.read.capture_id; },
          "The capture sequence's id (cuStreamGetCaptureInfo); 0 for a graph read by handle.")
      .def_property_readonly(
          "unreadable",
          [](const PyReadGraph& self) {
            std::vector<std::tuple<std::uint64_t, std::string, std::string>> out;
            for (const cupti::UnreadableNode& node : self.read.unreadable) {
              out.emplace_back(node.id, node.kernel, node.cause);
            }
            return out;
          },
          "Kernel nodes kept without their arguments: (node id, kernel name, cause).")
      .def_property_readonly(
          "conditionals_without_bodies",
          [](const PyReadGraph& self) { return self.read.conditionals_without_bodies; },
          "Ids of conditional nodes whose bodies were not read (CUDA 13.0 has no getter).");
}

}  // namespace
}  // namespace graphcheck::detail

namespace py = pybind11;

PYBIND11_MODULE(_cuda, m) {
  m.doc() =
      "graphcheck's CUDA graph reader: the nodes of a graph under capture, read through the "
      "driver (unverified on a GPU). Private: graphcheck.watch uses it.";

  // The Node values returned are _core's classes, registered there.
  py::module_ core = py::module_::import("graphcheck._core");
  graphcheck::detail::raise_errors_as_core(core);

  m.attr("__version__") = GRAPHCHECK_VERSION_STRING;
  m.attr("READER") = std::string(graphcheck::kReaderCudaGraph);
  graphcheck::detail::bind_read_graph(m);

  m.def(
      "driver_problem", [] { return graphcheck::detail::loaded_driver().problem; },
      "Why CUDA graphs cannot be read here (no driver, no CUPTI, a driver older than CUDA "
      "12.4), or '' when they can. Loads the driver table on first use; never raises.");
  m.def(
      "read_capture",
      [](std::uintptr_t stream) {
        return graphcheck::detail::read_without_gil([stream](graphcheck::cupti::DriverApi& api) {
          // NOLINTNEXTLINE(performance-no-int-to-ptr): Python hands the handle as an integer
          return graphcheck::cupti::read_capturing_stream(api, reinterpret_cast<CUstream>(stream));
        });
      },
      py::arg("stream"),
      "Reads the graph the CUDA stream `stream` (a cudaStream_t as int, "
      "torch.cuda.Stream.cuda_stream) is capturing into. Call it before the capture ends, on "
      "the capturing thread. Raises graphcheck.GraphcheckError when the stream is not "
      "capturing, the driver cannot be loaded, or a graph query fails.");
  m.def(
      "read_graph",
      [](std::uintptr_t graph) {
        return graphcheck::detail::read_without_gil([graph](graphcheck::cupti::DriverApi& api) {
          // NOLINTNEXTLINE(performance-no-int-to-ptr): Python hands the handle as an integer
          return graphcheck::cupti::read_graph_nodes(api, reinterpret_cast<CUgraph>(graph));
        });
      },
      py::arg("graph"),
      "Reads the CUDA graph `graph` (a cudaGraph_t as int, e.g. "
      "torch.cuda.CUDAGraph(keep_graph=True).raw_cuda_graph()). The graph must stay alive "
      "and unused by other threads for the call.");
}
