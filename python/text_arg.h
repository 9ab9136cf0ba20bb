// Text arguments of the compiled modules: a str that cannot be UTF-8 (a lone surrogate, as a
// file name or environment variable that is not UTF-8 decodes to) raises the package's
// GraphcheckValueError naming the argument, never pybind11's "incompatible function
// arguments" TypeError (python/graphcheck/_errors.py).
#ifndef GRAPHCHECK_PYTHON_TEXT_ARG_H_
#define GRAPHCHECK_PYTHON_TEXT_ARG_H_

#include <pybind11/pybind11.h>

#include <string>
#include <string_view>
#include <utility>

namespace graphcheck::detail {

/// A str (or bytes) argument, kept as the Python object until the binding names it: pybind11
/// loads every str into it, so the conversion, and its error, happen in the binding's body.
/// Lifetime: `view` points into the object, which the TextArg holds.
class TextArg {
 public:
  TextArg() = default;
  explicit TextArg(pybind11::object value) : value_(std::move(value)) {}

  /// The text as UTF-8 (bytes as they are), valid while this TextArg lives.
  /// @throws pybind11::error_already_set with graphcheck.GraphcheckValueError naming
  /// `argument`, the character and its index, for a str that is not valid Unicode.
  [[nodiscard]] std::string_view view(std::string_view argument) const;
  /// `view(argument)` as a string.
  [[nodiscard]] std::string utf8(std::string_view argument) const {
    return std::string(view(argument));
  }
  [[nodiscard]] const pybind11::object& object() const { return value_; }

 private:
  pybind11::object value_;
};

/// `value` (a str or bytes) as UTF-8, with TextArg's error naming `argument`; any other type
/// raises graphcheck.GraphcheckTypeError naming `argument` and the type found.
[[nodiscard]] std::string text_of(const pybind11::handle& value, std::string_view argument);

}  // namespace graphcheck::detail

namespace pybind11::detail {

// Loads any str or bytes (other types fail as before: a TypeError listing the signatures).
template <>
struct type_caster<graphcheck::detail::TextArg> {
  PYBIND11_TYPE_CASTER(graphcheck::detail::TextArg, const_name("str"));

  bool load(handle source, bool /*convert*/) {
    if (!PyUnicode_Check(source.ptr()) && !PyBytes_Check(source.ptr())) {
      return false;
    }
    value = graphcheck::detail::TextArg(reinterpret_borrow<object>(source));
    return true;
  }

  static handle cast(const graphcheck::detail::TextArg& text, return_value_policy /*policy*/,
                     handle /*parent*/) {
    return text.object().inc_ref();
  }
};

}  // namespace pybind11::detail

#endif  // GRAPHCHECK_PYTHON_TEXT_ARG_H_
