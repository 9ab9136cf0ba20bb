// graphcheck::Error raised as graphcheck._core.GraphcheckError from a module other than _core
// (graphcheck._torch, graphcheck._cuda). Each extension module is its own shared object with
// hidden symbols, so _core's translator does not match the Error type another module throws:
// every module registers its own translator to the one Python class.
#ifndef GRAPHCHECK_PYTHON_CORE_ERROR_H_
#define GRAPHCHECK_PYTHON_CORE_ERROR_H_

#include <graphcheck/error.h>
#include <pybind11/gil_safe_call_once.h>
#include <pybind11/pybind11.h>

#include <exception>
#include <string_view>

namespace graphcheck::detail {

/// @brief Sets the Python error `type` with `message`, whatever bytes it holds: a message
/// names paths and names as they are, and pybind11's own translation (PyErr_SetString) would
/// replace the error by a UnicodeDecodeError for one that is not UTF-8. Bytes that are not
/// UTF-8 become backslash escapes.
inline void set_error_text(const pybind11::handle& type, std::string_view message) {
  PyObject* text = PyUnicode_DecodeUTF8(message.data(), static_cast<Py_ssize_t>(message.size()),
                                        "backslashreplace");
  if (text == nullptr) {  // out of memory: the type alone still says what failed
    PyErr_Clear();
    PyErr_SetNone(type.ptr());
    return;
  }
  PyErr_SetObject(type.ptr(), text);
  Py_DECREF(text);
}

/// @brief Makes a graphcheck::Error escaping this module's functions raise `core`'s
/// GraphcheckError. Call once, from the module's init (with the GIL). Lifetime: the class is
/// kept for the interpreter's life (pybind11's once-and-store, safe under subinterpreters).
inline void raise_errors_as_core(const pybind11::module_& core) {
  namespace py = pybind11;
  PYBIND11_CONSTINIT static py::gil_safe_call_once_and_store<py::object> error;
  error.call_once_and_store_result([&core] { return core.attr("GraphcheckError"); });
  // pybind11's translator type takes the exception_ptr by value.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  py::register_local_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) {
        std::rethrow_exception(thrown);
      }
    } catch (const Error& caught) {
      set_error_text(error.get_stored(), caught.what());
    }
  });
}

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_PYTHON_CORE_ERROR_H_
