// check(): one check of a snapshot, with indexes built for it alone. The engine is in
// detail/check_engine.cc; CheckSession (check_session.cc) runs the same engine with indexes
// and per-graph tables kept between checks.
#include <graphcheck/checker.h>

#include <string>
#include <vector>

#include "graphcheck/detail/check_engine.h"
#include "graphcheck/detail/epoch_indexes.h"

namespace graphcheck {

Report check(const Snapshot& snapshot, const CheckOptions& options) {
  std::vector<const Epoch*> epochs;
  epochs.reserve(snapshot.epochs.size());
  for (const Epoch& epoch : snapshot.epochs) {
    epochs.push_back(&epoch);
  }
  detail::EpochIndexes indexes(std::move(epochs));
  detail::CheckInput input;
  input.indexes = &indexes;
  input.graphs.reserve(snapshot.graphs.size());
  for (const GraphRecord& graph : snapshot.graphs) {
    input.graphs.push_back(&graph);
  }
  input.globs = snapshot.allow;
  input.globs.insert(input.globs.end(), options.allow.begin(), options.allow.end());
  input.options = &options;
  return detail::run_check(input);
}

}  // namespace graphcheck
