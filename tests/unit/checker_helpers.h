// Small builders shared by the checker's unit tests: spans, allocations, kernel words and a
// one-reference snapshot.
#ifndef GRAPHCHECK_TESTS_UNIT_CHECKER_HELPERS_H_
#define GRAPHCHECK_TESTS_UNIT_CHECKER_HELPERS_H_

#include <graphcheck/checker.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace graphcheck::testing_helpers {

inline Span make_span(Address begin, std::uint64_t size, OwnerKind kind, std::string name) {
  return {begin, size, kind, std::move(name), ""};
}

inline Allocation make_alloc(Address begin, std::uint64_t size, std::uint64_t generation,
                             std::string label = "", std::string pool = "default") {
  return {begin, size, std::move(pool), generation, std::move(label)};
}

// The 8 little-endian bytes of `word`.
inline std::vector<std::uint8_t> le_word(std::uint64_t word) {
  std::vector<std::uint8_t> bytes(8);
  for (std::size_t i = 0; i < 8; ++i) {
    bytes[i] = static_cast<std::uint8_t>(word >> (8 * i));
  }
  return bytes;
}

// One kernel node "gemm" with two arguments: a scalar, then 16 bytes (a scalar, `address`).
inline Node kernel_using(std::uint64_t id, Address address) {
  Node node;
  node.id = id;
  node.type = NodeType::kKernel;
  node.name = "gemm";
  std::vector<std::uint8_t> bytes = le_word(64);
  const std::vector<std::uint8_t> pointer = le_word(address);
  bytes.insert(bytes.end(), pointer.begin(), pointer.end());
  node.params = {{0, le_word(3)}, {8, bytes}};
  return node;
}

// A snapshot with one graph of one kernel using `address`; the capture epoch holds `spans`
// and `allocs`; `later` epochs follow it.
inline Snapshot one_reference(Address address, std::vector<Span> spans,
                              std::vector<Allocation> allocs, std::vector<Epoch> later = {}) {
  Snapshot snapshot;
  snapshot.epochs.push_back({"capture", std::move(spans), std::move(allocs)});
  for (Epoch& epoch : later) {
    snapshot.epochs.push_back(std::move(epoch));
  }
  snapshot.graphs.push_back({1, "capture", {kernel_using(0, address)}});
  return snapshot;
}

// The verdict of a report's single reference.
inline Verdict only_verdict(const Report& report) {
  EXPECT_EQ(report.summary.references, 1U);
  for (std::size_t v = 0; v < kVerdictCount; ++v) {
    if (report.summary.counts[v] == 1) {
      return static_cast<Verdict>(v);
    }
  }
  ADD_FAILURE() << "no verdict counted";
  return Verdict::kRegistered;
}

}  // namespace graphcheck::testing_helpers

#endif  // GRAPHCHECK_TESTS_UNIT_CHECKER_HELPERS_H_
