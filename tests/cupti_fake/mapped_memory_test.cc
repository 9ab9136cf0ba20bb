// Memory a graph can address that no device allocation call made (issue 18 §4): IPC
// mappings (cuIpcOpenMemHandle) and pinned host memory (cuMemHostAlloc, cuMemAllocHost,
// cuMemHostRegister, cuMemHostGetDevicePointer) are allocations, in pools "ipc" and "host",
// until closed, freed or unregistered; a graph reading them is no longer `dangling`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cupti/allocation_tracker.h"
#include "cupti/backend.h"
#include "cupti_fake/callback_data.h"
#include "cupti_fake/fake_driver.h"

namespace graphcheck::cupti {
namespace {

using testing::drive;
using testing::FakeDriver;
using testing::FakeNode;
using ::testing::HasSubstr;

constexpr CUdeviceptr kIpc = 0x7f5000000000;
constexpr Address kHost = 0x7e0000001000;

class MappedMemoryTest : public ::testing::Test {
 protected:
  FakeDriver api_;
  AllocationTracker tracker_{{}, &api_};

  void open_ipc(CUdeviceptr address) {
    CUdeviceptr out = address;
    drive(tracker_, CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2,
          cuIpcOpenMemHandle_v2_params{&out, {}, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS});
  }
};

TEST_F(MappedMemoryTest, AnIpcMappingIsAnAllocationUntilClosed) {
  api_.address_ranges[kIpc] = 1 << 20;
  open_ipc(kIpc);
  std::vector<Allocation> live = tracker_.allocations();
  ASSERT_EQ(live.size(), 1U);
  EXPECT_EQ(live[0].begin, kIpc);
  EXPECT_EQ(live[0].size, 1U << 20);
  EXPECT_EQ(live[0].pool, "ipc");
  EXPECT_THAT(live[0].label, HasSubstr("cuIpcOpenMemHandle #1"));
  drive(tracker_, CUPTI_DRIVER_TRACE_CBID_cuIpcCloseMemHandle, cuIpcCloseMemHandle_params{kIpc});
  EXPECT_TRUE(tracker_.allocations().empty());
}

TEST_F(MappedMemoryTest, AnIpcMappingOfUnknownSizeIsCounted) {
  open_ipc(kIpc);  // the fake knows no range there
  EXPECT_TRUE(tracker_.allocations().empty());
  EXPECT_EQ(tracker_.ipc_unsized(), 1U);
  AllocationTracker without_driver;
  CUdeviceptr out = kIpc;
  drive(without_driver, CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle,
        cuIpcOpenMemHandle_params{&out, {}, 0});
  EXPECT_EQ(without_driver.ipc_unsized(), 1U);
}

TEST_F(MappedMemoryTest, PinnedHostMemoryIsAnAllocationAtItsAddressUntilFreed) {
  void* pinned = reinterpret_cast<void*>(kHost);  // NOLINT(performance-no-int-to-ptr)
  drive(tracker_, CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
        cuMemHostAlloc_params{&pinned, 4096, CU_MEMHOSTALLOC_DEVICEMAP});
  void* other = reinterpret_cast<void*>(kHost + 0x10000);  // NOLINT(performance-no-int-to-ptr)
  drive(tracker_, CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2,
        cuMemHostRegister_v2_params{other, 8192, CU_MEMHOSTREGISTER_DEVICEMAP});
  // A device address other than the host one: the same memory there too.
  CUdeviceptr device = 0x7f6000000000;
  drive(tracker_, CUPTI_DRIVER_TRACE_CBID_cuMemHostGetDevicePointer_v2,
        cuMemHostGetDevicePointer_v2_params{&device, pinned, 0});
  std::vector<Allocation> live = tracker_.allocations();
  ASSERT_EQ(live.size(), 3U);
  EXPECT_EQ(live[0].begin, kHost);
  EXPECT_EQ(live[0].size, 4096U);
  EXPECT_EQ(live[0].pool, "host");
  EXPECT_EQ(live[1].begin, kHost + 0x10000);
  EXPECT_EQ(live[1].size, 8192U);
  EXPECT_EQ(live[2].begin, 0x7f6000000000U);
  EXPECT_EQ(live[2].size, 4096U);
  EXPECT_EQ(live[2].pool, "host");

  drive(tracker_, CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, cuMemFreeHost_params{pinned});
  drive(tracker_, CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister, cuMemHostUnregister_params{other});
  EXPECT_TRUE(tracker_.allocations().empty());
}

// Through the backend: a kernel reading an IPC buffer and a pinned staging buffer finds both
// live (unregistered in an injected process, allowlistable by label), not dangling.
TEST(MappedMemoryBackendTest, AGraphReadingIpcAndPinnedMemoryIsNotDangling) {
  FakeDriver api;
  api.address_ranges[kIpc] = 1 << 20;
  Backend backend(api, {});
  ASSERT_TRUE(backend.enable().ok());
  CUdeviceptr ipc_out = kIpc;
  cuIpcOpenMemHandle_v2_params open{&ipc_out, {}, 0};
  void* pinned = reinterpret_cast<void*>(kHost);  // NOLINT(performance-no-int-to-ptr)
  cuMemAllocHost_v2_params host{&pinned, 4096};
  CUresult ok = CUDA_SUCCESS;
  const auto exit_call = [&](CUpti_CallbackId cbid, const void* params) {
    CUpti_CallbackData data{};
    data.callbackSite = CUPTI_API_EXIT;
    data.functionParams = params;
    data.functionReturnValue = &ok;
    backend.dispatcher().on_callback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
  };
  exit_call(CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2, &open);
  exit_call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2, &host);

  std::uint64_t ipc_arg = kIpc + 64;
  std::uint64_t host_arg = kHost + 8;
  void* args[] = {&ipc_arg, &host_arg};
  const CUgraph graph = api.add_graph(1);
  FakeNode node;
  node.type = CU_GRAPH_NODE_TYPE_KERNEL;
  node.id = 2;
  node.kernel.func = api.add_function("all_reduce", {{0, 8}, {8, 8}});
  node.kernel.kernelParams = args;
  api.add_node(graph, node);
  CUgraphExec exec = api.add_exec(3);
  cuGraphInstantiateWithFlags_params instantiate{&exec, graph, 0};
  exit_call(CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &instantiate);
  ASSERT_TRUE(backend.dispatcher().take_error().ok());

  const Report report = backend.session().check_now("exit");
  ASSERT_EQ(report.findings.size(), 2U);
  for (const Finding& finding : report.findings) {
    EXPECT_EQ(finding.verdict, Verdict::kUnregistered) << finding.owner;
  }
  EXPECT_THAT(report.findings[0].owner, HasSubstr("cuIpcOpenMemHandle"));
  EXPECT_THAT(report.findings[1].owner, HasSubstr("cuMemAllocHost_v2"));
  EXPECT_TRUE(std::any_of(api.enabled.begin(), api.enabled.end(), [](const CallbackId& id) {
    return id.cbid == CUPTI_DRIVER_TRACE_CBID_cuIpcOpenMemHandle_v2;
  }));
}

}  // namespace
}  // namespace graphcheck::cupti
