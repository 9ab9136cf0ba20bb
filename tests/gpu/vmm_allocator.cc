// The gpu tier's VMM allocator (see gpu_support.h). Ran on an H200 on 2026-12-04.
#include <string>

#include "gpu/gpu_support.h"

namespace graphcheck::gpu_testing {
namespace {

// Driver entry points resolved once through the runtime (which loads libcuda itself).
struct VmmApi {
  decltype(&cuMemGetAllocationGranularity) granularity = nullptr;
  decltype(&cuMemAddressReserve) reserve = nullptr;
  decltype(&cuMemAddressFree) address_free = nullptr;
  decltype(&cuMemCreate) create = nullptr;
  decltype(&cuMemRelease) release = nullptr;
  decltype(&cuMemMap) map = nullptr;
  decltype(&cuMemUnmap) unmap = nullptr;
  decltype(&cuMemSetAccess) set_access = nullptr;
  std::string error;
};

template <typename Fn>
void resolve(const char* name, Fn& fn, std::string& error) {
  void* pointer = nullptr;
  cudaDriverEntryPointQueryResult query{};
  if (cudaGetDriverEntryPointByVersion(name, &pointer, 12000, cudaEnableDefault, &query) !=
          cudaSuccess ||
      pointer == nullptr) {
    error += std::string(error.empty() ? "" : ", ") + name;
    return;
  }
  fn = reinterpret_cast<Fn>(pointer);
}

const VmmApi& vmm_api() {
  static const VmmApi api = [] {
    VmmApi result;
    resolve("cuMemGetAllocationGranularity", result.granularity, result.error);
    resolve("cuMemAddressReserve", result.reserve, result.error);
    resolve("cuMemAddressFree", result.address_free, result.error);
    resolve("cuMemCreate", result.create, result.error);
    resolve("cuMemRelease", result.release, result.error);
    resolve("cuMemMap", result.map, result.error);
    resolve("cuMemUnmap", result.unmap, result.error);
    resolve("cuMemSetAccess", result.set_access, result.error);
    if (!result.error.empty()) {
      result.error = "driver entry points not found: " + result.error;
    }
    return result;
  }();
  return api;
}

CUmemAllocationProp properties(int device) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = device;
  return prop;
}

}  // namespace

VmmAllocator::VmmAllocator(int device, std::size_t size) : device_(device) {
  const VmmApi& api = vmm_api();
  if (!api.error.empty()) {
    error_ = api.error;
    return;
  }
  const CUmemAllocationProp prop = properties(device_);
  std::size_t granularity = 0;
  if (!ok(api.granularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
          "cuMemGetAllocationGranularity")) {
    return;
  }
  size_ = (size + granularity - 1) / granularity * granularity;
  if (!ok(api.reserve(&base_, size_, 0, 0, 0), "cuMemAddressReserve")) {
    return;
  }
  create_and_map();
}

VmmAllocator::~VmmAllocator() {
  const VmmApi& api = vmm_api();
  if (mapped_) {
    sleep();
  }
  if (base_ != 0 && api.address_free != nullptr) {
    api.address_free(base_, size_);
  }
}

void VmmAllocator::create_and_map() {
  const VmmApi& api = vmm_api();
  const CUmemAllocationProp prop = properties(device_);
  if (!ok(api.create(&handle_, size_, &prop, 0), "cuMemCreate") ||
      !ok(api.map(base_, size_, 0, handle_, 0), "cuMemMap")) {
    return;
  }
  mapped_ = true;
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  ok(api.set_access(base_, size_, &access, 1), "cuMemSetAccess");
}

void VmmAllocator::sleep() {
  const VmmApi& api = vmm_api();
  if (!mapped_) {
    return;
  }
  ok(api.unmap(base_, size_), "cuMemUnmap");
  ok(api.release(handle_), "cuMemRelease");
  mapped_ = false;
}

void VmmAllocator::wake() {
  if (!mapped_) {
    create_and_map();
  }
}

bool VmmAllocator::ok(CUresult result, const char* call) {
  if (result == CUDA_SUCCESS) {
    return true;
  }
  if (error_.empty()) {
    error_ =
        std::string(call) + " failed with CUresult " + std::to_string(static_cast<int>(result));
  }
  return false;
}

}  // namespace graphcheck::gpu_testing
