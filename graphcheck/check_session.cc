// CheckSession: a snapshot kept between checks, with its epoch indexes, per-graph reference
// tables and last reports (include/graphcheck/check_session.h).
#include <graphcheck/check_session.h>
#include <graphcheck/error.h>

#include <algorithm>
#include <utility>

#include "graphcheck/detail/check_engine.h"
#include "graphcheck/detail/epoch_indexes.h"

namespace graphcheck {
namespace {

// Reports kept, most recent last: a caller that alternates a few checks (an on-demand check
// beside a launch check per graph) finds each again.
constexpr std::size_t kCachedReports = 8;

std::string ids_text(const std::vector<std::shared_ptr<const GraphRecord>>& graphs) {
  std::string text;
  for (const auto& graph : graphs) {
    text += text.empty() ? "" : ", ";
    text += std::to_string(graph->id);
  }
  return text.empty() ? "(none)" : text;
}

// The pointers an owning vector holds (unique_ptr or shared_ptr), in order.
template <typename Owner>
std::vector<const typename Owner::element_type*> raw_pointers(const std::vector<Owner>& owners) {
  std::vector<const typename Owner::element_type*> raw;
  raw.reserve(owners.size());
  for (const Owner& owner : owners) {
    raw.push_back(owner.get());
  }
  return raw;
}

}  // namespace

struct CheckSession::State {
  Producer producer;
  std::vector<std::unique_ptr<Epoch>> epochs;  // in order; unique_ptr: stable addresses
  std::vector<std::shared_ptr<const GraphRecord>> graphs;
  std::vector<std::string> allow;
  detail::EpochIndexes indexes;
  detail::GraphTables tables;
  std::uint64_t version = 0;  // bumped by every change
  struct Cached {
    std::uint64_t version = 0;
    CheckOptions options;
    std::vector<const GraphRecord*> graphs;
    std::shared_ptr<Report> report;  // handed out as const
  };
  std::vector<Cached> cache;
  // A report no caller holds any more: the next check writes its findings into the same
  // strings (no allocation when they fit), as a session checked again and again does.
  std::shared_ptr<Report> spare;
  SessionCheckStats stats;

  void changed() {
    ++version;
    for (Cached& cached : cache) {
      if (!spare && cached.report.use_count() == 1) {
        spare = std::move(cached.report);
      }
    }
    cache.clear();
  }
  [[nodiscard]] std::size_t epoch_position(std::string_view label) const {
    for (std::size_t i = 0; i < epochs.size(); ++i) {
      if (epochs[i]->label == label) {
        return i;
      }
    }
    return epochs.size();
  }
  [[nodiscard]] std::size_t graph_position(std::uint64_t id) const {
    for (std::size_t i = 0; i < graphs.size(); ++i) {
      if (graphs[i]->id == id) {
        return i;
      }
    }
    return graphs.size();
  }
  // The graphs with the listed ids, in session order.
  [[nodiscard]] std::vector<const GraphRecord*> select(
      const std::vector<std::uint64_t>& ids) const {
    for (const std::uint64_t id : ids) {
      if (graph_position(id) == graphs.size()) {
        throw Error("check session: graph id " + std::to_string(id) +
                    " is not in the session (it has: " + ids_text(graphs) +
                    "); pass one of those ids or put_graph it first");
      }
    }
    std::vector<const GraphRecord*> selected;
    for (const auto& graph : graphs) {
      if (std::find(ids.begin(), ids.end(), graph->id) != ids.end()) {
        selected.push_back(graph.get());
      }
    }
    return selected;
  }
  [[nodiscard]] Snapshot snapshot_of(const std::vector<const GraphRecord*>& selected) const {
    Snapshot snapshot;
    snapshot.producer = producer;
    for (const auto& epoch : epochs) {
      snapshot.epochs.push_back(*epoch);
    }
    for (const GraphRecord* graph : selected) {
      snapshot.graphs.push_back(*graph);
    }
    snapshot.allow = allow;
    return snapshot;
  }
  std::shared_ptr<const Report> check(const CheckOptions& options,
                                      std::vector<const GraphRecord*> selected) {
    stats = SessionCheckStats{};
    for (const Cached& cached : cache) {
      if (cached.version == version && cached.graphs == selected &&
          cached.options.epoch == options.epoch && cached.options.baseline == options.baseline &&
          cached.options.allow == options.allow &&
          cached.options.stale_allow == options.stale_allow) {
        stats.reused_report = true;
        return cached.report;
      }
    }
    indexes.set_epochs(raw_pointers(epochs));
    detail::CheckInput input;
    input.indexes = &indexes;
    input.graphs = selected;
    input.globs = allow;
    input.globs.insert(input.globs.end(), options.allow.begin(), options.allow.end());
    input.options = &options;
    input.tables = &tables;
    input.recycle = spare.get();
    detail::CheckStats run_stats;
    auto report = std::make_shared<Report>(detail::run_check(input, &run_stats));
    spare.reset();
    stats.graphs_scanned = run_stats.graphs_scanned;
    stats.graphs_replayed = run_stats.graphs_replayed;
    stats.references_replayed = run_stats.references_replayed;
    if (cache.size() == kCachedReports) {
      cache.erase(cache.begin());
    }
    cache.push_back({version, options, std::move(selected), report});
    return report;
  }
};

CheckSession::CheckSession() : state_(std::make_unique<State>()) {}

CheckSession::CheckSession(Snapshot snapshot) : CheckSession() {
  state_->producer = std::move(snapshot.producer);
  for (Epoch& epoch : snapshot.epochs) {
    put_epoch(std::move(epoch));
  }
  for (GraphRecord& graph : snapshot.graphs) {
    put_graph(std::make_shared<const GraphRecord>(std::move(graph)));
  }
  state_->allow = std::move(snapshot.allow);
}

CheckSession::CheckSession(CheckSession&&) noexcept = default;
CheckSession& CheckSession::operator=(CheckSession&&) noexcept = default;
CheckSession::~CheckSession() = default;

EpochChange CheckSession::put_epoch(Epoch epoch, EpochPlace place) {
  State& state = *state_;
  if (epoch.label.empty()) {
    throw Error("check session: put_epoch: the epoch has no label; give each epoch a unique label");
  }
  const std::size_t at = state.epoch_position(epoch.label);
  if (at == state.epochs.size()) {
    state.epochs.push_back(std::make_unique<Epoch>(std::move(epoch)));
    state.changed();
    return EpochChange::kAdded;
  }
  const bool in_place = place == EpochPlace::kKeep || at + 1 == state.epochs.size();
  const bool equal = *state.epochs[at] == epoch;
  if (equal && in_place) {
    return EpochChange::kUnchanged;
  }
  if (!equal) {
    auto replacement = std::make_unique<Epoch>(std::move(epoch));
    // Indexed while the old epoch is still known, so that the same ranges share its cells
    // (and the graphs' tables stay valid).
    static_cast<void>(state.indexes.index(*replacement));
    state.indexes.forget(*state.epochs[at]);
    state.epochs[at] = std::move(replacement);
  }
  if (!in_place) {
    std::rotate(state.epochs.begin() + static_cast<std::ptrdiff_t>(at),
                state.epochs.begin() + static_cast<std::ptrdiff_t>(at) + 1, state.epochs.end());
  }
  state.changed();
  return EpochChange::kReplaced;
}

bool CheckSession::remove_epoch(std::string_view label) {
  State& state = *state_;
  const std::size_t at = state.epoch_position(label);
  if (at == state.epochs.size()) {
    return false;
  }
  state.indexes.forget(*state.epochs[at]);
  state.epochs.erase(state.epochs.begin() + static_cast<std::ptrdiff_t>(at));
  state.changed();
  return true;
}

void CheckSession::put_graph(GraphRecord graph) {
  const std::size_t at = state_->graph_position(graph.id);
  if (at != state_->graphs.size() && *state_->graphs[at] == graph) {
    return;
  }
  put_graph(std::make_shared<const GraphRecord>(std::move(graph)));
}

void CheckSession::put_graph(std::shared_ptr<const GraphRecord> graph) {
  State& state = *state_;
  if (!graph) {
    throw Error("check session: put_graph: the graph record is null; pass a record");
  }
  const std::size_t at = state.graph_position(graph->id);
  if (at == state.graphs.size()) {
    state.graphs.push_back(std::move(graph));
  } else {
    if (state.graphs[at] == graph) {
      return;
    }
    state.tables.erase(state.graphs[at].get());
    state.graphs[at] = std::move(graph);
  }
  state.changed();
}

bool CheckSession::remove_graph(std::uint64_t id) {
  State& state = *state_;
  const std::size_t at = state.graph_position(id);
  if (at == state.graphs.size()) {
    return false;
  }
  state.tables.erase(state.graphs[at].get());
  state.graphs.erase(state.graphs.begin() + static_cast<std::ptrdiff_t>(at));
  state.changed();
  return true;
}

void CheckSession::set_allow(std::vector<std::string> globs) {
  if (globs != state_->allow) {
    state_->allow = std::move(globs);
    state_->changed();
  }
}

void CheckSession::set_producer(Producer producer) { state_->producer = std::move(producer); }

const Epoch* CheckSession::find_epoch(std::string_view label) const {
  const std::size_t at = state_->epoch_position(label);
  return at == state_->epochs.size() ? nullptr : state_->epochs[at].get();
}

std::shared_ptr<const GraphRecord> CheckSession::find_graph(std::uint64_t id) const {
  const std::size_t at = state_->graph_position(id);
  return at == state_->graphs.size() ? nullptr : state_->graphs[at];
}

std::vector<std::string> CheckSession::epoch_labels() const {
  std::vector<std::string> labels;
  for (const auto& epoch : state_->epochs) {
    labels.push_back(epoch->label);
  }
  return labels;
}

std::vector<std::uint64_t> CheckSession::graph_ids() const {
  std::vector<std::uint64_t> ids;
  for (const auto& graph : state_->graphs) {
    ids.push_back(graph->id);
  }
  return ids;
}

Snapshot CheckSession::snapshot() const {
  return state_->snapshot_of(raw_pointers(state_->graphs));
}

Snapshot CheckSession::snapshot(const std::vector<std::uint64_t>& graph_ids) const {
  return state_->snapshot_of(state_->select(graph_ids));
}

std::shared_ptr<const Report> CheckSession::check(const CheckOptions& options) {
  return state_->check(options, raw_pointers(state_->graphs));
}

std::shared_ptr<const Report> CheckSession::check(const CheckOptions& options,
                                                  const std::vector<std::uint64_t>& graph_ids) {
  return state_->check(options, state_->select(graph_ids));
}

const SessionCheckStats& CheckSession::last_stats() const { return state_->stats; }

std::size_t CheckSession::table_bytes() const {
  std::size_t bytes = state_->indexes.table_bytes();
  for (const auto& [graph, table] : state_->tables) {
    bytes += table.bytes();
  }
  return bytes;
}

}  // namespace graphcheck
