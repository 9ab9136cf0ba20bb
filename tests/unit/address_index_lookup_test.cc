// AddressIndex lookup table: every address resolves as a plain scan of the epoch would, at
// cell boundaries, at both ends of the address space, in far-apart clusters, in dense runs,
// and whatever order the epoch lists its ranges in; the scan's grouped lookup (`probe`, then
// `classify_probed`) agrees with it.
#include <graphcheck/address_index.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <string>
#include <tuple>
#include <vector>

namespace graphcheck {
namespace {

constexpr Address kTop = ~Address{0};

int kind_rank(OwnerKind kind) {
  constexpr std::array<int, 5> kRank = {0, 1, 2, 4, 3};  // parameter, buffer, runtime, input, graph
  return kRank.at(static_cast<std::size_t>(kind));
}

bool inside(Address begin, std::uint64_t size, Address address) {
  return address >= begin && address - begin < size;
}

// The documented resolution rules, applied by scanning every range.
const Span* expected_span(const Epoch& epoch, Address address) {
  const Span* best = nullptr;
  for (const Span& span : epoch.spans) {
    if (!inside(span.begin, span.size, address)) {
      continue;
    }
    if (best == nullptr ||
        std::make_tuple(span.size, kind_rank(span.kind), span.name, &span) <
            std::make_tuple(best->size, kind_rank(best->kind), best->name, best)) {
      best = &span;
    }
  }
  return best;
}

const Allocation* expected_allocation(const Epoch& epoch, Address address) {
  const Allocation* best = nullptr;
  for (const Allocation& allocation : epoch.allocations) {
    if (inside(allocation.begin, allocation.size, address) &&
        (best == nullptr || std::make_tuple(allocation.size, allocation.begin, &allocation) <
                                std::make_tuple(best->size, best->begin, best))) {
      best = &allocation;
    }
  }
  return best;
}

// Every boundary, its neighbours, both ends of the address space, and some points between.
std::vector<Address> probes(const Epoch& epoch) {
  std::vector<Address> points = {0, 1, kTop - 1, kTop};
  const auto around = [&](Address at) {
    points.push_back(at - 1);
    points.push_back(at);
    points.push_back(at + 1);
  };
  for (const Span& span : epoch.spans) {
    around(span.begin);
    around(span.begin + span.size);
    points.push_back(span.begin + span.size / 2);
  }
  for (const Allocation& allocation : epoch.allocations) {
    around(allocation.begin);
    around(allocation.begin + allocation.size);
  }
  return points;
}

void expect_agrees_with_scan(const Epoch& epoch) {
  const AddressIndex index(epoch);
  for (Address address : probes(epoch)) {
    const AddressHit hit = index.find(address);
    ASSERT_EQ(hit.span, expected_span(epoch, address)) << format_address(address);
    ASSERT_EQ(hit.allocation, expected_allocation(epoch, address)) << format_address(address);
    // The extent find_cell reports resolves alike at both of its ends.
    Address first = 1;
    Address last = 0;
    const std::uint32_t cell = index.find_cell(address, &first, &last);
    ASSERT_LE(first, address);
    ASSERT_GE(last, address);
    ASSERT_EQ(cell, index.find_cell(address));
    ASSERT_EQ(index.find_cell(first), cell) << format_address(first);
    ASSERT_EQ(index.find_cell(last), cell) << format_address(last);
    // The scan's lookup, whole and in its two halves, finds the same cell and its class.
    if (index.contains(address)) {
      auto whole = AddressIndex::CellClass::kOther;
      auto halves = AddressIndex::CellClass::kEndCell;
      ASSERT_EQ(index.classify(address, &whole), cell) << format_address(address);
      ASSERT_EQ(index.classify_probed(address, index.probe(address), &halves), cell);
      ASSERT_EQ(whole, index.cell_class(cell)) << format_address(address);
      ASSERT_EQ(halves, whole) << format_address(address);
    } else {
      ASSERT_EQ(cell, AddressIndex::kNoCell) << format_address(address);
    }
  }
}

Span span_at(Address begin, std::uint64_t size, OwnerKind kind, std::string name) {
  return Span{begin, size, kind, std::move(name), ""};
}

Allocation allocation_at(Address begin, std::uint64_t size, std::string pool = "default") {
  return Allocation{begin, size, std::move(pool), 1, ""};
}

TEST(AddressIndexLookupTest, EmptyEpochAndEmptySpansResolveNothing) {
  expect_agrees_with_scan(Epoch{"e", {}, {}});
  expect_agrees_with_scan(Epoch{"e", {span_at(0x1000, 0, OwnerKind::kParameter, "empty")}, {}});
}

TEST(AddressIndexLookupTest, RangesAtAddressZeroAndAtTheTopResolve) {
  const Epoch epoch{"e",
                    {span_at(0, 0x10, OwnerKind::kParameter, "zero"),
                     span_at(kTop - 0xf, 0x10, OwnerKind::kBuffer, "top"),
                     span_at(kTop, 1, OwnerKind::kRuntime, "last byte")},
                    {allocation_at(0, kTop), allocation_at(kTop - 0xff, 0x100)}};
  expect_agrees_with_scan(epoch);
  const AddressIndex index(epoch);
  EXPECT_EQ(index.find_span(0)->name, "zero");
  EXPECT_EQ(index.find_span(0x10), nullptr);  // half-open
  EXPECT_EQ(index.find_span(kTop)->name, "last byte");
  EXPECT_EQ(index.find_allocation(kTop)->size, 0x100U);
}

TEST(AddressIndexLookupTest, FarApartClustersResolveInEachCluster) {
  Epoch epoch{"e", {}, {}};
  for (std::uint64_t i = 0; i < 300; ++i) {
    epoch.spans.push_back(span_at(0x1000 + i * 0x40, 0x20 + i % 3 * 0x10, OwnerKind::kParameter,
                                  "low" + std::to_string(i)));
    epoch.spans.push_back(span_at(0x7f3a00000000 + i * 0x10000, 0x100 + i * 0x80,
                                  OwnerKind::kBuffer, "mid" + std::to_string(i)));
    epoch.spans.push_back(span_at(kTop - 0x100000 + i * 0x100, 0x100, OwnerKind::kRuntime,
                                  "high" + std::to_string(i)));
  }
  epoch.allocations.push_back(allocation_at(0x7f5000000000, 1ULL << 30, "graph"));
  epoch.allocations.push_back(allocation_at(0x7f3a00000000, std::uint64_t{300} * 0x10000));
  expect_agrees_with_scan(epoch);
}

TEST(AddressIndexLookupTest, DenseOneByteSpansResolveEachByte) {
  Epoch epoch{"e", {}, {}};
  for (std::uint64_t i = 0; i < 1000; ++i) {
    epoch.spans.push_back(
        span_at(0x5000 + i, 1, OwnerKind::kParameter, "byte" + std::to_string(i)));
  }
  epoch.spans.push_back(span_at(1ULL << 40, 8, OwnerKind::kParameter, "far"));
  expect_agrees_with_scan(epoch);
}

TEST(AddressIndexLookupTest, NestedOverlappingAndTiedSpansFollowTheRules) {
  Epoch epoch{"e", {}, {}};
  std::uint64_t state = 7;
  const auto next = [&](std::uint64_t below) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 17) % below;
  };
  constexpr std::array<OwnerKind, 5> kKinds = {OwnerKind::kParameter, OwnerKind::kBuffer,
                                               OwnerKind::kRuntime, OwnerKind::kInput,
                                               OwnerKind::kGraph};
  for (int i = 0; i < 400; ++i) {
    // Few distinct begins and sizes, so that nesting, equal sizes and identical spans occur.
    const Address begin = 0x10000 + next(64) * 0x40;
    const std::uint64_t size = 0x40 * (1 + next(8));
    epoch.spans.push_back(span_at(begin, size, kKinds.at(next(5)), "s" + std::to_string(next(6))));
    if (i % 4 == 0) {
      epoch.allocations.push_back(allocation_at(begin, size * (1 + next(3))));
    }
  }
  expect_agrees_with_scan(epoch);
}

TEST(AddressIndexLookupTest, UnsortedEpochResolvesLikeSortedOne) {
  Epoch sorted{"e", {}, {}};
  for (std::uint64_t i = 0; i < 2000; ++i) {
    sorted.spans.push_back(span_at(0x7f0000000000 + i * 0x1000, 0x800 + i % 5 * 0x100,
                                   OwnerKind::kParameter, "t" + std::to_string(i)));
    if (i % 50 == 0) {
      sorted.allocations.push_back(
          allocation_at(0x7f0000000000 + i * 0x1000, std::uint64_t{50} * 0x1000));
    }
  }
  Epoch shuffled = sorted;
  std::uint64_t state = 99;
  for (std::size_t i = shuffled.spans.size(); i > 1; --i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    std::swap(shuffled.spans[i - 1], shuffled.spans[(state >> 33) % i]);
  }
  std::reverse(shuffled.allocations.begin(), shuffled.allocations.end());
  expect_agrees_with_scan(shuffled);
  const AddressIndex a(sorted);
  const AddressIndex b(shuffled);
  for (Address address : probes(sorted)) {
    const Span* x = a.find_span(address);
    const Span* y = b.find_span(address);
    ASSERT_EQ(x == nullptr, y == nullptr) << format_address(address);
    if (x != nullptr) {
      ASSERT_EQ(x->name, y->name) << format_address(address);
    }
  }
}

}  // namespace
}  // namespace graphcheck
