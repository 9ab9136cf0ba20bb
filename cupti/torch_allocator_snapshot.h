// Allocations from PyTorch's CUDA caching allocator (c10::cuda::CUDACachingAllocator::
// snapshot()): segments and their allocated blocks, with pools derived from the segment's
// pool id, so that a graph's private pool reads as graph-owned. Built only where LibTorch
// has CUDA (target graphcheck_cupti_torch); this header holds no torch types.
#ifndef GRAPHCHECK_CUPTI_TORCH_ALLOCATOR_SNAPSHOT_H_
#define GRAPHCHECK_CUPTI_TORCH_ALLOCATOR_SNAPSHOT_H_

#include <graphcheck/epoch.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "cupti/checker_session.h"

namespace graphcheck::cupti {

/// @brief A PyTorch memory pool id (`MempoolId_t`): {0,0} is the default pool, {id,0} a
/// graph's own private pool, {0,uid} a `graph_pool_handle()` or a user `MemPool`.
using TorchPoolId = std::pair<std::int64_t, std::int64_t>;

/// @brief How pool ids become pool names.
struct TorchSnapshotOptions {
  /// Pools shared by graphs through `torch.cuda.graph_pool_handle()` ({0,uid}): they cannot
  /// be told apart from a user `MemPool` by id, so they read as graph-owned only when listed.
  std::vector<TorchPoolId> graph_pools;
};

/// @brief "default" for {0,0}; "graph:<a>,<b>" for a graph-private pool ({a,0}, a != 0) or
/// a listed graph pool; "mempool:<a>,<b>" for any other pool (a user MemPool such as vLLM's
/// tagged "weights" pool: not graph-owned). Thread safety: pure function.
[[nodiscard]] std::string torch_pool_name(TorchPoolId pool,
                                          const TorchSnapshotOptions& options = {});

namespace detail {
/// The parts of a caching-allocator segment graphcheck uses, free of torch types.
struct TorchSegment {
  std::uint64_t address = 0;
  std::uint64_t total_size = 0;
  TorchPoolId pool{0, 0};
  std::int64_t device = 0;
  /// Blocks in address order: size and whether it is live (a tensor holds it, or a stream
  /// still uses it after its free).
  std::vector<std::pair<std::uint64_t, bool>> blocks;
};
/// One allocation per allocated block (label "torch block dev<d>"), then one for the segment
/// holding them (label "torch segment dev<d>"), all in the segment's pool; the checker
/// attributes an address to the smallest allocation holding it, the first listed on a tie (a
/// block as large as its segment is the block).
[[nodiscard]] std::vector<Allocation> torch_allocations(const std::vector<TorchSegment>& segments,
                                                        const TorchSnapshotOptions& options);
}  // namespace detail

/// @brief The caching allocator's segments and allocated blocks as allocations (see
/// `detail::torch_allocations`). Empty when CUDA was never initialised in this process.
/// Call it from outside allocator callbacks (it takes the allocator's locks).
/// @throws Error with the torch message if the snapshot fails.
/// Thread safety: as `CUDACachingAllocator::snapshot()` (safe from any thread).
[[nodiscard]] std::vector<Allocation> torch_allocator_allocations(
    const TorchSnapshotOptions& options = {});

/// @brief Makes `torch_allocator_allocations(options)` an allocation source of `session`,
/// whose blocks take the generation of the tracked memory under them
/// (`SourceGenerations::kInherit`). What a program linking LibTorch with CUDA and the CUPTI
/// backend calls once: without the blocks, a tensor packed right after a registered one
/// (the caching allocator packs blocks back to back) reads as that tensor's end pointer, and
/// one in a segment allocated before the subscription is in no allocation at all (the first
/// GPU run, 2026-12-04: GpuTorchGraphTest). The snapshot is taken at every capture epoch,
/// check and snapshot, from the thread that triggers it (a graph's instantiation among them);
/// the caching allocator's mutex is taken then, never the session's.
/// @returns empty when added; else why not (torch's allocator is another backend, such as
/// `PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync`, which takes no snapshot: the session
/// then checks without the blocks). Never throws for that.
std::string add_torch_allocator(CheckerSession& session, TorchSnapshotOptions options = {});

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_TORCH_ALLOCATOR_SNAPSHOT_H_
