#include "cupti/torch_allocator_snapshot.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <graphcheck/error.h>
#include <torch/version.h>

#include <algorithm>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>

#include "graphcheck/detail/allocator_memory.h"

#if !defined(TORCH_VERSION_MAJOR) || TORCH_VERSION_MAJOR < 2
#error "graphcheck_cupti_torch needs torch >= 2.0 (SnapshotInfo with segment pool ids)"
#endif

namespace graphcheck::cupti {

std::string torch_pool_name(TorchPoolId pool, const TorchSnapshotOptions& options) {
  const bool listed = std::find(options.graph_pools.begin(), options.graph_pools.end(), pool) !=
                      options.graph_pools.end();
  return graphcheck::detail::torch_pool_name(pool, listed);
}

namespace detail {

std::vector<Allocation> torch_allocations(const std::vector<TorchSegment>& segments,
                                          const TorchSnapshotOptions& options) {
  std::vector<Allocation> result;
  for (const TorchSegment& segment : segments) {
    const std::string pool = torch_pool_name(segment.pool, options);
    const std::string device = "dev" + std::to_string(segment.device);
    // The allocator reports no generations: the CUPTI tracker's table carries them for the
    // cudaMalloc/cuMemMap underneath (add_torch_allocator inherits them); these entries only
    // name pools and tensors. Blocks before their segment: a block as large as its segment
    // (a big tensor gets one of its own) ties with it, and ties go by position.
    std::uint64_t offset = 0;
    for (const auto& [size, allocated] : segment.blocks) {
      if (allocated && size > 0) {
        result.push_back(
            Allocation{segment.address + offset, size, pool, 1, "torch block " + device});
      }
      offset += size;
    }
    result.push_back(
        Allocation{segment.address, segment.total_size, pool, 1, "torch segment " + device});
  }
  return result;
}

}  // namespace detail

namespace {

// Fields and shapes differ across torch 2.x: detect them rather than pin one release.
template <typename Segment>
TorchPoolId pool_of(const Segment& segment) {
  if constexpr (requires { segment.owner_private_pool_id; }) {
    return {static_cast<std::int64_t>(segment.owner_private_pool_id.first),
            static_cast<std::int64_t>(segment.owner_private_pool_id.second)};
  } else {
    return {0, 0};
  }
}

// A block a tensor holds, or one freed while a stream still uses it (`active`: torch's
// `active_pending_free`, which kernels still read; the Python watch's rule too).
template <typename Block>
bool live(const Block& block) {
  if constexpr (requires { block.active; }) {
    return block.allocated || block.active;
  } else {
    return block.allocated;
  }
}

// A template so the requires-expression is checked by substitution (false on releases
// without the two-argument form) instead of being ill-formed.
template <typename PoolId>
auto take_snapshot(PoolId all_pools) {
  if constexpr (requires { c10::cuda::CUDACachingAllocator::snapshot(all_pools, false); }) {
    return c10::cuda::CUDACachingAllocator::snapshot(all_pools, false);
  } else {
    return c10::cuda::CUDACachingAllocator::snapshot();
  }
}

}  // namespace

std::vector<Allocation> torch_allocator_allocations(const TorchSnapshotOptions& options) {
  std::vector<detail::TorchSegment> segments;
  try {
    // 2.11: snapshot(MempoolId_t = {0,0}, bool include_traces = true); {0,0} means all pools.
    // Traces are not needed: ask for none where the parameter exists.
    const auto info = take_snapshot(c10::MempoolId_t{0, 0});
    for (const auto& segment : info.segments) {
      detail::TorchSegment out;
      out.address = static_cast<std::uint64_t>(segment.address);
      out.total_size = static_cast<std::uint64_t>(segment.total_size);
      out.pool = pool_of(segment);
      // DeviceIndex is a signed 8-bit index where -1 means "no device": sign extension is meant.
      out.device =
          static_cast<std::int64_t>(segment.device);  // NOLINT(bugprone-signed-char-misuse)
      for (const auto& block : segment.blocks) {
        out.blocks.emplace_back(static_cast<std::uint64_t>(block.size), live(block));
      }
      segments.push_back(std::move(out));
    }
  } catch (const std::exception& error) {
    throw Error(std::string("torch caching-allocator snapshot failed: ") + error.what() +
                "; call it after CUDA is initialised, outside allocator callbacks");
  }
  return detail::torch_allocations(segments, options);
}

std::string add_torch_allocator(CheckerSession& session, TorchSnapshotOptions options) {
  // torch's other allocator backends (backend:cudaMallocAsync, a pluggable allocator) refuse
  // every snapshot, with or without a GPU: as a source, it failed every epoch and check of the
  // session (found by a review). The caching allocator answers even before CUDA starts.
  try {
    (void)torch_allocator_allocations(options);
  } catch (const Error& error) {
    return std::string("torch's caching-allocator blocks are not added: ") + error.what();
  }
  session.add_allocations(
      [options = std::move(options)] { return torch_allocator_allocations(options); },
      SourceGenerations::kInherit);
  return {};
}

}  // namespace graphcheck::cupti
