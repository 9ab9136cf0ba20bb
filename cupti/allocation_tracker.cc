#include "cupti/allocation_tracker.h"

#include <cuda.h>
#include <cupti.h>  // also the *_params structs (generated_cuda_meta.h, unguarded)
#include <cxxabi.h>
#include <dlfcn.h>
#include <unwind.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

namespace graphcheck::cupti {
namespace {

constexpr CUpti_CallbackId kCallbacks[] = {
    CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
    CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
    CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,
    CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree,
    CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
    CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
    CUPTI_DRIVER_TRACE_CBID_cuMemMap,
    CUPTI_DRIVER_TRACE_CBID_cuMemUnmap,
    // Which streams capture: inside a capture cuMemAllocAsync/cuMemFreeAsync add graph nodes.
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph,
    CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz,
    CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture,
    CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz,
};

// The pool of an allocation made inside a stream capture: an alloc node's graph memory
// ("graph:..." is a graph pool to the checker, docs/verdicts.md rule 7).
constexpr std::string_view kGraphPool = "graph:alloc_node";
// The pool of a segment cuMemAlloc made on a thread while a capture it began is open: a
// caching allocator's graph pool (PyTorch's private pools grow only then, by cudaMalloc from
// the capturing thread), so memory another graph of a shared pool produced, and the buffers
// generated code allocates without a dispatcher op, are graph memory [verify on a GPU].
constexpr std::string_view kCapturePool = "graph:capture_segment";

template <typename Params>
const Params& as(const void* params) {
  return *static_cast<const Params*>(params);
}

// Output pointers are read only after a successful call; a null output pointer (a caller
// bug the driver rejected) reads as 0.
Address out_address(const CUdeviceptr* pointer) {
  return pointer == nullptr ? 0 : static_cast<Address>(*pointer);
}

bool skipped_module(const char* path, const char* self) {
  if (path == nullptr) {
    return true;
  }
  if (self != nullptr && std::string_view(path) == self) {
    return true;
  }
  std::string_view name(path);
  if (const auto slash = name.rfind('/'); slash != std::string_view::npos) {
    name.remove_prefix(slash + 1);
  }
  for (const std::string_view prefix :
       {"libcuda.", "libcudart", "libcupti", "libgraphcheck", "libc.so", "libstdc++"}) {
    if (name.substr(0, prefix.size()) == prefix) {
      return true;
    }
  }
  return false;
}

}  // namespace

namespace detail {
namespace {

// A return address's part in an allocation's site: skipped (a frame of the CUDA, CUPTI or
// graphcheck libraries, libc or libstdc++, or one dladdr cannot place), or the site's text.
struct FrameSite {
  bool skipped = true;
  std::string text;
};

FrameSite describe_frame(void* frame, const char* self_path) {
  Dl_info info{};
  if (::dladdr(frame, &info) == 0 || skipped_module(info.dli_fname, self_path)) {
    return {};
  }
  std::string_view module(info.dli_fname);
  if (const auto slash = module.rfind('/'); slash != std::string_view::npos) {
    module.remove_prefix(slash + 1);
  }
  std::string symbol = "?";
  std::uintptr_t offset =
      reinterpret_cast<std::uintptr_t>(frame) - reinterpret_cast<std::uintptr_t>(info.dli_fbase);
  if (info.dli_sname != nullptr) {
    int status = 0;
    const std::unique_ptr<char, decltype(&std::free)> demangled(
        abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &status), &std::free);
    symbol = status == 0 && demangled ? demangled.get() : info.dli_sname;
    offset =
        reinterpret_cast<std::uintptr_t>(frame) - reinterpret_cast<std::uintptr_t>(info.dli_saddr);
  }
  std::array<char, 32> hex{};
  std::snprintf(hex.data(), hex.size(), "+0x%zx", static_cast<std::size_t>(offset));
  return {false, " from " + std::string(module) + "(" + symbol + hex.data() + ")"};
}

// Return address -> FrameSite. dladdr scans a library's symbol table, microseconds per frame
// and more in a process holding torch's libraries, while a program allocates from a few
// call sites: each address is described once. Cleared when it reaches kMaxFrames. A library
// unloaded and another loaded at its addresses would be named by the old one's text (a
// label, nothing is judged by it).
struct FrameSites {
  static constexpr std::size_t kMaxFrames = 16384;
  std::mutex mutex;
  std::unordered_map<void*, FrameSite> sites;
};

FrameSites& frame_sites() {
  // Never destroyed: allocations are freed, and their callbacks run, during exit.
  static auto* const sites = new FrameSites;  // NOLINT(cppcoreguidelines-owning-memory)
  return *sites;
}

const char* own_module_path() {
  Dl_info self{};
  return ::dladdr(reinterpret_cast<void*>(&own_module_path), &self) != 0 ? self.dli_fname : nullptr;
}

// One stack walk: frames are visited innermost first and the walk stops at the first frame
// that is not skipped, so only the CUDA, CUPTI and graphcheck frames above the caller are
// unwound, not the whole stack.
struct SiteWalk {
  static constexpr int kMaxDepth = 32;
  const char* self_path = nullptr;
  FrameSites* cache = nullptr;
  int depth = 0;
  std::string text;
};

// Whether the walk goes on past `frame` (a return address); sets walk.text when it stops
// at a site.
bool visit_frame(SiteWalk& walk, void* frame) {
  FrameSites& cache = *walk.cache;
  {
    const std::scoped_lock lock(cache.mutex);
    if (const auto found = cache.sites.find(frame); found != cache.sites.end()) {
      walk.text = found->second.text;
      return found->second.skipped;
    }
  }
  FrameSite site = describe_frame(frame, walk.self_path);  // outside the lock: the slow part
  walk.text = site.text;
  const bool skipped = site.skipped;
  const std::scoped_lock lock(cache.mutex);
  if (cache.sites.size() >= FrameSites::kMaxFrames) {
    cache.sites.clear();
  }
  cache.sites.emplace(frame, std::move(site));
  return skipped;
}

_Unwind_Reason_Code on_frame(_Unwind_Context* context, void* argument) {
  auto& walk = *static_cast<SiteWalk*>(argument);
  if (++walk.depth > SiteWalk::kMaxDepth) {
    return _URC_END_OF_STACK;
  }
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the unwinder gives the address as an integer
  void* const frame = reinterpret_cast<void*>(_Unwind_GetIP(context));
  if (frame == nullptr) {
    return _URC_NO_REASON;
  }
  try {  // nothing may unwind through the unwinder's own frames
    return visit_frame(walk, frame) ? _URC_NO_REASON : _URC_END_OF_STACK;
  } catch (...) {
    walk.text.clear();
    return _URC_END_OF_STACK;
  }
}

}  // namespace

std::string allocation_site() {
  static const char* const self_path = own_module_path();  // the loader's string
  SiteWalk walk;
  walk.self_path = self_path;
  walk.cache = &frame_sites();
  ::_Unwind_Backtrace(&on_frame, &walk);
  return walk.text;
}

}  // namespace detail

AllocationTracker::AllocationTracker(TrackerOptions options, DriverApi* api)
    : options_(options), api_(api) {
  table_.set_default_policy(options_.default_policy);
}

std::vector<CallbackId> AllocationTracker::callbacks() const {
  std::vector<CallbackId> ids;
  for (const CUpti_CallbackId cbid : kCallbacks) {
    ids.push_back({CUPTI_CB_DOMAIN_DRIVER_API, cbid});
  }
  for (const CUpti_CallbackId cbid : detail::kMappedCallbacks) {
    ids.push_back({CUPTI_CB_DOMAIN_DRIVER_API, cbid});
  }
  return ids;
}

void AllocationTracker::on_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                                    const void* data) {
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API || data == nullptr) {
    return;
  }
  const auto& callback = *static_cast<const CUpti_CallbackData*>(data);
  if (callback.functionParams == nullptr) {
    return;
  }
  events_.fetch_add(1, std::memory_order_relaxed);
  if (callback.callbackSite == CUPTI_API_ENTER) {
    on_enter(cbid, callback.functionParams);
    return;
  }
  const auto* result = static_cast<const CUresult*>(callback.functionReturnValue);
  if (result != nullptr && *result != CUDA_SUCCESS) {
    return;  // nothing was allocated or mapped
  }
  on_exit(cbid, callback.functionParams);
}

void AllocationTracker::on_enter(CUpti_CallbackId cbid, const void* params) {
  if (on_enter_mapped(cbid, params)) {
    return;
  }
  const std::scoped_lock lock(mutex_);
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
      table_.remove(as<cuMemFree_v2_params>(params).dptr);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz: {
      // The two parameter structs have the same layout ({dptr, hStream}). Inside a capture
      // the call adds a free node and frees nothing: the memory (a graph allocation, cuda.h
      // cuMemFreeAsync) stays live until a launch runs the node, which CUPTI does not report.
      const auto& p = as<cuMemFreeAsync_params>(params);
      if (!capturing_.contains(p.hStream)) {
        table_.remove(p.dptr);
      }
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz:
      capturing_.erase(as<cuStreamEndCapture_params>(params).hStream);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree: {
      const auto& p = as<cuMemAddressFree_params>(params);
      table_.free_reservation(p.ptr, p.size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
      table_.release_handle(as<cuMemRelease_params>(params).handle);
      break;
    case CUPTI_DRIVER_TRACE_CBID_cuMemUnmap: {
      const auto& p = as<cuMemUnmap_params>(params);
      table_.unmap(p.ptr, p.size);
      break;
    }
    default:
      break;
  }
}

std::string_view AllocationTracker::segment_pool_locked() const {
  const std::thread::id self = std::this_thread::get_id();
  for (const auto& [stream, thread] : capturing_) {
    if (thread == self) {
      return kCapturePool;
    }
  }
  return "default";
}

void AllocationTracker::on_exit(CUpti_CallbackId cbid, const void* params) {
  if (on_exit_mapped(cbid, params)) {
    return;
  }
  // The site is taken before the lock: a backtrace is the slow part.
  auto api_label = [&](std::string_view api) { return label(api); };
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
      const auto& p = as<cuMemAlloc_v2_params>(params);
      std::string text = api_label("cuMemAlloc_v2");
      const std::scoped_lock lock(mutex_);
      table_.add(out_address(p.dptr), p.bytesize, std::string(segment_pool_locked()),
                 std::move(text));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
      const auto& p = as<cuMemAllocPitch_v2_params>(params);
      const std::uint64_t pitch = p.pPitch == nullptr ? p.WidthInBytes : *p.pPitch;
      std::string text = api_label("cuMemAllocPitch_v2");
      const std::scoped_lock lock(mutex_);
      table_.add(out_address(p.dptr), pitch * p.Height, std::string(segment_pool_locked()),
                 std::move(text));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
      const auto& p = as<cuMemAllocManaged_params>(params);
      std::string text = api_label("cuMemAllocManaged");
      const std::scoped_lock lock(mutex_);
      table_.add(out_address(p.dptr), p.bytesize, "managed", std::move(text));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
      // The two parameter structs have the same layout ({dptr, bytesize, hStream}).
      const auto& p = as<cuMemAllocAsync_params>(params);
      std::string text = api_label("cuMemAllocAsync");
      const std::scoped_lock lock(mutex_);
      const bool in_capture = capturing_.contains(p.hStream);
      table_.add(out_address(p.dptr), p.bytesize,
                 in_capture ? std::string(kGraphPool) : std::string("async"), std::move(text));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync:
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
      const auto& p = as<cuMemAllocFromPoolAsync_params>(params);
      std::string text = api_label("cuMemAllocFromPoolAsync");
      const std::scoped_lock lock(mutex_);
      const std::string pool =
          capturing_.contains(p.hStream)
              ? std::string(kGraphPool)
              : "async:" + format_address(reinterpret_cast<std::uintptr_t>(p.pool));
      table_.add(out_address(p.dptr), p.bytesize, pool, std::move(text));
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCaptureToGraph_ptsz: {
      // Every form's parameter struct starts with the stream.
      const std::scoped_lock lock(mutex_);
      capturing_[as<cuStreamBeginCapture_params>(params).hStream] = std::this_thread::get_id();
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve: {
      const auto& p = as<cuMemAddressReserve_params>(params);
      const std::scoped_lock lock(mutex_);
      table_.reserve(out_address(p.ptr), p.size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
      const auto& p = as<cuMemCreate_params>(params);
      const std::scoped_lock lock(mutex_);
      table_.create_handle(p.handle == nullptr ? 0 : *p.handle, p.size);
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemMap: {
      const auto& p = as<cuMemMap_params>(params);
      std::string text = api_label("cuMemMap");
      const std::scoped_lock lock(mutex_);
      table_.map(p.ptr, p.size, p.handle, std::move(text));
      break;
    }
    default:
      break;
  }
}

std::string AllocationTracker::label(std::string_view api) {
  std::uint64_t number = 0;
  {
    const std::scoped_lock lock(mutex_);
    number = ++sequence_;
  }
  std::string text = std::string(api) + " #" + std::to_string(number);
  if (options_.site == SiteCapture::kBacktrace) {
    text += detail::allocation_site();
  }
  return text;
}

std::vector<Allocation> AllocationTracker::allocations() const {
  const std::scoped_lock lock(mutex_);
  return table_.allocations();
}

void AllocationTracker::tag_reservation(Address address, std::string_view pool,
                                        RestorePolicy policy) {
  const std::scoped_lock lock(mutex_);
  table_.tag_reservation(address, pool, policy);
}

void AllocationTracker::mark_restored(Address begin, std::uint64_t size) {
  const std::scoped_lock lock(mutex_);
  table_.mark_restored(begin, size);
}

TableStats AllocationTracker::stats() const {
  const std::scoped_lock lock(mutex_);
  return table_.stats();
}

}  // namespace graphcheck::cupti
