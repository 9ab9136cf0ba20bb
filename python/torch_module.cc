// graphcheck._torch: the ATen capture window, the CPU weights arena and the replay for Python
// (docs/python.md). Links the LibTorch adapter and torch's Python bindings, as torch extensions
// do; graphcheck._capture, graphcheck.arena and graphcheck.testing are its Python API.
#include <graphcheck/config.h>
#include <pybind11/pybind11.h>

#include "python/core_error.h"
#include "python/torch_bindings.h"

namespace py = pybind11;

PYBIND11_MODULE(_torch, m) {
  m.doc() =
      "graphcheck's LibTorch part: capture window, weights arena, replay. Import graphcheck "
      "and use graphcheck.capture, graphcheck.WeightsArena and graphcheck.testing.";

  // torch first (its Python bindings convert tensors), then _core: the Epoch, Snapshot and
  // Allocation values returned here are _core's classes, registered there.
  py::module_::import("torch");
  py::module_ core = py::module_::import("graphcheck._core");

  // graphcheck::Error from the adapter raises _core's GraphcheckError, as _core's own calls do.
  graphcheck::detail::raise_errors_as_core(core);

  m.attr("__version__") = GRAPHCHECK_VERSION_STRING;
  graphcheck::detail::bind_arena(m);
  graphcheck::detail::bind_capture(m);
  graphcheck::detail::bind_fingerprint(m);
}
