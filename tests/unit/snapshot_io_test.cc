// Snapshot JSON (format version 1): every field read, the writer, files. Errors and limits:
// snapshot_io_errors_test.cc.
#include <gmock/gmock.h>
#include <graphcheck/error.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <ios>
#include <string>
#include <utility>

#include "snapshot_io_helpers.h"

namespace graphcheck {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using testing_helpers::error_of;
using testing_helpers::kExample;
using testing_helpers::with_epoch;
using testing_helpers::with_nodes;

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

// Which backend read a graph (issue 18): optional, written only when said.
TEST(SnapshotRead, AGraphSaysWhatReadItsNodesWhenItSays) {
  EXPECT_EQ(parse_snapshot(with_nodes("")).graphs[0].reader, "");
  Snapshot snapshot = parse_snapshot(with_nodes(""));
  EXPECT_THAT(to_json(snapshot), ::testing::Not(HasSubstr("reader")));
  snapshot.graphs[0].reader = std::string(kReaderCudaGraph);
  const std::string json = to_json(snapshot);
  EXPECT_THAT(json, HasSubstr(R"("epoch": "capture",
   "reader": "cuda-graph",
   "nodes")"));
  EXPECT_EQ(parse_snapshot(json), snapshot);
  std::string number = json;
  number.replace(number.find(R"("cuda-graph")"), 12, "7");
  EXPECT_THAT(error_of(number), HasSubstr("graphs[0].reader: expected a string, found 7"));
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

// A 2D copy between different pitches covers a different extent on each side: one size per
// side, written only then (an equal pair keeps the one `size`).
TEST(SnapshotNodes, MemcpyOfTwoExtentsHasASizePerSideAndRoundTrips) {
  const char* two = R"({"id": 1, "type": "memcpy", "src": "0x1000", "dst": "0x2000",)"
                    R"( "src_size": 1636, "dst_size": 400})";
  EXPECT_EQ(only_node(two).operands, (std::vector<Operand>{{"src", 0x1000, 1636, Access::kRead},
                                                           {"dst", 0x2000, 400, Access::kWrite}}));
  const Snapshot snapshot = parse_snapshot(with_nodes(two));
  const std::string text = to_json(snapshot);
  EXPECT_THAT(text, HasSubstr(R"("src_size": 1636, "dst_size": 400)"));
  EXPECT_THAT(text, Not(HasSubstr(R"("size")")));
  EXPECT_EQ(parse_snapshot(text), snapshot);
  const Snapshot equal = parse_snapshot(with_nodes(
      R"({"id": 1, "type": "memcpy", "src": "0x1000", "dst": "0x2000", "src_size": 64, "dst_size": 64})"));
  EXPECT_THAT(to_json(equal), HasSubstr(R"("dst": "0x2000", "size": 64)"));
}

// A pinned-host copy has one device side (the first GPU run: the writer refused the node).
TEST(SnapshotNodes, MemcpyMayLeaveOutAHostSideAndRoundTrips) {
  for (const char* node : {R"({"id": 1, "type": "memcpy", "src": "0x1000", "size": 64})",
                           R"({"id": 1, "type": "memcpy", "dst": "0x2000", "size": 64})",
                           R"({"id": 1, "type": "memcpy"})"}) {
    const Snapshot snapshot = parse_snapshot(with_nodes(node));
    EXPECT_EQ(parse_snapshot(to_json(snapshot)), snapshot) << node;
  }
  EXPECT_EQ(only_node(R"({"id": 1, "type": "memcpy", "dst": "0x2000", "size": 64})").operands,
            (std::vector<Operand>{{"dst", 0x2000, 64, Access::kWrite}}));
  Snapshot swapped = parse_snapshot(
      with_nodes(R"({"id": 1, "type": "memcpy", "src": "0x1000", "dst": "0x2000", "size": 64})"));
  std::swap(swapped.graphs[0].nodes[0].operands[0], swapped.graphs[0].nodes[0].operands[1]);
  EXPECT_THAT([&] { (void)to_json(swapped); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  R"(operands: expected operand 0 of a memcpy node to be "src" with its access)")));
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

// A batch mem-op node's addresses (issue 18 §4), as an op node's, and written back the same.
TEST(SnapshotNodes, BatchMemOpListsItsWaitReadsThenWrites) {
  const Node node = only_node(R"({"id": 0, "type": "batch_mem_op",
    "reads": [{"begin": "0x100", "size": 4}], "writes": [{"begin": "0x300", "size": 8}]})");
  EXPECT_EQ(node.operands, (std::vector<Operand>{{"reads[0]", 0x100, 4, Access::kRead},
                                                 {"writes[0]", 0x300, 8, Access::kWrite}}));
  Snapshot snapshot = parse_snapshot(with_nodes(R"({"id": 0, "type": "batch_mem_op",
    "reads": [{"begin": "0x100", "size": 4}], "writes": [{"begin": "0x300", "size": 8}]})"));
  EXPECT_EQ(parse_snapshot(to_json(snapshot)), snapshot);
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
                           "ext_semas_wait", "batch_mem_op"}) {  // batch_mem_op: keys optional
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
              ::testing::ThrowsMessage<Error>(dir_.string() +
                                              ": expected a snapshot file, found a folder"));
  // A watch's folder: what to run on it instead.
  std::ofstream(dir_ / "index.jsonl").close();
  EXPECT_THAT([&] { (void)read_snapshot(dir_); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "found a folder written by graphcheck's watch: run graphcheck report on it")));
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

TEST_F(SnapshotFiles, WhatIsNoSnapshotFileIsRefusedByWhatItIs) {
  // A device is never read (/dev/zero read until memory ran out); a FIFO without a writer is
  // not waited for (it hung); an empty file is named so; a NUL byte is refused where it is (the
  // JSON lexer took it for the end: a document, a NUL and garbage was accepted).
  EXPECT_THAT(
      [] { (void)read_snapshot("/dev/null"); },
      ::testing::ThrowsMessage<Error>("/dev/null: expected a snapshot file, found a device"));
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT([&] { (void)read_snapshot(fifo); },
              ::testing::ThrowsMessage<Error>(fifo + ": expected a snapshot, found a FIFO (named "
                                                     "pipe) that gave no bytes (no writer, or it "
                                                     "wrote nothing)"));
  const auto empty = dir_ / "empty.json";
  std::ofstream(empty).close();
  EXPECT_THAT([&] { (void)read_snapshot(empty); },
              ::testing::ThrowsMessage<Error>(empty.string() +
                                              ": expected a snapshot, found an empty file"));
  const auto padded = dir_ / "padded.json";
  std::ofstream(padded, std::ios::binary) << kExample << '\n' << std::string(3, '\0') << "{{";
  EXPECT_THAT([&] { (void)read_snapshot(padded); },
              ::testing::ThrowsMessage<Error>(HasSubstr(": not valid JSON: a NUL byte at line ")));
  EXPECT_THAT([] { (void)parse_snapshot(std::string("{\"format\"\0}", 11), "t.json"); },
              ::testing::ThrowsMessage<Error>(
                  "t.json: not valid JSON: a NUL byte at line 1, column 10 (byte 10), which JSON "
                  "text never holds (a string writes it \\u0000): is the file damaged or "
                  "padded?"));
}

}  // namespace
}  // namespace graphcheck
