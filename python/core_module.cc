// graphcheck._core: the checker, snapshot and report I/O for Python (docs/python.md). Links
// the core only, never LibTorch, so it imports whatever torch is installed (or none).
#include <graphcheck/address.h>
#include <graphcheck/config.h>
#include <graphcheck/epoch.h>
#include <graphcheck/error.h>
#include <graphcheck/graph.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>
#include <graphcheck/verdict.h>

#include <cstddef>
#include <optional>
#include <string_view>

#include "python/core_bindings.h"
#include "python/core_error.h"
#include "python/text_arg.h"

namespace py = pybind11;

PYBIND11_MODULE(_core, m) {
  using graphcheck::detail::spellings;
  m.doc() =
      "graphcheck's checker, snapshot and report I/O (the C++ core). Import the package "
      "`graphcheck`, which re-exports what is public here.";

  // graphcheck::Error (misuse, bad input, setup failures) as one exception class. It derives
  // from RuntimeError, as the C++ class derives from std::runtime_error.
  auto& error = py::register_exception<graphcheck::Error>(m, "GraphcheckError", PyExc_RuntimeError);
  error.attr("__module__") = "graphcheck";
  // Tried before pybind11's own translator of register_exception, which would turn a message
  // that is not UTF-8 (a path, a name) into a UnicodeDecodeError.
  graphcheck::detail::raise_errors_as_core(m);
  error.attr("__doc__") =
      "Misuse, bad input or a setup failure reported by graphcheck's C++ code. The message names "
      "the cause and the fix (for input: the file or field, its JSON path, what was expected "
      "and what was found). Findings are never errors: they are data in a Report.";

  m.attr("__version__") = GRAPHCHECK_VERSION_STRING;
  m.attr("SNAPSHOT_VERSION") = graphcheck::kSnapshotVersion;
  m.attr("REPORT_VERSION") = graphcheck::kReportVersion;
  m.attr("VERDICTS") = spellings<graphcheck::Verdict>(graphcheck::kVerdictCount);
  py::list finding_verdicts;
  for (std::size_t i = 0; i < graphcheck::kVerdictCount; ++i) {
    const auto verdict = static_cast<graphcheck::Verdict>(i);
    if (graphcheck::is_finding(verdict)) {
      finding_verdicts.append(graphcheck::detail::to_py_str(graphcheck::to_string(verdict)));
    }
  }
  m.attr("FINDING_VERDICTS") = py::tuple(finding_verdicts);
  m.attr("OWNER_KINDS") = spellings<graphcheck::OwnerKind>(graphcheck::detail::kOwnerKindCount);
  m.attr("NODE_TYPES") = spellings<graphcheck::NodeType>(graphcheck::detail::kNodeTypeCount);
  m.attr("ACCESSES") = spellings<graphcheck::Access>(graphcheck::detail::kAccessCount);

  m.def(
      "format_address",
      [](graphcheck::Address address) { return graphcheck::format_address(address); },
      py::arg("address"), "The address as lower-case hex with a 0x prefix ('0x7f3a00000000').");
  m.def(
      "parse_address",
      [](const graphcheck::detail::TextArg& text) -> std::optional<graphcheck::Address> {
        return graphcheck::parse_address(text.view("text"));
      },
      py::arg("text"), "Parses '0x...' (1 to 16 hex digits); None for any other text.");

  graphcheck::detail::bind_snapshot(m);
  graphcheck::detail::bind_report(m);
  graphcheck::detail::bind_allocator(m);
}
