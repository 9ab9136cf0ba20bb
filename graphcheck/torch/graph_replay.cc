#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/torch/aten_capture.h>
#include <graphcheck/torch/graph_replay.h>
#include <graphcheck/torch/registry.h>
#include <graphcheck/torch/weights_arena.h>

#include <cmath>
#include <limits>

namespace graphcheck::libtorch {
namespace {

// Checkpoint seeds of the reference factory's weight updates, offsets from the model's seed.
constexpr std::uint64_t kFirstUpdateSeed = 1000;
constexpr std::uint64_t kSecondUpdateSeed = 2000;

// Re-read at every epoch: a user's reload may re-register tensors (new TensorImpls).
Registry make_registry(const ReplayModel& model) {
  Registry registry;
  registry.add_module(*model.module);
  if (model.declare_runtime) {
    model.declare_runtime(registry);
  }
  return registry;
}

void compare(const at::Tensor& before, const at::Tensor& after, ReplayStep& step) {
  step.outputs_equal = before.sizes() == after.sizes() && at::equal(before, after);
  if (before.sizes() != after.sizes()) {
    step.max_abs_diff = std::numeric_limits<double>::infinity();
    return;
  }
  const at::Tensor diff = (before.to(at::kDouble) - after.to(at::kDouble)).abs();
  step.max_abs_diff = diff.numel() == 0 ? 0.0 : diff.max().item<double>();
}

void check_step(ReplayResult& result, ReplayStep& step, const ReplayOptions& options) {
  CheckOptions check_options;
  check_options.epoch = step.label;
  check_options.allow = options.allow;
  step.report = check(result.snapshot, check_options);
}

void validate(const ReplayModel& model) {
  if (!model.module || !model.forward || !model.reload_in_place || !model.reload_by_rebinding) {
    throw Error(
        "run_graph_replay: the factory returned a ReplayModel without module, forward, "
        "reload_in_place or reload_by_rebinding; set all four");
  }
}

}  // namespace

const std::vector<std::string>& replay_step_labels() {
  static const std::vector<std::string> labels = {"capture", "after_wake_l1",
                                                  "after_wake_l2_reload", "after_reload_rebind"};
  return labels;
}

ReplayResult run_graph_replay(const ReplayFactory& factory, const ReplayOptions& options) {
  WeightsArena arena(options.arena_capacity);
  ReplayModel model = factory(arena);
  validate(model);
  const auto& labels = replay_step_labels();
  ReplayResult result;

  // Capture: a warm-up forward (as before a CUDA graph capture), then the captured forward.
  // Its output shares the graph's output storage: the graph's static output, which every
  // replay overwrites.
  static_cast<void>(model.forward());
  CaptureRecord record;
  at::Tensor static_output;
  {
    CaptureOptions capture_options;
    capture_options.arena = &arena;
    CaptureWindow window(capture_options);
    for (const auto& [name, tensor] : model.inputs) {
      window.declare_input(name, tensor);
    }
    static_output = model.forward();
    record = window.finish();
  }
  CapturedGraph& graph = *record.replayable;
  result.snapshot = make_snapshot(record, {});

  // Each step changes memory (not at capture), replays the graph, runs the model eagerly as
  // it now is, compares the two and records the step's epoch.
  const auto run_step = [&](const std::string& label, const std::function<void()>& change) {
    if (change) {
      change();
    }
    graph.replay();
    const at::Tensor replayed = static_output.clone();
    const at::Tensor eager = model.forward();
    result.snapshot.epochs.push_back(label == labels[0]
                                         ? make_capture_epoch(make_registry(model), &arena, record)
                                         : make_epoch(label, make_registry(model), &arena, record));
    ReplayStep step;
    step.label = label;
    compare(replayed, eager, step);
    check_step(result, step, options);
    result.steps.push_back(std::move(step));
  };
  run_step(labels[0], nullptr);
  run_step(labels[1], [&] {
    arena.sleep(SleepLevel::kLevel1, make_registry(model));
    arena.wake_up();
  });
  run_step(labels[2], [&] {
    arena.sleep(SleepLevel::kLevel2, make_registry(model));
    arena.wake_up();
    const WeightsArena::LoadScope scope(arena);
    model.reload_in_place();
  });
  run_step(labels[3], [&] {
    const WeightsArena::LoadScope scope(arena);
    model.reload_by_rebinding();
  });
  result.snapshot.allow = options.allow;
  return result;
}

ReplayFactory reference_replay_factory(const ReferenceConfig& config, std::uint64_t seed,
                                       std::int64_t tokens) {
  return [config, seed, tokens](WeightsArena& arena) {
    auto model = build_reference_model(config, seed, &arena);
    auto generator = at::make_generator<at::CPUGeneratorImpl>(seed + 1);
    const at::Tensor ids = at::randint(config.vocab, {tokens}, generator, at::kLong);
    const at::Tensor positions = at::arange(tokens, at::kLong);
    // Two weight updates, as an RL trainer pushes them: values differ from the loaded ones
    // and from each other, so a graph that reads stale storage shows in the outputs.
    const Checkpoint first_update = make_checkpoint(*model, seed + kFirstUpdateSeed);
    const Checkpoint second_update = make_checkpoint(*model, seed + kSecondUpdateSeed);
    ReplayModel replay;
    replay.module = model;
    replay.forward = [model, ids, positions] { return model->forward(ids, positions); };
    replay.reload_in_place = [model, first_update] {
      model->load_weights_in_place(first_update);
      model->process_weights_after_loading();
    };
    replay.reload_by_rebinding = [model, second_update] {
      model->load_weights_by_rebinding(second_update);
      model->process_weights_after_loading();
    };
    replay.declare_runtime = [model](Registry& registry) {
      model->declare_runtime_state(registry);
    };
    replay.inputs = {{"input_ids", ids}, {"positions", positions}};
    return replay;
  };
}

}  // namespace graphcheck::libtorch
