// AddressIndex: innermost wins, ties are deterministic, ranges are half-open.
#include <graphcheck/address_index.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <thread>

namespace graphcheck {
namespace {

Span make_span(Address begin, std::uint64_t size, OwnerKind kind, std::string name) {
  Span span;
  span.begin = begin;
  span.size = size;
  span.kind = kind;
  span.name = std::move(name);
  return span;
}

Allocation make_alloc(Address begin, std::uint64_t size, std::string pool = "default",
                      std::string label = "") {
  Allocation allocation;
  allocation.begin = begin;
  allocation.size = size;
  allocation.pool = std::move(pool);
  allocation.generation = 1;
  allocation.label = std::move(label);
  return allocation;
}

std::string name_at(const AddressIndex& index, Address address) {
  const Span* span = index.find_span(address);
  return span == nullptr ? "<none>" : span->name;
}

// A build on a thread whose index cache is already destroyed: glibc's exit() destroys the
// exiting thread's thread_locals before the atexit handlers run (the CUPTI injection's exit
// check builds indexes there), and a thread_local made before the cache is destroyed after
// it, as here. Before, such a build used the destroyed cache (ASan: heap-use-after-free; the
// injection's exit check segfaulted 5 runs in 5).
const Epoch* g_late_epoch = nullptr;
std::string g_late_found;  // NOLINT(cert-err58-cpp): a test's result slot

struct BuildsAtThreadExit {
  BuildsAtThreadExit() = default;
  BuildsAtThreadExit(const BuildsAtThreadExit&) = delete;
  BuildsAtThreadExit& operator=(const BuildsAtThreadExit&) = delete;
  BuildsAtThreadExit(BuildsAtThreadExit&&) = delete;
  BuildsAtThreadExit& operator=(BuildsAtThreadExit&&) = delete;
  ~BuildsAtThreadExit() {
    const AddressIndex index(*g_late_epoch);
    g_late_found = name_at(index, 0x1010);
  }
};

TEST(AddressIndexTest, ABuildAfterItsThreadsCacheIsDestroyedNeedsNoCache) {
  const Epoch epoch{"capture", {make_span(0x1000, 0x100, OwnerKind::kParameter, "w")}, {}};
  g_late_epoch = &epoch;
  g_late_found.clear();
  std::thread([] {
    thread_local BuildsAtThreadExit late;  // made before the cache, so destroyed after it
    (void)&late;
    const AddressIndex first(*g_late_epoch);  // makes the cache; its tables go back there
    EXPECT_EQ(name_at(first, 0x1010), "w");
  }).join();
  EXPECT_EQ(g_late_found, "w");
}

TEST(AddressIndexTest, EmptyEpochResolvesNothing) {
  const Epoch epoch{"capture", {}, {}};
  const AddressIndex index(epoch);
  for (Address address : {Address{0}, Address{0x1000}, ~Address{0}}) {
    const AddressHit hit = index.find(address);
    EXPECT_EQ(hit.span, nullptr);
    EXPECT_EQ(hit.allocation, nullptr);
  }
}

TEST(AddressIndexTest, EndAddressIsOutsideAndBeginInside) {
  const Epoch epoch{"capture", {make_span(0x1000, 0x100, OwnerKind::kParameter, "w")}, {}};
  const AddressIndex index(epoch);
  EXPECT_EQ(name_at(index, 0xfff), "<none>");
  EXPECT_EQ(name_at(index, 0x1000), "w");
  EXPECT_EQ(name_at(index, 0x10ff), "w");
  EXPECT_EQ(name_at(index, 0x1100), "<none>");
}

TEST(AddressIndexTest, AdjacentSpansSplitAtTheBoundary) {
  const Epoch epoch{"capture",
                    {make_span(0x1100, 0x100, OwnerKind::kBuffer, "b"),
                     make_span(0x1000, 0x100, OwnerKind::kParameter, "a")},
                    {}};
  const AddressIndex index(epoch);
  EXPECT_EQ(name_at(index, 0x10ff), "a");
  EXPECT_EQ(name_at(index, 0x1100), "b");
  EXPECT_EQ(name_at(index, 0x1200), "<none>");
}

TEST(AddressIndexTest, NestedSpansResolveToTheInnermost) {
  const Epoch epoch{"capture",
                    {make_span(0x1000, 0x1000, OwnerKind::kRuntime, "outer"),
                     make_span(0x1400, 0x400, OwnerKind::kBuffer, "middle"),
                     make_span(0x1500, 0x10, OwnerKind::kParameter, "inner")},
                    {}};
  const AddressIndex index(epoch);
  EXPECT_EQ(name_at(index, 0x1000), "outer");
  EXPECT_EQ(name_at(index, 0x1400), "middle");
  EXPECT_EQ(name_at(index, 0x1508), "inner");
  EXPECT_EQ(name_at(index, 0x1510), "middle");
  EXPECT_EQ(name_at(index, 0x1800), "outer");
  EXPECT_EQ(name_at(index, 0x2000), "<none>");
  const AddressHit hit = index.find(0x1508);
  ASSERT_TRUE(hit.has_rivals);
  const auto rivals = index.rivals(hit);
  ASSERT_EQ(rivals.size(), 2U);
  EXPECT_EQ(rivals[0]->name, "middle");
  EXPECT_EQ(rivals[1]->name, "outer");
}

TEST(AddressIndexTest, DeeplyNestedSpansKeepTheInnermostRivalsOnly) {
  // Every rival of every cell took memory quadratic in the nesting (20k nested spans: 2 GB).
  Epoch epoch{"capture", {}, {}};
  constexpr Address kBase = 0x100000;
  for (std::uint64_t i = 0; i < 40; ++i) {
    epoch.spans.push_back(
        make_span(kBase + 16 * i, 0x10000 - 32 * i, OwnerKind::kBuffer, "b" + std::to_string(i)));
  }
  const AddressIndex index(epoch);
  const AddressHit hit = index.find(kBase + 16 * 39);
  EXPECT_EQ(hit.span->name, "b39");
  const auto rivals = index.rivals(hit);
  ASSERT_EQ(rivals.size(), 16U);
  EXPECT_EQ(rivals.front()->name, "b38");  // innermost first
  EXPECT_EQ(rivals.back()->name, "b23");
}

TEST(AddressIndexTest, EqualSizeTiesGoByKindOrderThenName) {
  // Kind order: parameter, buffer, runtime, input, graph.
  const Epoch epoch{"capture",
                    {make_span(0x1000, 0x100, OwnerKind::kGraph, "g"),
                     make_span(0x1000, 0x100, OwnerKind::kInput, "i"),
                     make_span(0x1000, 0x100, OwnerKind::kRuntime, "r"),
                     make_span(0x2000, 0x100, OwnerKind::kGraph, "g2"),
                     make_span(0x2000, 0x100, OwnerKind::kInput, "i2"),
                     make_span(0x3000, 0x100, OwnerKind::kBuffer, "zeta"),
                     make_span(0x3000, 0x100, OwnerKind::kBuffer, "alpha")},
                    {}};
  const AddressIndex index(epoch);
  EXPECT_EQ(name_at(index, 0x1080), "r");
  EXPECT_EQ(name_at(index, 0x2080), "i2");
  EXPECT_EQ(name_at(index, 0x3080), "alpha");
}

TEST(AddressIndexTest, IdenticalSpansCountOnceAndAreNoRivals) {
  const Epoch epoch{"capture",
                    {make_span(0x1000, 0x100, OwnerKind::kParameter, "w"),
                     make_span(0x1000, 0x100, OwnerKind::kParameter, "w"),
                     make_span(0x1000, 0x80, OwnerKind::kParameter, "w")},
                    {}};
  const AddressIndex index(epoch);
  const AddressHit hit = index.find(0x1010);
  ASSERT_NE(hit.span, nullptr);
  EXPECT_EQ(hit.span, &epoch.spans[2]);  // the smaller view of the same owner
  EXPECT_FALSE(hit.has_rivals);
  EXPECT_EQ(index.find(0x1090).span, &epoch.spans[0]);  // first of the identical pair
}

TEST(AddressIndexTest, PartialOverlapSplitsIntoThreeCells) {
  const Epoch epoch{"capture",
                    {make_span(0x1000, 0x200, OwnerKind::kParameter, "a"),
                     make_span(0x1100, 0x80, OwnerKind::kBuffer, "b")},
                    {}};
  const AddressIndex index(epoch);
  EXPECT_EQ(name_at(index, 0x10ff), "a");
  EXPECT_EQ(name_at(index, 0x1100), "b");
  EXPECT_EQ(name_at(index, 0x1180), "a");
  EXPECT_FALSE(index.find(0x1000).has_rivals);
  EXPECT_TRUE(index.find(0x1100).has_rivals);
}

TEST(AddressIndexTest, EmptySpansContainNothing) {
  const Epoch epoch{"capture", {make_span(0x1000, 0, OwnerKind::kParameter, "zero")}, {}};
  const AddressIndex index(epoch);
  EXPECT_EQ(name_at(index, 0x1000), "<none>");
}

TEST(AddressIndexTest, AllocationsResolveToTheInnermostAndFlagGraphPools) {
  const Epoch epoch{"capture",
                    {},
                    {make_alloc(0x10000, 0x10000, "default", "segment"),
                     make_alloc(0x12000, 0x1000, "default", "block"),
                     make_alloc(0x40000, 0x1000, "graph:7", "")}};
  const AddressIndex index(epoch);
  EXPECT_EQ(index.find_allocation(0x10000)->label, "segment");
  EXPECT_EQ(index.find_allocation(0x12000)->label, "block");
  EXPECT_EQ(index.find_allocation(0x13000)->label, "segment");
  EXPECT_EQ(index.find_allocation(0x20000), nullptr);
  EXPECT_FALSE(index.find(0x12000).graph_pool);
  EXPECT_TRUE(index.find(0x40000).graph_pool);
  EXPECT_EQ(index.find_span(0x12000), nullptr);
}

TEST(AddressIndexTest, SpansAndAllocationsResolveIndependently) {
  const Epoch epoch{"capture",
                    {make_span(0x1100, 0x100, OwnerKind::kParameter, "w")},
                    {make_alloc(0x1000, 0x1000)}};
  const AddressIndex index(epoch);
  const AddressHit inside = index.find(0x1180);
  EXPECT_EQ(inside.span, &epoch.spans[0]);
  EXPECT_EQ(inside.allocation, &epoch.allocations[0]);
  const AddressHit beside = index.find(0x1200);
  EXPECT_EQ(beside.span, nullptr);
  EXPECT_EQ(beside.allocation, &epoch.allocations[0]);
}

TEST(AddressIndexTest, RangeReachingTheTopOfTheAddressSpaceWorks) {
  const Epoch epoch{"capture",
                    {make_span(~Address{0} - 0xff, 0x100, OwnerKind::kRuntime, "top")},
                    {make_alloc(~Address{0} - 0xfff, 0x1000)}};
  const AddressIndex index(epoch);
  EXPECT_EQ(name_at(index, ~Address{0}), "top");
  EXPECT_EQ(name_at(index, ~Address{0} - 0x100), "<none>");
  EXPECT_NE(index.find_allocation(~Address{0}), nullptr);
}

TEST(AddressIndexTest, ManySparseSpansAgreeWithALinearScan) {
  Epoch epoch{"capture", {}, {}};
  // Clustered and spread addresses, so that buckets hold very different numbers of points.
  for (std::uint64_t i = 0; i < 500; ++i) {
    epoch.spans.push_back(make_span(0x7f0000000000 + i * 0x300, 0x100 + (i % 7) * 0x40,
                                    OwnerKind::kParameter, "p" + std::to_string(i)));
    epoch.spans.push_back(
        make_span(0x1000 + i * i * 0x10000, 0x800, OwnerKind::kBuffer, "b" + std::to_string(i)));
  }
  const AddressIndex index(epoch);
  std::uint64_t state = 12345;
  for (int probe = 0; probe < 20000; ++probe) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const Span& target = epoch.spans[(state >> 33) % epoch.spans.size()];
    const Address address = target.begin + ((state >> 7) % (target.size + 0x200)) - 0x100;
    const Span* expected = nullptr;
    for (const Span& span : epoch.spans) {
      if (span.contains(address) && (expected == nullptr || span.size < expected->size)) {
        expected = &span;
      }
    }
    ASSERT_EQ(index.find_span(address), expected) << format_address(address);
  }
}

}  // namespace
}  // namespace graphcheck
