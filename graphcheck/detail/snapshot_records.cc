// The records of snapshot format version 1 (docs/snapshot-format.md): every field typed and
// checked where it is read, so that each error names the JSON path of the bad field.
#include "graphcheck/detail/snapshot_records.h"

#include <graphcheck/error.h>

#include <algorithm>
#include <array>
#include <initializer_list>
#include <optional>
#include <utility>

#include "graphcheck/detail/snapshot_validate.h"

namespace graphcheck::detail {
namespace {

constexpr std::string_view kFormat = "graphcheck-snapshot";
constexpr std::size_t kNodeTypeCount = 15;

bool is_one_of(std::string_view key, std::initializer_list<std::string_view> keys) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

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
  if (!field.json().is_string()) {
    field.fail("a string");
  }
  const std::string& text = field.json().get_ref<const std::string&>();
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
    if (std::find(kBackends.begin(), kBackends.end(), producer.backend) == kBackends.end()) {
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

Operand read_extent(const JsonField& field, std::string_view begin_key, std::string role,
                    Access access) {
  Operand operand;
  operand.role = std::move(role);
  operand.begin = field.required(begin_key).as_address();
  operand.size = field.required("size").as_positive();
  operand.access = access;
  return operand;
}

// Optional (absent in older files): addresses the kernel uses outside its argument bytes, such
// as the global address inside a TMA descriptor. Always reads; the size may be 0 (unknown).
Operand read_kernel_operand(const JsonField& field) {
  return {field.required("role").as_nonempty_string(), field.required("begin").as_address(),
          field.required("size").as_uint(), Access::kRead};
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

// The finished list member `key` of a record (`member` is its value in `fields`, [] when the
// list ended); rethrows the first error among its elements.
template <typename T>
T take_list(const JsonField& member, std::string_view key, RecordLists& lists) {
  (void)member.array_size();  // any other value than a list is an error here
  const auto it = std::find_if(lists.rbegin(), lists.rend(),
                               [key](const auto& entry) { return entry.first == key; });
  if (it == lists.rend()) {
    return T{};  // not reached: a member reads as [] only once its list has ended
  }
  if (it->second.error) {
    throw Error(*it->second.error);
  }
  return std::move(std::get<T>(it->second.items));
}

template <typename T>
T required_list(const JsonField& fields, std::string_view key, RecordLists& lists) {
  return take_list<T>(fields.required(key), key, lists);
}

}  // namespace

SnapshotKind member_kind(SnapshotKind record, std::string_view key) {
  using K = SnapshotKind;
  struct Member {
    std::string_view key;
    SnapshotKind kind;
  };
  // The members each record defines (docs/snapshot-format.md); any other key is unknown.
  static constexpr std::array<Member, 6> kRootMembers = {{{"format", K::kScalar},
                                                          {"version", K::kScalar},
                                                          {"producer", K::kProducer},
                                                          {"epochs", K::kEpochs},
                                                          {"graphs", K::kGraphs},
                                                          {"allow", K::kAllow}}};
  static constexpr std::array<Member, 3> kEpochMembers = {
      {{"label", K::kScalar}, {"spans", K::kSpans}, {"allocations", K::kAllocations}}};
  static constexpr std::array<Member, 4> kGraphMembers = {
      {{"id", K::kScalar}, {"epoch", K::kScalar}, {"reader", K::kScalar}, {"nodes", K::kNodes}}};
  static constexpr std::array<Member, 16> kNodeMembers = {{{"id", K::kScalar},
                                                           {"type", K::kScalar},
                                                           {"name", K::kScalar},
                                                           {"src", K::kScalar},
                                                           {"dst", K::kScalar},
                                                           {"size", K::kScalar},
                                                           {"src_size", K::kScalar},
                                                           {"dst_size", K::kScalar},
                                                           {"begin", K::kScalar},
                                                           {"dptr", K::kScalar},
                                                           {"params", K::kParams},
                                                           {"operands", K::kKernelOperands},
                                                           {"reads", K::kExtents},
                                                           {"writes", K::kExtents},
                                                           {"nodes", K::kNodes},
                                                           {"bodies", K::kBodies}}};
  static constexpr std::array<Member, 1> kBodyMembers = {{{"nodes", K::kNodes}}};
  const auto find = [key](const auto& members) {
    for (const Member& member : members) {
      if (member.key == key) {
        return member.kind;
      }
    }
    return K::kUnknown;
  };
  // Records of scalars: every member the format defines is a scalar.
  const auto scalar = [key](std::initializer_list<std::string_view> keys) {
    return is_one_of(key, keys) ? K::kScalar : K::kUnknown;
  };
  switch (record) {
    case K::kRoot:
      return find(kRootMembers);
    case K::kEpoch:
      return find(kEpochMembers);
    case K::kGraph:
      return find(kGraphMembers);
    case K::kNode:
      return find(kNodeMembers);
    case K::kBody:
      return find(kBodyMembers);
    case K::kProducer:
      return scalar({"backend", "tool"});
    case K::kSpan:
      return scalar({"begin", "size", "kind", "name", "reason"});
    case K::kAllocation:
      return scalar({"begin", "size", "pool", "generation", "label"});
    case K::kParam:
      return scalar({"offset", "size", "hex"});
    case K::kKernelOperand:
      return scalar({"role", "begin", "size"});
    case K::kExtent:
      return scalar({"begin", "size"});
    default:
      return K::kUnknown;
  }
}

SnapshotKind element_kind(SnapshotKind list) {
  using K = SnapshotKind;
  switch (list) {
    case K::kEpochs:
      return K::kEpoch;
    case K::kSpans:
      return K::kSpan;
    case K::kAllocations:
      return K::kAllocation;
    case K::kGraphs:
      return K::kGraph;
    case K::kNodes:
      return K::kNode;
    case K::kParams:
      return K::kParam;
    case K::kKernelOperands:
      return K::kKernelOperand;
    case K::kExtents:
      return K::kExtent;
    case K::kBodies:
      return K::kBody;
    default:
      return K::kScalar;  // allow: strings
  }
}

SnapshotItems empty_items(SnapshotKind list) {
  using K = SnapshotKind;
  switch (list) {
    case K::kEpochs:
      return std::vector<Epoch>{};
    case K::kSpans:
      return std::vector<Span>{};
    case K::kAllocations:
      return std::vector<Allocation>{};
    case K::kGraphs:
      return std::vector<GraphRecord>{};
    case K::kNodes:
      return NodeList{};
    case K::kParams:
      return std::vector<KernelParam>{};
    case K::kKernelOperands:
    case K::kExtents:
      return std::vector<Operand>{};
    case K::kBodies:
      return std::vector<NodeList>{};
    default:
      return std::vector<std::string>{};
  }
}

void add_element(SnapshotKind list, std::string_view list_key, const JsonField& element,
                 SnapshotItems& items) {
  using K = SnapshotKind;
  switch (list) {
    case K::kSpans:
      std::get<std::vector<Span>>(items).push_back(read_span(element));
      break;
    case K::kAllocations:
      std::get<std::vector<Allocation>>(items).push_back(read_allocation(element));
      break;
    case K::kParams:
      std::get<std::vector<KernelParam>>(items).push_back(read_param(element));
      break;
    case K::kKernelOperands:
      std::get<std::vector<Operand>>(items).push_back(read_kernel_operand(element));
      break;
    case K::kExtents: {
      // Reads first, then writes: the operand order `to_json` expects back.
      auto& operands = std::get<std::vector<Operand>>(items);
      const Access access = list_key == "reads" ? Access::kRead : Access::kWrite;
      operands.push_back(
          read_extent(element, "begin", element_path(list_key, operands.size()), access));
      break;
    }
    case K::kAllow:
      std::get<std::vector<std::string>>(items).push_back(element.as_string());
      break;
    default:
      // Epochs, graphs, nodes and bodies are read as records when they are objects; a value
      // handed over here is not one.
      element.fail("an object");
  }
}

Epoch read_epoch(const JsonField& fields, RecordLists& lists) {
  Epoch epoch;
  epoch.label = fields.required("label").as_nonempty_string();
  epoch.spans = required_list<std::vector<Span>>(fields, "spans", lists);
  epoch.allocations = required_list<std::vector<Allocation>>(fields, "allocations", lists);
  return epoch;
}

GraphRecord read_graph(const JsonField& fields, RecordLists& lists) {
  GraphRecord graph;
  graph.id = fields.required("id").as_uint();
  graph.epoch = fields.required("epoch").as_string();
  if (const auto reader = fields.optional("reader")) {
    graph.reader = reader->as_string();
  }
  graph.nodes = required_list<NodeList>(fields, "nodes", lists);
  return graph;
}

NodeList read_body(const JsonField& fields, RecordLists& lists) {
  return required_list<NodeList>(fields, "nodes", lists);
}

namespace {

// A memcpy's sides: `size` for both, or, in a pitched copy between different pitches (both
// sides present), `src_size` and `dst_size` instead; never both forms.
std::pair<std::uint64_t, std::uint64_t> memcpy_sizes(const JsonField& fields, bool both_sides) {
  const std::optional<JsonField> src_size = fields.optional("src_size");
  const std::optional<JsonField> dst_size = fields.optional("dst_size");
  if (const std::optional<JsonField> size = fields.optional("size")) {
    if (src_size || dst_size) {
      (src_size ? *src_size : *dst_size)
          .fail_with(
              R"(a memcpy gives "size" (both sides) or "src_size" and "dst_size", not both)");
    }
    const std::uint64_t bytes = size->as_positive();
    return {bytes, bytes};
  }
  if (!both_sides || (!src_size && !dst_size)) {
    (void)fields.required("size");  // throws: the one size a copy with one side needs
  }
  return {fields.required("src_size").as_positive(), fields.required("dst_size").as_positive()};
}

}  // namespace

Node read_node(const JsonField& fields, RecordLists& lists) {
  Node node;
  node.id = fields.required("id").as_uint();
  const JsonField type = fields.required("type");
  std::optional<NodeType> parsed;
  if (type.json().is_string()) {
    parsed = parse_node_type(type.json().get_ref<const std::string&>());
  }
  if (!parsed) {
    type.fail(accepted_node_types());
  }
  node.type = *parsed;
  switch (node.type) {
    case NodeType::kKernel:
      node.name = fields.required("name").as_string();
      node.params = required_list<std::vector<KernelParam>>(fields, "params", lists);
      if (const std::optional<JsonField> operands = fields.optional("operands")) {
        node.operands = take_list<std::vector<Operand>>(*operands, "operands", lists);
      }
      break;
    case NodeType::kMemcpy: {
      // A side in host or array memory is no device address: the file omits it (the CUPTI
      // backend reads a pinned-host copy with one side), and a copy with neither holds none.
      const std::optional<JsonField> src = fields.optional("src");
      const std::optional<JsonField> dst = fields.optional("dst");
      if (!src && !dst) {
        break;
      }
      const auto [src_size, dst_size] = memcpy_sizes(fields, src && dst);
      if (src) {
        node.operands.push_back({"src", src->as_address(), src_size, Access::kRead});
      }
      if (dst) {
        node.operands.push_back({"dst", dst->as_address(), dst_size, Access::kWrite});
      }
      break;
    }
    case NodeType::kMemset:
      node.operands.push_back(read_extent(fields, "dst", "dst", Access::kWrite));
      break;
    case NodeType::kMemAlloc:
      node.operands.push_back(read_extent(fields, "begin", "alloc", Access::kWrite));
      break;
    case NodeType::kMemFree:
      node.operands.push_back({"dptr", fields.required("dptr").as_address(), 0, Access::kUnknown});
      break;
    case NodeType::kOp:
      node.name = fields.required("name").as_string();
      node.operands = required_list<std::vector<Operand>>(fields, "reads", lists);
      for (Operand& write : required_list<std::vector<Operand>>(fields, "writes", lists)) {
        node.operands.push_back(std::move(write));
      }
      break;
    case NodeType::kBatchMemOp:
      // Optional: wait addresses read, write addresses written (the CUPTI backend).
      for (const char* key : {"reads", "writes"}) {
        if (const std::optional<JsonField> list = fields.optional(key)) {
          for (Operand& operand : take_list<std::vector<Operand>>(*list, key, lists)) {
            node.operands.push_back(std::move(operand));
          }
        }
      }
      break;
    case NodeType::kChildGraph:
      node.bodies.push_back(required_list<NodeList>(fields, "nodes", lists));
      break;
    case NodeType::kConditional:
      node.bodies = required_list<std::vector<NodeList>>(fields, "bodies", lists);
      break;
    case NodeType::kHost:
    case NodeType::kEmpty:
    case NodeType::kEventWait:
    case NodeType::kEventRecord:
    case NodeType::kExtSemasSignal:
    case NodeType::kExtSemasWait:
      break;
  }
  return node;
}

Snapshot read_root(const JsonField& fields, RecordLists& lists) {
  fields.expect_object();
  const JsonField format = fields.required("format");
  if (!format.json().is_string() || format.json().get_ref<const std::string&>() != kFormat) {
    if (format.json().is_string() &&
        format.json().get_ref<const std::string&>() == "graphcheck-report") {
      // A watch folder holds reports beside the snapshots: say which file this reads.
      format.fail_with(
          "expected \"graphcheck-snapshot\", found \"graphcheck-report\": this file is a "
          "report; pass the snapshot it was checked from (the watch writes "
          "p<pid>-graph<id>.snapshot.json beside its reports), or run graphcheck report on the "
          "watch's folder");
    }
    format.fail("\"graphcheck-snapshot\"");
  }
  const JsonField version = fields.required("version");
  if (!version.json().is_number_unsigned() ||
      version.json().get<std::uint64_t>() != static_cast<std::uint64_t>(kSnapshotVersion)) {
    version.fail("1 (this build reads snapshot format version 1)");
  }
  Snapshot snapshot;
  if (const auto producer = fields.optional("producer")) {
    snapshot.producer = read_producer(*producer);
  }
  const JsonField epochs = fields.required("epochs");
  snapshot.epochs = take_list<std::vector<Epoch>>(epochs, "epochs", lists);
  if (snapshot.epochs.empty()) {
    epochs.fail("at least one epoch");
  }
  snapshot.graphs = required_list<std::vector<GraphRecord>>(fields, "graphs", lists);
  if (const auto allow = fields.optional("allow")) {
    snapshot.allow = take_list<std::vector<std::string>>(*allow, "allow", lists);
  }
  return snapshot;
}

}  // namespace graphcheck::detail
