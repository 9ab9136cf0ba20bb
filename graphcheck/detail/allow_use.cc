// Allowlist use over every epoch: the owners a check's references have anywhere.
#include "graphcheck/detail/allow_use.h"

namespace graphcheck::detail {

Address AllowUse::CaptureTouches::cell_last(Address address) const {
  Address first = 0;
  Address last = 0;
  static_cast<void>(index->find_cell(address, &first, &last));
  return last;
}

bool AllowUse::start_graph(const Epoch& capture, const AddressIndex& capture_index) {
  auto [at, fresh] = by_capture_.try_emplace(&capture);
  current_ = &at->second;
  if (!fresh) {
    return !current_->keep_ranges;
  }
  current_->index = &capture_index;
  current_->cells.assign(capture_index.cell_count() + 1, CellMark{});  // and a spare entry
  // An epoch that does not share the capture's cells needs each reference's addresses.
  for (const Epoch* epoch : indexes_.epochs()) {
    if (!indexes_.index(*epoch).same_cells(capture_index)) {
      current_->keep_ranges = true;
      break;
    }
  }
  return !current_->keep_ranges;
}

void AllowUse::merge(const std::vector<CellMark>& cells,
                     const std::vector<std::pair<Address, Address>>& ranges) {
  std::vector<CellMark>& into = current_->cells;
  for (std::size_t cell = 0; cell < cells.size() && cell < into.size(); ++cell) {
    into[cell].set = into[cell].set || cells[cell].set;
  }
  current_->ranges.insert(current_->ranges.end(), ranges.begin(), ranges.end());
}

void AllowUse::finish() {
  for (const auto& [capture, touches] : by_capture_) {
    for (const Epoch* epoch : indexes_.epochs()) {
      if (allowlist_.all_used()) {
        return;
      }
      const AddressIndex& index = indexes_.index(*epoch);
      std::vector<char> seen(index.cell_count(), 0);
      if (index.same_cells(*touches.index)) {
        for (std::size_t cell = 0; cell < index.cell_count(); ++cell) {
          if (touches.cells[cell].set) {
            note_cell(index, static_cast<std::uint32_t>(cell));
            seen[cell] = 1;
          }
        }
      }
      for (const auto& [first, last] : touches.ranges) {
        for (Address at = first;;) {
          Address ignored = 0;
          Address until = 0;
          const std::uint32_t cell = index.find_cell(at, &ignored, &until);
          if (cell != AddressIndex::kNoCell && seen[cell] == 0) {
            seen[cell] = 1;
            note_cell(index, cell);
          }
          if (until >= last) {
            break;
          }
          at = until + 1;
        }
      }
    }
  }
}

// The owners an allowlist could excuse at this cell: the allocation's label where no span,
// or only an input span, holds it, and that input's name.
void AllowUse::note_cell(const AddressIndex& index, std::uint32_t cell) {
  const AddressHit hit = index.hit(cell);
  if (hit.span != nullptr && hit.kind != OwnerKind::kInput) {
    return;
  }
  if (hit.allocation != nullptr) {
    note(hit.allocation->label);
  }
  if (hit.span != nullptr) {
    note(hit.span->name);
  }
}

void AllowUse::note(const std::string& name) {
  if (!name.empty() && noted_.insert(name).second) {
    allowlist_.note_owner(name);
  }
}

}  // namespace graphcheck::detail
