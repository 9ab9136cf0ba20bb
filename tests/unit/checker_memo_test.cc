// The multi-epoch fast paths: an index shared by epochs listing the same ranges, the memo
// of decisions by cells, and checks whose answers must not depend on either.
#include <graphcheck/address_index.h>
#include <graphcheck/checker.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "graphcheck/detail/decision_memo.h"
#include "unit/checker_helpers.h"

namespace graphcheck {
namespace {

constexpr Address kBase = 0x7e0000000000;
constexpr std::uint64_t kRegion = 0x100000;
constexpr std::uint64_t kAlloc = 0x10000;
constexpr Address kNowhere = 0x100000000;  // below every range
constexpr Address kFar = 0x7f9000000000;   // above every range

using testing_helpers::le_word;

Address region(int i) { return kBase + static_cast<Address>(i) * kRegion; }

// Objects by region, each referenced at several offsets by several nodes so that decisions
// are reused: spans of each kind (param 0, buffer 1, runtime 2, graph 3, input in discarded
// memory 4, input in kept memory 5), discarded memory without a span (6; 7 allowed), a
// workspace (8; 9 allowed), a graph pool (10), a parameter inside a runtime span (11), and
// discarded memory half inside the graph's mem_alloc range (12). Only with `changes`: a
// rebound parameter (13), an address with a new owner (14), a freed allocation (15), a
// replaced one (16: another allocation at another begin, stale), and a runtime span over
// the upper half of object 6 (its discarded bytes reused by another owner: stale).
Epoch capture_epoch() {
  Epoch epoch{"capture", {}, {}};
  const auto span = [&](int i, OwnerKind kind, const std::string& name) {
    epoch.spans.push_back({region(i) + 0x100, 0x1000, kind, name, ""});
  };
  const auto alloc = [&](int i, const std::string& pool, const std::string& label) {
    epoch.allocations.push_back({region(i), kAlloc, pool, 1, label});
  };
  for (int i = 0; i <= 16; ++i) {
    alloc(i,
          i == 10                                            ? "graph"
          : i == 5 || i == 8 || i == 9 || i == 11 || i == 16 ? "default"
                                                             : "weights",
          i == 7 || i == 9 ? "allowed.x" + std::to_string(i) : "site" + std::to_string(i));
  }
  span(0, OwnerKind::kParameter, "p0");
  span(1, OwnerKind::kBuffer, "b1");
  span(2, OwnerKind::kRuntime, "r2");
  span(3, OwnerKind::kGraph, "g3");
  span(4, OwnerKind::kInput, "i4");
  span(5, OwnerKind::kInput, "i5");
  epoch.spans.push_back({region(11), kAlloc, OwnerKind::kRuntime, "kv", "cache"});
  span(11, OwnerKind::kParameter, "p11");
  span(13, OwnerKind::kParameter, "p13");
  span(14, OwnerKind::kParameter, "p14");
  return epoch;
}

// The later epoch: the weights pool discarded (a new generation); with `changes`, also a
// rebinding reload, a new owner, a freed and a replaced allocation.
Epoch later_epoch(bool changes) {
  Epoch epoch = capture_epoch();
  epoch.label = "after";
  for (Allocation& allocation : epoch.allocations) {
    if (allocation.pool == "weights") {
      allocation.generation = 2;
    }
  }
  if (changes) {
    epoch.spans[8].begin = region(13) + 0x8000;       // p13 moved
    epoch.spans[9].name = "other";                    // p14's bytes now belong to another owner
    epoch.allocations[15].size = 0;                   // freed (an empty allocation covers nothing)
    epoch.allocations[16].begin = region(16) + 0x20;  // replaced
    // Runtime state refilled into the upper half of object 6: one capture cell, two later
    // ones.
    epoch.spans.push_back({region(6) + 0x800, 0x800, OwnerKind::kRuntime, "fresh", "refilled"});
  }
  return epoch;
}

// Kernel node `id` with one argument per object, at an offset that varies with the node.
Node kernel(std::uint64_t id, int objects) {
  Node node;
  node.id = id;
  node.type = NodeType::kKernel;
  node.name = "k" + std::to_string(id % 5);
  for (int i = 0; i < objects; ++i) {
    const Address offset = 0x100 + ((id * 0x1d0 + static_cast<Address>(i) * 0x40) % 0xf00);
    node.params.push_back({static_cast<std::uint64_t>(i) * 8, le_word(region(i) + offset)});
  }
  return node;
}

Snapshot world(bool changes, std::uint64_t nodes) {
  Snapshot snapshot;
  snapshot.epochs = {capture_epoch(), later_epoch(changes)};
  snapshot.allow = {"allowed.*"};
  const int objects = changes ? 17 : 13;
  GraphRecord graph{1, "capture", {}};
  Node copy;  // node 1: a copy from memory nothing holds (dangling in every epoch)
  copy.id = 1;
  copy.type = NodeType::kMemcpy;
  copy.operands = {{"src", kNowhere, 0x40, Access::kRead}, {"dst", kFar, 0x40, Access::kWrite}};
  graph.nodes.push_back(copy);
  for (std::uint64_t n = 2; n < nodes; ++n) {
    graph.nodes.push_back(kernel(n, objects));
  }
  // Node 0, last: the graph owns the upper half of object 12's allocation. Last, so that its
  // own reference (inside that half) is not the first to decide the cell.
  Node alloc;
  alloc.id = 0;
  alloc.type = NodeType::kMemAlloc;
  alloc.operands = {{"alloc", region(12) + 0x800, 0x800, Access::kWrite}};
  graph.nodes.push_back(alloc);
  snapshot.graphs.push_back(std::move(graph));
  return snapshot;
}

CheckOptions in_epoch(const std::string& label) {
  CheckOptions options;
  options.epoch = label;
  return options;
}

TEST(CheckerMemoTest, EpochWithTheCaptureRangesDecidesLikeAnUnalignedOne) {
  // Appending a span nothing references makes the later epoch's ranges differ, so its
  // index is built anew and every reference takes the general path through the memo.
  const Snapshot aligned = world(false, 40);
  Snapshot unaligned = aligned;
  unaligned.epochs[1].spans.push_back({kFar + 0x100000, 0x100, OwnerKind::kBuffer, "far", ""});
  const Report expected = check(unaligned, in_epoch("after"));
  const Report actual = check(aligned, in_epoch("after"));
  EXPECT_EQ(actual, expected);
  // The world exercises each verdict of an aligned later epoch.
  for (Verdict verdict :
       {Verdict::kRegistered, Verdict::kRuntime, Verdict::kGraph, Verdict::kInput, Verdict::kLost,
        Verdict::kAllowed, Verdict::kUnregistered, Verdict::kDangling}) {
    EXPECT_GT(actual.summary.count(verdict), 0U) << to_string(verdict);
  }
  // Object 12: lost outside the graph's range, graph-owned inside it, in one cell.
  std::size_t lost_in_12 = 0;
  for (const Finding& finding : actual.findings) {
    if (finding.address >= region(12) && finding.address < region(12) + kAlloc) {
      EXPECT_EQ(finding.verdict, Verdict::kLost);
      EXPECT_LT(finding.address, region(12) + 0x800);
      EXPECT_EQ(finding.owner, "site12");
      ++lost_in_12;
    }
  }
  EXPECT_GT(lost_in_12, 0U);
  EXPECT_LT(lost_in_12, 38U);  // some of the 38 kernels reference the graph-owned half
}

// Each node checked alone (with the mem_alloc node that gives the graph its range) gets the
// findings it gets inside the whole graph, where its cells' decisions are memoized.
void expect_same_as_alone(bool changes) {
  const Snapshot whole = world(changes, 30);
  const Report report = check(whole, in_epoch("after"));
  const NodeList& nodes = whole.graphs[0].nodes;
  Snapshot base = whole;
  base.graphs[0].nodes = {nodes.back()};
  const Report alloc_only = check(base, in_epoch("after"));
  Summary sum;
  for (std::size_t n = 0; n + 1 < nodes.size(); ++n) {
    Snapshot alone = base;
    alone.graphs[0].nodes = {nodes[n], nodes.back()};
    const Report single = check(alone, in_epoch("after"));
    std::vector<Finding> in_whole;
    for (const Finding& finding : report.findings) {
      if (finding.node == nodes[n].id) {
        in_whole.push_back(finding);
      }
    }
    EXPECT_EQ(single.findings, in_whole) << "node " << n;
    sum.references += single.summary.references - alloc_only.summary.references;
    for (std::size_t v = 0; v < kVerdictCount; ++v) {
      sum.counts[v] += single.summary.counts[v] - alloc_only.summary.counts[v];
    }
  }
  EXPECT_EQ(sum.references + alloc_only.summary.references, report.summary.references);
  for (std::size_t v = 0; v < kVerdictCount; ++v) {
    EXPECT_EQ(sum.counts[v] + alloc_only.summary.counts[v], report.summary.counts[v])
        << to_string(static_cast<Verdict>(v));
  }
}

TEST(CheckerMemoTest, MemoizedDecisionsMatchEachNodeCheckedAloneInAnAlignedEpoch) {
  expect_same_as_alone(false);
}

TEST(CheckerMemoTest, MemoizedDecisionsMatchEachNodeCheckedAloneAfterRebindingAndFrees) {
  expect_same_as_alone(true);
  const Report report = check(world(true, 30), in_epoch("after"));
  bool moved = false;
  bool other_owner = false;
  bool freed = false;
  bool replaced = false;
  for (const Finding& finding : report.findings) {
    moved = moved || (finding.owner == "p13" && finding.detail.starts_with("moved to "));
    other_owner =
        other_owner || (finding.owner == "p14" && finding.detail.starts_with("now inside"));
    freed = freed || (finding.verdict == Verdict::kDangling && finding.owner == "site15");
    replaced = replaced || (finding.verdict == Verdict::kStale &&
                            finding.detail.starts_with("owned by \"site16\" at capture, now inside "
                                                       "allocation ") &&
                            finding.owner == "site16");
  }
  EXPECT_TRUE(moved);
  EXPECT_TRUE(other_owner);
  EXPECT_TRUE(freed);
  EXPECT_TRUE(replaced);
  // Object 6 splits into lost references and stale ones (its discarded bytes now hold
  // runtime state: another owner).
  std::uint64_t lost_in_6 = 0;
  std::uint64_t stale_in_6 = 0;
  for (const Finding& finding : report.findings) {
    lost_in_6 += finding.owner == "site6" && finding.verdict == Verdict::kLost ? 1U : 0U;
    stale_in_6 += finding.owner == "site6" && finding.verdict == Verdict::kStale ? 1U : 0U;
  }
  EXPECT_GT(lost_in_6, 0U);
  EXPECT_GT(stale_in_6, 0U);
  EXPECT_EQ(lost_in_6 + stale_in_6, 28U);
}

// The hit of `address` in `index`, as comparable fields.
std::vector<std::uintptr_t> resolve(const AddressIndex& index, Address address) {
  const AddressHit hit = index.find(address);
  return {
      reinterpret_cast<std::uintptr_t>(hit.span),  reinterpret_cast<std::uintptr_t>(hit.allocation),
      static_cast<std::uintptr_t>(hit.kind),       static_cast<std::uintptr_t>(hit.graph_pool),
      static_cast<std::uintptr_t>(hit.has_rivals), index.rivals(hit).size()};
}

std::vector<Address> probes() {
  std::vector<Address> addresses = {0, kNowhere, kFar, ~Address{0}};
  for (int i = 0; i <= 17; ++i) {
    for (Address offset : {0x0UL, 0xffUL, 0x100UL, 0x10ffUL, 0x1100UL, 0x8000UL, 0xffffUL}) {
      addresses.push_back(region(i) + offset);
    }
  }
  return addresses;
}

TEST(AddressIndexShareTest, EpochWithTheSameRangesSharesCellsAndResolvesToItsOwnObjects) {
  const Epoch capture = capture_epoch();
  Epoch later = later_epoch(false);  // new generations
  later.allocations[3].label = "relabelled";
  later.spans[6].reason = "another reason";
  later.allocations[10].pool = "graph:7";  // still a graph pool
  const AddressIndex first(capture);
  const AddressIndex shared(later, first);
  const AddressIndex fresh(later);
  EXPECT_TRUE(shared.same_cells(first));
  EXPECT_TRUE(first.same_cells(shared));
  EXPECT_FALSE(fresh.same_cells(first));
  EXPECT_EQ(&shared.epoch(), &later);
  EXPECT_EQ(shared.cell_count(), first.cell_count());
  for (Address address : probes()) {
    EXPECT_EQ(resolve(shared, address), resolve(fresh, address)) << format_address(address);
    EXPECT_EQ(resolve(shared, address)[0],
              reinterpret_cast<std::uintptr_t>(shared.hit(first.find_cell(address)).span));
  }
}

TEST(AddressIndexShareTest, EpochWithOtherRangesIsBuiltAnew) {
  const Epoch capture = capture_epoch();
  const AddressIndex first(capture);
  std::vector<Epoch> variants(6, later_epoch(false));
  variants[0].spans[2].name = "renamed";
  variants[1].spans[2].kind = OwnerKind::kBuffer;
  variants[2].spans[2].size += 1;
  variants[3].allocations[10].pool = "default";  // no longer a graph pool
  variants[4].allocations[4].begin += 0x10;
  variants[5].spans.push_back({kFar, 0x10, OwnerKind::kParameter, "extra", ""});
  for (std::size_t v = 0; v < variants.size(); ++v) {
    const AddressIndex rebuilt(variants[v], first);
    const AddressIndex fresh(variants[v]);
    EXPECT_FALSE(rebuilt.same_cells(first)) << "variant " << v;
    for (Address address : probes()) {
      EXPECT_EQ(resolve(rebuilt, address), resolve(fresh, address))
          << "variant " << v << " at " << format_address(address);
    }
  }
}

TEST(DecisionMemoTest, StoresPerCellsAndStartsOverWhenTheLaterCellsChange) {
  using detail::DecisionMemo;
  DecisionMemo memo(4);
  DecisionMemo::Entry& entry = memo.at(2, 5, 6);
  EXPECT_TRUE(entry.vacant());
  EXPECT_FALSE(entry.ranges_free());
  entry.decision[1] = 300;  // decided for an address inside the graph's ranges only
  EXPECT_FALSE(memo.at(2, 5, 6).vacant());
  EXPECT_FALSE(memo.at(2, 5, 6).ranges_free());
  EXPECT_EQ(memo.at(2, 5, 6).decision[0], DecisionMemo::kUnknown);
  memo.at(2, 5, 6).decision[0] = 300;
  EXPECT_TRUE(memo.at(2, 5, 6).ranges_free());
  EXPECT_TRUE(memo.at(1, 5, 6).vacant());  // another capture cell
  EXPECT_TRUE(memo.at(2, 5, 7).vacant());  // another baseline cell replaces the entry
  EXPECT_TRUE(memo.at(2, 5, 6).vacant());
  // Cell numbers past the capture's cells (kNoCell) share one entry.
  memo.at(AddressIndex::kNoCell, 1, 1).decision = {7, 7};
  EXPECT_EQ(memo.at(4, 1, 1).decision[0], 7U);
  EXPECT_TRUE(memo.at(3, 1, 1).vacant());
}

}  // namespace
}  // namespace graphcheck
