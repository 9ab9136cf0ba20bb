// AllocationTracker: memory a graph can address that no device allocation call made (issue
// 18 §4): another process's allocation opened through CUDA IPC (torch multiprocessing,
// all-reduce buffers), and pinned host memory, which unified addressing maps at its host
// address. Without these entries every reference into them read `dangling`.
#include <cuda.h>
#include <cupti.h>  // the *_params structs

#include <string>

#include "cupti/allocation_tracker.h"

namespace graphcheck::cupti {
namespace {

constexpr std::string_view kIpcPool = "ipc";
constexpr std::string_view kHostPool = "host";

template <typename Params>
const Params& as(const void* params) {
  return *static_cast<const Params*>(params);
}

Address host_address(const void* pointer) { return reinterpret_cast<Address>(pointer); }

}  // namespace

bool AllocationTracker::on_enter_mapped(CUpti_CallbackId cbid, const void* params) {
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle: {
      const std::scoped_lock lock(mutex_);
      table_.remove(as<cuIpcCloseMemHandle_params>(params).dptr);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost: {
      const std::scoped_lock lock(mutex_);
      remove_host_locked(host_address(as<cuMemFreeHost_params>(params).p));
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister: {
      const std::scoped_lock lock(mutex_);
      remove_host_locked(host_address(as<cuMemHostUnregister_params>(params).p));
      return true;
    }
    default:
      return false;
  }
}

bool AllocationTracker::on_exit_mapped(CUpti_CallbackId cbid, const void* params) {
  Address begin = 0;
  std::uint64_t size = 0;
  std::string_view api;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle:
    case CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2: {
      // The two parameter structs have the same layout ({pdptr, handle, Flags}). The call
      // says no size: the driver's range of the mapping does, asked before locking (the
      // tracker's mutex is a leaf: cupti/lock_order.h).
      const auto& p = as<cuIpcOpenMemHandle_v2_params>(params);
      begin = p.pdptr == nullptr ? 0 : static_cast<Address>(*p.pdptr);
      CUdeviceptr base = 0;
      std::size_t bytes = 0;
      if (begin == 0 || api_ == nullptr ||
          api_->cu_mem_get_address_range(&base, &bytes, begin) != CUDA_SUCCESS || bytes == 0) {
        ipc_unsized_.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
      begin = base;
      size = bytes;
      std::string text = label("cuIpcOpenMemHandle");
      const std::scoped_lock lock(mutex_);
      table_.add(begin, size, kIpcPool, std::move(text));
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
      const auto& p = as<cuMemHostAlloc_params>(params);
      begin = p.pp == nullptr ? 0 : host_address(*p.pp);
      size = p.bytesize;
      api = "cuMemHostAlloc";
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
      const auto& p = as<cuMemAllocHost_v2_params>(params);
      begin = p.pp == nullptr ? 0 : host_address(*p.pp);
      size = p.bytesize;
      api = "cuMemAllocHost_v2";
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister:
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2: {
      const auto& p = as<cuMemHostRegister_v2_params>(params);  // same layout in both forms
      begin = host_address(p.p);
      size = p.bytesize;
      api = "cuMemHostRegister";
      break;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuMemHostGetDevicePointer_v2: {
      // Unified addressing makes the device address the host one; where the driver returns
      // another, the same pinned range is addressable there too.
      const auto& p = as<cuMemHostGetDevicePointer_v2_params>(params);
      const Address device = p.pdptr == nullptr ? 0 : static_cast<Address>(*p.pdptr);
      const Address host = host_address(p.p);
      if (device == 0 || device == host) {
        return true;
      }
      std::string text = label("cuMemHostGetDevicePointer_v2");
      const std::scoped_lock lock(mutex_);
      auto range = host_.upper_bound(host);
      if (range == host_.begin()) {
        return true;  // pinned before graphcheck attached: its size is unknown
      }
      --range;
      if (host >= range->first + range->second) {
        return true;
      }
      const std::uint64_t offset = host - range->first;
      table_.add(device - offset, range->second, kHostPool, std::move(text));
      host_alias_[range->first].push_back(device - offset);
      return true;
    }
    default:
      return false;
  }
  if (begin == 0 || size == 0) {
    return true;
  }
  std::string text = label(api);
  const std::scoped_lock lock(mutex_);
  table_.add(begin, size, kHostPool, std::move(text));
  host_[begin] = size;
  return true;
}

void AllocationTracker::remove_host_locked(Address begin) {
  table_.remove(begin);
  host_.erase(begin);
  if (const auto alias = host_alias_.find(begin); alias != host_alias_.end()) {
    for (const Address device : alias->second) {
      table_.remove(device);
    }
    host_alias_.erase(alias);
  }
}

}  // namespace graphcheck::cupti
