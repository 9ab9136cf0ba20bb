// `Snapshot` to JSON text (format version 1), written directly: a snapshot of a large decode
// step holds tens of thousands of spans and kernel arguments.
#include <graphcheck/error.h>
#include <graphcheck/snapshot.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "graphcheck/detail/json_access.h"
#include "graphcheck/detail/snapshot_validate.h"

namespace graphcheck {
namespace {

constexpr std::string_view kWriteSource = "cannot write snapshot";

enum class Layout : std::uint8_t {
  kInline,  ///< `{"a": 1, "b": 2}` on the current line
  kBlock,   ///< one member or element per line, indented one space per level
};

// Writes JSON text with the layout chosen per container: records of scalars (a span, an
// allocation, a kernel argument, a node without nested lists) stay on one line, lists of
// them get one line each. Strings must already be valid UTF-8 (the validator checks).
class Emitter {
 public:
  void key(std::string_view name) {
    separate();
    out_ += '"';
    out_ += name;  // keys are this writer's own ASCII names
    out_ += "\": ";
    after_key_ = true;
  }
  void string(std::string_view text) {
    value_start();
    detail::append_json_string(out_, text);
  }
  void number(std::uint64_t value) {
    value_start();
    char buffer[24];
    const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
    out_.append(buffer, result.ptr);
  }
  void address(Address value) { string(format_address(value)); }
  void begin(char open, Layout layout) {
    value_start();
    out_ += open;
    levels_.push_back({layout, true});
  }
  void end(char close) {
    const Level level = levels_.back();
    levels_.pop_back();
    if (level.layout == Layout::kBlock && !level.empty) {
      out_ += '\n';
      out_.append(levels_.size(), ' ');
    }
    out_ += close;
  }
  std::string take() { return std::move(out_); }

 private:
  struct Level {
    Layout layout;
    bool empty;
  };

  void value_start() {
    if (after_key_) {
      after_key_ = false;
    } else {
      separate();
    }
  }
  void separate() {
    if (levels_.empty()) {
      return;
    }
    Level& level = levels_.back();
    if (!level.empty) {
      out_ += level.layout == Layout::kInline ? ", " : ",";
    }
    if (level.layout == Layout::kBlock) {
      out_ += '\n';
      out_.append(levels_.size(), ' ');
    }
    level.empty = false;
  }

  std::string out_;
  std::vector<Level> levels_;
  bool after_key_ = false;
};

void write_hex(Emitter& emitter, const std::vector<std::uint8_t>& bytes) {
  constexpr std::string_view kDigits = "0123456789abcdef";
  std::string text;
  text.reserve(bytes.size() * 2);
  for (const std::uint8_t byte : bytes) {
    text += kDigits[byte >> 4U];
    text += kDigits[byte & 0xfU];
  }
  emitter.string(text);
}

void write_nodes(Emitter& emitter, const NodeList& nodes);

// Whether an operand record carries its role (kernel operands) or not (op reads/writes,
// whose role follows from their position).
enum class Role : std::uint8_t { kOmitted, kWritten };

// One operand as an inline record: {"role"?, "begin", "size"}.
void write_extent(Emitter& emitter, const Operand& operand, Role role) {
  emitter.begin('{', Layout::kInline);
  if (role == Role::kWritten) {
    emitter.key("role");
    emitter.string(operand.role);
  }
  emitter.key("begin");
  emitter.address(operand.begin);
  emitter.key("size");
  emitter.number(operand.size);
  emitter.end('}');
}

void write_node(Emitter& emitter, const Node& node) {
  const bool nested = node.type == NodeType::kKernel || node.type == NodeType::kOp ||
                      node.type == NodeType::kChildGraph || node.type == NodeType::kConditional;
  emitter.begin('{', nested ? Layout::kBlock : Layout::kInline);
  emitter.key("id");
  emitter.number(node.id);
  emitter.key("type");
  emitter.string(to_string(node.type));
  switch (node.type) {
    case NodeType::kKernel:
      emitter.key("name");
      emitter.string(node.name);
      emitter.key("params");
      emitter.begin('[', Layout::kBlock);
      for (const KernelParam& param : node.params) {
        emitter.begin('{', Layout::kInline);
        emitter.key("offset");
        emitter.number(param.offset);
        emitter.key("size");
        emitter.number(param.bytes.size());
        emitter.key("hex");
        write_hex(emitter, param.bytes);
        emitter.end('}');
      }
      emitter.end(']');
      if (!node.operands.empty()) {  // optional key: files without kernel operands unchanged
        emitter.key("operands");
        emitter.begin('[', Layout::kBlock);
        for (const Operand& operand : node.operands) {
          write_extent(emitter, operand, Role::kWritten);
        }
        emitter.end(']');
      }
      break;
    case NodeType::kMemcpy:
      // The validator guarantees "src" before "dst", either one optional. A pitched copy between
      // different pitches covers a different extent on each side: one size per side then.
      for (const Operand& operand : node.operands) {
        emitter.key(operand.role);
        emitter.address(operand.begin);
      }
      if (node.operands.size() == 2 && node.operands[0].size != node.operands[1].size) {
        emitter.key("src_size");
        emitter.number(node.operands[0].size);
        emitter.key("dst_size");
        emitter.number(node.operands[1].size);
      } else if (!node.operands.empty()) {
        emitter.key("size");
        emitter.number(node.operands[0].size);
      }
      break;
    case NodeType::kMemset:
    case NodeType::kMemAlloc:
      emitter.key(node.type == NodeType::kMemset ? "dst" : "begin");
      emitter.address(node.operands[0].begin);
      emitter.key("size");
      emitter.number(node.operands[0].size);
      break;
    case NodeType::kMemFree:
      emitter.key("dptr");
      emitter.address(node.operands[0].begin);
      break;
    case NodeType::kOp:
    case NodeType::kBatchMemOp:
      if (node.type == NodeType::kOp) {
        emitter.key("name");
        emitter.string(node.name);
      } else if (node.operands.empty()) {
        break;  // optional keys: batch mem-op nodes without addresses stay as they were
      }
      // The validator guarantees the reads come first, then the writes.
      for (const Access access : {Access::kRead, Access::kWrite}) {
        emitter.key(access == Access::kRead ? "reads" : "writes");
        emitter.begin('[', Layout::kBlock);
        for (const Operand& operand : node.operands) {
          if (operand.access == access) {
            write_extent(emitter, operand, Role::kOmitted);
          }
        }
        emitter.end(']');
      }
      break;
    case NodeType::kChildGraph:
      emitter.key("nodes");
      write_nodes(emitter, node.bodies[0]);
      break;
    case NodeType::kConditional:
      emitter.key("bodies");
      emitter.begin('[', Layout::kBlock);
      for (const NodeList& body : node.bodies) {
        emitter.begin('{', Layout::kBlock);
        emitter.key("nodes");
        write_nodes(emitter, body);
        emitter.end('}');
      }
      emitter.end(']');
      break;
    default:
      break;
  }
  emitter.end('}');
}

void write_nodes(Emitter& emitter, const NodeList& nodes) {
  emitter.begin('[', Layout::kBlock);
  for (const Node& node : nodes) {
    write_node(emitter, node);
  }
  emitter.end(']');
}

void write_epoch(Emitter& emitter, const Epoch& epoch) {
  emitter.begin('{', Layout::kBlock);
  emitter.key("label");
  emitter.string(epoch.label);
  emitter.key("spans");
  emitter.begin('[', Layout::kBlock);
  for (const Span& span : epoch.spans) {
    emitter.begin('{', Layout::kInline);
    emitter.key("begin");
    emitter.address(span.begin);
    emitter.key("size");
    emitter.number(span.size);
    emitter.key("kind");
    emitter.string(to_string(span.kind));
    emitter.key("name");
    emitter.string(span.name);
    if (!span.reason.empty()) {
      emitter.key("reason");
      emitter.string(span.reason);
    }
    emitter.end('}');
  }
  emitter.end(']');
  emitter.key("allocations");
  emitter.begin('[', Layout::kBlock);
  for (const Allocation& allocation : epoch.allocations) {
    emitter.begin('{', Layout::kInline);
    emitter.key("begin");
    emitter.address(allocation.begin);
    emitter.key("size");
    emitter.number(allocation.size);
    emitter.key("pool");
    emitter.string(allocation.pool);
    emitter.key("generation");
    emitter.number(allocation.generation);
    if (!allocation.label.empty()) {
      emitter.key("label");
      emitter.string(allocation.label);
    }
    emitter.end('}');
  }
  emitter.end(']');
  emitter.end('}');
}

}  // namespace

std::string to_json(const Snapshot& snapshot) {
  detail::validate_snapshot(snapshot, kWriteSource);
  Emitter emitter;
  emitter.begin('{', Layout::kBlock);
  emitter.key("format");
  emitter.string("graphcheck-snapshot");
  emitter.key("version");
  emitter.number(kSnapshotVersion);
  emitter.key("producer");
  emitter.begin('{', Layout::kInline);
  emitter.key("backend");
  emitter.string(snapshot.producer.backend);
  emitter.key("tool");
  emitter.string(snapshot.producer.tool);
  emitter.end('}');
  emitter.key("epochs");
  emitter.begin('[', Layout::kBlock);
  for (const Epoch& epoch : snapshot.epochs) {
    write_epoch(emitter, epoch);
  }
  emitter.end(']');
  emitter.key("graphs");
  emitter.begin('[', Layout::kBlock);
  for (const GraphRecord& graph : snapshot.graphs) {
    emitter.begin('{', Layout::kBlock);
    emitter.key("id");
    emitter.number(graph.id);
    emitter.key("epoch");
    emitter.string(graph.epoch);
    if (!graph.reader.empty()) {
      emitter.key("reader");
      emitter.string(graph.reader);
    }
    emitter.key("nodes");
    write_nodes(emitter, graph.nodes);
    emitter.end('}');
  }
  emitter.end(']');
  emitter.key("allow");
  emitter.begin('[', Layout::kInline);
  for (const std::string& glob : snapshot.allow) {
    emitter.string(glob);
  }
  emitter.end(']');
  emitter.end('}');
  std::string text = emitter.take();
  text += '\n';
  return text;
}

void write_snapshot(const Snapshot& snapshot, const std::filesystem::path& path) {
  const std::string text = to_json(snapshot);
  const std::string name = path.string();
  const auto fail = [&name](int error) {
    throw Error(name + ": cannot write the snapshot file: " + std::strerror(error));
  };
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(name.c_str(), "wb"),
                                                       &std::fclose);
  if (!file) {
    fail(errno);
  }
  if (std::fwrite(text.data(), 1, text.size(), file.get()) != text.size()) {
    fail(errno);
  }
  // fclose flushes: its failure (a full disk) is a write failure too.
  if (std::fclose(file.release()) != 0) {
    fail(errno);
  }
}

}  // namespace graphcheck
