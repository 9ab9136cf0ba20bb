// Snapshot JSON (format version 1): every error class, and the limits on nesting and memory.
// Reading and writing: snapshot_io_test.cc.
#include <gmock/gmock.h>
#include <graphcheck/error.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "snapshot_io_helpers.h"

namespace graphcheck {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using testing_helpers::error_of;
using testing_helpers::with_epoch;
using testing_helpers::with_nodes;

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
            R"(t.json: format: expected "graphcheck-snapshot", found "graphcheck-report": )"
            R"(this file is a report; pass the snapshot it was checked from (the watch writes )"
            R"(p<pid>-graph<id>.snapshot.json beside its reports), or run graphcheck report on )"
            R"(the watch's folder)");
  EXPECT_EQ(error_of(R"({"format": "graphcheck-other", "version": 1})"),
            R"(t.json: format: expected "graphcheck-snapshot", found "graphcheck-other")");
  EXPECT_EQ(error_of(R"({"format": "graphcheck-snapshot", "version": 2})"),
            "t.json: version: expected 1 (this build reads snapshot format version 1), found 2");
}

TEST(SnapshotErrors, MissingRequiredKeyNamesTheObjectAndTheKey) {
  EXPECT_EQ(error_of(with_epoch(R"({"label": "a", "spans": []})")),
            R"(t.json: epochs[0]: missing required key "allocations")");
  // A memcpy may leave out a host side (docs/snapshot-format.md), not the size of the other.
  EXPECT_EQ(error_of(with_nodes(R"({"id": 0, "type": "memcpy", "src": "0x1"})")),
            R"(t.json: graphs[0].nodes[0]: missing required key "size")");
  EXPECT_EQ(error_of(with_nodes(R"({"id": 0, "type": "memcpy", "src": "0x1", "size": 4})")),
            "<parsed>");
  // A size per side is for a copy with two sides, both given, and never beside `size`.
  EXPECT_EQ(error_of(with_nodes(R"({"id": 0, "type": "memcpy", "src": "0x1", "src_size": 4})")),
            R"(t.json: graphs[0].nodes[0]: missing required key "size")");
  EXPECT_EQ(error_of(with_nodes(
                R"({"id": 0, "type": "memcpy", "src": "0x1", "dst": "0x9", "src_size": 4})")),
            R"(t.json: graphs[0].nodes[0]: missing required key "dst_size")");
  EXPECT_EQ(error_of(with_nodes(R"({"id": 0, "type": "memcpy", "src": "0x1", "dst": "0x9",)"
                                R"( "size": 4, "dst_size": 4})")),
            R"(t.json: graphs[0].nodes[0].dst_size: a memcpy gives "size" (both sides) or )"
            R"("src_size" and "dst_size", not both)");
  EXPECT_EQ(error_of(with_nodes(R"({"id": 0, "type": "memcpy", "src": "0x1", "dst": "0x9",)"
                                R"( "src_size": 0, "dst_size": 4})")),
            R"(t.json: graphs[0].nodes[0].src_size: expected a positive integer, found 0)");
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
  // A memcpy names the key its size has in the file (it named a "size" the node lacked).
  EXPECT_THAT(error_of(with_nodes(R"({"id": 0, "type": "memcpy", "src": "0x1000",
    "dst": "0xffffffffffffff00", "src_size": 16, "dst_size": 4096})")),
              HasSubstr("graphs[0].nodes[0].dst_size: expected a size that keeps"));
  EXPECT_THAT(error_of(with_nodes(R"({"id": 0, "type": "memcpy", "src": "0xffffffffffffff00",
    "dst": "0x1000", "src_size": 4096, "dst_size": 16})")),
              HasSubstr("graphs[0].nodes[0].src_size: expected a size that keeps"));
  EXPECT_THAT(error_of(with_nodes(R"({"id": 0, "type": "memcpy", "src": "0xffffffffffffff00",
    "dst": "0x1000", "size": 4096})")),
              HasSubstr("graphs[0].nodes[0].size: expected a size that keeps"));
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
            "t.json: graphs[1].id: expected an id that no earlier graph uses, found 1 "
            "(graphs[0] has it)");
}

TEST(SnapshotErrors, NodeIdsAreUniqueAcrossBodies) {
  EXPECT_EQ(error_of(with_nodes(R"({"id": 5, "type": "empty"}, {"id": 6, "type": "conditional",
    "bodies": [{"nodes": []}, {"nodes": [{"id": 5, "type": "host"}]}]})")),
            "t.json: graphs[0].nodes[1].bodies[1].nodes[0].id: expected an id that no other node "
            "of graph 3 uses, found 5 (graphs[0].nodes[0] has it)");
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

// Unknown content and deep nesting cost no memory beyond a few times the text
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
    const long growth = parse_peak_growth_kib(document);
    ASSERT_GE(growth, 0) << "could not measure the child's memory";
    EXPECT_LT(growth, static_cast<long>(4 * document.size() / 1024))
        << "KiB added to parse " << document.substr(0, 80) << "... (" << document.size()
        << " bytes)";
  }
  EXPECT_EQ(parse_snapshot(with_junk(objects)).epochs.size(), 1U);
}

}  // namespace
}  // namespace graphcheck
