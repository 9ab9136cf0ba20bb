// Text arguments of the compiled modules (text_arg.h).
#include "python/text_arg.h"

#include <string>

namespace graphcheck::detail {
namespace {

namespace py = pybind11;

// Raises graphcheck.<name> (a class of graphcheck._errors) with `message`.
[[noreturn]] void raise(const char* name, const std::string& message) {
  const py::object type = py::module_::import("graphcheck._errors").attr(name);
  PyErr_SetString(type.ptr(), message.c_str());
  throw py::error_already_set();
}

}  // namespace

std::string_view TextArg::view(std::string_view argument) const {
  if (PyBytes_Check(value_.ptr())) {
    char* data = nullptr;
    Py_ssize_t size = 0;
    if (PyBytes_AsStringAndSize(value_.ptr(), &data, &size) != 0) {
      throw py::error_already_set();
    }
    return {data, static_cast<std::size_t>(size)};
  }
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(value_.ptr(), &size);
  if (data != nullptr) {
    return {data, static_cast<std::size_t>(size)};
  }
  // A lone surrogate (U+D800..U+DFFF) has no UTF-8 form. Name it and where it is.
  PyErr_Clear();
  const Py_ssize_t length = PyUnicode_GetLength(value_.ptr());
  Py_ssize_t at = 0;
  Py_UCS4 code = 0;
  for (; at < length; ++at) {
    code = PyUnicode_ReadChar(value_.ptr(), at);
    if (code >= 0xD800 && code <= 0xDFFF) {
      break;
    }
  }
  const std::string shown = py::str(py::module_::import("builtins").attr("ascii")(value_));
  constexpr std::size_t kShown = 60;
  raise("GraphcheckValueError",
        std::string(argument) + ": expected text, found " +
            (shown.size() <= kShown ? shown : shown.substr(0, kShown) + "...") +
            ", which holds the lone surrogate " +
            py::str("U+{:04X}").format(code).cast<std::string>() + " at index " +
            std::to_string(at) +
            " (not valid Unicode: bytes that are not UTF-8, decoded with surrogateescape?); pass "
            "text that encodes to UTF-8");
}

std::string text_of(const py::handle& value, std::string_view argument) {
  if (!PyUnicode_Check(value.ptr()) && !PyBytes_Check(value.ptr())) {
    raise("GraphcheckTypeError",
          std::string(argument) + ": expected a str, found " +
              py::str(py::type::handle_of(value).attr("__name__")).cast<std::string>());
  }
  return TextArg(py::reinterpret_borrow<py::object>(value)).utf8(argument);
}

}  // namespace graphcheck::detail
