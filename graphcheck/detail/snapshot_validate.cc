// The invariants of `Snapshot`, shared by the reader (after it has typed every field) and the
// writer (before it writes anything), so that what one accepts the other accepts too.
#include "graphcheck/detail/snapshot_validate.h"

#include <graphcheck/error.h>

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graphcheck/detail/json_access.h"

namespace graphcheck {
namespace detail {
namespace {

constexpr std::size_t kOwnerKindCount = 5;
constexpr std::size_t kNodeTypeCount = 15;
constexpr std::size_t kLabelsListed = 8;

std::string quote_text(std::string_view text) { return describe_json(nlohmann::json(text)); }

// Checks a snapshot in document order and throws at the first violation. The paths of spans,
// allocations and fields are built only when a check fails (one per node list and node
// otherwise), so validating a large snapshot allocates little.
class Validator {
 public:
  explicit Validator(std::string_view source) : source_(source) {}

  void run(const Snapshot& snapshot) {
    if (std::find(kBackends.begin(), kBackends.end(), snapshot.producer.backend) ==
        kBackends.end()) {
      fail("producer.backend", R"(a backend, one of "cupti", "aten", "synthetic")",
           quote_text(snapshot.producer.backend));
    }
    check_text(snapshot.producer.tool, [] { return std::string("producer.tool"); });
    for (std::size_t i = 0; i < snapshot.allow.size(); ++i) {
      check_text(snapshot.allow[i], [i] { return element_path("allow", i); });
    }
    if (snapshot.epochs.empty()) {
      fail("epochs", "at least one epoch", "[]");
    }
    std::unordered_set<std::string_view> labels;
    for (std::size_t e = 0; e < snapshot.epochs.size(); ++e) {
      const Epoch& epoch = snapshot.epochs[e];
      const std::string path = element_path("epochs", e);
      if (epoch.label.empty()) {
        fail(path + ".label", "a non-empty string", "\"\"");
      }
      check_text(epoch.label, [&] { return path + ".label"; });
      if (!labels.insert(epoch.label).second) {
        fail(path + ".label", "a label that no earlier epoch uses", quote_text(epoch.label));
      }
      for (std::size_t i = 0; i < epoch.spans.size(); ++i) {
        const Span& span = epoch.spans[i];
        if (static_cast<std::size_t>(span.kind) >= kOwnerKindCount) {
          fail(element_path(path + ".spans", i) + ".kind", "an owner kind",
               std::to_string(static_cast<int>(span.kind)));
        }
        check_extent(span.begin, span.size,
                     [&] { return element_path(path + ".spans", i) + ".size"; });
        check_text(span.name, [&] { return element_path(path + ".spans", i) + ".name"; });
        check_text(span.reason, [&] { return element_path(path + ".spans", i) + ".reason"; });
      }
      for (std::size_t i = 0; i < epoch.allocations.size(); ++i) {
        const Allocation& allocation = epoch.allocations[i];
        check_extent(allocation.begin, allocation.size,
                     [&] { return element_path(path + ".allocations", i) + ".size"; });
        check_text(allocation.pool,
                   [&] { return element_path(path + ".allocations", i) + ".pool"; });
        check_text(allocation.label,
                   [&] { return element_path(path + ".allocations", i) + ".label"; });
      }
    }
    std::unordered_map<std::uint64_t, std::size_t> graph_ids;  // id -> its first graph
    for (std::size_t g = 0; g < snapshot.graphs.size(); ++g) {
      const GraphRecord& graph = snapshot.graphs[g];
      const std::string path = element_path("graphs", g);
      if (const auto [first, added] = graph_ids.try_emplace(graph.id, g); !added) {
        fail(path + ".id", "an id that no earlier graph uses",
             std::to_string(graph.id) + " (" + element_path("graphs", first->second) + " has it)");
      }
      if (labels.count(graph.epoch) == 0) {
        fail(path + ".epoch",
             "the label of an epoch of this snapshot (" + list_labels(snapshot) + ")",
             quote_text(graph.epoch));
      }
      check_text(graph.reader, [&] { return path + ".reader"; });
      graph_id_ = graph.id;
      find_repeated_ids(graph.nodes);
      check_nodes(graph.nodes, path + ".nodes", 0);
    }
  }

 private:
  [[noreturn]] void fail(std::string_view path, std::string_view expected,
                         std::string_view found) const {
    throw Error(field_prefix(source_, path) + "expected " + std::string(expected) + ", found " +
                std::string(found));
  }

  // The reader accepts only UTF-8 text, so the writer must not produce anything else.
  template <typename MakePath>
  void check_text(std::string_view text, const MakePath& make_path) const {
    if (!is_valid_utf8(text)) {
      fail(make_path(), "UTF-8 text", "bytes that are not UTF-8: " + quote_text(text));
    }
  }

  // `make_path()`: the path of the size's own key.
  template <typename MakePath>
  void check_extent(Address begin, std::uint64_t size, const MakePath& make_path) const {
    if (size == 0) {
      fail(make_path(), "a positive integer", "0");
    }
    if (!fits_in_address_space(begin, size)) {
      fail(make_path(),
           "a size that keeps begin + size within 64 bits (at most " +
               std::to_string(UINT64_MAX - begin) + " after " + format_address(begin) + ")",
           std::to_string(size));
    }
  }

  static std::string list_labels(const Snapshot& snapshot) {
    std::string list = "one of ";
    for (std::size_t e = 0; e < snapshot.epochs.size() && e < kLabelsListed; ++e) {
      list += e == 0 ? "" : ", ";
      list += quote_text(snapshot.epochs[e].label);
    }
    if (snapshot.epochs.size() > kLabelsListed) {
      list += ", ...";
    }
    return list;
  }

  // The ids that more than one node of a graph uses, found with a sorted list of every id (8
  // bytes a node; a hash set of all of them took five times that on large graphs). The walk
  // in `check_nodes` then reports the first node, in document order, whose id came before.
  void find_repeated_ids(const NodeList& nodes) {
    all_ids_.clear();
    repeated_ids_.clear();
    seen_repeated_.clear();
    collect_ids(nodes, 0);
    std::sort(all_ids_.begin(), all_ids_.end());
    for (std::size_t i = 1; i < all_ids_.size(); ++i) {
      if (all_ids_[i] == all_ids_[i - 1]) {
        repeated_ids_.insert(all_ids_[i]);
      }
    }
    all_ids_ = {};
  }

  void collect_ids(const NodeList& nodes, std::size_t depth) {
    if (depth > kMaxGraphNesting) {
      return;  // refused by `check_nodes` before any id there matters
    }
    for (const Node& node : nodes) {
      all_ids_.push_back(node.id);
      for (const NodeList& body : node.bodies) {
        collect_ids(body, depth + 1);
      }
    }
  }

  void check_nodes(const NodeList& nodes, const std::string& path, std::size_t depth) {
    if (depth > kMaxGraphNesting && !nodes.empty()) {
      throw Error(field_prefix(source_, path) + "expected at most " +
                  std::to_string(kMaxGraphNesting) +
                  " levels of nested child graphs and conditional bodies, found more");
    }
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      const Node& node = nodes[n];
      const std::string node_path = element_path(path, n);
      if (repeated_ids_.count(node.id) != 0) {
        const auto [first, added] = seen_repeated_.try_emplace(node.id, node_path);
        if (!added) {
          fail(node_path + ".id",
               "an id that no other node of graph " + std::to_string(graph_id_) + " uses",
               std::to_string(node.id) + " (" + first->second + " has it)");
        }
      }
      check_shape(node, node_path);
      check_text(node.name, [&] { return node_path + ".name"; });
      for (std::size_t p = 0; p < node.params.size(); ++p) {
        if (node.params[p].bytes.empty()) {
          fail(element_path(node_path + ".params", p) + ".hex", "at least one byte", "\"\"");
        }
      }
      if (node.type == NodeType::kChildGraph) {
        check_nodes(node.bodies[0], node_path + ".nodes", depth + 1);
      } else {
        for (std::size_t b = 0; b < node.bodies.size(); ++b) {
          check_nodes(node.bodies[b], element_path(node_path + ".bodies", b) + ".nodes", depth + 1);
        }
      }
    }
  }

  // The writer can only express a node in the form the reader builds for its type; any
  // other content would be lost or changed by a round trip, so it is refused here.
  void check_shape(const Node& node, const std::string& path) const {
    if (static_cast<std::size_t>(node.type) >= kNodeTypeCount) {
      fail(path + ".type", "a node type", std::to_string(static_cast<int>(node.type)));
    }
    const std::string type(to_string(node.type));
    const bool named = node.type == NodeType::kKernel || node.type == NodeType::kOp;
    if (!named && !node.name.empty()) {
      fail(path + ".name", "no name for a " + type + " node (only kernel and op nodes have one)",
           quote_text(node.name));
    }
    if (node.type != NodeType::kKernel && !node.params.empty()) {
      fail(path + ".params", "no params for a " + type + " node",
           std::to_string(node.params.size()) + " params");
    }
    std::size_t bodies = 0;
    if (node.type == NodeType::kChildGraph) {
      bodies = 1;
    } else if (node.type == NodeType::kConditional) {
      bodies = node.bodies.size();
    }
    if (node.bodies.size() != bodies) {
      fail(path + ".bodies", std::to_string(bodies) + " bodies for a " + type + " node",
           std::to_string(node.bodies.size()) + " bodies");
    }
    check_operands(node, path, type);
  }

  void check_operands(const Node& node, const std::string& path, const std::string& type) const {
    const auto& operands = node.operands;
    const auto expect = [&](std::size_t count, std::string_view form) {
      if (operands.size() != count) {
        fail(path + ".operands", "for a " + type + " node " + std::string(form),
             std::to_string(operands.size()) + " operands");
      }
    };
    // The key a memcpy side's size has in the file: "size" when both sides share it (or one
    // side is given), else "src_size" / "dst_size" (the writer's rule).
    const auto memcpy_size_key = [&](std::string_view role) {
      return operands.size() == 2 && operands[0].size != operands[1].size
                 ? std::string(role) + "_size"
                 : std::string("size");
    };
    const auto check = [&](std::size_t i, std::string_view role, Access access,
                           std::string_view size_key) {
      const Operand& operand = operands[i];
      if (operand.role != role || operand.access != access) {
        fail(path + ".operands",
             "operand " + std::to_string(i) + " of a " + type + " node to be \"" +
                 std::string(role) + "\" with its access",
             quote_text(operand.role));
      }
      if (access != Access::kUnknown) {
        check_extent(operand.begin, operand.size, [&] {
          if (node.type == NodeType::kMemcpy) {
            return path + "." + memcpy_size_key(role);
          }
          return (size_key.empty() ? path : path + "." + std::string(size_key)) + ".size";
        });
      } else if (operand.size != 0) {
        fail(path + ".operands", "size 0 for the \"" + std::string(role) + "\" operand",
             std::to_string(operand.size));
      }
    };
    switch (node.type) {
      case NodeType::kMemcpy: {
        // Each side is optional (host or array memory is no device address), in this order;
        // each has its own size (a pitched copy between different pitches covers two extents).
        if (operands.size() > 2) {
          expect(2, R"(at most "src" (read) and "dst" (write))");
        }
        const bool dst_only = operands.size() == 1 && operands[0].role == "dst";
        if (!operands.empty() && !dst_only) {
          check(0, "src", Access::kRead, "");
        }
        if (operands.size() == 2 || dst_only) {
          check(operands.size() - 1, "dst", Access::kWrite, "");
        }
        break;
      }
      case NodeType::kMemset:
        expect(1, R"("dst" (write))");
        check(0, "dst", Access::kWrite, "");
        break;
      case NodeType::kMemAlloc:
        expect(1, R"("alloc" (write))");
        check(0, "alloc", Access::kWrite, "");
        break;
      case NodeType::kMemFree:
        expect(1, R"("dptr" (unknown access, size 0))");
        check(0, "dptr", Access::kUnknown, "");
        break;
      case NodeType::kOp:
      case NodeType::kBatchMemOp: {
        std::size_t reads = 0;
        while (reads < operands.size() && operands[reads].access == Access::kRead) {
          ++reads;
        }
        for (std::size_t i = 0; i < operands.size(); ++i) {
          const std::string role =
              i < reads ? element_path("reads", i) : element_path("writes", i - reads);
          check(i, role, i < reads ? Access::kRead : Access::kWrite, role);
        }
        break;
      }
      case NodeType::kKernel:
        // Optional addresses outside the argument bytes (TMA descriptor targets): the file
        // spells role, begin and size only, so every one is a read of a known or 0 size.
        for (std::size_t i = 0; i < operands.size(); ++i) {
          const Operand& operand = operands[i];
          const auto operand_path = [&] { return element_path(path + ".operands", i); };
          if (operand.role.empty()) {
            fail(operand_path() + ".role", "a non-empty role", "\"\"");
          }
          check_text(operand.role, [&] { return operand_path() + ".role"; });
          if (operand.access != Access::kRead) {
            fail(operand_path(), "a kernel operand with read access (the only one a file holds)",
                 operand.access == Access::kWrite ? "write access" : "unknown access");
          }
          if (operand.size != 0 && !fits_in_address_space(operand.begin, operand.size)) {
            check_extent(operand.begin, operand.size, [&] { return operand_path() + ".size"; });
          }
        }
        break;
      default:
        expect(0, "no operands");
        break;
    }
  }

  std::string_view source_;
  std::vector<std::uint64_t> all_ids_;
  std::unordered_set<std::uint64_t> repeated_ids_;
  std::unordered_map<std::uint64_t, std::string> seen_repeated_;  // id -> its first node
  std::uint64_t graph_id_ = 0;
};

}  // namespace

void validate_snapshot(const Snapshot& snapshot, std::string_view source) {
  Validator(source).run(snapshot);
}

}  // namespace detail

}  // namespace graphcheck
