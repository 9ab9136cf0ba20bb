// The model's small pieces: address text, enum spellings, span containment.
#include <graphcheck/address.h>
#include <graphcheck/epoch.h>
#include <graphcheck/graph.h>
#include <graphcheck/verdict.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <set>

namespace graphcheck {
namespace {

TEST(AddressTest, FormatsLowerCaseHexWithoutPadding) {
  EXPECT_EQ(format_address(0x7f3a00000000ULL), "0x7f3a00000000");
  EXPECT_EQ(format_address(0), "0x0");
  EXPECT_EQ(format_address(~0ULL), "0xffffffffffffffff");
}

TEST(AddressTest, ParsesEitherCaseAndRejectsEverythingElse) {
  EXPECT_EQ(parse_address("0x7F3a00000000"), 0x7f3a00000000ULL);
  EXPECT_EQ(parse_address("0X10"), 0x10ULL);
  for (const char* bad :
       {"", "0x", "7f3a", "0x-1", "0x12g", "0x1 ", " 0x1", "0x10000000000000000"}) {
    EXPECT_FALSE(parse_address(bad).has_value()) << bad;
  }
}

TEST(NamesTest, EverySpellingRoundTrips) {
  for (int i = 0; i < 5; ++i) {
    const auto kind = static_cast<OwnerKind>(i);
    EXPECT_EQ(parse_owner_kind(to_string(kind)), kind);
  }
  for (int i = 0; i <= static_cast<int>(NodeType::kOp); ++i) {
    const auto type = static_cast<NodeType>(i);
    EXPECT_EQ(parse_node_type(to_string(type)), type);
  }
  for (std::size_t i = 0; i < kVerdictCount; ++i) {
    const auto verdict = static_cast<Verdict>(i);
    EXPECT_EQ(parse_verdict(to_string(verdict)), verdict);
  }
  EXPECT_FALSE(parse_owner_kind("Parameter").has_value());
  EXPECT_FALSE(parse_node_type("graph").has_value());
  EXPECT_FALSE(parse_verdict("ok").has_value());
}

TEST(NamesTest, OnlyTheFourFindingVerdictsAreFindings) {
  const std::set<Verdict> findings = {Verdict::kUnregistered, Verdict::kDangling, Verdict::kStale,
                                      Verdict::kLost};
  for (std::size_t i = 0; i < kVerdictCount; ++i) {
    const auto verdict = static_cast<Verdict>(i);
    EXPECT_EQ(is_finding(verdict), findings.count(verdict) == 1) << to_string(verdict);
  }
}

TEST(SpanTest, IsHalfOpenSoTheEndAddressIsOutside) {
  const Span span{0x1000, 0x100, OwnerKind::kBuffer, "b", ""};
  EXPECT_TRUE(span.contains(0x1000));
  EXPECT_TRUE(span.contains(0x10ff));
  EXPECT_FALSE(span.contains(0x1100));
  EXPECT_FALSE(span.contains(0xfff));
}

TEST(AllocationTest, GraphPoolsAreGraphOrGraphColonSomething) {
  Allocation a;
  for (const char* pool : {"graph", "graph:1", "graph:(1, 0)"}) {
    a.pool = pool;
    EXPECT_TRUE(a.is_graph_pool()) << pool;
  }
  for (const char* pool : {"default", "graphs", "weights", ""}) {
    a.pool = pool;
    EXPECT_FALSE(a.is_graph_pool()) << pool;
  }
}

}  // namespace
}  // namespace graphcheck
