// The generator of the checker's property test (checker_property_gen.h): objects of every
// category with their ranges in each epoch, then graphs whose references point into them.
#include "checker_property_gen.h"

#include <graphcheck/checker.h>

#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace graphcheck::testing_helpers {
namespace {

class Generator {
 public:
  explicit Generator(std::uint32_t seed) : rng_(seed) {
    snapshot_.epochs = {{"capture", {}, {}}, {"after", {}, {}}, {"wake", {}, {}}};
    snapshot_.allow = {"allowed.*", "unused.*"};
    for (int i = 0; i < 540; ++i) {
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

  // "wake" lists the capture's ranges position by position (its index shares the capture's
  // cells), with the generations a sleep and wake give: `wake_generation` for this object.
  void add_object(Category category, std::uint64_t i) {
    Object object;
    object.category = category;
    object.alloc = kBase + i * kRegion;
    object.span_size = 0x100 + pick(0x8000);
    object.span = object.alloc + pick(kAllocSize - object.span_size);
    objects_.push_back(object);
    Epoch& capture = snapshot_.epochs[0];
    Epoch& after = snapshot_.epochs[1];
    Epoch& wake = snapshot_.epochs[2];
    const std::string n = std::to_string(i);
    const Span span{object.span, object.span_size, OwnerKind::kParameter, "p." + n, ""};
    const Allocation gen1{object.alloc, kAllocSize, "default", 1, "site." + n};
    Allocation gen2 = gen1;
    gen2.generation = 2;
    const auto in_capture_and_wake = [&](const Span* s, const Allocation& a, std::uint64_t g) {
      if (s != nullptr) {
        capture.spans.push_back(*s);
        wake.spans.push_back(*s);
      }
      capture.allocations.push_back(a);
      Allocation woken = a;
      woken.generation = g;
      wake.allocations.push_back(woken);
    };
    // Most objects: the same span in every epoch, the allocation with the generation given.
    const auto steady = [&](const Span& s, const Allocation& a, std::uint64_t g) {
      in_capture_and_wake(&s, a, g);
      after.spans.push_back(s);
      Allocation later = a;
      later.generation = g;
      after.allocations.push_back(later);
    };
    Span changed = span;
    switch (category) {
      case Category::kParam:
        steady(span, gen1, 1);
        break;
      case Category::kBuffer:
        changed.kind = OwnerKind::kBuffer;
        steady(changed, gen1, 2);
        break;
      case Category::kRuntime:
        changed.kind = OwnerKind::kRuntime;
        steady(changed, gen1, 2);
        break;
      case Category::kInput:
        changed.kind = OwnerKind::kInput;
        steady(changed, gen1, 1);
        break;
      case Category::kGraphSpan:
        changed.kind = OwnerKind::kGraph;
        steady(changed, gen1, 2);
        break;
      case Category::kGraphPool: {
        Allocation pool = gen1;
        pool.pool = "graph";
        in_capture_and_wake(nullptr, pool, 3);
        pool.generation = 3;
        after.allocations.push_back(pool);
        break;
      }
      case Category::kMemAlloc:
        break;  // only the graphs' mem_alloc nodes own it
      case Category::kAllowedUnregistered:
      case Category::kAllowedLost: {
        Allocation allowed = gen1;
        allowed.label = "allowed." + n;
        const std::uint64_t g = category == Category::kAllowedLost ? 2 : 1;
        in_capture_and_wake(nullptr, allowed, g);
        allowed.generation = g;
        after.allocations.push_back(allowed);
        break;
      }
      case Category::kUnregistered:
        in_capture_and_wake(nullptr, gen1, 1);
        after.allocations.push_back(gen1);
        break;
      case Category::kDangling:
        in_capture_and_wake(nullptr, gen1, 1);  // freed only in "after"
        break;
      case Category::kStaleMoved: {
        in_capture_and_wake(&span, gen1, 1);
        Span moved = span;
        moved.begin = object.alloc + kRegion / 2;  // only in "after": never a capture pointer
        after.spans.push_back(moved);
        after.allocations.push_back(gen1);
        break;
      }
      case Category::kStaleOwner: {
        in_capture_and_wake(&span, gen1, 1);
        Span other = span;
        other.kind = OwnerKind::kBuffer;
        other.name = "q." + n;
        after.spans.push_back(other);
        after.allocations.push_back(gen1);
        break;
      }
      case Category::kLost:
        in_capture_and_wake(nullptr, gen1, 2);
        after.allocations.push_back(gen2);
        break;
      case Category::kNested: {
        const Span outer{object.alloc, kAllocSize, OwnerKind::kRuntime, "kv." + n, "KV"};
        in_capture_and_wake(&outer, gen1, 2);
        after.spans.push_back(outer);
        after.allocations.push_back(gen2);
        capture.spans.push_back(span);
        wake.spans.push_back(span);
        after.spans.push_back(span);
        break;
      }
      case Category::kReused: {
        in_capture_and_wake(nullptr, gen1, 1);
        // The weights loader reused the whole allocation for a parameter.
        after.spans.push_back({object.alloc, kAllocSize, OwnerKind::kParameter, "r." + n, ""});
        Allocation load = gen1;
        load.label = "load." + n;
        after.allocations.push_back(load);
        break;
      }
      case Category::kPartialMove: {
        in_capture_and_wake(&span, gen1, 1);
        Span moved = span;
        moved.begin += 0x80;
        after.spans.push_back(moved);
        after.allocations.push_back(gen1);
        break;
      }
      case Category::kFreedBlock: {
        Allocation segment = gen1;
        segment.label = "segment." + n;
        const Allocation block{object.span, object.span_size, "default", 1, "block." + n};
        in_capture_and_wake(nullptr, segment, 1);
        in_capture_and_wake(nullptr, block, 1);
        after.allocations.push_back(segment);
        break;
      }
    }
  }

  // Whether references to an object of this category point into its span (its block for
  // kFreedBlock); kNested chooses per reference.
  static bool uses_span(Category category) {
    switch (category) {
      case Category::kParam:
      case Category::kBuffer:
      case Category::kRuntime:
      case Category::kInput:
      case Category::kGraphSpan:
      case Category::kStaleMoved:
      case Category::kStaleOwner:
      case Category::kPartialMove:
      case Category::kFreedBlock:
        return true;
      default:
        return false;
    }
  }

  // The verdicts of an address inside the object's span (or, with `in_span` false, of its
  // allocation outside the span).
  static Verdicts verdicts_of(Category category, bool in_span) {
    using V = Verdict;
    switch (category) {
      case Category::kParam:
      case Category::kBuffer:
        return all(V::kRegistered);
      case Category::kRuntime:
        return all(V::kRuntime);
      case Category::kInput:
        return all(V::kInput);
      case Category::kGraphSpan:
      case Category::kGraphPool:
      case Category::kMemAlloc:
        return all(V::kGraph);
      case Category::kUnregistered:
        return all(V::kUnregistered);
      case Category::kAllowedUnregistered:
      case Category::kAllowedLost:
        return all(V::kAllowed);
      case Category::kDangling:
      case Category::kFreedBlock:
        return {V::kUnregistered, V::kDangling, V::kUnregistered};
      case Category::kStaleMoved:
      case Category::kStaleOwner:
      case Category::kPartialMove:
        return {V::kRegistered, V::kStale, V::kRegistered};
      case Category::kLost:
        return {V::kUnregistered, V::kLost, V::kLost};
      case Category::kNested:
        return all(in_span ? V::kRegistered : V::kRuntime);
      case Category::kReused:
        return {V::kUnregistered, V::kStale, V::kUnregistered};
    }
    return all(V::kRegistered);
  }

  // A pointer into a random object with room for `size` bytes of the same owner after it,
  // with its expected verdicts.
  Address pointer(Expected& expected, std::uint64_t size) {
    const Object& object = objects_[pick(objects_.size())];
    const bool in_span =
        uses_span(object.category) || (object.category == Category::kNested && pick(2) == 0);
    Address address = 0;
    if (in_span) {
      address = object.span + pick(object.span_size - size + 1);
    } else {
      address = object.alloc + pick(kAllocSize - size + 1);
      // kNested: outside the inner span, with the whole extent outside it.
      while (object.category == Category::kNested && address < object.span + object.span_size &&
             address + size > object.span) {
        address = object.alloc + pick(kAllocSize - size + 1);
      }
    }
    expected.verdicts = verdicts_of(object.category, in_span);
    return address;
  }

  // One past the end of a random object's span (a span ends there and none begins), with
  // the span's verdicts; 0 when the object has no span.
  Address end_pointer(Expected& expected) {
    const Object& object = objects_[pick(objects_.size())];
    if (!uses_span(object.category) || object.category == Category::kFreedBlock) {
      return 0;
    }
    expected.verdicts = verdicts_of(object.category, true);
    return object.span + object.span_size;
  }

  // A word no capture span, allocation or mem_alloc range contains, and no span's end.
  Address scalar() {
    switch (pick(3)) {
      case 0:
        return pick(0x100000000ULL);  // ints, floats, sizes
      case 1:
        return kBase + pick(objects_.size()) * kRegion + kAllocSize + 1 +
               pick(kRegion - kAllocSize - 1);
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
        const std::uint64_t roll = pick(8);
        Expected expected = at_node(graph, id);
        expected.param = static_cast<std::int64_t>(p);
        expected.offset = static_cast<std::uint32_t>(at);
        Address word = 0;
        if (roll == 0) {
          word = end_pointer(expected);  // a begin/end pair's end
        } else if (roll < 4) {
          word = pointer(expected, 1);
        }
        if (word == 0) {
          put_word(bytes, at, scalar());
          continue;
        }
        put_word(bytes, at, word);
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
      node.operands.push_back({role, pointer(expected, kCopySize), kCopySize, Access::kUnknown});
      expected_.push_back(expected);
    }
    return node;
  }

  // An op reading across the end of a parameter into the allocation behind it: the worst
  // part (the unregistered bytes, or nothing at all past the allocation's end) wins.
  Node spill(std::uint64_t graph, std::uint64_t id) {
    Node node;
    node.id = id;
    node.type = NodeType::kOp;
    node.name = "aten::mm";
    const Object* object = nullptr;
    while (object == nullptr || object->category != Category::kParam) {
      object = &objects_[pick(objects_.size())];
    }
    const Address end = object->span + object->span_size;
    Expected expected = at_node(graph, id);
    expected.operand = "reads[0]";
    expected.verdicts =
        all(end + 32 <= object->alloc + kAllocSize ? Verdict::kUnregistered : Verdict::kDangling);
    node.operands.push_back({"reads[0]", end - 32, 64, Access::kRead});
    expected_.push_back(expected);
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
        expected.verdicts = all(Verdict::kGraph);
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
      } else if (roll == 3) {
        graph.nodes.push_back(spill(g, id++));
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

}  // namespace

World::World(std::uint32_t seed) {
  const Generator generator(seed);
  snapshot_ = generator.snapshot();
  expected_ = generator.expected();
}

}  // namespace graphcheck::testing_helpers
