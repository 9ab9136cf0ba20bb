#include "cupti/checker_session.h"

#include <graphcheck/config.h>
#include <graphcheck/error.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <utility>

namespace graphcheck::cupti {
namespace {

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream stream(path, std::ios::binary | std::ios::trunc);
  stream << text;
  if (!stream) {
    throw Error("cannot write " + path.string() + "; check that the output folder is writable");
  }
}

bool same_state(const Epoch& left, const Epoch& right) {
  return left.spans == right.spans && left.allocations == right.allocations;
}

}  // namespace

CheckerSession::CheckerSession(SessionOptions options, SessionSources sources)
    : options_(std::move(options)), sources_(std::move(sources)) {}

void CheckerSession::set_spans(std::vector<Span> spans) {
  const std::scoped_lock lock(mutex_);
  spans_ = std::move(spans);
}

void CheckerSession::add_allocations(std::function<std::vector<Allocation>()> source) {
  const std::scoped_lock lock(mutex_);
  extra_allocations_.push_back(std::move(source));
}

std::string CheckerSession::note_graph_capture(std::uint64_t graph_id) {
  const std::scoped_lock lock(mutex_);
  Epoch current = current_epoch_locked("");
  // Many graphs captured in a row (one per batch size) share one capture epoch as long as
  // nothing was allocated, freed or registered in between.
  if (last_capture_.has_value() && same_state(epochs_[*last_capture_], current)) {
    graph_epochs_[graph_id] = epochs_[*last_capture_].label;
    return epochs_[*last_capture_].label;
  }
  current.label = unique_label_locked("capture");
  epochs_.push_back(std::move(current));
  last_capture_ = epochs_.size() - 1;
  graph_epochs_[graph_id] = epochs_.back().label;
  return epochs_.back().label;
}

std::string CheckerSession::record_epoch(std::string_view label) {
  const std::scoped_lock lock(mutex_);
  epochs_.push_back(current_epoch_locked(unique_label_locked(label)));
  return epochs_.back().label;
}

Snapshot CheckerSession::snapshot(std::string_view current_label) {
  const std::scoped_lock lock(mutex_);
  return snapshot_locked(current_label);
}

Report CheckerSession::check_now(std::string_view label) {
  const std::scoped_lock lock(mutex_);
  const Snapshot snapshot = snapshot_locked(label);
  CheckOptions check_options;
  check_options.epoch = snapshot.epochs.back().label;
  Report report = check(snapshot, check_options);
  if (report.has_findings()) {
    log("graphcheck: findings in epoch '" + report.epoch + "'\n" + to_text(report));
  }
  emit_locked(snapshot, report, label);
  return report;
}

Status CheckerSession::on_graph_launch(std::uint64_t exec) noexcept {
  if (options_.launch_check == LaunchCheck::kOff) {
    return {};
  }
  try {
    const std::scoped_lock lock(mutex_);
    std::optional<GraphRecord> record =
        sources_.graph_for_exec ? sources_.graph_for_exec(exec) : std::nullopt;
    if (!record.has_value()) {
      return {};
    }
    Snapshot snapshot;
    snapshot.producer = {"cupti", "graphcheck " GRAPHCHECK_VERSION_STRING};
    snapshot.allow = options_.allow;
    GraphRecord graph = with_epoch_locked(std::move(*record));
    const auto capture = std::find_if(epochs_.begin(), epochs_.end(), [&](const Epoch& epoch) {
      return epoch.label == graph.epoch;
    });
    if (capture != epochs_.end()) {
      snapshot.epochs.push_back(*capture);
    }
    std::string launch_label = graph.epoch == "launch" ? "launch.1" : "launch";
    snapshot.epochs.push_back(current_epoch_locked(launch_label));
    if (capture == epochs_.end()) {
      graph.epoch = launch_label;  // never noted at capture: references found in this state
    }
    snapshot.graphs.push_back(std::move(graph));
    CheckOptions check_options;
    check_options.epoch = launch_label;
    const Report report = check(snapshot, check_options);
    ++launches_checked_;
    if (!report.has_findings()) {
      return {};
    }
    ++launches_with_findings_;
    log("graphcheck: findings at launch of graph " + std::to_string(snapshot.graphs[0].id) +
        " (exec " + format_address(exec) + ")\n" + to_text(report));
    emit_locked(snapshot, report, "launch");
    if (options_.policy == FindingPolicy::kWarn) {
      return {};
    }
    switch (options_.error_action) {
      case ErrorAction::kExitProcess:
        std::fflush(nullptr);
        std::_Exit(1);
      case ErrorAction::kAbort:
        std::abort();
      case ErrorAction::kReturnStatus:
        break;
    }
    return Status::error("graphcheck: " + std::to_string(report.findings.size()) +
                         " finding(s) at launch of graph " + std::to_string(snapshot.graphs[0].id) +
                         " under policy error");
  } catch (const std::exception& error) {
    return Status::error(std::string("graphcheck: launch check failed: ") + error.what());
  } catch (...) {
    return Status::error("graphcheck: launch check failed with an unknown exception");
  }
}

std::uint64_t CheckerSession::launches_checked() const {
  const std::scoped_lock lock(mutex_);
  return launches_checked_;
}

std::uint64_t CheckerSession::launches_with_findings() const {
  const std::scoped_lock lock(mutex_);
  return launches_with_findings_;
}

Epoch CheckerSession::current_epoch_locked(std::string label) const {
  Epoch epoch;
  epoch.label = std::move(label);
  // Zero-sized entries (empty tensors) cover no address and break the snapshot invariant.
  std::copy_if(spans_.begin(), spans_.end(), std::back_inserter(epoch.spans),
               [](const Span& span) { return span.size > 0; });
  auto add = [&](const std::vector<Allocation>& allocations) {
    std::copy_if(allocations.begin(), allocations.end(), std::back_inserter(epoch.allocations),
                 [](const Allocation& allocation) { return allocation.size > 0; });
  };
  if (sources_.allocations) {
    add(sources_.allocations());
  }
  for (const auto& source : extra_allocations_) {
    add(source());
  }
  std::stable_sort(epoch.allocations.begin(), epoch.allocations.end(),
                   [](const Allocation& a, const Allocation& b) { return a.begin < b.begin; });
  return epoch;
}

std::string CheckerSession::unique_label_locked(std::string_view label) const {
  auto taken = [&](const std::string& candidate) {
    return std::any_of(epochs_.begin(), epochs_.end(),
                       [&](const Epoch& epoch) { return epoch.label == candidate; });
  };
  std::string candidate(label);
  for (int suffix = 1; taken(candidate); ++suffix) {
    candidate = std::string(label) + "." + std::to_string(suffix);
  }
  return candidate;
}

GraphRecord CheckerSession::with_epoch_locked(GraphRecord graph) const {
  if (const auto it = graph_epochs_.find(graph.id); it != graph_epochs_.end()) {
    graph.epoch = it->second;
  }
  return graph;
}

Snapshot CheckerSession::snapshot_locked(std::string_view current_label) const {
  Snapshot snapshot;
  snapshot.producer = {"cupti", "graphcheck " GRAPHCHECK_VERSION_STRING};
  snapshot.allow = options_.allow;
  snapshot.epochs = epochs_;
  snapshot.epochs.push_back(current_epoch_locked(unique_label_locked(current_label)));
  const std::string& current = snapshot.epochs.back().label;
  if (sources_.graphs) {
    for (GraphRecord& graph : sources_.graphs()) {
      graph = with_epoch_locked(std::move(graph));
      // A graph never noted at capture (graphcheck attached late) is found in the current
      // state: unregistered and dangling show, stale and lost cannot.
      if (snapshot.find_epoch(graph.epoch) == nullptr) {
        graph.epoch = current;
      }
      snapshot.graphs.push_back(std::move(graph));
    }
  }
  return snapshot;
}

void CheckerSession::emit_locked(const Snapshot& snapshot, const Report& report,
                                 std::string_view tag) {
  if (options_.out_dir.empty()) {
    return;
  }
  std::string unique(tag);
  for (int suffix = 1; used_tags_.count(unique) != 0; ++suffix) {
    unique = std::string(tag) + "." + std::to_string(suffix);
  }
  used_tags_.insert(unique);
  const std::string stem = options_.file_prefix + "-" + unique;
  write_snapshot(snapshot, options_.out_dir / (stem + "-snapshot.json"));
  write_text(options_.out_dir / (stem + "-report.json"), to_json(report));
  write_text(options_.out_dir / (stem + "-report.txt"), to_text(report));
}

void CheckerSession::log(std::string_view text) const {
  if (options_.log) {
    options_.log(text);
    return;
  }
  std::fwrite(text.data(), 1, text.size(), stderr);
  if (!text.empty() && text.back() != '\n') {
    std::fputc('\n', stderr);
  }
}

}  // namespace graphcheck::cupti
