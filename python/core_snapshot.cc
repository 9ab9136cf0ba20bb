// graphcheck._core: the snapshot types (docs/snapshot-format.md) and their I/O.
#include <graphcheck/address.h>
#include <graphcheck/epoch.h>
#include <graphcheck/graph.h>
#include <graphcheck/snapshot.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "python/core_bindings.h"
#include "python/text_arg.h"

namespace graphcheck::detail {
namespace {

namespace py = pybind11;

// Binds a std::string member as a read-write str property (decoded with U+FFFD for bytes that
// are not UTF-8; a str that is not valid Unicode is refused naming "Class.name").
template <typename T, typename Class>
void def_text(Class& cls, const char* name, std::string T::*member, const char* doc) {
  const std::string what = py::str(cls.attr("__name__")).template cast<std::string>() + "." + name;
  cls.def_property(
      name, [member](const T& self) { return to_py_str(self.*member); },
      [member, what](T& self, const TextArg& value) { self.*member = value.utf8(what); }, doc);
}

OwnerKind owner_kind_from(const TextArg& text) {
  return parse_spelling<OwnerKind>(text.view("Span.kind"), "Span.kind", kOwnerKindCount,
                                   parse_owner_kind);
}

NodeType node_type_from(const TextArg& text) {
  return parse_spelling<NodeType>(text.view("Node.type"), "Node.type", kNodeTypeCount,
                                  parse_node_type);
}

Access access_from(const TextArg& text) {
  return parse_spelling<Access>(text.view("Operand.access"), "Operand.access", kAccessCount,
                                parse_access);
}

py::str address_repr(Address address) { return to_py_str(format_address(address)); }

// Snapshot.allow, each glob named by its index in messages.
std::vector<std::string> globs_of(const std::vector<TextArg>& allow) {
  std::vector<std::string> globs;
  globs.reserve(allow.size());
  for (std::size_t i = 0; i < allow.size(); ++i) {
    globs.push_back(allow[i].utf8("Snapshot.allow[" + std::to_string(i) + "]"));
  }
  return globs;
}

// "<1 span>", "<3 spans>": the size of a list member in a repr.
py::str count_repr(std::size_t count, const char* noun) {
  return py::str("<{} {}{}>").format(count, noun, count == 1 ? "" : "s");
}

void bind_epoch_types(py::module_& m) {
  py::class_<Span> span(m, "Span",
                        "An address range [begin, begin + size) with an owner (a parameter or "
                        "buffer by module path, declared runtime state, graph or input memory).");
  span.def(py::init([](Address begin, std::uint64_t size, const TextArg& kind, const TextArg& name,
                       const TextArg& reason) {
             return Span{begin, size, owner_kind_from(kind), name.utf8("Span.name"),
                         reason.utf8("Span.reason")};
           }),
           py::arg("begin"), py::arg("size"), py::arg("kind") = "parameter", py::arg("name") = "",
           py::arg("reason") = "")
      .def_readwrite("begin", &Span::begin, "First address (int).")
      .def_readwrite("size", &Span::size, "Size in bytes.")
      .def_property(
          "kind", [](const Span& self) { return to_py_str(to_string(self.kind)); },
          [](Span& self, const TextArg& kind) { self.kind = owner_kind_from(kind); },
          "Owner kind: 'parameter', 'buffer', 'runtime', 'graph' or 'input'.");
  def_text<Span>(span, "name", &Span::name, "Module path or declared name.");
  def_text<Span>(span, "reason", &Span::reason, "Why runtime or input memory is exempt.");
  span.def_property_readonly("end", &Span::end, "One past the last address.")
      .def("contains", &Span::contains, py::arg("address"),
           "True if begin <= address < end (half-open).")
      .def("__eq__", [](const Span& a, const Span& b) { return a == b; })
      .def("__repr__", [](const Span& self) {
        return py::str("Span(begin={}, size={}, kind={!r}, name={!r}, reason={!r})")
            .format(address_repr(self.begin), self.size, to_py_str(to_string(self.kind)),
                    to_py_str(self.name), to_py_str(self.reason));
      });

  py::class_<Allocation> allocation(
      m, "Allocation",
      "A live allocation known to a backend, with its pool and generation (which changes when "
      "its bytes were discarded and not restored).");
  allocation
      .def(py::init([](Address begin, std::uint64_t size, const TextArg& pool,
                       std::uint64_t generation, const TextArg& label) {
             return Allocation{begin, size, pool.utf8("Allocation.pool"), generation,
                               label.utf8("Allocation.label")};
           }),
           py::arg("begin"), py::arg("size"), py::arg("pool") = "default",
           py::arg("generation") = 0, py::arg("label") = "")
      .def_readwrite("begin", &Allocation::begin, "First address (int).")
      .def_readwrite("size", &Allocation::size, "Size in bytes.")
      .def_readwrite("generation", &Allocation::generation, "Generation (int).");
  def_text<Allocation>(allocation, "pool", &Allocation::pool,
                       "Pool name: 'default', 'weights', 'graph' or 'graph:<id>', ...");
  def_text<Allocation>(allocation, "label", &Allocation::label,
                       "Attribute path or allocation site; may be empty.");
  allocation.def_property_readonly("end", &Allocation::end, "One past the last address.")
      .def("contains", &Allocation::contains, py::arg("address"), "True if begin <= address < end.")
      .def("is_graph_pool", &Allocation::is_graph_pool,
           "True for pools named 'graph' or 'graph:<anything>'.")
      .def("__eq__", [](const Allocation& a, const Allocation& b) { return a == b; })
      .def("__repr__", [](const Allocation& self) {
        return py::str("Allocation(begin={}, size={}, pool={!r}, generation={}, label={!r})")
            .format(address_repr(self.begin), self.size, to_py_str(self.pool), self.generation,
                    to_py_str(self.label));
      });

  py::class_<Epoch> epoch(m, "Epoch", "The spans and allocations at one moment.");
  epoch
      .def(py::init([](const TextArg& label, std::vector<Span> spans,
                       std::vector<Allocation> allocations) {
             return Epoch{label.utf8("Epoch.label"), std::move(spans), std::move(allocations)};
           }),
           py::arg("label"), py::arg("spans") = std::vector<Span>{},
           py::arg("allocations") = std::vector<Allocation>{})
      .def_readwrite("spans", &Epoch::spans,
                     "The spans (list[Span]; a copy on read: assign a list to change it).")
      .def_readwrite("allocations", &Epoch::allocations,
                     "The allocations (list[Allocation]; a copy on read).");
  def_text<Epoch>(epoch, "label", &Epoch::label, "The epoch's label ('capture', ...).");
  epoch.def("__eq__", [](const Epoch& a, const Epoch& b) { return a == b; })
      .def("__repr__", [](const Epoch& self) {
        return py::str("Epoch(label={!r}, spans={}, allocations={})")
            .format(to_py_str(self.label), count_repr(self.spans.size(), "span"),
                    count_repr(self.allocations.size(), "allocation"));
      });
}

void bind_graph_types(py::module_& m) {
  py::class_<KernelParam> param(m, "KernelParam",
                                "One kernel argument: its offset and its bytes in memory order.");
  param
      .def(py::init([](std::uint64_t offset, const py::bytes& data) {
             const std::string_view view = data;
             return KernelParam{offset, std::vector<std::uint8_t>(view.begin(), view.end())};
           }),
           py::arg("offset"), py::arg("data"))
      .def_readwrite("offset", &KernelParam::offset, "Offset in the packed argument buffer.")
      .def_property(
          "data",
          [](const KernelParam& self) {
            return py::bytes(reinterpret_cast<const char*>(self.bytes.data()), self.bytes.size());
          },
          [](KernelParam& self, const py::bytes& data) {
            const std::string_view view = data;
            self.bytes.assign(view.begin(), view.end());
          },
          "The argument's bytes (bytes; little-endian words as the device reads them).")
      .def("__eq__", [](const KernelParam& a, const KernelParam& b) { return a == b; })
      .def("__repr__", [](const KernelParam& self) {
        return py::str("KernelParam(offset={}, data={})")
            .format(self.offset, count_repr(self.bytes.size(), "byte"));
      });

  py::class_<Operand> operand(m, "Operand",
                              "An address operand of a node, with its extent where known.");
  operand
      .def(py::init(
               [](const TextArg& role, Address begin, std::uint64_t size, const TextArg& access) {
                 return Operand{role.utf8("Operand.role"), begin, size, access_from(access)};
               }),
           py::arg("role"), py::arg("begin"), py::arg("size") = 0, py::arg("access") = "unknown")
      .def_readwrite("begin", &Operand::begin, "The address (int).")
      .def_readwrite("size", &Operand::size, "Extent in bytes; 0 where unknown.")
      .def_property(
          "access", [](const Operand& self) { return to_py_str(to_string(self.access)); },
          [](Operand& self, const TextArg& access) { self.access = access_from(access); },
          "'unknown', 'read', 'write' or 'read-write'.");
  def_text<Operand>(operand, "role", &Operand::role, "'src', 'dst', 'reads[0]', ...");
  operand.def("__eq__", [](const Operand& a, const Operand& b) { return a == b; })
      .def("__repr__", [](const Operand& self) {
        return py::str("Operand(role={!r}, begin={}, size={}, access={!r})")
            .format(to_py_str(self.role), address_repr(self.begin), self.size,
                    to_py_str(to_string(self.access)));
      });

  py::class_<Node> node(m, "Node", "One graph node; which members are used depends on type.");
  node.def(py::init([](std::uint64_t id, const TextArg& type, const TextArg& name,
                       std::vector<KernelParam> params, std::vector<Operand> operands,
                       std::vector<NodeList> bodies) {
             return Node{id,
                         node_type_from(type),
                         name.utf8("Node.name"),
                         std::move(params),
                         std::move(operands),
                         std::move(bodies)};
           }),
           py::arg("id"), py::arg("type") = "empty", py::arg("name") = "",
           py::arg("params") = std::vector<KernelParam>{},
           py::arg("operands") = std::vector<Operand>{},
           py::arg("bodies") = std::vector<NodeList>{})
      .def_readwrite("id", &Node::id, "Node id, unique within its graph.")
      .def_property(
          "type", [](const Node& self) { return to_py_str(to_string(self.type)); },
          [](Node& self, const TextArg& type) { self.type = node_type_from(type); },
          "'kernel', 'memcpy', 'memset', 'op', ... (the snapshot spelling).")
      .def_readwrite("params", &Node::params,
                     "Kernel arguments (list[KernelParam]; a copy on read).")
      .def_readwrite("operands", &Node::operands,
                     "Address operands (list[Operand]; a copy on read).")
      .def_readwrite(
          "bodies", &Node::bodies,
          "Child graph (one body) or conditional (one per branch) node lists (a copy on read).");
  def_text<Node>(node, "name", &Node::name, "Kernel or op name; empty for other kinds.");
  node.def("__eq__", [](const Node& a, const Node& b) { return a == b; })
      .def("__repr__", [](const Node& self) {
        return py::str("Node(id={}, type={!r}, name={!r})")
            .format(self.id, to_py_str(to_string(self.type)), to_py_str(self.name));
      });

  py::class_<GraphRecord> graph(m, "GraphRecord",
                                "A captured graph: its id, its capture epoch and its nodes.");
  graph
      .def(py::init([](std::uint64_t id, const TextArg& epoch, NodeList nodes) {
             return GraphRecord{id, epoch.utf8("GraphRecord.epoch"), std::move(nodes)};
           }),
           py::arg("id"), py::arg("epoch"), py::arg("nodes") = NodeList{})
      .def_readwrite("id", &GraphRecord::id, "Graph id.")
      .def_readwrite("nodes", &GraphRecord::nodes, "The nodes (list[Node]; a copy on read).");
  def_text<GraphRecord>(graph, "epoch", &GraphRecord::epoch,
                        "Label of the epoch the graph was captured in.");
  def_text<GraphRecord>(graph, "reader", &GraphRecord::reader,
                        "What read the nodes: 'cuda-graph', 'aten-dispatcher', or '' (not said).");
  graph.def("__eq__", [](const GraphRecord& a, const GraphRecord& b) { return a == b; })
      .def("__repr__", [](const GraphRecord& self) {
        return py::str("GraphRecord(id={}, epoch={!r}, nodes={})")
            .format(self.id, to_py_str(self.epoch), count_repr(self.nodes.size(), "node"));
      });
}

void bind_snapshot_type(py::module_& m) {
  py::class_<Producer> producer_class(m, "Producer", "Who wrote a snapshot.");
  producer_class
      .def(py::init([](const TextArg& backend, const TextArg& tool) {
             return Producer{backend.utf8("Producer.backend"), tool.utf8("Producer.tool")};
           }),
           py::arg("backend") = "synthetic", py::arg("tool") = "")
      .def("__eq__", [](const Producer& a, const Producer& b) { return a == b; })
      .def("__repr__", [](const Producer& self) {
        return py::str("Producer(backend={!r}, tool={!r})")
            .format(to_py_str(self.backend), to_py_str(self.tool));
      });
  def_text<Producer>(producer_class, "backend", &Producer::backend,
                     "'cupti', 'aten' or 'synthetic'.");
  def_text<Producer>(producer_class, "tool", &Producer::tool, "'graphcheck 0.1.0', ...");

  py::class_<Snapshot>(
      m, "Snapshot",
      "Everything the checker reads: epochs in order, graphs, allowlist globs (snapshot "
      "format version 1, docs/snapshot-format.md).")
      .def(py::init([](const Producer* producer, std::vector<Epoch> epochs,
                       std::vector<GraphRecord> graphs, const std::vector<TextArg>& allow) {
             Snapshot snapshot;
             if (producer != nullptr) {
               snapshot.producer = *producer;
             }
             snapshot.epochs = std::move(epochs);
             snapshot.graphs = std::move(graphs);
             snapshot.allow = globs_of(allow);
             return snapshot;
           }),
           py::arg("producer") = py::none(), py::arg("epochs") = std::vector<Epoch>{},
           py::arg("graphs") = std::vector<GraphRecord>{},
           py::arg("allow") = std::vector<std::string>{})
      .def_readwrite("producer", &Snapshot::producer, "Who wrote it (a Producer).")
      .def_readwrite("epochs", &Snapshot::epochs, "Epochs in order (list[Epoch]; a copy on read).")
      .def_readwrite("graphs", &Snapshot::graphs, "Graphs (list[GraphRecord]; a copy on read).")
      .def_property(
          "allow", [](const Snapshot& self) { return self.allow; },
          [](Snapshot& self, const std::vector<TextArg>& allow) { self.allow = globs_of(allow); },
          "Allowlist globs (list[str]; a copy on read).")
      .def(
          "find_epoch",
          [](const Snapshot& self, const TextArg& label) -> std::optional<Epoch> {
            if (const Epoch* epoch = self.find_epoch(label.view("label"))) {
              return *epoch;
            }
            return std::nullopt;
          },
          py::arg("label"), "A copy of the epoch labelled `label`, or None.")
      .def(
          "to_json", [](const Snapshot& self) { return to_json(self); },
          "The snapshot as JSON text (format version 1). Raises GraphcheckError if an invariant "
          "is broken (duplicate epoch labels or graph ids, a graph naming a missing epoch, a zero "
          "size).")
      .def("__eq__", [](const Snapshot& a, const Snapshot& b) { return a == b; })
      .def("__repr__", [](const Snapshot& self) {
        py::list labels;
        for (const Epoch& epoch : self.epochs) {
          labels.append(to_py_str(epoch.label));
        }
        return py::str("Snapshot(producer={!r}, epochs={!r}, graphs={}, allow={!r})")
            .format(py::cast(self.producer), labels, count_repr(self.graphs.size(), "graph"),
                    py::cast(self.allow));
      });
}

}  // namespace

void bind_snapshot(py::module_& m) {
  bind_epoch_types(m);
  bind_graph_types(m);
  bind_snapshot_type(m);

  m.def(
      "parse_snapshot",
      [](const TextArg& text, const TextArg& source) {
        return parse_snapshot(text.view("text"), source.view("source"));
      },
      py::arg("text"), py::arg("source") = "snapshot",
      "Parses and validates snapshot JSON text. Raises GraphcheckError naming the JSON path of "
      "a bad field, what was expected and what was found; `source` names the text in messages.");
  m.def(
      "read_snapshot", [](const std::filesystem::path& path) { return read_snapshot(path); },
      py::arg("path"),
      "Reads and parses a snapshot file (str or os.PathLike). Raises GraphcheckError naming the "
      "path when it cannot be read, or the bad field.");
  m.def(
      "write_snapshot",
      [](const Snapshot& snapshot, const std::filesystem::path& path) {
        const py::gil_scoped_release unlocked;  // a watch writes snapshots beside the capture
        write_snapshot(snapshot, path);
      },
      py::arg("snapshot"), py::arg("path"),
      "Writes the snapshot's JSON to `path`. Raises GraphcheckError naming the path on failure. "
      "Releases the GIL while it writes: do not change the snapshot from another thread "
      "meanwhile.");
}

}  // namespace graphcheck::detail
