// Epoch indexes shared by every graph of a check (and every check of a session).
#include "graphcheck/detail/epoch_indexes.h"

#include <graphcheck/error.h>

#include <algorithm>
#include <string>
#include <vector>

#include "graphcheck/detail/closest.h"

namespace graphcheck::detail {
namespace {

// Labels as the message shows them: escaped (printable), since a NUL in a label ended the
// message there (what() is a C string) and the known labels were lost.
std::string in_quotes(std::string_view text) { return "\"" + printable(text) + "\""; }

}  // namespace

const Epoch& EpochIndexes::resolve(const std::string& label, std::string_view field) const {
  if (label.empty()) {
    if (epochs_.empty()) {
      throw Error("check: the snapshot has no epochs, so there is nothing to check " +
                  std::string(field == "epoch" ? "in" : "against") +
                  "; add at least one epoch to the snapshot");
    }
    return *epochs_.back();
  }
  const Epoch* epoch = find(label);
  if (epoch == nullptr) {
    std::vector<std::string> known;
    known.reserve(epochs_.size());
    for (const Epoch* each : epochs_) {
      known.push_back(each->label);
    }
    throw Error("check: " + std::string(field) + " " + in_quotes(label) +
                " is not an epoch of the snapshot" + did_you_mean(label, known) +
                " (it has: " + labels() + "); pass one of those labels");
  }
  return *epoch;
}

const Epoch& EpochIndexes::capture_of(const GraphRecord& graph, std::size_t position) const {
  const Epoch* capture = find(graph.epoch);
  if (capture == nullptr) {
    throw Error("check: graphs[" + std::to_string(position) + "] (id " + std::to_string(graph.id) +
                ") names epoch " + in_quotes(graph.epoch) +
                ", which is not in the snapshot (it has: " + labels() +
                "); fix the graph's epoch label");
  }
  return *capture;
}

const AddressIndex& EpochIndexes::index(const Epoch& epoch) {
  std::unique_ptr<AddressIndex>& slot = indexes_[&epoch];
  if (!slot) {
    for (const AddressIndex* built : built_) {
      const Epoch& other = built->epoch();
      if (other.spans.size() == epoch.spans.size() &&
          other.allocations.size() == epoch.allocations.size()) {
        // Builds from scratch when the ranges differ after all.
        slot = std::make_unique<AddressIndex>(epoch, *built);
        break;
      }
    }
    if (!slot) {
      slot = std::make_unique<AddressIndex>(epoch);
    }
    built_.push_back(slot.get());
  }
  return *slot;
}

void EpochIndexes::forget(const Epoch& epoch) {
  const auto it = indexes_.find(&epoch);
  if (it != indexes_.end()) {
    built_.erase(std::remove(built_.begin(), built_.end(), it->second.get()), built_.end());
    indexes_.erase(it);
  }
  by_name_.erase(&epoch);
  by_begin_.erase(&epoch);
}

std::size_t EpochIndexes::table_bytes() const {
  std::vector<std::uint64_t> seen;
  std::size_t bytes = 0;
  for (const AddressIndex* index : built_) {
    if (std::find(seen.begin(), seen.end(), index->layout_id()) == seen.end()) {
      seen.push_back(index->layout_id());
      bytes += index->table_bytes();
    }
  }
  return bytes;
}

const Span* EpochIndexes::moved(const Epoch& epoch, const Span& span) {
  auto [it, inserted] = by_name_.try_emplace(&epoch);
  if (inserted) {
    for (const Span& candidate : epoch.spans) {
      it->second.emplace(std::string_view(candidate.name), &candidate);
    }
  }
  const auto [first, last] = it->second.equal_range(std::string_view(span.name));
  const Span* best = nullptr;
  for (auto at = first; at != last; ++at) {
    const Span* candidate = at->second;
    if (candidate->kind != span.kind) {
      continue;
    }
    if (candidate->begin == span.begin) {
      return nullptr;  // still in place (perhaps with another size)
    }
    if (best == nullptr || candidate < best) {
      best = candidate;
    }
  }
  return best;
}

bool EpochIndexes::has_allocation(const Epoch& epoch, const Allocation& allocation) {
  auto [it, inserted] = by_begin_.try_emplace(&epoch);
  if (inserted) {
    for (const Allocation& candidate : epoch.allocations) {
      it->second.emplace(candidate.begin, &candidate);
    }
  }
  const auto [first, last] = it->second.equal_range(allocation.begin);
  for (auto at = first; at != last; ++at) {
    const std::string& label = at->second->label;
    if (label == allocation.label || label.empty() || allocation.label.empty()) {
      return true;
    }
  }
  return false;
}

}  // namespace graphcheck::detail
