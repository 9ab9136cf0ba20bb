// The generator of the checker's property test (checker_property_test.cc): random graphs over
// random objects whose verdicts are known by construction, in the capture epoch, a later epoch
// whose ranges changed ("after": rebinding, reuse, frees) and one that shares the capture's
// index ("wake": the same ranges, new generations). The generator is checker_property_gen.cc.
#ifndef GRAPHCHECK_TESTS_UNIT_CHECKER_PROPERTY_GEN_H_
#define GRAPHCHECK_TESTS_UNIT_CHECKER_PROPERTY_GEN_H_

#include <graphcheck/checker.h>

#include <cstdint>
#include <string>
#include <vector>

namespace graphcheck::testing_helpers {

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
  kReused,       // an unregistered allocation whose memory a parameter was loaded into
  kPartialMove,  // a parameter rebound 0x80 further: its new range still covers most words
  kFreedBlock,   // a block freed inside its segment, which stays live
};
inline constexpr int kCategories = 18;
inline constexpr Address kBase = 0x7e0000000000;
inline constexpr std::uint64_t kRegion = 0x100000;  // one object per MiB
inline constexpr std::uint64_t kAllocSize = 0x10000;
inline constexpr std::uint64_t kCopySize = 64;  // bytes each copy operand spans

struct Object {
  Category category = Category::kParam;
  Address alloc = 0;
  Address span = 0;  // inner span (kNested: the parameter inside the runtime span)
  std::uint64_t span_size = 0;
};

// One verdict per epoch checked: "capture" itself, "after" and "wake" against "capture".
struct Verdicts {
  Verdict capture = Verdict::kRegistered;
  Verdict after = Verdict::kRegistered;
  Verdict wake = Verdict::kRegistered;
};

struct Expected {
  std::uint64_t graph = 0;
  std::uint64_t node = 0;
  std::int64_t param = -1;  // -1 for operands
  std::uint32_t offset = 0;
  std::string operand;
  Verdicts verdicts;
};

inline Verdicts all(Verdict verdict) { return {verdict, verdict, verdict}; }

// A generated world: its snapshot and the expected verdicts of every reference in it, in the
// order of the graphs, nodes, parameters and offsets. The same seed gives the same world.
class World {
 public:
  explicit World(std::uint32_t seed);
  const Snapshot& snapshot() const { return snapshot_; }
  const std::vector<Expected>& expected() const { return expected_; }

 private:
  Snapshot snapshot_;
  std::vector<Expected> expected_;
};

}  // namespace graphcheck::testing_helpers

#endif  // GRAPHCHECK_TESTS_UNIT_CHECKER_PROPERTY_GEN_H_
