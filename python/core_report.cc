// graphcheck._core: check(), the repeated-check session, reports (docs/report-format.md) and
// allowlists.
#include <graphcheck/address.h>
#include <graphcheck/check_session.h>
#include <graphcheck/checker.h>
#include <graphcheck/report.h>
#include <graphcheck/report_html.h>
#include <graphcheck/snapshot.h>
#include <graphcheck/verdict.h>

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graphcheck/detail/glob.h"
#include "graphcheck/detail/text_groups.h"
#include "python/core_bindings.h"
#include "python/text_arg.h"

namespace graphcheck::detail {
namespace {

namespace py = pybind11;

// Binds a std::string member as a read-only str property.
template <typename T, typename Class>
void def_text(Class& cls, const char* name, std::string T::*member, const char* doc) {
  cls.def_property_readonly(
      name, [member](const T& self) { return to_py_str(self.*member); }, doc);
}

py::list to_py_list(const std::vector<std::string>& items) {
  py::list out;
  for (const std::string& item : items) {
    out.append(to_py_str(item));
  }
  return out;
}

// graphs, nodes and references, then the nine verdict counts in report order.
py::dict summary_dict(const Summary& summary) {
  py::dict out;
  out["graphs"] = summary.graphs;
  out["nodes"] = summary.nodes;
  out["references"] = summary.references;
  for (std::size_t i = 0; i < kVerdictCount; ++i) {
    const auto verdict = static_cast<Verdict>(i);
    out[to_py_str(to_string(verdict))] = summary.count(verdict);
  }
  return out;
}

// The `allow` argument: any iterable of str. A bare str is refused: iterating it would add one
// glob per character.
std::vector<std::string> allow_globs(const py::object& allow) {
  if (py::isinstance<py::str>(allow) || py::isinstance<py::bytes>(allow)) {
    throw py::type_error(
        "allow: expected an iterable of glob strings, found a single string (wrap it in a list)");
  }
  std::vector<std::string> globs;
  std::size_t index = 0;
  for (const py::handle item : py::iter(allow)) {
    if (!py::isinstance<py::str>(item)) {
      throw py::type_error(py::str("allow[{}]: expected a str glob, found {}")
                               .format(index, py::type::of(item).attr("__name__"))
                               .cast<std::string>());
    }
    globs.push_back(text_of(item, "allow[" + std::to_string(index) + "]"));
    ++index;
  }
  return globs;
}

// `threads`: an int from 0 to kMaxCheckThreads (CheckOptions::threads); a bool is no count.
std::size_t check_threads(const py::object& threads) {
  const auto expected = [](const py::handle found) {
    return py::str("threads: expected an int from 0 to {}, found {}")
        .format(kMaxCheckThreads, found)
        .cast<std::string>();
  };
  if (!py::isinstance<py::int_>(threads) || py::isinstance<py::bool_>(threads)) {
    throw py::type_error(expected(py::type::of(threads).attr("__name__")));
  }
  if (threads < py::int_(0) || threads > py::int_(kMaxCheckThreads)) {
    throw py::value_error(expected(threads));
  }
  return threads.cast<std::size_t>();
}

CheckOptions check_options(const std::optional<TextArg>& epoch,
                           const std::optional<TextArg>& baseline, const py::object& allow,
                           const py::object& threads) {
  CheckOptions options;
  options.epoch = epoch ? epoch->utf8("epoch") : "";
  options.baseline = baseline ? baseline->utf8("baseline") : "";
  options.allow = allow_globs(allow);
  options.threads = check_threads(threads);
  return options;
}

constexpr const char* kCheckDoc =
    "Checks every graph of `snapshot` (a Snapshot, or the path of a snapshot file) in one epoch "
    "and returns a Report.\n\n"
    "epoch: the epoch to check in (default: the snapshot's last). baseline: the epoch to "
    "compare against for 'stale' and 'lost' (default: each graph's capture epoch). allow: "
    "allowlist globs (fnmatch over owner names and allocation labels) added to the snapshot's "
    "own. threads: how many threads read the graphs' argument words (0, the default: one per "
    "core the process may run on, at most 8, for snapshots large enough to gain; 1: this "
    "thread); the report is the same whatever the count. Findings are data in the report, "
    "never exceptions; GraphcheckError is raised for an epoch the snapshot lacks (the message "
    "lists those it has) or an unreadable file.";

void bind_finding(py::module_& m) {
  py::class_<Finding> finding(m, "Finding",
                              "One reference whose verdict is a finding (read-only).");
  finding
      .def_property_readonly(
          "verdict", [](const Finding& self) { return to_py_str(to_string(self.verdict)); },
          "'unregistered', 'dangling', 'stale' or 'lost'.")
      .def_property_readonly(
          "owner_kind",
          [](const Finding& self) -> std::optional<py::str> {
            if (!self.owner_kind) {
              return std::nullopt;
            }
            return to_py_str(to_string(*self.owner_kind));
          },
          "'parameter', 'buffer', 'runtime', 'graph', 'input', or None when no span owns the "
          "address.")
      .def_readonly("graph", &Finding::graph, "Graph id.")
      .def_readonly("node", &Finding::node, "Node id.")
      .def_property_readonly(
          "node_type", [](const Finding& self) { return to_py_str(to_string(self.node_type)); },
          "'kernel', 'op', 'memcpy', ... (the snapshot spelling).")
      .def_readonly("param", &Finding::param, "Kernel argument index, else None.")
      .def_readonly("offset", &Finding::offset,
                    "Byte offset of the pointer word in that argument, else None.")
      .def_readonly("address", &Finding::address, "The address (int).")
      .def_property_readonly(
          "access", [](const Finding& self) { return to_py_str(to_string(self.access)); },
          "'unknown', 'read', 'write' or 'read-write'.")
      .def_readonly("range_begin", &Finding::range_begin,
                    "Start of the part of the operand judged (0 for argument words).")
      .def_readonly("range_size", &Finding::range_size,
                    "Size of the part of the operand judged (0 for argument words).");
  def_text<Finding>(finding, "owner", &Finding::owner,
                    "Owner name, else the allocation label, else ''.");
  def_text<Finding>(finding, "kernel", &Finding::kernel, "Kernel or op name ('' for memcpy, ...).");
  def_text<Finding>(finding, "operand", &Finding::operand,
                    "Operand role for other node kinds ('src', 'reads[0]', ...).");
  def_text<Finding>(finding, "detail", &Finding::detail, "What happened.");
  def_text<Finding>(finding, "fix", &Finding::fix,
                    "One sentence: what to change in the model or engine.");
  finding.def("__eq__", [](const Finding& a, const Finding& b) { return a == b; })
      .def("__repr__", [](const Finding& self) {
        return py::str(
                   "Finding(verdict={!r}, owner={!r}, graph={}, node={}, kernel={!r}, "
                   "address={})")
            .format(to_py_str(to_string(self.verdict)), to_py_str(self.owner), self.graph,
                    self.node, to_py_str(self.kernel), to_py_str(format_address(self.address)));
      });
}

void bind_report_type(py::module_& m) {
  py::class_<Report>(m, "Report",
                     "The result of checking a snapshot's graphs in one epoch (read-only). "
                     "str(report) is the text report; to_json() the JSON report (format "
                     "version 1); to_html() one HTML page.")
      .def_property_readonly(
          "epoch", [](const Report& self) { return to_py_str(self.epoch); }, "The epoch checked.")
      .def_property_readonly(
          "baseline", [](const Report& self) { return to_py_str(self.baseline); },
          "The epoch compared against for 'stale' and 'lost'.")
      .def_property_readonly(
          "summary", [](const Report& self) { return summary_dict(self.summary); },
          "Counts: 'graphs', 'nodes', 'references', then each of the nine verdicts (a new dict "
          "on every read).")
      .def_readonly("findings", &Report::findings,
                    "Every reference whose verdict is a finding, in graph, node, reference "
                    "order (list[Finding]; a copy on read).")
      .def_property_readonly(
          "stale_allow", [](const Report& self) { return to_py_list(self.stale_allow); },
          "Allowlist globs that allowed nothing.")
      .def_property_readonly(
          "stale_allow_hints",
          [](const Report& self) { return to_py_list(detail::stale_allow_hints(self)); },
          "For each of stale_allow, the slip it likely holds ('' when none is seen): a comment "
          "on the glob's line, or a '*' where '**' would match owners with findings.")
      .def_property_readonly(
          "warnings", [](const Report& self) { return to_py_list(self.warnings); },
          "One line per address range covered by spans of different owners.")
      .def_property_readonly(
          "unattributed",
          [](const Report& self) {
            py::list out;
            for (const UnattributedWords& node : self.unattributed) {
              out.append(py::make_tuple(node.graph, node.node, to_py_str(node.kernel), node.words,
                                        node.first));
            }
            return out;
          },
          "Kernel nodes with argument words that look like pointers into memory no span, "
          "allocation or graph range of the capture holds: (graph, node, kernel, words, first "
          "such word) each; not findings (docs/report-format.md).")
      .def_property_readonly(
          "ok", [](const Report& self) { return !self.has_findings(); }, "True if no findings.")
      .def(
          "to_json",
          [](const Report& self, int indent) {
            std::string json;
            {
              // A report is read-only: a watch's writer thread renders it beside the capture.
              const py::gil_scoped_release unlocked;
              json = to_json(self, indent);
            }
            return json;
          },
          py::arg("indent") = 2,
          "The JSON report (format version 1); one line when indent is negative. Releases the "
          "GIL while it renders.")
      .def(
          "to_html",
          [](const Report& self, const Snapshot* snapshot, const py::object& subject,
             const py::object& header, const py::object& allow, const py::object& navigation) {
            HtmlOptions options;
            options.subject = subject.is_none() ? "" : text_of(subject, "subject");
            options.allow = allow_globs(allow);
            if (!header.is_none()) {
              std::size_t index = 0;
              for (const py::handle line : py::iter(header)) {
                options.header.push_back(text_of(line, "header[" + std::to_string(index) + "]"));
                ++index;
              }
            }
            if (!navigation.is_none()) {
              const py::dict links(navigation);  // dict(navigation): any mapping
              auto link = [&links](const char* key) {
                return links.contains(key) && !links[key].is_none()
                           ? text_of(links[key], std::string("navigation[") + key + "]")
                           : std::string();
              };
              options.navigation = HtmlNavigation{link("index"), link("previous"), link("next")};
            }
            std::string page;
            {
              // Every Python value was read above; the snapshot must not change meanwhile.
              const py::gil_scoped_release unlocked;
              page = to_html(self, snapshot, options);
            }
            return to_py_str(page);
          },
          py::arg("snapshot") = py::none(), py::kw_only(), py::arg("subject") = py::none(),
          py::arg("header") = py::none(), py::arg("allow") = py::tuple(),
          py::arg("navigation") = py::none(),
          "The report as one self-contained HTML page (inline CSS and JS, nothing fetched): "
          "the verdict and what to fix first, counts, findings by fix and owner, stale allowlist "
          "entries; given the Snapshot the report was checked from, also an address-space map "
          "per graph and epoch and every other epoch's report (checked against the same "
          "baseline, with the snapshot's globs and `allow`). `subject` names what was checked "
          "(tab title, heading), `header` lines go under the heading, `navigation` "
          "({'index', 'previous', 'next'}: relative hrefs) links a folder's pages "
          "(docs/report-format.md, 'HTML report'). Write it to a .html file and open it. Releases "
          "the GIL while it renders: do not change the snapshot from another thread meanwhile.")
      .def("__str__", [](const Report& self) { return to_py_str(to_text(self)); })
      .def("__eq__", [](const Report& a, const Report& b) { return a == b; })
      .def("__repr__", [](const Report& self) {
        return py::str("<Report epoch={!r} baseline={!r} references={} findings={}>")
            .format(to_py_str(self.epoch), to_py_str(self.baseline), self.summary.references,
                    self.findings.size());
      });
}

// CheckSession: what Capture.check uses so that checking again costs only what changed
// (docs/verdicts.md, "Repeated checks"). Internal to the package (no re-export).
void bind_session(py::module_& m) {
  py::class_<CheckSession> session(
      m, "CheckSession",
      "A snapshot kept between checks (graphcheck::CheckSession): check() returns what "
      "check(snapshot) returns for its current contents, reusing the epoch indexes, per-graph "
      "reference tables and last reports. Not thread-safe: one thread at a time.");
  session.def(py::init([](const Snapshot& snapshot) { return CheckSession(snapshot); }),
              py::arg("snapshot"), "A session holding a copy of `snapshot`.");
  session.def(
      "put_epoch",
      [](CheckSession& self, const Epoch& epoch, bool last) {
        switch (self.put_epoch(epoch, last ? EpochPlace::kLast : EpochPlace::kKeep)) {
          case EpochChange::kAdded:
            return "added";
          case EpochChange::kUnchanged:
            return "unchanged";
          case EpochChange::kReplaced:
            break;
        }
        return "replaced";
      },
      py::arg("epoch"), py::kw_only(), py::arg("last") = false,
      "Adds `epoch`, or replaces the session's epoch with its label (moved last when `last`); "
      "returns 'added', 'unchanged' (equal and in place: nothing to redo) or 'replaced'.");
  session.def(
      "remove_epoch",
      [](CheckSession& self, const TextArg& label) {
        return self.remove_epoch(label.view("label"));
      },
      py::arg("label"), "Removes the epoch labelled `label`; False when there is none.");
  session.def_property_readonly("epochs", &CheckSession::epoch_labels,
                                "The epoch labels, in order.");
  session.def(
      "check",
      [](CheckSession& self, const std::optional<TextArg>& epoch,
         const std::optional<TextArg>& baseline, const py::object& allow,
         const py::object& threads) {
        return Report(*self.check(check_options(epoch, baseline, allow, threads)));
      },
      py::arg("epoch") = py::none(), py::arg("baseline") = py::none(),
      py::arg("allow") = py::tuple(), py::arg("threads") = 0,
      "check(snapshot) of the session's contents, with check()'s arguments and errors.");
  session.def_property_readonly(
      "last_stats",
      [](const CheckSession& self) {
        const SessionCheckStats& stats = self.last_stats();
        py::dict out;
        out["reused_report"] = stats.reused_report;
        out["graphs_scanned"] = stats.graphs_scanned;
        out["graphs_replayed"] = stats.graphs_replayed;
        out["references_replayed"] = stats.references_replayed;
        return out;
      },
      "What the last check did: reused_report (the last report, nothing changed), "
      "graphs_scanned, graphs_replayed and references_replayed.");
}

}  // namespace

void bind_report(py::module_& m) {
  bind_finding(m);
  bind_report_type(m);
  bind_session(m);

  m.def(
      "check",
      [](const Snapshot& snapshot, const std::optional<TextArg>& epoch,
         const std::optional<TextArg>& baseline, const py::object& allow,
         const py::object& threads) {
        return check(snapshot, check_options(epoch, baseline, allow, threads));
      },
      py::arg("snapshot"), py::arg("epoch") = py::none(), py::arg("baseline") = py::none(),
      py::arg("allow") = py::tuple(), py::arg("threads") = 0, kCheckDoc);
  m.def(
      "check",
      [](const std::filesystem::path& path, const std::optional<TextArg>& epoch,
         const std::optional<TextArg>& baseline, const py::object& allow,
         const py::object& threads) {
        const CheckOptions options = check_options(epoch, baseline, allow, threads);
        return check(read_snapshot(path), options);
      },
      py::arg("snapshot"), py::arg("epoch") = py::none(), py::arg("baseline") = py::none(),
      py::arg("allow") = py::tuple(), py::arg("threads") = 0);
  m.def(
      "parse_report", [](const TextArg& text) { return parse_report(text.view("text")); },
      py::arg("text"),
      "Parses report JSON (format version 1), as Report.to_json() writes it. Raises "
      "GraphcheckError naming the JSON path of a bad field.");
  m.def(
      "glob_matches",
      [](const py::object& glob, const py::object& name) {
        return detail::glob_matches(text_of(glob, "glob"), text_of(name, "name"));
      },
      py::arg("glob"), py::arg("name"),
      "True if the allowlist glob matches the whole of `name` (`*` within one dotted "
      "component, `**` across them, `?` one character but '.', every other character itself), "
      "in time O(len(glob) * len(name)) whatever the glob: the one glob language of the "
      "checker, the census and the zoo. Raises GraphcheckValueError for text that is not "
      "UTF-8.");
  m.def(
      "owner_families",
      [](const py::iterable& owners) {
        // Families in the order of their first owner; each shown as the text report shows it.
        std::vector<std::string> names;
        std::map<std::string, std::size_t> index;
        std::vector<std::vector<std::string_view>> families;
        for (py::handle owner : owners) {
          names.push_back(text_of(owner, "owners[" + std::to_string(names.size()) + "]"));
        }
        for (const std::string& name : names) {
          const auto [it, added] = index.try_emplace(detail::owner_family(name), families.size());
          if (added) {
            families.emplace_back();
          }
          families[it->second].emplace_back(name);
        }
        std::vector<std::pair<std::string, std::size_t>> out;
        out.reserve(families.size());
        for (const std::vector<std::string_view>& family : families) {
          out.emplace_back(detail::family_name(family), family.size());
        }
        return out;
      },
      py::arg("owners"),
      "The owners (distinct names, in order) as families, in the order of each family's first "
      "owner: (name, owners) with the name as the text report compacts it "
      "('layers.{0-31}.mlp.alpha', 32), the owner itself for a family of one.");
  m.def(
      "read_allowlist",
      [](const std::filesystem::path& path) { return read_allowlist(path.string()); },
      py::arg("path"),
      "Reads allowlist globs from a file: one per line; blank lines and lines starting with '#' "
      "are skipped. The file must be UTF-8 text in a regular file of at most 4 MiB (what "
      "`graphcheck check --allow` reads). Raises GraphcheckError naming the path if it cannot "
      "be read, is not a regular file (a FIFO is refused without waiting) or is too large, and "
      "naming path:line, the byte and its offset for a line that is not UTF-8 or holds a NUL.");
}

}  // namespace graphcheck::detail
