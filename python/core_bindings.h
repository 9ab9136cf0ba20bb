// Shared declarations of graphcheck._core's binding sources (python/core_*.cc): the enum
// spellings and the string conversion every source uses.
//
// Value semantics: the bound types are copied across the boundary, and list members (Epoch.spans,
// Snapshot.graphs, Report.findings, ...) convert to a new Python list on every read. Binding them
// as references into their owner instead would let Python keep a reference to an element that a
// later append moves (a use after free); a copy costs little next to a check.
#ifndef GRAPHCHECK_PYTHON_CORE_BINDINGS_H_
#define GRAPHCHECK_PYTHON_CORE_BINDINGS_H_

#include <graphcheck/epoch.h>
#include <graphcheck/graph.h>
#include <graphcheck/report.h>
#include <graphcheck/verdict.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace graphcheck::detail {

/// Binds Producer, Span, Allocation, Epoch, KernelParam, Operand, Node, GraphRecord, Snapshot
/// and their list types, and the snapshot I/O functions (python/core_snapshot.cc).
void bind_snapshot(pybind11::module_& module);

/// Binds Finding, Report and the report functions, check() and read_allowlist()
/// (python/core_report.cc). Needs bind_snapshot first (check() takes a Snapshot).
void bind_report(pybind11::module_& module);

/// Binds allocator_allocations() and add_allocator_memory(): PyTorch's caching allocator as
/// epoch allocations (python/core_allocator.cc). Needs bind_snapshot first.
void bind_allocator(pybind11::module_& module);

/// `text` as a Python str; bytes that are not UTF-8 (kernel and attribute names may hold any)
/// become U+FFFD, as in the JSON report, instead of raising on attribute access.
inline pybind11::str to_py_str(std::string_view text) {
  PyObject* object =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (object == nullptr) {
    throw pybind11::error_already_set();
  }
  return pybind11::reinterpret_steal<pybind11::str>(object);
}

/// The spellings of an enum with `count` values numbered from 0, as a tuple of str.
template <typename Enum>
pybind11::tuple spellings(std::size_t count) {
  pybind11::tuple out(count);
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = to_py_str(to_string(static_cast<Enum>(i)));
  }
  return out;
}

/// Parses an enum spelling with `parse`; on failure raises ValueError naming `field`, the
/// accepted spellings and what was found.
template <typename Enum, typename Parse>
Enum parse_spelling(std::string_view text, std::string_view field, std::size_t count, Parse parse) {
  if (const std::optional<Enum> value = parse(text)) {
    return *value;
  }
  std::string message(field);
  message += ": expected one of ";
  for (std::size_t i = 0; i < count; ++i) {
    message += i == 0 ? "'" : ", '";
    message += to_string(static_cast<Enum>(i));
    message += "'";
  }
  message += ", found '";
  message += text;
  message += "'";
  throw pybind11::value_error(message);
}

/// Number of values of each enum bound as strings (they are numbered from 0).
inline constexpr std::size_t kOwnerKindCount = 5;  // kParameter .. kInput
inline constexpr std::size_t kNodeTypeCount = 15;  // kKernel .. kOp
inline constexpr std::size_t kAccessCount = 4;     // kUnknown .. kReadWrite
static_assert(static_cast<std::size_t>(OwnerKind::kInput) + 1 == kOwnerKindCount);
static_assert(static_cast<std::size_t>(NodeType::kOp) + 1 == kNodeTypeCount);
static_assert(static_cast<std::size_t>(Access::kReadWrite) + 1 == kAccessCount);

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_PYTHON_CORE_BINDINGS_H_
