// The epochs of one check, each indexed once however many graphs use it.
#ifndef GRAPHCHECK_DETAIL_EPOCH_INDEXES_H_
#define GRAPHCHECK_DETAIL_EPOCH_INDEXES_H_

#include <graphcheck/address_index.h>
#include <graphcheck/epoch.h>
#include <graphcheck/snapshot.h>

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace graphcheck::detail {

/// Finds a check's epochs by label and builds their indexes on first use.
/// Lifetime: points into the snapshot, which must outlive it. Thread safety: none (one per
/// check).
class EpochIndexes {
 public:
  explicit EpochIndexes(const Snapshot& snapshot) : snapshot_(snapshot) {}

  [[nodiscard]] const Epoch* find(std::string_view label) const {
    for (const Epoch& epoch : snapshot_.epochs) {
      if (epoch.label == label) {
        return &epoch;
      }
    }
    return nullptr;
  }

  /// The index of `epoch`. An epoch listing the same ranges as one indexed before (an
  /// epoch after sleep and wake, with new generations only) copies that index's tables
  /// instead of sweeping again, and shares its cell numbers (`AddressIndex::same_cells`).
  const AddressIndex& index(const Epoch& epoch) {
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

  /// Where a rebinding reload moved `span`'s owner: a span of `epoch` with `span`'s kind and
  /// name at another begin (the first in epoch order), provided none of that kind and name
  /// is still at `span`'s begin; else nullptr. The name table is built on first use only,
  /// since most checks never need it.
  const Span* moved(const Epoch& epoch, const Span& span) {
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

  /// True if `epoch` has an allocation with `allocation`'s begin and label (an empty label
  /// matches any): the same allocation, whatever its size or generation. The table is
  /// built on first use only.
  bool has_allocation(const Epoch& epoch, const Allocation& allocation) {
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

  /// The snapshot's epoch labels, for error messages.
  [[nodiscard]] std::string labels() const {
    std::string text;
    for (const Epoch& epoch : snapshot_.epochs) {
      text += text.empty() ? "" : ", ";
      text += epoch.label;
    }
    return text.empty() ? "(none)" : text;
  }

 private:
  const Snapshot& snapshot_;
  std::unordered_map<const Epoch*, std::unique_ptr<AddressIndex>> indexes_;
  std::vector<const AddressIndex*> built_;  // in build order: the first alike one is shared
  std::unordered_map<const Epoch*, std::unordered_multimap<std::string_view, const Span*>> by_name_;
  std::unordered_map<const Epoch*, std::unordered_multimap<Address, const Allocation*>> by_begin_;
};

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_EPOCH_INDEXES_H_
