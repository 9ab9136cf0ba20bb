// The CPU graph-replay story as a reusable helper: capture a forward, sleep and wake at both
// levels, reload in place and by rebinding; after each step replay the captured graph, compare
// its output with an eager forward and check the capture against the step's epoch.
#ifndef GRAPHCHECK_TORCH_GRAPH_REPLAY_H_
#define GRAPHCHECK_TORCH_GRAPH_REPLAY_H_

#include <ATen/core/Tensor.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>
#include <graphcheck/torch/reference_model.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace graphcheck::libtorch {

class Registry;
class WeightsArena;

/// @brief A user's model as the replay drives it. Every callback runs on the calling thread.
struct ReplayModel {
  /// The model; its parameters and buffers are the registered spans (re-read at each epoch).
  std::shared_ptr<torch::nn::Module> module;
  /// One forward pass on fixed inputs; must be deterministic for equal weights.
  std::function<at::Tensor()> forward;
  /// A weight update written into the existing storages (`copy_`), then post-processing.
  /// Its values should differ from the loaded ones (as an RL update's do), so that a graph
  /// reading memory the update did not reach shows in the outputs.
  std::function<void()> reload_in_place;
  /// A weight update that assigns fresh tensors to the parameters, then post-processing. Its
  /// values should differ from those the storages hold after `reload_in_place`.
  std::function<void()> reload_by_rebinding;
  /// Declares runtime state (KV caches, workspaces) in the registry; may be empty.
  std::function<void(Registry&)> declare_runtime;
  /// Static inputs of the graph (kept alive by this struct), declared in the capture window.
  std::vector<std::pair<std::string, at::Tensor>> inputs;
};

/// @brief Builds the model; called once with the arena the model must load into (inside a
/// `WeightsArena::LoadScope`, as an engine's weights pool).
using ReplayFactory = std::function<ReplayModel(WeightsArena& arena)>;

/// @brief Options of `run_graph_replay`.
struct ReplayOptions {
  std::size_t arena_capacity = std::size_t{1} << 30;  ///< address space reserved, bytes
  std::vector<std::string> allow;                     ///< allowlist globs for every check
};

/// @brief One step of the story.
struct ReplayStep {
  std::string label;  ///< the epoch label
  /// The replayed graph's output == an eager forward of the model as it now is (`at::equal`:
  /// same shape and values; NaN never equals NaN).
  bool outputs_equal = false;
  double max_abs_diff = 0.0;  ///< NaN when either output has NaN where the other does not
  Report report;              ///< the capture checked in this step's epoch
};

/// @brief The steps and the snapshot holding the capture and every epoch.
struct ReplayResult {
  std::vector<ReplayStep> steps;
  Snapshot snapshot;
};

/// @brief Epoch labels in step order: capture, after_wake_l1, after_wake_l2_reload,
/// after_reload_rebind.
[[nodiscard]] const std::vector<std::string>& replay_step_labels();

/// @brief Runs the story. `capture`: a warm-up forward, then a forward inside a
/// `CaptureWindow` (with the arena, keeping the ops: `CaptureRecord::replayable`).
/// `after_wake_l1`: sleep level 1 and wake. `after_wake_l2_reload`: sleep level 2, wake,
/// `reload_in_place` inside a load scope. `after_reload_rebind`: `reload_by_rebinding` inside a
/// load scope. After each step (capture included) the captured graph is replayed
/// (`CapturedGraph::replay`, which never calls the module) and its output, read from the
/// captured forward's output tensor, is compared with an eager `forward`; then the capture is
/// checked in the step's epoch (baseline: the capture epoch). A replay error (a pre-existing
/// storage outside the arena freed) propagates as `graphcheck::Error`.
/// @throws graphcheck::Error for setup failures (a factory without forward, arena misuse).
[[nodiscard]] ReplayResult run_graph_replay(const ReplayFactory& factory,
                                            const ReplayOptions& options = {});

/// @brief A factory for the reference model: `tokens` input ids and positions from `seed`;
/// `reload_in_place` loads a second checkpoint and `reload_by_rebinding` a third (seeds
/// `seed + 1000` and `seed + 2000`), two weight updates with different random values.
[[nodiscard]] ReplayFactory reference_replay_factory(const ReferenceConfig& config,
                                                     std::uint64_t seed, std::int64_t tokens);

}  // namespace graphcheck::libtorch

#endif  // GRAPHCHECK_TORCH_GRAPH_REPLAY_H_
