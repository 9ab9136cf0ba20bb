// The rules of docs/verdicts.md ("Verdicts"), in precedence order, for one address.
#include "graphcheck/detail/verdict_rules.h"

#include <graphcheck/address.h>

#include <algorithm>
#include <functional>
#include <utility>

namespace graphcheck::detail {
namespace {

constexpr std::size_t kMaxWarningLines = 100;
constexpr std::uint32_t kUndecided = DecisionMemo::kUnknown;

// The contract's ways to register a tensor, in the census's words (graphcheck/_census.py): a
// derived tensor fills a declared slot, a constant is registered as one, and a tensor a
// non-module object holds (a quant method's) is listed by that object and registered with
// register_held_tensors, the step that listing alone does not do.
constexpr std::string_view kFixUnregistered =
    "register it: fill a declared slot with set_derived_buffer, or register_constant_buffer for "
    "a constant, or list it in persistent_tensors() of its holder and call "
    "register_held_tensors(model); or declare it runtime state if the engine rewrites it before "
    "each replay";
constexpr std::string_view kFixLost =
    "register it so sleep restores it: fill a declared slot with set_derived_buffer, or "
    "register_constant_buffer for a constant, or list it in persistent_tensors() of its holder "
    "and call register_held_tensors(model); or declare it runtime state if the engine refills "
    "it before replay";
// A dangling read is mostly a tensor bound anew (a reload's derived scale): keeping the old
// one alive alone would freeze its values into the graph, so the fix says to refill in place.
constexpr std::string_view kFixDangling =
    "keep the tensor alive at its address for the graph's lifetime and register it (to change "
    "its values, copy_ into it rather than binding a new tensor to its name), or recapture the "
    "graph after freeing it";
constexpr std::string_view kFixReused =
    "the graph still uses memory that was freed and reused: keep the tensor alive for the "
    "graph's lifetime and register it (set_derived_buffer, register_constant_buffer, "
    "persistent_tensors()), or recapture the graph";

// A stale owner's fix depends on what it is: weights are reloaded, buffers refilled, runtime
// state kept in place, inputs copied into.
std::string_view stale_fix(OwnerKind kind) {
  switch (kind) {
    case OwnerKind::kParameter:
      return "reload the parameter in place with copy_ rather than rebinding it (the graph "
             "keeps the old address), or recapture the graph";
    case OwnerKind::kBuffer:
      return "refill the buffer in place (set_derived_buffer copies into the existing "
             "storage; copy_ otherwise) instead of assigning a new tensor, or recapture the "
             "graph";
    case OwnerKind::kRuntime:
      return "keep runtime state at one address for the graph's lifetime (allocate it once "
             "and reuse it), or recapture the graph after reallocating it";
    case OwnerKind::kInput:
      return "copy new inputs into the captured static input with copy_ instead of passing "
             "a new tensor, or recapture the graph";
    case OwnerKind::kGraph:
      break;
  }
  return "recapture the graph";
}

std::string in_quotes(std::string_view text) {
  std::string result;
  result.reserve(text.size() + 2);
  result += '"';
  result += text;
  result += '"';
  return result;
}

std::string owner_text(const Span& span) {
  return std::string(to_string(span.kind)) + " " + in_quotes(span.name);
}

std::string allocation_text(const Allocation& allocation) {
  std::string text = "allocation " + format_address(allocation.begin);
  if (!allocation.label.empty()) {
    return text + " " + in_quotes(allocation.label);
  }
  return text + " (" + std::to_string(allocation.size) + " bytes, pool " +
         in_quotes(allocation.pool) + ")";
}

// One allocation in two epochs: the same begin and label (its size may grow, as an
// expandable segment's does, and its generation says whether its bytes survived). An empty
// label is unknown, not different: a backend may label allocations in one epoch only.
bool same_allocation(const Allocation* a, const Allocation* b) {
  return a != nullptr && b != nullptr && a->begin == b->begin &&
         (a->label == b->label || a->label.empty() || b->label.empty());
}

// True when `outer` holds all of `inner` and more: the segment around a block.
bool encloses(const Allocation& outer, const Allocation& inner) {
  return outer.begin <= inner.begin && outer.size > inner.size &&
         inner.begin - outer.begin <= outer.size - inner.size;
}

std::uint32_t number(Verdict verdict) { return static_cast<std::uint32_t>(verdict); }

}  // namespace

Verdict ok_verdict(OwnerKind kind) {
  switch (kind) {
    case OwnerKind::kParameter:
    case OwnerKind::kBuffer:
      return Verdict::kRegistered;
    case OwnerKind::kRuntime:
      return Verdict::kRuntime;
    case OwnerKind::kGraph:
      return Verdict::kGraph;
    case OwnerKind::kInput:
      return Verdict::kInput;
  }
  return Verdict::kRegistered;
}

int severity(Verdict verdict) {
  switch (verdict) {
    case Verdict::kAllowed:
      return 1;
    case Verdict::kUnregistered:
      return 2;
    case Verdict::kDangling:
      return 3;
    case Verdict::kLost:
      return 4;
    case Verdict::kStale:
      return 5;
    default:
      return 0;
  }
}

std::uint32_t VerdictRules::decide(const AddressHit& now, const AddressHit& then,
                                   const GraphEpochs& epochs, RangeQuestion& in_graph) {
  note_overlap(*epochs.checked_index, now);
  if (epochs.compare) {
    if (then.span != nullptr && then.kind != OwnerKind::kGraph) {
      note_overlap(*epochs.baseline_index, then);
      if (const std::uint32_t stale = stale_span(now, then, epochs); stale != kUndecided) {
        return stale;
      }
    }
    if (then.allocation != nullptr && !then.graph_pool &&
        (then.span == nullptr || (now.span == nullptr && then.kind != OwnerKind::kGraph)) &&
        !in_graph.answer()) {
      if (const std::uint32_t changed = stale_allocation(now, then, epochs);
          changed != kUndecided) {
        return changed;
      }
    }
  }
  const Span* owner = now.span;
  const Allocation* alloc = now.allocation;
  const Allocation* alloc_then = then.allocation;
  const std::string* names[3] = {owner != nullptr ? &owner->name : nullptr,
                                 alloc != nullptr ? &alloc->label : nullptr,
                                 alloc_then != nullptr ? &alloc_then->label : nullptr};

  // lost: the same allocation with new bytes, and nothing that restores it covers the
  // address (an input owner does not restore anything).
  if (same_allocation(alloc, alloc_then) && alloc->generation != alloc_then->generation &&
      (owner == nullptr || now.kind == OwnerKind::kInput) && !now.graph_pool &&
      !in_graph.answer()) {
    if (allowed(names)) {
      return number(Verdict::kAllowed);
    }
    const bool named = owner != nullptr;
    return finding(Verdict::kLost,
                   named                  ? owner->name
                   : alloc->label.empty() ? alloc_then->label
                                          : alloc->label,
                   named ? std::optional<OwnerKind>(owner->kind) : std::nullopt,
                   "generation " + std::to_string(alloc_then->generation) + " -> " +
                       std::to_string(alloc->generation) + " (bytes discarded after " +
                       epochs.baseline->label + ")",
                   kFixLost);
  }
  if (owner != nullptr) {
    return number(ok_verdict(now.kind));
  }
  if (in_graph.answer()) {
    return number(Verdict::kGraph);
  }
  // dangling
  if (alloc == nullptr) {
    std::string detail = "no span or live allocation holds it in " + epochs.checked->label;
    if (alloc_then != nullptr) {
      detail = "allocation " + format_address(alloc_then->begin) + " was freed after " +
               epochs.baseline->label + "; " + detail;
    }
    return finding(Verdict::kDangling, alloc_then != nullptr ? alloc_then->label : "", std::nullopt,
                   std::move(detail), kFixDangling);
  }
  if (now.graph_pool) {
    return number(Verdict::kGraph);
  }
  // unregistered
  if (allowed(names)) {
    return number(Verdict::kAllowed);
  }
  return finding(Verdict::kUnregistered, alloc->label, std::nullopt, unregistered_detail(*alloc),
                 kFixUnregistered);
}

// A span owned the address in the baseline: stale when that owner moved (the same kind and
// name at another begin) or another span owns the address now.
std::uint32_t VerdictRules::stale_span(const AddressHit& now, const AddressHit& then,
                                       const GraphEpochs& epochs) {
  const Span& was = *then.span;
  if (const Span* moved = indexes_.moved(*epochs.checked, was)) {
    std::string detail =
        "moved to " + format_address(moved->begin) + " after " + epochs.baseline->label;
    // The address the graph reads may now be another tensor's: the graph then computes with
    // that tensor's values (plausible output, not a crash), the clue a review missed here.
    if (now.span != nullptr && (now.span->name != was.name || now.span->kind != was.kind)) {
      detail += "; the address now holds " + owner_text(*now.span);
    }
    return finding(Verdict::kStale, was.name, was.kind, std::move(detail), stale_fix(was.kind));
  }
  const Span* owner = now.span;
  if (owner != nullptr && (owner->name != was.name || owner->kind != was.kind)) {
    return finding(Verdict::kStale, was.name, was.kind, "now inside " + owner_text(*owner),
                   stale_fix(was.kind));
  }
  return kUndecided;
}

// The baseline owner was an allocation (no span held the address, or the span that did is
// gone now without moving). Stale when the address now belongs to another owner: a span
// over new bytes, or another allocation; dangling when only a coarser allocation that
// already held it (its segment) is left.
std::uint32_t VerdictRules::stale_allocation(const AddressHit& now, const AddressHit& then,
                                             const GraphEpochs& epochs) {
  const Allocation& was = *then.allocation;
  const std::string& owner = then.span != nullptr ? then.span->name : was.label;
  const std::optional<OwnerKind> owner_kind =
      then.span != nullptr ? std::optional<OwnerKind>(then.kind) : std::nullopt;
  const std::string owned_by =
      "owned by " +
      (then.span != nullptr ? owner_text(*then.span)
                            : (was.label.empty() ? allocation_text(was) : in_quotes(was.label))) +
      " at " + epochs.baseline->label + ", now inside ";
  const Allocation* alloc = now.allocation;
  if (same_allocation(alloc, &was)) {
    // Still the same allocation: a span over it now is the owner being registered, unless
    // its bytes were discarded in between (memory loaded anew under another owner).
    if (now.span != nullptr && now.kind != OwnerKind::kGraph && now.kind != OwnerKind::kInput &&
        alloc->generation != was.generation) {
      return finding(Verdict::kStale, owner, owner_kind,
                     owned_by + owner_text(*now.span) + " (generation " +
                         std::to_string(was.generation) + " -> " +
                         std::to_string(alloc->generation) + ")",
                     kFixReused);
    }
    // A parameter or buffer at capture whose span is gone from E without moving, over the
    // same allocation: the tensor left the registry (`del` and a plain attribute bound
    // anew, as a process_weights_after_loading may do), so the engine no longer reloads or
    // restores what the graph reads. Before, the allocation's label (a source line) was
    // called unregistered, the owner's name lost and "register it" advised.
    if (then.span != nullptr &&
        (then.kind == OwnerKind::kParameter || then.kind == OwnerKind::kBuffer)) {
      std::string detail = owner_text(*then.span) + " at " + epochs.baseline->label +
                           " is no longer registered in " + epochs.checked->label +
                           "; the graph still reads its storage, " + allocation_text(*alloc);
      if (alloc->generation != was.generation) {
        detail += " (generation " + std::to_string(was.generation) + " -> " +
                  std::to_string(alloc->generation) + ")";
      }
      return finding(Verdict::kStale, owner, owner_kind, std::move(detail), stale_fix(then.kind));
    }
    return kUndecided;
  }
  if (now.span != nullptr) {
    return finding(Verdict::kStale, owner, owner_kind, owned_by + owner_text(*now.span),
                   kFixReused);
  }
  if (alloc == nullptr) {
    return kUndecided;  // freed and not reused: dangling, by the common rules
  }
  if (encloses(*alloc, was) && indexes_.has_allocation(*epochs.baseline, *alloc)) {
    return finding(Verdict::kDangling, owner, owner_kind,
                   "block " + format_address(was.begin) + " (" + std::to_string(was.size) +
                       " bytes) was freed after " + epochs.baseline->label +
                       "; only the allocation around it, " + format_address(alloc->begin) + " (" +
                       std::to_string(alloc->size) + " bytes), is live in " + epochs.checked->label,
                   kFixDangling);
  }
  return finding(Verdict::kStale, owner, owner_kind, owned_by + allocation_text(*alloc),
                 kFixReused);
}

std::uint32_t VerdictRules::finding(Verdict verdict, const std::string& owner,
                                    std::optional<OwnerKind> owner_kind, std::string detail,
                                    std::string_view fix) {
  decided_.push_back({verdict, owner, owner_kind, std::move(detail), fix});
  return kFindingBase + static_cast<std::uint32_t>(decided_.size() - 1);
}

bool VerdictRules::NamesLess::operator()(const std::array<const std::string*, 3>& a,
                                         const std::array<const std::string*, 3>& b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      std::less<const std::string*>());
}

// allowlist_.allows, remembered per set of names: a glob match is costly next to a map lookup.
bool VerdictRules::allowed(const std::string* const (&names)[3]) {
  const std::array<const std::string*, 3> key = {names[0], names[1], names[2]};
  const auto [at, fresh] = allowed_.try_emplace(key, false);
  if (fresh) {
    at->second = allowlist_.allows(names, 3);
  }
  return at->second;
}

// The detail depends on the allocation alone, and one workspace is often hit by many
// references: built once per allocation.
const std::string& VerdictRules::unregistered_detail(const Allocation& allocation) {
  auto [detail, fresh] = unregistered_details_.try_emplace(&allocation);
  if (fresh) {
    detail->second = "inside allocation " + format_address(allocation.begin) + " (" +
                     std::to_string(allocation.size) + " bytes, pool " +
                     in_quotes(allocation.pool) + ") that no span covers";
  }
  return detail->second;
}

// Records each pair of spans of different owners that a decided address falls in, once.
void VerdictRules::note_overlap(const AddressIndex& index, const AddressHit& hit) {
  if (!hit.has_rivals) {
    return;
  }
  const Span& winner = *hit.span;
  for (const Span* rival : index.rivals(hit)) {
    // Unordered: the same two spans may meet again with the roles swapped.
    const Span* first = std::min(&winner, rival, std::less<>());
    const Span* second = first == rival ? &winner : rival;
    const std::pair<const Span*, const Span*> key(first, second);
    if (!overlap_pairs_.insert(key).second || overlap_pairs_.size() > kMaxWarningLines) {
      continue;
    }
    const char* why = winner.size < rival->size    ? "innermost"
                      : winner.kind != rival->kind ? "same size; kind order"
                                                   : "same size; name order";
    warnings_.push_back("epoch " + index.epoch().label + ": " +
                        format_address(std::max(winner.begin, rival->begin)) + ".." +
                        format_address(std::min(winner.end(), rival->end())) + " is inside " +
                        owner_text(winner) + " and " + owner_text(*rival) + "; resolved to " +
                        in_quotes(winner.name) + " (" + why + ")");
  }
}

std::vector<std::string> VerdictRules::warnings() const {
  std::vector<std::string> lines = warnings_;
  if (overlap_pairs_.size() > kMaxWarningLines) {
    lines.push_back("... and " + std::to_string(overlap_pairs_.size() - kMaxWarningLines) +
                    " more overlapping pairs");
  }
  return lines;
}

}  // namespace graphcheck::detail
