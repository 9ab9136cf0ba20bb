// graphcheck._torch: the ATen capture window, the CPU weights arena and the replay for Python
// (docs/python.md). Links the LibTorch adapter and torch's Python bindings, as torch extensions
// do; graphcheck._capture, graphcheck.arena and graphcheck.testing are its Python API.
#include <graphcheck/config.h>
#include <graphcheck/error.h>
#include <pybind11/gil_safe_call_once.h>
#include <pybind11/pybind11.h>

#include <exception>

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
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<py::object> error;
  error.call_once_and_store_result([&core] { return core.attr("GraphcheckError"); });
  // pybind11's translator type takes the exception_ptr by value.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  py::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) {
        std::rethrow_exception(thrown);
      }
    } catch (const graphcheck::Error& caught) {
      py::set_error(error.get_stored(), caught.what());
    }
  });

  m.attr("__version__") = GRAPHCHECK_VERSION_STRING;
  graphcheck::detail::bind_arena(m);
  graphcheck::detail::bind_capture(m);
}
