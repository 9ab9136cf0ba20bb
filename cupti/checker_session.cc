#include "cupti/checker_session.h"

#include <graphcheck/config.h>
#include <graphcheck/error.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iterator>
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

// The generation of the allocation of `table` (sorted by begin; the tracker's entries are
// disjoint: a new one replaces what it overlaps) holding `address`, else 1 (memory the table
// never saw: allocated before the subscription, or unmapped).
std::uint64_t inherited_generation(const std::vector<Allocation>& table, Address address) {
  auto it = std::upper_bound(table.begin(), table.end(), address,
                             [](Address a, const Allocation& b) { return a < b.begin; });
  if (it == table.begin()) {
    return 1;
  }
  --it;
  return address - it->begin < it->size ? it->generation : 1;
}

}  // namespace

CheckerSession::CheckerSession(SessionOptions options, SessionSources sources)
    : options_(std::move(options)), sources_(std::move(sources)) {}

void CheckerSession::set_spans(std::vector<Span> spans) {
  const Lock lock(*this);
  spans_ = std::move(spans);
}

void CheckerSession::add_allocations(std::function<std::vector<Allocation>()> source,
                                     SourceGenerations generations) {
  const Lock lock(*this);
  extra_allocations_.push_back(ExtraSource{std::move(source), generations});
}

CheckerSession::Gathered CheckerSession::gather(bool graphs) const {
  std::vector<ExtraSource> extra;
  {
    const Lock lock(*this);
    extra = extra_allocations_;
  }
  Gathered gathered;
  auto add = [&](const std::vector<Allocation>& allocations) {
    // Zero-sized entries (empty tensors) cover no address and break the snapshot invariant.
    std::copy_if(allocations.begin(), allocations.end(), std::back_inserter(gathered.allocations),
                 [](const Allocation& allocation) { return allocation.size > 0; });
  };
  std::vector<Allocation> table;
  if (sources_.allocations) {
    table = sources_.allocations();
    add(table);
  }
  std::sort(table.begin(), table.end(),
            [](const Allocation& a, const Allocation& b) { return a.begin < b.begin; });
  for (const ExtraSource& source : extra) {
    std::vector<Allocation> allocations = source.source();
    if (source.generations == SourceGenerations::kInherit) {
      for (Allocation& allocation : allocations) {
        allocation.generation = inherited_generation(table, allocation.begin);
      }
    }
    add(allocations);
  }
  std::stable_sort(gathered.allocations.begin(), gathered.allocations.end(),
                   [](const Allocation& a, const Allocation& b) { return a.begin < b.begin; });
  if (graphs && sources_.graphs) {
    gathered.graphs = sources_.graphs();
    if (sources_.graph_warnings) {
      for (const GraphRecord& graph : gathered.graphs) {
        gathered.warnings[graph.id] = sources_.graph_warnings(graph.id);
      }
    }
  }
  return gathered;
}

std::string CheckerSession::note_graph_capture(std::uint64_t graph_id) {
  const Gathered gathered = gather(false);
  const Lock lock(*this);
  Epoch current = current_epoch_locked("", gathered);
  // Many graphs captured in a row (one per batch size) share one capture epoch as long as
  // nothing was allocated, freed or registered in between.
  if (last_capture_.has_value() && same_state(epochs_[*last_capture_], current)) {
    graph_epochs_[graph_id] = epochs_[*last_capture_].label;
    return epochs_[*last_capture_].label;
  }
  current.label = take_label_locked("capture");
  epochs_.push_back(std::move(current));
  last_capture_ = epochs_.size() - 1;
  graph_epochs_[graph_id] = epochs_.back().label;
  return epochs_.back().label;
}

std::string CheckerSession::record_epoch(std::string_view label) {
  const Gathered gathered = gather(false);
  const Lock lock(*this);
  epochs_.push_back(current_epoch_locked(take_label_locked(label), gathered));
  return epochs_.back().label;
}

Snapshot CheckerSession::snapshot(std::string_view current_label) {
  Gathered gathered = gather(true);
  const Lock lock(*this);
  return snapshot_locked(current_label, gathered);
}

Report CheckerSession::check_now(std::string_view label) {
  Gathered gathered = gather(true);
  const Lock lock(*this);
  for (auto& [exec, last] : launch_findings_) {
    log_repeats_locked(exec, last);
  }
  const std::shared_ptr<const Report> report =
      with_destroyed_locked(check_now_locked(unique_label_locked(label), gathered));
  // Nodes the backend could not read are worth a look even without findings.
  const bool unchecked =
      std::any_of(report->warnings.begin(), report->warnings.end(),
                  [](const std::string& line) { return line.starts_with("not checked: "); });
  if (report->has_findings() || unchecked) {
    const std::string what = report->has_findings() ? "findings" : "nodes not checked";
    log("graphcheck: " + what + " in epoch '" + report->epoch + "'\n" + to_text(*report));
  } else if (report->summary.graphs == 0) {
    log("graphcheck: " + std::string(kNothingChecked.substr(6)) + "\n");
  }
  if (!options_.out_dir.empty()) {
    // Files that cannot be written (a full disk, a folder removed meanwhile) must not lose
    // the report: the exit check's status under GRAPHCHECK_POLICY=error comes from it.
    try {
      emit_locked(now_session_.snapshot(), *report, label);
    } catch (const std::exception& error) {
      log("graphcheck: the files of epoch '" + report->epoch + "' were not written to " +
          options_.out_dir.string() + ": " + error.what() + "\n");
    }
  }
  return *report;
}

// The session holds what snapshot_locked(label) would: the recorded epochs (each put once:
// recorded epochs never change), the current state last under `label`, every graph in the
// sources' order.
std::shared_ptr<const Report> CheckerSession::check_now_locked(const std::string& label,
                                                               Gathered& gathered) {
  graphcheck::CheckSession& session = now_session_;
  if (now_epochs_ == 0) {
    session.set_producer({"cupti", "graphcheck " GRAPHCHECK_VERSION_STRING});
    session.set_allow(options_.allow);
  }
  if (!now_label_.empty() && now_label_ != label) {
    session.remove_epoch(now_label_);  // the last check's state, under another label
  }
  for (; now_epochs_ < epochs_.size(); ++now_epochs_) {
    session.put_epoch(epochs_[now_epochs_]);
  }
  session.put_epoch(current_epoch_locked(label, gathered), graphcheck::EpochPlace::kLast);
  now_label_ = label;
  std::vector<std::uint64_t> ids;
  if (sources_.graphs) {
    std::vector<GraphRecord>& graphs = gathered.graphs;
    for (GraphRecord& graph : graphs) {
      graph = with_epoch_locked(std::move(graph));
      // A graph never noted at capture (graphcheck attached late) is found in the current
      // state: unregistered and dangling show, stale and lost cannot.
      if (session.find_epoch(graph.epoch) == nullptr) {
        graph.epoch = label;
      }
      ids.push_back(graph.id);
    }
    // Graphs gone from the sources leave; the rest must keep the sources' order.
    for (const std::uint64_t id : session.graph_ids()) {
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) {
        session.remove_graph(id);
      }
    }
    std::vector<std::uint64_t> kept = session.graph_ids();
    if (!std::equal(kept.begin(), kept.end(), ids.begin(),
                    ids.begin() + static_cast<std::ptrdiff_t>(std::min(kept.size(), ids.size())))) {
      for (const std::uint64_t id : kept) {
        session.remove_graph(id);
      }
    }
    for (GraphRecord& graph : graphs) {
      session.put_graph(std::move(graph));
    }
  } else {
    for (const std::uint64_t id : session.graph_ids()) {
      session.remove_graph(id);
    }
  }
  graphcheck::CheckOptions check_options;
  check_options.epoch = label;
  std::vector<std::string> lines;
  for (const std::uint64_t id : session.graph_ids()) {
    std::vector<std::string>& more = gathered.warnings[id];
    lines.insert(lines.end(), std::make_move_iterator(more.begin()),
                 std::make_move_iterator(more.end()));
  }
  return with_warnings(session.check(check_options), lines);
}

std::shared_ptr<const Report> CheckerSession::with_warnings(std::shared_ptr<const Report> report,
                                                            const std::vector<std::string>& lines) {
  if (lines.empty()) {
    return report;
  }
  auto copy = std::make_shared<Report>(*report);
  copy->warnings.insert(copy->warnings.end(), lines.begin(), lines.end());
  return copy;
}

// The launched graph's record (`source`, from the sources before locking), labelled with
// its capture epoch: the same object as at the last launch of `exec` while its source
// record and label are unchanged.
std::shared_ptr<const GraphRecord> CheckerSession::launch_graph_locked(
    std::uint64_t exec, const std::shared_ptr<const GraphRecord>& source) {
  if (!source) {
    return nullptr;
  }
  if (sources_.shared_graph_for_exec) {
    LaunchGraph& known = launch_graphs_[exec];
    const auto label = graph_epochs_.find(source->id);
    const std::string& epoch = label != graph_epochs_.end() ? label->second : source->epoch;
    if (known.source != source || !known.labelled || known.labelled->epoch != epoch) {
      known.source = source;
      known.labelled = std::make_shared<const GraphRecord>(with_epoch_locked(*source));
    }
    return known.labelled;
  }
  return std::make_shared<const GraphRecord>(with_epoch_locked(*source));
}

Status CheckerSession::on_graph_launch(std::uint64_t exec) noexcept {
  if (options_.launch_check == LaunchCheck::kOff) {
    return {};
  }
  try {
    // The sources first, without the lock (cupti/lock_order.h).
    std::shared_ptr<const GraphRecord> source;
    if (sources_.shared_graph_for_exec) {
      source = sources_.shared_graph_for_exec(exec);
    } else if (sources_.graph_for_exec) {
      if (std::optional<GraphRecord> record = sources_.graph_for_exec(exec)) {
        source = std::make_shared<const GraphRecord>(std::move(*record));
      }
    }
    if (!source) {
      return {};
    }
    const Gathered gathered = gather(false);
    const std::vector<std::string> warnings =
        sources_.graph_warnings ? sources_.graph_warnings(source->id) : std::vector<std::string>{};
    const Lock lock(*this);
    std::shared_ptr<const GraphRecord> graph = launch_graph_locked(exec, source);
    const auto capture = std::find_if(epochs_.begin(), epochs_.end(), [&](const Epoch& epoch) {
      return epoch.label == graph->epoch;
    });
    const std::string launch_label = graph->epoch == "launch" ? "launch.1" : "launch";
    if (capture == epochs_.end()) {
      // Never noted at capture: references are found in this state.
      GraphRecord relabelled = *graph;
      relabelled.epoch = launch_label;
      graph = std::make_shared<const GraphRecord>(std::move(relabelled));
    }
    // One session per capture epoch: its capture epoch (recorded epochs never change), the
    // launch state, the graphs launched so far; each check reads only the launched graph.
    // Graphs never noted at capture have sessions of their own (by launch label), so that a
    // recorded epoch that happens to be labelled like a launch state is never replaced.
    const bool captured = capture != epochs_.end();
    auto [at, fresh] = launch_sessions_.try_emplace(std::make_pair(captured, graph->epoch));
    LaunchSession& launch = at->second;
    if (fresh) {
      launch.session.set_producer({"cupti", "graphcheck " GRAPHCHECK_VERSION_STRING});
      launch.session.set_allow(options_.allow);
      if (captured) {
        launch.session.put_epoch(*capture);
      }
      launch.launch_label = launch_label;
    }
    launch.session.put_epoch(current_epoch_locked(launch_label, gathered));
    launch.session.put_graph(graph);
    graphcheck::CheckOptions check_options;
    check_options.epoch = launch_label;
    const std::shared_ptr<const Report> report =
        with_warnings(launch.session.check(check_options, {graph->id}), warnings);
    ++launches_checked_;
    LaunchFindings& last = launch_findings_[exec];
    const bool repeated =
        report->has_findings() && last.graph == graph->id && last.findings == report->findings;
    if (repeated) {
      ++last.repeats;
    } else {
      log_repeats_locked(exec, last);
      last.graph = graph->id;
      last.findings = report->findings;
    }
    if (!report->has_findings()) {
      return {};
    }
    ++launches_with_findings_;
    if (!repeated) {
      log("graphcheck: findings at launch of graph " + std::to_string(graph->id) + " (exec " +
          format_address(exec) + ")\n" + to_text(*report));
      if (!options_.out_dir.empty()) {
        emit_locked(launch.session.snapshot({graph->id}), *report, "launch");
      }
    }
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
    return Status::error("graphcheck: " + std::to_string(report->findings.size()) +
                         " finding(s) at launch of graph " + std::to_string(graph->id) +
                         " under policy error");
  } catch (const std::exception& error) {
    return Status::error(std::string("graphcheck: launch check failed: ") + error.what());
  } catch (...) {
    return Status::error("graphcheck: launch check failed with an unknown exception");
  }
}

std::uint64_t CheckerSession::launches_checked() const {
  const Lock lock(*this);
  return launches_checked_;
}

std::uint64_t CheckerSession::launches_with_findings() const {
  const Lock lock(*this);
  return launches_with_findings_;
}

Epoch CheckerSession::current_epoch_locked(std::string label, const Gathered& gathered) const {
  Epoch epoch;
  epoch.label = std::move(label);
  // Zero-sized entries (empty tensors) cover no address and break the snapshot invariant.
  std::copy_if(spans_.begin(), spans_.end(), std::back_inserter(epoch.spans),
               [](const Span& span) { return span.size > 0; });
  epoch.allocations = gathered.allocations;
  return epoch;
}

std::string CheckerSession::unique_label_locked(std::string_view label) const {
  std::string candidate(label);
  if (epoch_labels_.count(candidate) == 0) {
    return candidate;
  }
  const auto known = taken_suffix_.find(candidate);
  int suffix = known != taken_suffix_.end() ? known->second : 0;
  do {
    candidate = std::string(label) + "." + std::to_string(++suffix);
  } while (epoch_labels_.count(candidate) != 0);
  return candidate;
}

std::string CheckerSession::take_label_locked(std::string_view label) {
  std::string taken = unique_label_locked(label);
  if (taken.size() > label.size()) {  // label.N, the first N free: 1 to N are taken now
    taken_suffix_[std::string(label)] = std::stoi(taken.substr(label.size() + 1));
  }
  epoch_labels_.insert(taken);
  return taken;
}

GraphRecord CheckerSession::with_epoch_locked(GraphRecord graph) const {
  if (const auto it = graph_epochs_.find(graph.id); it != graph_epochs_.end()) {
    graph.epoch = it->second;
  }
  return graph;
}

Snapshot CheckerSession::snapshot_locked(std::string_view current_label, Gathered& gathered) const {
  Snapshot snapshot;
  snapshot.producer = {"cupti", "graphcheck " GRAPHCHECK_VERSION_STRING};
  snapshot.allow = options_.allow;
  snapshot.epochs = epochs_;
  snapshot.epochs.push_back(current_epoch_locked(unique_label_locked(current_label), gathered));
  const std::string& current = snapshot.epochs.back().label;
  if (sources_.graphs) {
    for (GraphRecord& graph : gathered.graphs) {
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

void CheckerSession::log_repeats_locked(std::uint64_t exec, LaunchFindings& last) {
  if (last.repeats == 0) {
    return;
  }
  log("graphcheck: the findings reported at launch of graph " + std::to_string(last.graph) +
      " (exec " + format_address(exec) + ") recurred at " + std::to_string(last.repeats) +
      " later launch" + (last.repeats == 1 ? "" : "es") + "\n");
  last.repeats = 0;
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
