// The epochs of a check, each indexed once however many graphs (and, in a CheckSession,
// however many checks) use it.
#ifndef GRAPHCHECK_DETAIL_EPOCH_INDEXES_H_
#define GRAPHCHECK_DETAIL_EPOCH_INDEXES_H_

#include <graphcheck/address_index.h>
#include <graphcheck/epoch.h>
#include <graphcheck/graph.h>
#include <graphcheck/report.h>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace graphcheck::detail {

/// Finds a check's epochs by label and builds their indexes on first use.
/// Lifetime: points into the epochs, which must outlive it (or be `forget`-ten first).
/// Thread safety: none (one per check, or one per CheckSession).
class EpochIndexes {
 public:
  EpochIndexes() = default;
  explicit EpochIndexes(std::vector<const Epoch*> epochs) : epochs_(std::move(epochs)) {}

  /// The check's epochs, in snapshot order.
  [[nodiscard]] const std::vector<const Epoch*>& epochs() const { return epochs_; }
  /// Replaces the list of epochs (a session's epochs after an update). Indexes of epochs
  /// no longer listed must have been forgotten.
  void set_epochs(std::vector<const Epoch*> epochs) { epochs_ = std::move(epochs); }

  [[nodiscard]] const Epoch* find(std::string_view label) const {
    for (const Epoch* epoch : epochs_) {
      if (epoch->label == label) {
        return epoch;
      }
    }
    return nullptr;
  }

  /// The epoch a check option names: `label`, or the last epoch when `label` is empty.
  /// `field` ("epoch", "baseline") names the option in messages.
  /// @throws Error naming the label and the labels there are, or saying there are none.
  const Epoch& resolve(const std::string& label, std::string_view field) const;

  /// The capture epoch of `graph`, the graph at `position` of the check.
  /// @throws Error naming the graph and its label when no epoch has that label.
  const Epoch& capture_of(const GraphRecord& graph, std::size_t position) const;

  /// The index of `epoch`. An epoch listing the same ranges as one indexed before (an
  /// epoch after sleep and wake, with new generations only) shares that index's tables
  /// instead of sweeping again, and its cell numbers (`AddressIndex::same_cells`).
  const AddressIndex& index(const Epoch& epoch);

  /// Drops what was built for `epoch` (a session's epoch replaced or removed).
  void forget(const Epoch& epoch);

  /// Where a rebinding reload moved `span`'s owner: a span of `epoch` with `span`'s kind and
  /// name at another begin (the first in epoch order), provided none of that kind and name
  /// is still at `span`'s begin; else nullptr. The name table is built on first use only,
  /// since most checks never need it.
  const Span* moved(const Epoch& epoch, const Span& span);

  /// True if `epoch` has an allocation with `allocation`'s begin and label (an empty label
  /// matches any): the same allocation, whatever its size or generation. The table is
  /// built on first use only.
  bool has_allocation(const Epoch& epoch, const Allocation& allocation);

  /// Bytes of the lookup tables built, each shared table counted once.
  [[nodiscard]] std::size_t table_bytes() const;

  /// The epoch labels, for error messages.
  [[nodiscard]] std::string labels() const {
    std::string text;
    for (const Epoch* epoch : epochs_) {
      text += text.empty() ? "" : ", ";
      text += printable(epoch->label);
    }
    return text.empty() ? "(none)" : text;
  }

 private:
  std::vector<const Epoch*> epochs_;
  std::unordered_map<const Epoch*, std::unique_ptr<AddressIndex>> indexes_;
  std::vector<const AddressIndex*> built_;  // in build order: the first alike one is shared
  std::unordered_map<const Epoch*, std::unordered_multimap<std::string_view, const Span*>> by_name_;
  std::unordered_map<const Epoch*, std::unordered_multimap<Address, const Allocation*>> by_begin_;
};

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_EPOCH_INDEXES_H_
