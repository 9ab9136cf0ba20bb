// A property test: random graphs over random objects whose verdicts are known by
// construction, checked in the capture epoch and in a later one (fixed seed).
#include <graphcheck/checker.h>
#include <gtest/gtest.h>

#include <array>
#include <random>
#include <string>
#include <vector>

namespace graphcheck {
namespace {

// What an object is, and so which verdict a reference to it gets.
enum class Category {
  kParam,
  kBuffer,
  kRuntime,
  kInput,
  kGraphSpan,
  kGraphPool,
  kMemAlloc,
  kUnregistered,
  kAllowedUnregistered,
  kDangling,
  kStaleMoved,
  kStaleOwner,
  kLost,
  kAllowedLost,
  kNested,
};
constexpr int kCategories = 15;
constexpr Address kBase = 0x7e0000000000;
constexpr std::uint64_t kRegion = 0x100000;  // one object per MiB
constexpr std::uint64_t kAllocSize = 0x10000;

struct Object {
  Category category = Category::kParam;
  Address alloc = 0;
  Address span = 0;  // inner span (kNested: the parameter inside the runtime span)
  std::uint64_t span_size = 0;
};

struct Expected {
  std::uint64_t graph = 0;
  std::uint64_t node = 0;
  std::int64_t param = -1;  // -1 for operands
  std::uint32_t offset = 0;
  std::string operand;
  Verdict later = Verdict::kRegistered;    // checked in "after" against "capture"
  Verdict capture = Verdict::kRegistered;  // checked in "capture" itself
};

class World {
 public:
  explicit World(std::uint32_t seed) : rng_(seed) {
    snapshot_.epochs = {{"capture", {}, {}}, {"after", {}, {}}};
    snapshot_.allow = {"allowed.*", "unused.*"};
    for (int i = 0; i < 450; ++i) {
      add_object(static_cast<Category>(i % kCategories), static_cast<std::uint64_t>(i));
    }
    for (std::uint64_t g = 1; g <= 4; ++g) {
      add_graph(g);
    }
  }
  const Snapshot& snapshot() const { return snapshot_; }
  const std::vector<Expected>& expected() const { return expected_; }

 private:
  std::uint64_t pick(std::uint64_t below) {
    return std::uniform_int_distribution<std::uint64_t>(0, below - 1)(rng_);
  }

  void add_object(Category category, std::uint64_t i) {
    Object object;
    object.category = category;
    object.alloc = kBase + i * kRegion;
    object.span_size = 0x100 + pick(0x8000);
    object.span = object.alloc + pick(kAllocSize - object.span_size);
    objects_.push_back(object);
    Epoch& capture = snapshot_.epochs[0];
    Epoch& after = snapshot_.epochs[1];
    const std::string n = std::to_string(i);
    const Span span{object.span, object.span_size, OwnerKind::kParameter, "p." + n, ""};
    const Allocation gen1{object.alloc, kAllocSize, "default", 1, "site." + n};
    Allocation gen2 = gen1;
    gen2.generation = 2;
    const auto both = [&](const Span& s, const Allocation& a_capture, const Allocation& a_after) {
      capture.spans.push_back(s);
      after.spans.push_back(s);
      capture.allocations.push_back(a_capture);
      after.allocations.push_back(a_after);
    };
    Span changed = span;
    switch (category) {
      case Category::kParam:
        both(span, gen1, gen1);
        break;
      case Category::kBuffer:
        changed.kind = OwnerKind::kBuffer;
        both(changed, gen1, gen2);
        break;
      case Category::kRuntime:
        changed.kind = OwnerKind::kRuntime;
        both(changed, gen1, gen2);
        break;
      case Category::kInput:
        changed.kind = OwnerKind::kInput;
        both(changed, gen1, gen1);
        break;
      case Category::kGraphSpan:
        changed.kind = OwnerKind::kGraph;
        both(changed, gen1, gen2);
        break;
      case Category::kGraphPool: {
        Allocation pool1 = gen1;
        pool1.pool = "graph";
        Allocation pool2 = pool1;
        pool2.generation = 3;
        capture.allocations.push_back(pool1);
        after.allocations.push_back(pool2);
        break;
      }
      case Category::kMemAlloc:
        break;  // only the graphs' mem_alloc nodes own it
      case Category::kAllowedUnregistered:
      case Category::kAllowedLost: {
        Allocation a1 = gen1;
        a1.label = "allowed." + n;
        Allocation a2 = category == Category::kAllowedLost ? a1 : gen1;
        a2.generation = category == Category::kAllowedLost ? 2 : 1;
        capture.allocations.push_back(a1);
        after.allocations.push_back(a2);
        break;
      }
      case Category::kUnregistered:
        capture.allocations.push_back(gen1);
        after.allocations.push_back(gen1);
        break;
      case Category::kDangling:
        capture.allocations.push_back(gen1);
        break;
      case Category::kStaleMoved: {
        capture.spans.push_back(span);
        Span moved = span;
        moved.begin = object.alloc + kRegion / 2;  // only in "after": never a capture pointer
        after.spans.push_back(moved);
        capture.allocations.push_back(gen1);
        after.allocations.push_back(gen1);
        break;
      }
      case Category::kStaleOwner: {
        capture.spans.push_back(span);
        Span other = span;
        other.kind = OwnerKind::kBuffer;
        other.name = "q." + n;
        after.spans.push_back(other);
        capture.allocations.push_back(gen1);
        after.allocations.push_back(gen1);
        break;
      }
      case Category::kLost:
        capture.allocations.push_back(gen1);
        after.allocations.push_back(gen2);
        break;
      case Category::kNested: {
        const Span outer{object.alloc, kAllocSize, OwnerKind::kRuntime, "kv." + n, "KV"};
        capture.spans.push_back(outer);
        after.spans.push_back(outer);
        both(span, gen1, gen2);
        break;
      }
    }
  }

  // A pointer into a random object, with its expected verdicts.
  Address pointer(Expected& expected) {
    const Object& object = objects_[pick(objects_.size())];
    const bool in_span = object.category != Category::kNested || pick(2) == 0;
    Address address = 0;
    if (in_span && object.category != Category::kMemAlloc &&
        object.category != Category::kGraphPool && object.category != Category::kUnregistered &&
        object.category != Category::kAllowedUnregistered &&
        object.category != Category::kDangling && object.category != Category::kLost &&
        object.category != Category::kAllowedLost) {
      address = object.span + pick(object.span_size);
    } else {
      address = object.alloc + pick(kAllocSize);
      while (object.category == Category::kNested && address >= object.span &&
             address < object.span + object.span_size) {
        address = object.alloc + pick(kAllocSize);
      }
    }
    using V = Verdict;
    switch (object.category) {
      case Category::kParam:
      case Category::kBuffer:
        expected.later = expected.capture = V::kRegistered;
        break;
      case Category::kRuntime:
        expected.later = expected.capture = V::kRuntime;
        break;
      case Category::kInput:
        expected.later = expected.capture = V::kInput;
        break;
      case Category::kGraphSpan:
      case Category::kGraphPool:
      case Category::kMemAlloc:
        expected.later = expected.capture = V::kGraph;
        break;
      case Category::kUnregistered:
        expected.later = expected.capture = V::kUnregistered;
        break;
      case Category::kAllowedUnregistered:
      case Category::kAllowedLost:
        expected.later = expected.capture = V::kAllowed;
        break;
      case Category::kDangling:
        expected.later = V::kDangling;
        expected.capture = V::kUnregistered;
        break;
      case Category::kStaleMoved:
      case Category::kStaleOwner:
        expected.later = V::kStale;
        expected.capture = V::kRegistered;
        break;
      case Category::kLost:
        expected.later = V::kLost;
        expected.capture = V::kUnregistered;
        break;
      case Category::kNested:
        expected.later = expected.capture = in_span ? V::kRegistered : V::kRuntime;
        break;
    }
    return address;
  }

  // A word no capture span, allocation or mem_alloc range contains.
  Address scalar() {
    switch (pick(3)) {
      case 0:
        return pick(0x100000000ULL);  // ints, floats, sizes
      case 1:
        return kBase + pick(objects_.size()) * kRegion + kAllocSize + pick(kRegion - kAllocSize);
      default:
        return ~Address{0} - pick(0x1000);  // -1 and friends
    }
  }

  static Expected at_node(std::uint64_t graph, std::uint64_t node) {
    Expected expected;
    expected.graph = graph;
    expected.node = node;
    return expected;
  }

  static void put_word(std::vector<std::uint8_t>& bytes, std::size_t at, std::uint64_t word) {
    for (int i = 0; i < 8; ++i) {
      bytes[at + static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(word >> (8 * i));
    }
  }

  Node kernel(std::uint64_t graph, std::uint64_t id) {
    Node node;
    node.id = id;
    node.type = NodeType::kKernel;
    node.name = "kernel_" + std::to_string(pick(20));
    const std::size_t params = 1 + pick(8);
    std::uint64_t packed = 0;
    for (std::size_t p = 0; p < params; ++p) {
      static constexpr std::array<std::size_t, 6> kSizes = {4, 8, 8, 16, 44, 64};
      const std::size_t size = kSizes[pick(kSizes.size())];
      std::vector<std::uint8_t> bytes(size);
      for (std::uint8_t& byte : bytes) {
        byte = static_cast<std::uint8_t>(pick(256));  // trailing and short bytes stay random
      }
      for (std::size_t at = 0; at + 8 <= size; at += 8) {
        if (pick(2) == 0) {
          put_word(bytes, at, scalar());
          continue;
        }
        Expected expected = at_node(graph, id);
        expected.param = static_cast<std::int64_t>(p);
        expected.offset = static_cast<std::uint32_t>(at);
        put_word(bytes, at, pointer(expected));
        expected_.push_back(expected);
      }
      node.params.push_back({packed, bytes});
      packed += size;
    }
    return node;
  }

  Node copy(std::uint64_t graph, std::uint64_t id) {
    Node node;
    node.id = id;
    node.type = pick(2) == 0 ? NodeType::kMemcpy : NodeType::kOp;
    node.name = node.type == NodeType::kOp ? "aten::add" : "";
    for (const char* role : {"src", "dst"}) {
      Expected expected = at_node(graph, id);
      expected.operand = role;
      node.operands.push_back({role, pointer(expected), 64, Access::kUnknown});
      expected_.push_back(expected);
    }
    return node;
  }

  void add_graph(std::uint64_t g) {
    GraphRecord graph{g, "capture", {}};
    std::uint64_t id = 0;
    // The graph allocates every kMemAlloc object first (an alloc node's own operand is a
    // graph reference too).
    for (const Object& object : objects_) {
      if (object.category == Category::kMemAlloc) {
        Node alloc;
        alloc.id = id++;
        alloc.type = NodeType::kMemAlloc;
        alloc.operands = {{"alloc", object.alloc, kAllocSize, Access::kWrite}};
        Expected expected = at_node(g, alloc.id);
        expected.operand = "alloc";
        expected.later = expected.capture = Verdict::kGraph;
        expected_.push_back(expected);
        graph.nodes.push_back(alloc);
      }
    }
    for (int n = 0; n < 500; ++n) {
      const std::uint64_t roll = pick(20);
      if (roll == 0) {
        graph.nodes.push_back(copy(g, id++));
      } else if (roll == 1) {
        Node child;
        child.id = id++;
        child.type = NodeType::kChildGraph;
        child.bodies.emplace_back();
        for (int k = 0; k < 3; ++k) {
          child.bodies[0].push_back(kernel(g, id++));
        }
        graph.nodes.push_back(child);
      } else if (roll == 2) {
        Node host;
        host.id = id++;
        host.type = NodeType::kHost;
        graph.nodes.push_back(host);
      } else {
        graph.nodes.push_back(kernel(g, id++));
      }
    }
    snapshot_.graphs.push_back(std::move(graph));
  }

  std::mt19937_64 rng_;
  Snapshot snapshot_;
  std::vector<Object> objects_;
  std::vector<Expected> expected_;
};

void expect_report(const Report& report, const std::vector<Expected>& expected,
                   Verdict Expected::*which) {
  ASSERT_EQ(report.summary.references, expected.size());
  std::array<std::uint64_t, kVerdictCount> counts{};
  std::vector<const Expected*> findings;
  for (const Expected& e : expected) {
    ++counts[static_cast<std::size_t>(e.*which)];
    if (is_finding(e.*which)) {
      findings.push_back(&e);
    }
  }
  EXPECT_EQ(report.summary.counts, counts);
  ASSERT_EQ(report.findings.size(), findings.size());
  for (std::size_t i = 0; i < findings.size(); ++i) {
    const Expected& e = *findings[i];
    const Finding& f = report.findings[i];
    ASSERT_EQ(f.verdict, e.*which) << i;
    ASSERT_EQ(f.graph, e.graph) << i;
    ASSERT_EQ(f.node, e.node) << i;
    if (e.param >= 0) {
      ASSERT_EQ(f.param, static_cast<std::uint32_t>(e.param)) << i;
      ASSERT_EQ(f.offset, e.offset) << i;
    } else {
      ASSERT_EQ(f.operand, e.operand) << i;
    }
  }
}

TEST(CheckerPropertyTest, RandomGraphsGetTheirConstructedVerdicts) {
  const World world(20240611);
  const std::vector<Expected>& expected = world.expected();
  ASSERT_GE(expected.size(), 10000U);

  const Report later = check(world.snapshot());
  EXPECT_EQ(later.epoch, "after");
  EXPECT_EQ(later.baseline, "capture");
  expect_report(later, expected, &Expected::later);
  EXPECT_EQ(later.stale_allow, std::vector<std::string>{"unused.*"});
  EXPECT_FALSE(later.warnings.empty());  // nested runtime/parameter pairs were referenced

  CheckOptions in_capture;
  in_capture.epoch = "capture";
  expect_report(check(world.snapshot(), in_capture), expected, &Expected::capture);
}

}  // namespace
}  // namespace graphcheck
