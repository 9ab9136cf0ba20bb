// PyTorch's caching allocator as epoch allocations: its segments and live blocks, graph
// pools named as graph memory, each block labelled by the first label range over it. The
// Python watch's rule (python/graphcheck/_watch/graph_pools.py, `GraphPools.apply`) run in
// C++, because a server's allocator holds thousands of blocks and the watch reads them at
// every capture (issue 32 §2); and the pool names of the CUPTI backend's torch snapshot
// (cupti/torch_allocator_snapshot.h), one rule for both.
#ifndef GRAPHCHECK_DETAIL_ALLOCATOR_MEMORY_H_
#define GRAPHCHECK_DETAIL_ALLOCATOR_MEMORY_H_

#include <graphcheck/address.h>
#include <graphcheck/epoch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace graphcheck::detail {

/// A PyTorch memory pool id (`MempoolId_t`): {0,0} is the default pool, {a,0} a graph's own
/// private pool, {0,uid} a `graph_pool_handle()` or a user `MemPool`.
using TorchPoolId = std::pair<std::int64_t, std::int64_t>;

/// True for a graph's private pool ({a,0}, a != 0) and for a pool a graph was seen using
/// (`listed`: a shared {0,uid} id cannot be told from a user `MemPool` by its value); never
/// for the default pool {0,0}.
[[nodiscard]] bool is_graph_pool(TorchPoolId pool, bool listed);

/// "default" for {0,0}; "graph:<a>,<b>" for a graph pool (`is_graph_pool`); "mempool:<a>,<b>"
/// for any other (a user MemPool such as vLLM's tagged "weights" pool).
[[nodiscard]] std::string torch_pool_name(TorchPoolId pool, bool listed);

/// One caching-allocator segment: where it lies, its pool, the device as the snapshot spells
/// it, and its live blocks (`active_allocated`, `active_pending_free`) as (begin, size).
struct AllocatorSegment {
  Address begin = 0;
  std::uint64_t size = 0;
  TorchPoolId pool{0, 0};
  bool listed = false;  // a graph was seen using `pool`
  std::string device;
  std::vector<std::pair<Address, std::uint64_t>> live;
};

/// A label for the addresses [begin, end) (a census path, an allocation site).
struct LabelRange {
  Address begin = 0;
  Address end = 0;
  std::string label;
};

/// The segments as allocations, in address order (stable: a segment's blocks before it): a
/// graph pool's segment alone (its blocks are the graph's own memory), any other segment's
/// live blocks unlabelled, then the segment, labelled "torch segment dev<device>". Segments
/// with no address or no size are left out. Generation 1 throughout.
[[nodiscard]] std::vector<Allocation> allocator_allocations(
    const std::vector<AllocatorSegment>& segments);

/// Adds the segments to `allocations` (an epoch's) as the watch does at every epoch of a
/// CUDA graph: an allocation already there that lies inside a graph pool's segment takes that
/// segment's pool (the ATen window's storages: memory another graph of the pool produced);
/// then each allocator entry is appended unless an allocation of the same range is there, or
/// (for a block) one that begins where it begins (the dispatcher's storage is the tensor);
/// each appended block takes the label of the first of `labels` (by begin) starting inside
/// it, else of the one starting just below that reaches into it, else none.
void add_allocator_memory(std::vector<Allocation>& allocations,
                          const std::vector<AllocatorSegment>& segments,
                          std::vector<LabelRange> labels);

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_ALLOCATOR_MEMORY_H_
