// Expect blocks (tests/data/README.md): the verdict counts check() reports in each epoch of
// a snapshot, stored beside the snapshot in the same JSON file. The gpu tier writes its
// recorded snapshots with these blocks, so a snapshot recorded on a GPU and committed under
// tests/data/gpu/ is a CPU regression test as it is: tests/unit/data_test.cc checks every
// file's blocks. Header-only, for tests (nlohmann-json and the core).
#ifndef GRAPHCHECK_TESTS_COMMON_EXPECT_BLOCK_H_
#define GRAPHCHECK_TESTS_COMMON_EXPECT_BLOCK_H_

#include <graphcheck/checker.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>
#include <graphcheck/verdict.h>

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace graphcheck::test_support {

/// The expect block of `snapshot` in `epoch`: {"epoch", "summary": {graphs, nodes,
/// references and every verdict's count}, "stale_allow"}. Runs check(); throws what it
/// throws (an unknown epoch).
inline nlohmann::json expect_block(const Snapshot& snapshot, const std::string& epoch) {
  CheckOptions options;
  options.epoch = epoch;
  const Report report = check(snapshot, options);
  nlohmann::json summary = {{"graphs", report.summary.graphs},
                            {"nodes", report.summary.nodes},
                            {"references", report.summary.references}};
  for (std::size_t i = 0; i < kVerdictCount; ++i) {
    const auto verdict = static_cast<Verdict>(i);
    summary[std::string(to_string(verdict))] = report.summary.count(verdict);
  }
  return {{"epoch", report.epoch}, {"summary", summary}, {"stale_allow", report.stale_allow}};
}

/// The snapshot's JSON text (to_json) with a "description", an "expect" block for its last
/// epoch and "expect_epochs" for every epoch, as the files in tests/data/ carry them.
inline std::string with_expect_blocks(const Snapshot& snapshot, std::string_view description) {
  nlohmann::json doc = nlohmann::json::parse(to_json(snapshot));
  doc["description"] = std::string(description);
  nlohmann::json epochs = nlohmann::json::array();
  for (const Epoch& epoch : snapshot.epochs) {
    epochs.push_back(expect_block(snapshot, epoch.label));
  }
  if (!epochs.empty()) {
    doc["expect"] = epochs.back();
  }
  doc["expect_epochs"] = epochs;
  return doc.dump(1) + "\n";
}

}  // namespace graphcheck::test_support

#endif  // GRAPHCHECK_TESTS_COMMON_EXPECT_BLOCK_H_
