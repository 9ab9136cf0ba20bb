// The pointer scan: which words of which arguments are references, and which nodes hold them.
#include <graphcheck/pointer_scan.h>
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace graphcheck {
namespace {

// Little-endian bytes of `words`, followed by `tail` extra bytes of 0xee.
std::vector<std::uint8_t> le_words(const std::vector<std::uint64_t>& words, std::size_t tail = 0) {
  std::vector<std::uint8_t> bytes;
  for (std::uint64_t word : words) {
    for (int i = 0; i < 8; ++i) {
      bytes.push_back(static_cast<std::uint8_t>(word >> (8 * i)));
    }
  }
  bytes.insert(bytes.end(), tail, 0xee);
  return bytes;
}

Node kernel(std::uint64_t id, std::vector<KernelParam> params) {
  Node node;
  node.id = id;
  node.type = NodeType::kKernel;
  node.name = std::to_string(id);
  node.name.insert(0, "k");
  node.params = std::move(params);
  return node;
}

Node with_operands(std::uint64_t id, NodeType type, std::vector<Operand> operands) {
  Node node;
  node.id = id;
  node.type = type;
  node.operands = std::move(operands);
  return node;
}

// (node id, param, offset, address) of each reference, in scan order.
using Row = std::tuple<std::uint64_t, std::uint32_t, std::uint32_t, Address>;

std::vector<Row> rows(const std::vector<Reference>& references) {
  std::vector<Row> result;
  result.reserve(references.size());
  for (const Reference& r : references) {
    result.emplace_back(r.node->id, r.param, r.offset, r.address);
  }
  return result;
}

class PointerScanTest : public ::testing::Test {
 protected:
  PointerScanTest() {
    Span span;
    span.begin = 0x7f0000001000;
    span.size = 0x1000;
    span.name = "w";
    capture_.spans.push_back(span);
    Allocation allocation;
    allocation.begin = 0x7f0000100000;
    allocation.size = 0x100;
    allocation.pool = "default";
    capture_.allocations.push_back(allocation);
  }
  std::vector<Reference> scan(const GraphRecord& graph) const {
    const AddressIndex index(capture_);
    return find_references(graph, index, GraphRanges(graph));
  }
  Epoch capture_{"capture", {}, {}};
};

TEST_F(PointerScanTest, StructArgumentIsScannedWordByWord) {
  // A 48-byte parameter block: scalar, pointer, scalar, pointer into the allocation, the
  // span's end pointer (one past it, where no span begins: a reference to the span), and one
  // past the allocation's end (not a span's end: a scalar).
  GraphRecord graph{1, "capture", {}};
  graph.nodes.push_back(kernel(0, {{0, le_words({42, 0x7f0000001008, 0x3f800000, 0x7f00001000ff,
                                                 0x7f0000002000, 0x7f0000100100})}}));
  EXPECT_EQ(rows(scan(graph)), (std::vector<Row>{{0, 0, 8, 0x7f0000001008},
                                                 {0, 0, 24, 0x7f00001000ff},
                                                 {0, 0, 32, 0x7f0000002000}}));
}

TEST_F(PointerScanTest, EndPointerIsLookedUpAtTheSpansLastByte) {
  const AddressIndex index(capture_);
  GraphRecord graph{1, "capture", {}};
  const GraphRanges ranges(graph);
  const WordOwner end = resolve_word(0x7f0000002000, index, ranges);
  EXPECT_TRUE(end.is_reference);
  EXPECT_EQ(end.lookup, 0x7f0000001fffU);
  EXPECT_EQ(index.hit(end.cell).span, &capture_.spans[0]);
  const WordOwner inside = resolve_word(0x7f0000001008, index, ranges);
  EXPECT_EQ(inside.lookup, 0x7f0000001008U);
  EXPECT_EQ(index.hit(inside.cell).span, &capture_.spans[0]);
  // Where another span begins at that address, the word is that span's begin.
  capture_.spans.push_back({0x7f0000002000, 0x100, OwnerKind::kBuffer, "next", ""});
  const AddressIndex with_next(capture_);
  const WordOwner next = resolve_word(0x7f0000002000, with_next, ranges);
  EXPECT_TRUE(next.is_reference);
  EXPECT_EQ(next.lookup, 0x7f0000002000U);
  EXPECT_EQ(with_next.hit(next.cell).span, &capture_.spans[1]);
}

TEST_F(PointerScanTest, WordsAreReadLittleEndianAtOffsetsWithinEachArgument) {
  GraphRecord graph{1, "capture", {}};
  graph.nodes.push_back(kernel(3, {{0, le_words({7})},
                                   {8, le_words({0x7f0000001000})},
                                   {16, le_words({1, 2, 0x7f0000001ff8})}}));
  EXPECT_EQ(rows(scan(graph)),
            (std::vector<Row>{{3, 1, 0, 0x7f0000001000}, {3, 2, 16, 0x7f0000001ff8}}));
}

TEST_F(PointerScanTest, ArgumentsUnderEightBytesAndTrailingBytesHoldNoPointers) {
  std::vector<std::uint8_t> short_arg = le_words({0x7f0000001000});
  short_arg.resize(7);
  GraphRecord graph{1, "capture", {}};
  // The trailing 4 bytes of the 12-byte argument are not a word; the word at 0 is.
  graph.nodes.push_back(kernel(0, {{0, short_arg}, {8, le_words({0x7f0000001010}, 4)}}));
  EXPECT_EQ(rows(scan(graph)), (std::vector<Row>{{0, 1, 0, 0x7f0000001010}}));
}

TEST_F(PointerScanTest, PackedBufferOffsetsDoNotShiftTheWordOffsets) {
  // A 4-byte int at packed offset 0, then a pointer at packed offset 4 (a packed `extra`
  // layout): the pointer's reference offset is 0 within its own argument.
  GraphRecord graph{1, "capture", {}};
  graph.nodes.push_back(kernel(0, {{0, {1, 0, 0, 0}}, {4, le_words({0x7f0000001100})}}));
  const std::vector<Reference> references = scan(graph);
  ASSERT_EQ(references.size(), 1U);
  EXPECT_EQ(references[0].param, 1U);
  EXPECT_EQ(references[0].offset, 0U);
  EXPECT_EQ(references[0].operand, nullptr);
}

TEST_F(PointerScanTest, MemAllocRangesOfTheSameGraphAreReferences) {
  GraphRecord graph{1, "capture", {}};
  graph.nodes.push_back(
      with_operands(0, NodeType::kMemAlloc, {{"alloc", 0x500000, 0x1000, Access::kWrite}}));
  graph.nodes.push_back(kernel(1, {{0, le_words({0x500800, 0x501000})}}));
  EXPECT_EQ(rows(scan(graph)), (std::vector<Row>{{0, 0, 0, 0x500000}, {1, 0, 0, 0x500800}}));
  GraphRecord other{2, "capture", {}};
  other.nodes.push_back(kernel(1, {{0, le_words({0x500800})}}));
  EXPECT_TRUE(scan(other).empty());  // another graph's alloc node does not count
}

TEST_F(PointerScanTest, EveryOperandOfNonKernelNodesIsAReference) {
  GraphRecord graph{1, "capture", {}};
  graph.nodes.push_back(with_operands(
      0, NodeType::kMemcpy, {{"src", 0x10, 64, Access::kRead}, {"dst", 0x20, 64, Access::kWrite}}));
  graph.nodes.push_back(with_operands(1, NodeType::kMemset, {{"dst", 0x30, 8, Access::kWrite}}));
  graph.nodes.push_back(
      with_operands(2, NodeType::kMemFree, {{"dptr", 0x40, 0, Access::kUnknown}}));
  Node op =
      with_operands(3, NodeType::kOp,
                    {{"reads[0]", 0x50, 4, Access::kRead}, {"writes[0]", 0x60, 4, Access::kWrite}});
  op.name = "aten::mm";
  graph.nodes.push_back(op);
  // A batch mem-op node's wait and write addresses (issue 18 §4).
  graph.nodes.push_back(with_operands(
      4, NodeType::kBatchMemOp,
      {{"reads[0]", 0x70, 4, Access::kRead}, {"writes[0]", 0x80, 8, Access::kWrite}}));
  const std::vector<Reference> references = scan(graph);
  std::vector<std::string> roles;
  for (const Reference& r : references) {
    ASSERT_NE(r.operand, nullptr);
    EXPECT_EQ(r.address, r.operand->begin);
    roles.push_back(r.operand->role);
  }
  EXPECT_EQ(roles, (std::vector<std::string>{"src", "dst", "dst", "dptr", "reads[0]", "writes[0]",
                                             "reads[0]", "writes[0]"}));
}

TEST_F(PointerScanTest, KernelOperandsAreReferencesAfterTheArgumentWords) {
  GraphRecord graph{1, "capture", {}};
  // The descriptor's own bytes hold no known address; its global address is an operand,
  // and an operand inside nothing known is still a reference (the backend named it).
  Node node = kernel(0, {{0, le_words({0x7f0000001008, 0x1234})}});
  node.operands = {{"param[1]+0:tensor_map", 0x7f0000002000, 0x400, Access::kRead},
                   {"param[2]+0:tensor_map", 0x9000, 0, Access::kRead}};
  graph.nodes.push_back(node);
  graph.nodes.push_back(kernel(1, {{0, le_words({0x7f0000100010})}}));
  const std::vector<Reference> references = scan(graph);
  EXPECT_EQ(rows(references), (std::vector<Row>{{0, 0, 0, 0x7f0000001008},
                                                {0, 0, 0, 0x7f0000002000},
                                                {0, 0, 0, 0x9000},
                                                {1, 0, 0, 0x7f0000100010}}));
  ASSERT_EQ(references.size(), 4U);
  EXPECT_EQ(references[0].operand, nullptr);
  ASSERT_NE(references[1].operand, nullptr);
  EXPECT_EQ(references[1].operand->role, "param[1]+0:tensor_map");
  ASSERT_NE(references[2].operand, nullptr);
  EXPECT_EQ(references[2].operand->role, "param[2]+0:tensor_map");
  EXPECT_EQ(references[3].operand, nullptr);
}

TEST_F(PointerScanTest, NodesWithoutOperandsHoldNone) {
  GraphRecord graph{1, "capture", {}};
  for (NodeType type :
       {NodeType::kHost, NodeType::kEmpty, NodeType::kEventWait, NodeType::kEventRecord,
        NodeType::kExtSemasSignal, NodeType::kExtSemasWait}) {
    Node node = with_operands(graph.nodes.size(), type, {{"x", 0x7f0000001000, 8, Access::kRead}});
    node.params = {{0, le_words({0x7f0000001000})}};
    graph.nodes.push_back(node);
  }
  EXPECT_TRUE(scan(graph).empty());
}

TEST_F(PointerScanTest, ChildAndConditionalBodiesAreRecursedInOrder) {
  Node child;
  child.id = 1;
  child.type = NodeType::kChildGraph;
  child.bodies.push_back({kernel(10, {{0, le_words({0x7f0000001000})}})});
  Node conditional;
  conditional.id = 2;
  conditional.type = NodeType::kConditional;
  conditional.bodies.push_back({kernel(20, {{0, le_words({0x7f0000001008})}})});
  conditional.bodies.push_back({child});  // nested two levels deep
  GraphRecord graph{9, "capture", {}};
  graph.nodes.push_back(kernel(0, {{0, le_words({0x7f0000001010})}}));
  graph.nodes.push_back(child);
  graph.nodes.push_back(conditional);
  const std::vector<Reference> references = scan(graph);
  EXPECT_EQ(rows(references), (std::vector<Row>{{0, 0, 0, 0x7f0000001010},
                                                {10, 0, 0, 0x7f0000001000},
                                                {20, 0, 0, 0x7f0000001008},
                                                {10, 0, 0, 0x7f0000001000}}));
  for (const Reference& r : references) {
    EXPECT_EQ(r.graph, 9U);
  }
  EXPECT_EQ(count_nodes(graph.nodes), 7U);  // 3 top, 1 in child, 1 + (1 + 1) in conditional
}

TEST(GraphRangesTest, OverlappingAndNestedRangesAreAllFound) {
  GraphRecord graph{1, "capture", {}};
  graph.nodes.push_back(
      with_operands(0, NodeType::kMemAlloc, {{"alloc", 0x1000, 0x10000, Access::kWrite}}));
  graph.nodes.push_back(
      with_operands(1, NodeType::kMemAlloc, {{"alloc", 0x2000, 0x10, Access::kWrite}}));
  const GraphRanges ranges(graph);
  EXPECT_TRUE(ranges.contains(0x1000));
  EXPECT_TRUE(ranges.contains(0x3000));  // past the small range, inside the big one
  EXPECT_FALSE(ranges.contains(0x11000));
  EXPECT_FALSE(ranges.contains(0xfff));
}

}  // namespace
}  // namespace graphcheck
