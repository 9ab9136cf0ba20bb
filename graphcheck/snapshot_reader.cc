// Snapshot JSON (format version 1) to `Snapshot`: every field typed and checked where it is
// read, so each error names the JSON path of the bad field; then the cross-field invariants.
#include <graphcheck/error.h>
#include <graphcheck/snapshot.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "graphcheck/detail/json_access.h"
#include "graphcheck/detail/snapshot_validate.h"

namespace graphcheck {
namespace {

using detail::JsonField;

constexpr std::string_view kFormat = "graphcheck-snapshot";
constexpr std::size_t kNodeTypeCount = 15;

std::string accepted_node_types() {
  std::string list = "a node type, one of";
  for (std::size_t i = 0; i < kNodeTypeCount; ++i) {
    list += i == 0 ? " \"" : ", \"";
    list += to_string(static_cast<NodeType>(i));
    list += '"';
  }
  return list;
}

std::string accepted_owner_kinds() {
  return R"(an owner kind, one of "parameter", "buffer", "runtime", "graph", "input")";
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') {
    return c - '0';
  }
  if (c >= 'a' && c <= 'f') {
    return c - 'a' + 10;
  }
  if (c >= 'A' && c <= 'F') {
    return c - 'A' + 10;
  }
  return -1;
}

std::vector<std::uint8_t> read_hex(const JsonField& field) {
  const std::string text = field.as_string();
  if (text.empty()) {
    field.fail("at least 2 hex digits (one byte)");
  }
  if (text.size() % 2 != 0) {
    field.fail("an even number of hex digits");
  }
  std::vector<std::uint8_t> bytes(text.size() / 2);
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const int high = hex_digit(text[2 * i]);
    const int low = hex_digit(text[2 * i + 1]);
    if (high < 0 || low < 0) {
      field.fail("hex digits only (0-9, a-f, A-F)");
    }
    bytes[i] = static_cast<std::uint8_t>(high * 16 + low);
  }
  return bytes;
}

Producer read_producer(const JsonField& field) {
  field.expect_object();
  Producer producer;
  if (const auto backend = field.optional("backend")) {
    producer.backend = backend->as_string();
    if (std::find(detail::kBackends.begin(), detail::kBackends.end(), producer.backend) ==
        detail::kBackends.end()) {
      backend->fail(R"(a backend, one of "cupti", "aten", "synthetic")");
    }
  }
  if (const auto tool = field.optional("tool")) {
    producer.tool = tool->as_string();
  }
  return producer;
}

Span read_span(const JsonField& field) {
  Span span;
  span.begin = field.required("begin").as_address();
  span.size = field.required("size").as_positive();
  const JsonField kind = field.required("kind");
  std::optional<OwnerKind> parsed;
  if (kind.json().is_string()) {
    parsed = parse_owner_kind(kind.json().get_ref<const std::string&>());
  }
  if (!parsed) {
    kind.fail(accepted_owner_kinds());
  }
  span.kind = *parsed;
  span.name = field.required("name").as_string();
  if (const auto reason = field.optional("reason")) {
    span.reason = reason->as_string();
  }
  return span;
}

Allocation read_allocation(const JsonField& field) {
  Allocation allocation;
  allocation.begin = field.required("begin").as_address();
  allocation.size = field.required("size").as_positive();
  allocation.pool = field.required("pool").as_string();
  allocation.generation = field.required("generation").as_uint();
  if (const auto label = field.optional("label")) {
    allocation.label = label->as_string();
  }
  return allocation;
}

Epoch read_epoch(const JsonField& field) {
  Epoch epoch;
  epoch.label = field.required("label").as_nonempty_string();
  const JsonField spans = field.required("spans");
  const std::size_t span_count = spans.array_size();
  epoch.spans.reserve(span_count);
  for (std::size_t i = 0; i < span_count; ++i) {
    epoch.spans.push_back(read_span(spans.element(i)));
  }
  const JsonField allocations = field.required("allocations");
  const std::size_t allocation_count = allocations.array_size();
  epoch.allocations.reserve(allocation_count);
  for (std::size_t i = 0; i < allocation_count; ++i) {
    epoch.allocations.push_back(read_allocation(allocations.element(i)));
  }
  return epoch;
}

Operand read_operand(const JsonField& field, std::string_view begin_key, std::string role,
                     Access access) {
  Operand operand;
  operand.role = std::move(role);
  operand.begin = field.required(begin_key).as_address();
  operand.size = field.required("size").as_positive();
  operand.access = access;
  return operand;
}

KernelParam read_param(const JsonField& field) {
  KernelParam param;
  param.offset = field.required("offset").as_uint();
  const JsonField size = field.required("size");
  const std::uint64_t declared = size.as_positive();
  param.bytes = read_hex(field.required("hex"));
  if (declared != param.bytes.size()) {
    size.fail(std::to_string(param.bytes.size()) + " (the number of bytes \"hex\" holds)");
  }
  return param;
}

NodeList read_nodes(const JsonField& field, std::size_t depth);

Node read_node(const JsonField& field, std::size_t depth) {
  Node node;
  node.id = field.required("id").as_uint();
  const JsonField type = field.required("type");
  std::optional<NodeType> parsed;
  if (type.json().is_string()) {
    parsed = parse_node_type(type.json().get_ref<const std::string&>());
  }
  if (!parsed) {
    type.fail(accepted_node_types());
  }
  node.type = *parsed;
  switch (node.type) {
    case NodeType::kKernel: {
      node.name = field.required("name").as_string();
      const JsonField params = field.required("params");
      const std::size_t count = params.array_size();
      node.params.reserve(count);
      for (std::size_t i = 0; i < count; ++i) {
        node.params.push_back(read_param(params.element(i)));
      }
      // Optional (absent in older files): addresses the kernel uses outside its argument
      // bytes, such as the global address inside a TMA descriptor. Always reads.
      if (const std::optional<JsonField> operands = field.optional("operands")) {
        const std::size_t operand_count = operands->array_size();
        node.operands.reserve(operand_count);
        for (std::size_t i = 0; i < operand_count; ++i) {
          const JsonField operand = operands->element(i);
          node.operands.push_back({operand.required("role").as_nonempty_string(),
                                   operand.required("begin").as_address(),
                                   operand.required("size").as_uint(), Access::kRead});
        }
      }
      break;
    }
    case NodeType::kMemcpy: {
      const std::uint64_t size = field.required("size").as_positive();
      node.operands.push_back({"src", field.required("src").as_address(), size, Access::kRead});
      node.operands.push_back({"dst", field.required("dst").as_address(), size, Access::kWrite});
      break;
    }
    case NodeType::kMemset:
      node.operands.push_back(read_operand(field, "dst", "dst", Access::kWrite));
      break;
    case NodeType::kMemAlloc:
      node.operands.push_back(read_operand(field, "begin", "alloc", Access::kWrite));
      break;
    case NodeType::kMemFree:
      node.operands.push_back({"dptr", field.required("dptr").as_address(), 0, Access::kUnknown});
      break;
    case NodeType::kOp: {
      node.name = field.required("name").as_string();
      // Reads first, then writes: the operand order `to_json` expects back.
      constexpr std::array<std::pair<std::string_view, Access>, 2> kExtents = {
          {{"reads", Access::kRead}, {"writes", Access::kWrite}}};
      for (const auto& [key, access] : kExtents) {
        const JsonField extents = field.required(key);
        const std::size_t count = extents.array_size();
        for (std::size_t i = 0; i < count; ++i) {
          node.operands.push_back(
              read_operand(extents.element(i), "begin", detail::element_path(key, i), access));
        }
      }
      break;
    }
    case NodeType::kChildGraph:
      node.bodies.push_back(read_nodes(field.required("nodes"), depth + 1));
      break;
    case NodeType::kConditional: {
      const JsonField bodies = field.required("bodies");
      const std::size_t count = bodies.array_size();
      node.bodies.reserve(count);
      for (std::size_t i = 0; i < count; ++i) {
        node.bodies.push_back(read_nodes(bodies.element(i).required("nodes"), depth + 1));
      }
      break;
    }
    case NodeType::kHost:
    case NodeType::kEmpty:
    case NodeType::kEventWait:
    case NodeType::kEventRecord:
    case NodeType::kExtSemasSignal:
    case NodeType::kExtSemasWait:
    case NodeType::kBatchMemOp:
      break;
  }
  return node;
}

NodeList read_nodes(const JsonField& field, std::size_t depth) {
  const std::size_t count = field.array_size();
  if (depth > detail::kMaxGraphNesting && count > 0) {
    field.fail_with("expected at most " + std::to_string(detail::kMaxGraphNesting) +
                    " levels of nested child graphs and conditional bodies, found more");
  }
  NodeList nodes;
  nodes.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    nodes.push_back(read_node(field.element(i), depth));
  }
  return nodes;
}

GraphRecord read_graph(const JsonField& field) {
  GraphRecord graph;
  graph.id = field.required("id").as_uint();
  graph.epoch = field.required("epoch").as_string();
  graph.nodes = read_nodes(field.required("nodes"), 0);
  return graph;
}

Snapshot read_document(const JsonField& root) {
  root.expect_object();
  const JsonField format = root.required("format");
  if (!format.json().is_string() || format.json().get_ref<const std::string&>() != kFormat) {
    format.fail("\"graphcheck-snapshot\"");
  }
  const JsonField version = root.required("version");
  if (!version.json().is_number_unsigned() ||
      version.json().get<std::uint64_t>() != static_cast<std::uint64_t>(kSnapshotVersion)) {
    version.fail("1 (this build reads snapshot format version 1)");
  }
  Snapshot snapshot;
  if (const auto producer = root.optional("producer")) {
    snapshot.producer = read_producer(*producer);
  }
  const JsonField epochs = root.required("epochs");
  const std::size_t epoch_count = epochs.array_size();
  if (epoch_count == 0) {
    epochs.fail("at least one epoch");
  }
  snapshot.epochs.reserve(epoch_count);
  for (std::size_t i = 0; i < epoch_count; ++i) {
    snapshot.epochs.push_back(read_epoch(epochs.element(i)));
  }
  const JsonField graphs = root.required("graphs");
  const std::size_t graph_count = graphs.array_size();
  snapshot.graphs.reserve(graph_count);
  for (std::size_t i = 0; i < graph_count; ++i) {
    snapshot.graphs.push_back(read_graph(graphs.element(i)));
  }
  if (const auto allow = root.optional("allow")) {
    const std::size_t count = allow->array_size();
    snapshot.allow.reserve(count);
    for (std::size_t i = 0; i < count; ++i) {
      snapshot.allow.push_back(allow->element(i).as_string());
    }
  }
  return snapshot;
}

}  // namespace

const Epoch* Snapshot::find_epoch(std::string_view label) const {
  const auto it = std::find_if(epochs.begin(), epochs.end(),
                               [label](const Epoch& epoch) { return epoch.label == label; });
  return it == epochs.end() ? nullptr : &*it;
}

Snapshot parse_snapshot(std::string_view json, std::string_view source) {
  const nlohmann::json document = detail::parse_json_document(json, source);
  Snapshot snapshot = read_document(JsonField(document, "", source));
  detail::validate_snapshot(snapshot, source);
  return snapshot;
}

Snapshot read_snapshot(const std::filesystem::path& path) {
  const std::string name = path.string();
  const auto fail = [&name](int error) {
    throw Error(name + ": cannot read the snapshot file: " + std::strerror(error));
  };
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(name.c_str(), "rb"),
                                                             &std::fclose);
  if (!file) {
    fail(errno);
  }
  std::string text;
  char buffer[1 << 16];
  while (true) {
    const std::size_t read = std::fread(buffer, 1, sizeof(buffer), file.get());
    text.append(buffer, read);
    if (read < sizeof(buffer)) {
      if (std::ferror(file.get()) != 0) {
        fail(errno);
      }
      break;
    }
  }
  return parse_snapshot(text, name);
}

}  // namespace graphcheck
