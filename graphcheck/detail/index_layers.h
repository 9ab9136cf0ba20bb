// The two layers an address index is merged from: where the winning span changes, and where
// the innermost allocation changes (docs/verdicts.md, "Lookup").
#ifndef GRAPHCHECK_DETAIL_INDEX_LAYERS_H_
#define GRAPHCHECK_DETAIL_INDEX_LAYERS_H_

#include <graphcheck/address.h>
#include <graphcheck/epoch.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

namespace graphcheck::detail {

/// Span indexes are int32 in cells (-1: none) and in edges.
constexpr std::size_t kMaxSpans = std::numeric_limits<std::int32_t>::max();
/// From `begin` to the next segment's begin, `span` wins (-1: no span covers it).
struct SpanSeg {
  Address begin;
  std::int32_t span;
  std::uint8_t kind;  ///< the winner's OwnerKind
  bool ends;          ///< a span ends at `begin` and none begins there
  /// Spans of other owners cover it too: the next entry of the rival offsets is its list.
  bool rivals;
};

/// From `begin` to the next segment's begin, `allocation` is the innermost (0xffffffff:
/// none).
struct AllocSeg {
  Address begin;
  std::uint32_t allocation;  ///< index, or 0xffffffff for none
  bool graph_pool;           ///< `allocation` is a graph pool
  bool starts;               ///< an allocation begins at `begin`
};

/// Scratch the layers reuse between builds (sorted edges of the general case).
struct LayerScratch {
  struct Edge {
    Address position = 0;
    std::int32_t item = 0;  // index into the epoch's spans or allocations
  };
  std::vector<Edge> starts;
  std::vector<Edge> ends;
};

/// The rival owners a segment keeps, innermost first. Every rival of every segment took memory
/// quadratic in the spans that nest (20k nested spans: 2 GB); the overlap warnings they feed
/// name at most 100 pairs in all.
inline constexpr std::size_t kMaxRivals = 16;

/// Fills `segs` with one segment per distinct begin or end of a non-empty span, in address
/// order, with the winner by the index's rules; rival lists are appended to `rivals` (a
/// count, then that many span indexes: the `kMaxRivals` innermost), and where each starts to
/// `rival_offsets`, one per segment with rivals. One pass when the spans are listed in
/// address order without overlaps, else a sort and a sweep.
void span_layer(const std::vector<Span>& spans, std::vector<SpanSeg>& segs,
                std::vector<std::int32_t>& rivals, std::vector<std::uint32_t>& rival_offsets,
                LayerScratch& scratch);

/// Fills `segs` with one segment per distinct begin or end of a non-empty allocation, in
/// address order, with the innermost allocation. One pass when they are listed in address
/// order without overlaps, else a sort and a sweep.
void allocation_layer(const std::vector<Allocation>& allocations, std::vector<AllocSeg>& segs,
                      LayerScratch& scratch);

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_INDEX_LAYERS_H_
