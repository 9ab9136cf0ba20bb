// Snapshot JSON (format version 1): every field read, every error class, the writer, files.
#include <gmock/gmock.h>
#include <graphcheck/error.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace graphcheck {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

constexpr const char* kExample = R"({
  "format": "graphcheck-snapshot", "version": 1,
  "producer": {"backend": "cupti", "tool": "graphcheck 0.1.0"},
  "epochs": [
    {"label": "capture",
     "spans": [
       {"begin": "0x7f3a00000000", "size": 1048576, "kind": "parameter", "name": "layers.0.mlp.weight"},
       {"begin": "0x7F3A00200000", "size": 65536, "kind": "runtime", "name": "kv_cache.0", "reason": "KV cache"}],
     "allocations": [
       {"begin": "0x7f3a00000000", "size": 2097152, "pool": "default", "generation": 1},
       {"begin": "0x7f3a00300000", "size": 512, "pool": "default", "generation": 7,
        "label": "layers.0.quant_method.workspace"}]},
    {"label": "after_wake", "spans": [], "allocations": []}],
  "graphs": [
    {"id": 1, "epoch": "capture",
     "nodes": [
       {"id": 0, "type": "kernel", "name": "gemm_kernel",
        "params": [{"offset": 0, "size": 8, "hex": "000000003a7F0000"}, {"offset": 8, "size": 4, "hex": "01020304"}]},
       {"id": 1, "type": "memcpy", "src": "0x10", "dst": "0x20", "size": 1024}]}],
  "allow": ["layers.*.quant_method.workspace"]
})";

// A snapshot with one epoch "capture" and one graph whose nodes are `nodes` (JSON text).
std::string with_nodes(const std::string& nodes) {
  return R"({"format": "graphcheck-snapshot", "version": 1,
  "epochs": [{"label": "capture", "spans": [], "allocations": []}],
  "graphs": [{"id": 3, "epoch": "capture", "nodes": [)" +
         nodes + "]}]}";
}

// A snapshot whose only epoch is `epoch` (JSON text) and that has no graphs.
std::string with_epoch(const std::string& epoch) {
  return R"({"format": "graphcheck-snapshot", "version": 1, "epochs": [)" + epoch +
         R"(], "graphs": []})";
}

// The message parse_snapshot throws for `json`, or "<parsed>" when it parses.
std::string error_of(const std::string& json) {
  try {
    (void)parse_snapshot(json, "t.json");
  } catch (const Error& error) {
    return error.what();
  }
  return "<parsed>";
}

Node only_node(const std::string& node) {
  return parse_snapshot(with_nodes(node)).graphs[0].nodes[0];
}

TEST(SnapshotRead, ReadsEveryFieldOfTheDesignExample) {
  const Snapshot snapshot = parse_snapshot(kExample, "example.json");
  EXPECT_EQ(snapshot.producer.backend, "cupti");
  EXPECT_EQ(snapshot.producer.tool, "graphcheck 0.1.0");
  ASSERT_EQ(snapshot.epochs.size(), 2U);
  const Epoch& capture = snapshot.epochs[0];
  EXPECT_EQ(capture.label, "capture");
  ASSERT_EQ(capture.spans.size(), 2U);
  EXPECT_EQ(capture.spans[0],
            (Span{0x7f3a00000000, 1048576, OwnerKind::kParameter, "layers.0.mlp.weight", ""}));
  EXPECT_EQ(capture.spans[1],
            (Span{0x7f3a00200000, 65536, OwnerKind::kRuntime, "kv_cache.0", "KV cache"}));
  ASSERT_EQ(capture.allocations.size(), 2U);
  EXPECT_EQ(capture.allocations[0], (Allocation{0x7f3a00000000, 2097152, "default", 1, ""}));
  EXPECT_EQ(capture.allocations[1].generation, 7U);
  EXPECT_EQ(capture.allocations[1].label, "layers.0.quant_method.workspace");
  EXPECT_EQ(snapshot.epochs[1].label, "after_wake");
  ASSERT_EQ(snapshot.graphs.size(), 1U);
  EXPECT_EQ(snapshot.graphs[0].id, 1U);
  EXPECT_EQ(snapshot.graphs[0].epoch, "capture");
  ASSERT_EQ(snapshot.graphs[0].nodes.size(), 2U);
  const Node& kernel = snapshot.graphs[0].nodes[0];
  EXPECT_EQ(kernel.type, NodeType::kKernel);
  EXPECT_EQ(kernel.name, "gemm_kernel");
  ASSERT_EQ(kernel.params.size(), 2U);
  EXPECT_EQ(kernel.params[0].offset, 0U);
  EXPECT_EQ(kernel.params[0].bytes, (std::vector<std::uint8_t>{0, 0, 0, 0, 0x3a, 0x7f, 0, 0}));
  EXPECT_EQ(kernel.params[1].offset, 8U);
  EXPECT_EQ(kernel.params[1].bytes, (std::vector<std::uint8_t>{1, 2, 3, 4}));
  EXPECT_EQ(snapshot.allow, std::vector<std::string>{"layers.*.quant_method.workspace"});
  EXPECT_NE(snapshot.find_epoch("after_wake"), nullptr);
  EXPECT_EQ(snapshot.find_epoch("after_sleep"), nullptr);
}

TEST(SnapshotRead, OptionalPartsTakeTheirDefaults) {
  const Snapshot snapshot = parse_snapshot(with_nodes(""));
  EXPECT_EQ(snapshot.producer, Producer{});
  EXPECT_TRUE(snapshot.allow.empty());
  EXPECT_TRUE(snapshot.graphs[0].nodes.empty());
}

TEST(SnapshotRead, IgnoresUnknownKeysEverywhere) {
  const Node node = only_node(R"({"id": 0, "type": "memset", "dst": "0x40", "size": 8,
                                  "future": {"x": [1, 2]}})");
  EXPECT_EQ(node.operands.size(), 1U);
  EXPECT_EQ(error_of(R"({"format": "graphcheck-snapshot", "version": 1, "extra": null,
    "epochs": [{"label": "a", "spans": [], "allocations": [], "note": "x"}], "graphs": []})"),
            "<parsed>");
}

TEST(SnapshotNodes, MemcpyHasSourceReadAndDestinationWriteOfOneSize) {
  const Node node =
      only_node(R"({"id": 4, "type": "memcpy", "src": "0x1000", "dst": "0x2000", "size": 64})");
  EXPECT_EQ(node.id, 4U);
  EXPECT_EQ(node.type, NodeType::kMemcpy);
  EXPECT_EQ(node.operands, (std::vector<Operand>{{"src", 0x1000, 64, Access::kRead},
                                                 {"dst", 0x2000, 64, Access::kWrite}}));
}

TEST(SnapshotNodes, MemsetWritesItsDestination) {
  const Node node = only_node(R"({"id": 0, "type": "memset", "dst": "0x2000", "size": 16})");
  EXPECT_EQ(node.operands, (std::vector<Operand>{{"dst", 0x2000, 16, Access::kWrite}}));
}

TEST(SnapshotNodes, MemAllocIsAnAllocOperand) {
  const Node node = only_node(R"({"id": 0, "type": "mem_alloc", "begin": "0x3000", "size": 8192})");
  EXPECT_EQ(node.type, NodeType::kMemAlloc);
  EXPECT_EQ(node.operands, (std::vector<Operand>{{"alloc", 0x3000, 8192, Access::kWrite}}));
}

TEST(SnapshotNodes, MemFreeHasADptrOfUnknownExtent) {
  const Node node = only_node(R"({"id": 0, "type": "mem_free", "dptr": "0x3000"})");
  EXPECT_EQ(node.operands, (std::vector<Operand>{{"dptr", 0x3000, 0, Access::kUnknown}}));
}

TEST(SnapshotNodes, OpListsReadsThenWritesWithTheirIndices) {
  const Node node = only_node(R"({"id": 0, "type": "op", "name": "aten::mm",
    "reads": [{"begin": "0x100", "size": 32}, {"begin": "0x200", "size": 16}],
    "writes": [{"begin": "0x300", "size": 8}]})");
  EXPECT_EQ(node.name, "aten::mm");
  EXPECT_EQ(node.operands, (std::vector<Operand>{{"reads[0]", 0x100, 32, Access::kRead},
                                                 {"reads[1]", 0x200, 16, Access::kRead},
                                                 {"writes[0]", 0x300, 8, Access::kWrite}}));
}

TEST(SnapshotNodes, ChildGraphNodesAreItsOnlyBody) {
  const Node node = only_node(R"({"id": 0, "type": "child_graph", "nodes": [
    {"id": 1, "type": "kernel", "name": "k", "params": []}, {"id": 2, "type": "empty"}]})");
  ASSERT_EQ(node.bodies.size(), 1U);
  ASSERT_EQ(node.bodies[0].size(), 2U);
  EXPECT_EQ(node.bodies[0][0].name, "k");
  EXPECT_EQ(node.bodies[0][1].type, NodeType::kEmpty);
}

TEST(SnapshotNodes, ConditionalHasOneBodyPerBranch) {
  const Node node = only_node(R"({"id": 0, "type": "conditional", "bodies": [
    {"nodes": [{"id": 1, "type": "host"}]}, {"nodes": []}]})");
  ASSERT_EQ(node.bodies.size(), 2U);
  EXPECT_EQ(node.bodies[0][0].type, NodeType::kHost);
  EXPECT_TRUE(node.bodies[1].empty());
}

TEST(SnapshotNodes, FieldlessTypesHoldNoReferences) {
  for (const char* type : {"host", "empty", "event_wait", "event_record", "ext_semas_signal",
                           "ext_semas_wait", "batch_mem_op"}) {
    const Node node = only_node(std::string(R"({"id": 9, "type": ")") + type + "\"}");
    EXPECT_EQ(to_string(node.type), type);
    EXPECT_TRUE(node.operands.empty() && node.params.empty() && node.bodies.empty()) << type;
  }
}

TEST(SnapshotNodes, KernelOperandsAreOptionalReadsWithRoleBeginAndSize) {
  const Snapshot without =
      parse_snapshot(with_nodes(R"({"id": 0, "type": "kernel", "name": "k", "params": []})"));
  EXPECT_TRUE(without.graphs[0].nodes[0].operands.empty());
  const Snapshot with = parse_snapshot(with_nodes(
      R"({"id": 0, "type": "kernel", "name": "k", "params": [], "operands": [
        {"role": "param[3]+0:tensor_map", "begin": "0x7f0000001000", "size": 4096},
        {"role": "param[4]+0:tensor_map", "begin": "0x7f0000002000", "size": 0}]})"));
  EXPECT_EQ(with.graphs[0].nodes[0].operands,
            (std::vector<Operand>{{"param[3]+0:tensor_map", 0x7f0000001000, 4096, Access::kRead},
                                  {"param[4]+0:tensor_map", 0x7f0000002000, 0, Access::kRead}}));
}

TEST(SnapshotErrors, KernelOperandsNeedARoleAndAnAddress) {
  EXPECT_THAT(
      [] {
        (void)parse_snapshot(with_nodes(
            R"({"id": 0, "type": "kernel", "name": "k", "params": [], "operands": [{"begin": "0x10", "size": 1}]})"));
      },
      ::testing::ThrowsMessage<Error>(
          HasSubstr(R"(graphs[0].nodes[0].operands[0]: missing required key "role")")));
  EXPECT_THAT(
      [] {
        (void)parse_snapshot(with_nodes(
            R"({"id": 0, "type": "kernel", "name": "k", "params": [], "operands": [{"role": "", "begin": "0x10", "size": 1}]})"));
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("graphs[0].nodes[0].operands[0].role")));
  EXPECT_THAT(
      [] {
        (void)parse_snapshot(with_nodes(
            R"({"id": 0, "type": "kernel", "name": "k", "params": [], "operands": [{"role": "t", "begin": "16", "size": 1}]})"));
      },
      ::testing::ThrowsMessage<Error>(HasSubstr("graphs[0].nodes[0].operands[0].begin")));
}

TEST(SnapshotErrors, BadJsonNamesTheByte) {
  const std::string message = error_of(R"({"format": tru})");
  EXPECT_THAT(message, StartsWith("t.json: not valid JSON: "));
  EXPECT_THAT(message, HasSubstr("(byte 15)"));
  EXPECT_THAT(message, Not(HasSubstr("\n")));
  EXPECT_THAT(error_of(""), StartsWith("t.json: not valid JSON: "));
  EXPECT_THAT(error_of("{} trailing"), StartsWith("t.json: not valid JSON: "));
  EXPECT_THAT(error_of(R"({"version": 1e999})"), StartsWith("t.json: not valid JSON: "));
}

TEST(SnapshotErrors, TopLevelMustBeAnObject) {
  EXPECT_EQ(error_of("[1, 2]"), "t.json: top level: expected an object, found [1,2]");
}

TEST(SnapshotErrors, FormatAndVersionAreChecked) {
  EXPECT_EQ(error_of(R"({"version": 1})"), R"(t.json: top level: missing required key "format")");
  EXPECT_EQ(error_of(R"({"format": "graphcheck-report", "version": 1})"),
            R"(t.json: format: expected "graphcheck-snapshot", found "graphcheck-report")");
  EXPECT_EQ(error_of(R"({"format": "graphcheck-snapshot", "version": 2})"),
            "t.json: version: expected 1 (this build reads snapshot format version 1), found 2");
}

TEST(SnapshotErrors, MissingRequiredKeyNamesTheObjectAndTheKey) {
  EXPECT_EQ(error_of(with_epoch(R"({"label": "a", "spans": []})")),
            R"(t.json: epochs[0]: missing required key "allocations")");
  EXPECT_EQ(error_of(with_nodes(R"({"id": 0, "type": "memcpy", "src": "0x1", "size": 4})")),
            R"(t.json: graphs[0].nodes[0]: missing required key "dst")");
}

TEST(SnapshotErrors, BadAddressNamesPathAndValue) {
  EXPECT_EQ(error_of(with_epoch(R"({"label": "a", "spans": [{"begin": 4096, "size": 1,
    "kind": "buffer", "name": "b"}], "allocations": []})")),
            "t.json: epochs[0].spans[0].begin: expected an address string \"0x\" followed by 1 "
            "to 16 hex digits, found 4096");
  EXPECT_THAT(
      error_of(with_nodes(R"({"id": 0, "type": "mem_free", "dptr": "0x12345678901234567"})")),
      HasSubstr(R"(graphs[0].nodes[0].dptr: expected an address string)"));
  EXPECT_THAT(error_of(with_nodes(R"({"id": 0, "type": "mem_free", "dptr": "0xg"})")),
              HasSubstr(R"(found "0xg")"));
}

TEST(SnapshotErrors, BadHexStrings) {
  const auto param = [](const std::string& size, const std::string& hex) {
    return error_of(with_nodes(R"({"id": 0, "type": "kernel", "name": "k", "params": [
      {"offset": 0, "size": 1, "hex": "00"}, {"offset": 8, "size": )" +
                               size + R"(, "hex": ")" + hex + R"("}]})"));
  };
  EXPECT_EQ(
      param("2", "abc"),
      R"(t.json: graphs[0].nodes[0].params[1].hex: expected an even number of hex digits, found "abc")");
  EXPECT_EQ(
      param("1", "zz"),
      R"(t.json: graphs[0].nodes[0].params[1].hex: expected hex digits only (0-9, a-f, A-F), found "zz")");
  EXPECT_THAT(param("1", ""), HasSubstr(R"(expected at least 2 hex digits (one byte), found "")"));
  EXPECT_EQ(
      param("3", "0102"),
      R"(t.json: graphs[0].nodes[0].params[1].size: expected 2 (the number of bytes "hex" holds), found 3)");
  EXPECT_THAT(param("0", "00"), HasSubstr("params[1].size: expected a positive integer, found 0"));
}

TEST(SnapshotErrors, SizesMustBePositiveIntegers) {
  const auto memset = [](const std::string& size) {
    return error_of(
        with_nodes(R"({"id": 0, "type": "memset", "dst": "0x10", "size": )" + size + "}"));
  };
  EXPECT_EQ(memset("0"), "t.json: graphs[0].nodes[0].size: expected a positive integer, found 0");
  EXPECT_EQ(memset("-8"), "t.json: graphs[0].nodes[0].size: expected a positive integer, found -8");
  EXPECT_THAT(memset("8.5"), HasSubstr("found 8.5"));
  EXPECT_THAT(memset("\"8\""), HasSubstr(R"(found "8")"));
  EXPECT_THAT(memset("18446744073709551616"), HasSubstr("expected a positive integer"));
  EXPECT_EQ(
      error_of(with_epoch(R"({"label": "a", "spans": [], "allocations": [
    {"begin": "0x0", "size": 1, "pool": "p", "generation": -1}]})")),
      "t.json: epochs[0].allocations[0].generation: expected a non-negative integer, found -1");
}

TEST(SnapshotErrors, RangesMustNotWrapPastTheAddressSpace) {
  EXPECT_EQ(error_of(with_epoch(R"({"label": "a", "spans": [{"begin": "0xfffffffffffffff0",
    "size": 16, "kind": "buffer", "name": "b"}], "allocations": []})")),
            "t.json: epochs[0].spans[0].size: expected a size that keeps begin + size within 64 "
            "bits (at most 15 after 0xfffffffffffffff0), found 16");
  EXPECT_EQ(error_of(with_epoch(R"({"label": "a", "spans": [{"begin": "0xfffffffffffffff0",
    "size": 15, "kind": "buffer", "name": "b"}], "allocations": []})")),
            "<parsed>");
  EXPECT_THAT(error_of(with_nodes(R"({"id": 0, "type": "op", "name": "x", "reads": [],
    "writes": [{"begin": "0xffffffffffffffff", "size": 2}]})")),
              HasSubstr("graphs[0].nodes[0].writes[0].size: expected a size that keeps"));
}

TEST(SnapshotErrors, UnknownNodeTypeListsTheAcceptedTypes) {
  const std::string message = error_of(with_nodes(R"({"id": 0, "type": "kernal"})"));
  EXPECT_THAT(message, StartsWith("t.json: graphs[0].nodes[0].type: expected a node type, one of "
                                  "\"kernel\", \"memcpy\""));
  EXPECT_THAT(message, HasSubstr("\"op\", found \"kernal\""));
}

TEST(SnapshotErrors, UnknownOwnerKindAndBackend) {
  EXPECT_THAT(
      error_of(with_epoch(R"({"label": "a", "spans": [{"begin": "0x0", "size": 1,
    "kind": "weight", "name": "w"}], "allocations": []})")),
      HasSubstr(
          R"(epochs[0].spans[0].kind: expected an owner kind, one of "parameter", "buffer", "runtime", "graph", "input", found "weight")"));
  EXPECT_EQ(
      error_of(R"({"format": "graphcheck-snapshot", "version": 1, "producer": {"backend": "hip"},
    "epochs": [], "graphs": []})"),
      R"(t.json: producer.backend: expected a backend, one of "cupti", "aten", "synthetic", found "hip")");
}

TEST(SnapshotErrors, EpochsMustBeANonEmptyArrayOfUniqueLabels) {
  EXPECT_EQ(
      error_of(R"({"format": "graphcheck-snapshot", "version": 1, "epochs": [], "graphs": []})"),
      "t.json: epochs: expected at least one epoch, found []");
  EXPECT_EQ(
      error_of(R"({"format": "graphcheck-snapshot", "version": 1, "epochs": {}, "graphs": []})"),
      "t.json: epochs: expected an array, found {}");
  EXPECT_EQ(error_of(R"({"format": "graphcheck-snapshot", "version": 1, "graphs": [],
    "epochs": [{"label": "a", "spans": [], "allocations": []}, {"label": "a", "spans": [], "allocations": []}]})"),
            R"(t.json: epochs[1].label: expected a label that no earlier epoch uses, found "a")");
  EXPECT_EQ(error_of(with_epoch(R"({"label": "", "spans": [], "allocations": []})")),
            R"(t.json: epochs[0].label: expected a non-empty string, found "")");
}

TEST(SnapshotErrors, GraphsNeedUniqueIdsAndAKnownEpoch) {
  const std::string base = R"({"format": "graphcheck-snapshot", "version": 1,
    "epochs": [{"label": "capture", "spans": [], "allocations": []},
               {"label": "after_wake", "spans": [], "allocations": []}], "graphs": [)";
  EXPECT_EQ(
      error_of(base + R"({"id": 1, "epoch": "sleep", "nodes": []}]})"),
      R"(t.json: graphs[0].epoch: expected the label of an epoch of this snapshot (one of "capture", "after_wake"), found "sleep")");
  EXPECT_EQ(error_of(base + R"({"id": 1, "epoch": "capture", "nodes": []},
                                {"id": 1, "epoch": "capture", "nodes": []}]})"),
            "t.json: graphs[1].id: expected an id that no earlier graph uses, found 1");
}

TEST(SnapshotErrors, NodeIdsAreUniqueAcrossBodies) {
  EXPECT_EQ(error_of(with_nodes(R"({"id": 5, "type": "empty"}, {"id": 6, "type": "conditional",
    "bodies": [{"nodes": []}, {"nodes": [{"id": 5, "type": "host"}]}]})")),
            "t.json: graphs[0].nodes[1].bodies[1].nodes[0].id: expected an id that no other node "
            "of graph 3 uses, found 5");
}

TEST(SnapshotErrors, NestingDeeperThanTheLimitIsRefused) {
  std::string nodes = R"({"id": 0, "type": "empty"})";
  for (int level = 1; level <= 70; ++level) {
    nodes = R"({"id": )" + std::to_string(level) + R"(, "type": "child_graph", "nodes": [)" +
            nodes + "]}";
  }
  EXPECT_THAT(
      error_of(with_nodes(nodes)),
      HasSubstr("expected at most 64 levels of nested child graphs and conditional bodies"));
}

TEST(SnapshotErrors, LongFoundValuesAreCutToOneShortLine) {
  const std::string message =
      error_of(with_nodes(R"({"id": 0, "type": "kernel", "name": "k", "params": [{"offset": 0,
    "size": 1, "hex": ")" +
                          std::string(500, 'x') + R"("}]})"));
  EXPECT_THAT(message, HasSubstr(R"(found ")" + std::string(39, 'x') + "..."));
  EXPECT_LT(message.size(), 200U);
  // A value of the wrong type is named by its first characters, however big or deep it is.
  const std::string deep = error_of(with_epoch(std::string(500, '[') + std::string(500, ']')));
  EXPECT_EQ(deep, "t.json: epochs[0]: expected an object, found " + std::string(40, '[') + "...");
  std::string ones;
  for (int i = 0; i < 100000; ++i) {
    ones += "1,";
  }
  const std::string wide = error_of(
      with_epoch(R"({"label": "a", "spans": {"x": [)" + ones + R"(1]}, "allocations": []})"));
  std::string cut = R"({"x":[)";
  while (cut.size() < 40) {
    cut += "1,";
  }
  EXPECT_EQ(wide, "t.json: epochs[0].spans: expected an array, found " + cut + "...");
  EXPECT_EQ(
      error_of(with_epoch(R"({"label": ["a", {"b": null}], "spans": [], "allocations": []})")),
      R"(t.json: epochs[0].label: expected a non-empty string, found ["a",{"b":null}])");
}

// Nesting deeper than 512 arrays and objects is refused where the reader reaches it, at any
// place in the document, before the rest is read (no memory or time spent on the nesting).
TEST(SnapshotErrors, NestingDeeperThan512IsRefusedEarlyWithThePath) {
  const std::string deepest =
      "expected arrays and objects nested at most 512 levels deep, found "
      "level 513";
  // `[[[[...` as the whole document: never closed, so this is also not valid JSON, but the
  // nesting is what the reader meets first.
  EXPECT_EQ(error_of(std::string(25'000, '[')), "t.json: top level: " + deepest);
  // Inside unknown content of a node (levels: top, graphs, graph, nodes, node, "future" = 6).
  const auto in_node = [](std::size_t levels) {
    return with_nodes(R"({"id": 0, "type": "empty", "future": )" + std::string(levels, '[') +
                      std::string(levels, ']') + "}");
  };
  EXPECT_EQ(error_of(in_node(512 - 5)), "<parsed>");
  EXPECT_EQ(error_of(in_node(512 - 4)), "t.json: graphs[0].nodes[0].future: " + deepest);
  // Before a syntax error later in the document: the nesting is met first.
  EXPECT_EQ(error_of(in_node(1000) + "}"), "t.json: graphs[0].nodes[0].future: " + deepest);
  // Where a known member holds it.
  EXPECT_EQ(error_of(R"({"format": "graphcheck-snapshot", "version": 1, "allow": [)" +
                     std::string(600, '[')),
            "t.json: allow[0]: " + deepest);
}

TEST(SnapshotRead, UnknownContentOfAnySizeAndShapeIsSkipped) {
  std::string junk = "[";
  for (int i = 0; i < 20000; ++i) {
    junk += R"({"a": [1, 2.5, "s", null, true, {"b": []}]}, )";
  }
  junk += std::string(10, '[') + std::string(10, ']') + "]";
  const Snapshot snapshot =
      parse_snapshot(R"({"junk": )" + junk + R"(, "format": "graphcheck-snapshot",
    "epochs": [{"label": "a", "spans": [], "allocations": [], "junk": )" +
                     junk + R"(}], "version": 1, "graphs": [
    {"id": 1, "epoch": "a", "junk": )" +
                     junk + R"(, "nodes": [{"id": 0, "type": "memset",
     "dst": "0x10", "size": 4, "junk": )" +
                     junk + R"(}]}]})");
  ASSERT_EQ(snapshot.graphs.size(), 1U);
  EXPECT_EQ(snapshot.graphs[0].nodes[0].operands,
            (std::vector<Operand>{{"dst", 0x10, 4, Access::kWrite}}));
}

// Members a node's type does not use are unknown keys for that node, whatever they hold and
// wherever the type comes in the object.
TEST(SnapshotRead, MembersOfOtherNodeTypesAreIgnored) {
  for (const std::string node :
       {R"({"params": [{"bad": 1}], "nodes": [7], "bodies": {}, "reads": 1, "id": 0,
            "type": "memset", "dst": "0x10", "size": 4})",
        R"({"id": 0, "type": "memset", "dst": "0x10", "size": 4, "params": [{"bad": 1}],
            "nodes": [7], "bodies": {}, "reads": 1, "name": 5})"}) {
    EXPECT_EQ(error_of(with_nodes(node)), "<parsed>") << node;
  }
}

// The error reported for a document with several problems follows the readers' order, not
// the order of the keys: a syntax error first, then format and version, then the top level's
// members in the order of the format, each record's members in the order of its table.
TEST(SnapshotErrors, TheFirstErrorDoesNotDependOnKeyOrder) {
  EXPECT_THAT(error_of(R"({"graphs": [{"id": "x"}], "epochs": [], "version": 2,
    "format": "graphcheck-snapshot"} ,)"),
              StartsWith("t.json: not valid JSON: "));
  EXPECT_EQ(error_of(R"({"graphs": [{"id": "x"}], "epochs": [], "version": 2,
    "format": "graphcheck-snapshot"})"),
            "t.json: version: expected 1 (this build reads snapshot format version 1), found 2");
  EXPECT_EQ(error_of(R"({"graphs": [{"id": "x"}], "version": 1, "format": "graphcheck-snapshot",
    "epochs": [{"spans": [{"begin": 1}], "label": ""}]})"),
            R"(t.json: epochs[0].label: expected a non-empty string, found "")");
  EXPECT_EQ(error_of(R"({"graphs": [{"id": "x"}], "version": 1, "format": "graphcheck-snapshot",
    "epochs": [{"allocations": [], "spans": [{"size": 1}, {"begin": 1}], "label": "a"}]})"),
            R"(t.json: epochs[0].spans[0]: missing required key "begin")");
  EXPECT_EQ(error_of(with_nodes(R"({"params": [{"offset": 0, "size": 1, "hex": "zz"}], "id": -1,
                              "type": "kernel", "name": "k"})")),
            "t.json: graphs[0].nodes[0].id: expected a non-negative integer, found -1");
}

TEST(SnapshotRead, AKeyGivenTwiceKeepsItsLastValue) {
  const Snapshot snapshot = parse_snapshot(with_epoch(
      R"({"label": "a", "spans": [{"bad": 1}], "allocations": 5, "spans": [],
          "allocations": [{"begin": "0x0", "size": 1, "pool": "p", "generation": 0}]})"));
  EXPECT_TRUE(snapshot.epochs[0].spans.empty());
  EXPECT_EQ(snapshot.epochs[0].allocations.size(), 1U);
  EXPECT_EQ(error_of(with_epoch(R"({"label": "a", "spans": [], "allocations": [], "spans": 5})")),
            "t.json: epochs[0].spans: expected an array, found 5");
}

TEST(SnapshotWrite, WritesKeysInDesignOrderWithCanonicalAddressesAndHex) {
  const std::string text = to_json(parse_snapshot(kExample));
  EXPECT_LT(text.find("\"format\""), text.find("\"version\""));
  EXPECT_LT(text.find("\"version\""), text.find("\"producer\""));
  EXPECT_LT(text.find("\"producer\""), text.find("\"epochs\""));
  EXPECT_LT(text.find("\"epochs\""), text.find("\"graphs\""));
  EXPECT_LT(text.find("\"graphs\""), text.find("\"allow\""));
  EXPECT_THAT(
      text,
      HasSubstr(
          R"("begin": "0x7f3a00200000", "size": 65536, "kind": "runtime", "name": "kv_cache.0", "reason": "KV cache")"));
  EXPECT_THAT(text, HasSubstr(R"({"offset": 0, "size": 8, "hex": "000000003a7f0000"})"));
  EXPECT_THAT(text, HasSubstr(R"("type": "memcpy",)"));
  EXPECT_THAT(text, HasSubstr(R"("src": "0x10")"));
}

TEST(SnapshotWrite, RoundTripsEveryNodeType) {
  const std::string nodes =
      R"({"id": 0, "type": "kernel", "name": "k", "params": [{"offset": 16, "size": 3, "hex": "abcdef"}]},
    {"id": 1, "type": "memcpy", "src": "0x1000", "dst": "0x2000", "size": 64},
    {"id": 2, "type": "memset", "dst": "0x2000", "size": 16},
    {"id": 3, "type": "mem_alloc", "begin": "0x3000", "size": 8},
    {"id": 4, "type": "mem_free", "dptr": "0x3000"},
    {"id": 5, "type": "op", "name": "aten::add", "reads": [{"begin": "0x1", "size": 1}], "writes": []},
    {"id": 6, "type": "child_graph", "nodes": [{"id": 7, "type": "host"}]},
    {"id": 8, "type": "conditional", "bodies": [{"nodes": [{"id": 9, "type": "event_wait"}]}, {"nodes": []}]},
    {"id": 10, "type": "empty"}, {"id": 11, "type": "event_record"}, {"id": 12, "type": "ext_semas_signal"},
    {"id": 13, "type": "ext_semas_wait"}, {"id": 14, "type": "batch_mem_op"})";
  const Snapshot snapshot = parse_snapshot(with_nodes(nodes));
  const std::string text = to_json(snapshot);
  EXPECT_EQ(parse_snapshot(text), snapshot);
  EXPECT_EQ(to_json(parse_snapshot(text)), text);
  EXPECT_THAT(text, ::testing::Not(HasSubstr(R"("operands")")));  // only when non-empty
  const Snapshot example = parse_snapshot(kExample);
  EXPECT_EQ(parse_snapshot(to_json(example)), example);
}

TEST(SnapshotWrite, RoundTripsAConstructedSnapshot) {
  Snapshot snapshot;
  snapshot.producer = {"aten", "test"};
  snapshot.epochs.push_back({"capture",
                             {{0xffffffffffffff00, 0xff, OwnerKind::kInput, "x", "static input"}},
                             {{0x10, 0x20, "graph:1", 0, ""}}});
  Node kernel{42, NodeType::kKernel, "\xc3\xa9t\xc3\xa9\n\"q\"", {{0, {0xde, 0xad}}}, {}, {}};
  snapshot.graphs.push_back({7, "capture", {kernel}});
  snapshot.allow = {"a*", ""};
  EXPECT_EQ(parse_snapshot(to_json(snapshot)), snapshot);
}

TEST(SnapshotWrite, RoundTripsKernelOperandsExactly) {
  Snapshot snapshot;
  snapshot.epochs.push_back({"capture", {}, {}});
  Node kernel{1, NodeType::kKernel, "tma_gemm", {{0, std::vector<std::uint8_t>(128, 0)}}, {}, {}};
  kernel.operands = {{"param[0]+0:tensor_map", 0x7f0000001000, 0x2000, Access::kRead},
                     {"param[0]+64:tensor_map", 0xffffffffffffff00, 0, Access::kRead}};
  snapshot.graphs.push_back({7, "capture", {kernel}});
  const std::string text = to_json(snapshot);
  EXPECT_THAT(
      text,
      HasSubstr(R"({"role": "param[0]+0:tensor_map", "begin": "0x7f0000001000", "size": 8192})"));
  EXPECT_EQ(parse_snapshot(text), snapshot);
  EXPECT_EQ(to_json(parse_snapshot(text)), text);

  Snapshot bad = snapshot;
  bad.graphs[0].nodes[0].operands[0].access = Access::kWrite;
  EXPECT_THAT([&] { (void)to_json(bad); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "graphs[0].nodes[0].operands[0]: expected a kernel operand with read access")));
  bad = snapshot;
  bad.graphs[0].nodes[0].operands[1].size = 0x200;
  EXPECT_THAT([&] { (void)to_json(bad); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "graphs[0].nodes[0].operands[1].size: expected a size that keeps begin + size")));
}

TEST(SnapshotWrite, RefusesBrokenInvariantsWithThePath) {
  Snapshot snapshot =
      parse_snapshot(with_nodes(R"({"id": 0, "type": "memset", "dst": "0x10", "size": 4})"));
  Snapshot bad = snapshot;
  bad.graphs[0].nodes[0].operands[0].size = 0;
  EXPECT_THAT(
      [&] { (void)to_json(bad); },
      ::testing::ThrowsMessage<Error>(
          "cannot write snapshot: graphs[0].nodes[0].size: expected a positive integer, found 0"));
  bad = snapshot;
  bad.graphs[0].nodes[0].operands.clear();
  EXPECT_THAT([&] { (void)to_json(bad); },
              ::testing::ThrowsMessage<Error>(HasSubstr("graphs[0].nodes[0].operands: expected")));
  bad = snapshot;
  bad.graphs[0].nodes[0].name = "n";
  EXPECT_THAT(
      [&] { (void)to_json(bad); },
      ::testing::ThrowsMessage<Error>(HasSubstr("graphs[0].nodes[0].name: expected no name")));
  bad = snapshot;
  bad.epochs.push_back(bad.epochs[0]);
  EXPECT_THAT([&] { (void)to_json(bad); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("epochs[1].label: expected a label that no earlier")));
  bad = snapshot;
  bad.epochs[0].spans.push_back({1, 1, OwnerKind::kBuffer, "bad\xff", ""});
  EXPECT_THAT([&] { (void)to_json(bad); },
              ::testing::ThrowsMessage<Error>(
                  HasSubstr("cannot write snapshot: epochs[0].spans[0].name: expected UTF-8 text, "
                            "found bytes that are not UTF-8")));
  bad = snapshot;
  bad.graphs[0].epoch = "elsewhere";
  EXPECT_THAT([&] { (void)to_json(bad); },
              ::testing::ThrowsMessage<Error>(HasSubstr("graphs[0].epoch: expected the label")));
  bad = snapshot;
  bad.producer.backend = "hip";
  EXPECT_THAT([&] { (void)to_json(bad); },
              ::testing::ThrowsMessage<Error>(HasSubstr("producer.backend: expected a backend")));
}

// The peak resident memory (KiB) that parsing `text` adds, measured in a child process: a
// new process's peak (VmHWM) starts at its size when it is forked. -1 if it cannot be told.
long parse_peak_growth_kib(const std::string& text) {
  const auto status_kib = [](const char* field) {
    std::ifstream status("/proc/self/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.starts_with(field)) {
        return std::stol(line.substr(std::string(field).size()));
      }
    }
    return -1L;
  };
  int pipe_ends[2];
  if (::pipe(pipe_ends) != 0) {
    return -1;
  }
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_ends[0]);
    const long before = status_kib("VmRSS:");
    try {
      (void)parse_snapshot(text);
    } catch (const Error&) {  // the cases below include refused documents
    }
    const std::string growth = std::to_string(status_kib("VmHWM:") - before);
    const bool written =
        ::write(pipe_ends[1], growth.data(), growth.size()) == static_cast<ssize_t>(growth.size());
    ::_exit(written ? 0 : 1);
  }
  ::close(pipe_ends[1]);
  std::string out(64, '\0');
  const ssize_t got = child > 0 ? ::read(pipe_ends[0], out.data(), out.size()) : -1;
  ::close(pipe_ends[0]);
  int status = 0;
  if (child < 0 || ::waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
      WEXITSTATUS(status) != 0 || got <= 0) {
    return -1;
  }
  return std::stol(out.substr(0, static_cast<std::size_t>(got)));
}

// A snapshot whose top level also holds `junk` under an unknown key.
std::string with_junk(const std::string& junk) {
  return R"({"format": "graphcheck-snapshot", "version": 1, "junk": )" + junk +
         R"(, "epochs": [{"label": "capture", "spans": [], "allocations": []}], "graphs": []})";
}

// Unknown content and deep nesting cost no memory beyond a few times the text and little time
// (a DOM of these 16 MiB documents took over 400 MiB; the unclosed brackets also seconds). The
// most they take: nlohmann's lexer keeps a run of brackets, commas and blanks (up to the next
// string, number or literal) for its error messages, in a vector that grows by doubling.
TEST(SnapshotMemory, UnknownContentAndDeepNestingCostAtMostAFewTimesTheText) {
  constexpr std::size_t kBytes = 16U << 20U;
  std::string objects = "[";
  while (objects.size() < kBytes) {
    objects += "{},";
  }
  objects += "{}]";
  std::string arrays = "[";
  while (arrays.size() < kBytes) {
    arrays += R"([0, "ab", null],)";
  }
  arrays += "[]]";
  for (const std::string& document :
       {with_junk(objects), with_junk(arrays), std::string(kBytes, '[')}) {
    const auto start = std::chrono::steady_clock::now();
    const long growth = parse_peak_growth_kib(document);
    const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start);
    ASSERT_GE(growth, 0) << "could not measure the child's memory";
    EXPECT_LT(growth, static_cast<long>(4 * document.size() / 1024))
        << "KiB added to parse " << document.substr(0, 80) << "... (" << document.size()
        << " bytes)";
    EXPECT_LT(seconds.count(), 10.0);
  }
  EXPECT_EQ(parse_snapshot(with_junk(objects)).epochs.size(), 1U);
}

class SnapshotFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("graphcheck_io_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(SnapshotFiles, WriteThenReadGivesTheSameSnapshot) {
  const Snapshot snapshot = parse_snapshot(kExample);
  write_snapshot(snapshot, dir_ / "s.json");
  EXPECT_EQ(read_snapshot(dir_ / "s.json"), snapshot);
}

TEST_F(SnapshotFiles, ErrorsNameThePathAndTheSystemError) {
  const std::string missing = (dir_ / "missing.json").string();
  EXPECT_THAT([&] { (void)read_snapshot(missing); },
              ::testing::ThrowsMessage<Error>(
                  missing + ": cannot read the snapshot file: No such file or directory"));
  EXPECT_THAT([&] { (void)read_snapshot(dir_); },
              ::testing::ThrowsMessage<Error>(HasSubstr("Is a directory")));
  const std::string nowhere = (dir_ / "no" / "s.json").string();
  EXPECT_THAT([&] { write_snapshot(parse_snapshot(kExample), nowhere); },
              ::testing::ThrowsMessage<Error>(
                  nowhere + ": cannot write the snapshot file: No such file or directory"));
}

TEST_F(SnapshotFiles, ParseErrorsInAFileNameThePath) {
  const auto path = dir_ / "bad.json";
  std::ofstream(path) << R"({"format": "graphcheck-snapshot", "version": 1, "graphs": []})";
  EXPECT_THAT([&] { (void)read_snapshot(path); },
              ::testing::ThrowsMessage<Error>(path.string() +
                                              R"(: top level: missing required key "epochs")"));
}

}  // namespace
}  // namespace graphcheck
