// Allocation tracking through constructed driver-API callbacks: cuMemAlloc/Free, the async
// forms, and the VMM sleep/wake sequence (reserve, create, map, unmap, map again).
#include "cupti/allocation_tracker.h"

#include <gmock/gmock.h>
#include <graphcheck/address.h>
#include <graphcheck/error.h>
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "common/thrown_message.h"
#include "cupti_fake/callback_data.h"
#include "cupti_fake/site_probe.h"

namespace graphcheck::cupti {
namespace {

using testing::drive;
using ::testing::HasSubstr;

constexpr Address kBase = 0x7f0000000000;
constexpr std::uint64_t kTwoMiB = 2 << 20;

void mem_alloc(AllocationTracker& tracker, Address address, std::uint64_t size,
               CUresult result = CUDA_SUCCESS) {
  CUdeviceptr out = address;
  drive(tracker, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, cuMemAlloc_v2_params{&out, size}, result);
}

void mem_free(AllocationTracker& tracker, Address address) {
  drive(tracker, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, cuMemFree_v2_params{address});
}

// The VMM calls an allocator like vLLM's CuMemAllocator makes.
struct Vmm {
  AllocationTracker& tracker;
  void reserve(Address address, std::uint64_t size) {
    CUdeviceptr out = address;
    drive(tracker, CUPTI_DRIVER_TRACE_CBID_cuMemAddressReserve,
          cuMemAddressReserve_params{&out, size, 0, 0, 0});
  }
  void create_and_map(Address address, std::uint64_t size, CUmemGenericAllocationHandle handle) {
    CUmemGenericAllocationHandle out = handle;
    drive(tracker, CUPTI_DRIVER_TRACE_CBID_cuMemCreate, cuMemCreate_params{&out, size, nullptr, 0});
    drive(tracker, CUPTI_DRIVER_TRACE_CBID_cuMemMap, cuMemMap_params{address, size, 0, handle, 0});
  }
  void unmap_and_release(Address address, std::uint64_t size, CUmemGenericAllocationHandle handle) {
    drive(tracker, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, cuMemUnmap_params{address, size});
    drive(tracker, CUPTI_DRIVER_TRACE_CBID_cuMemRelease, cuMemRelease_params{handle});
  }
};

TEST(AllocationTrackerTest, MemAllocAddsADefaultPoolEntryAndMemFreeRemovesIt) {
  AllocationTracker tracker;
  mem_alloc(tracker, kBase, 4096);
  ASSERT_EQ(tracker.allocations().size(), 1u);
  const Allocation allocation = tracker.allocations()[0];
  EXPECT_EQ(allocation.begin, kBase);
  EXPECT_EQ(allocation.size, 4096u);
  EXPECT_EQ(allocation.pool, "default");
  EXPECT_EQ(allocation.generation, 1u);
  EXPECT_EQ(allocation.label, "cuMemAlloc_v2 #1");
  mem_free(tracker, kBase);
  EXPECT_TRUE(tracker.allocations().empty());
  EXPECT_EQ(tracker.stats().unknown_frees, 0u);
}

TEST(AllocationTrackerTest, FailedAllocationIsNotRecorded) {
  AllocationTracker tracker;
  mem_alloc(tracker, kBase, 4096, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_TRUE(tracker.allocations().empty());
}

TEST(AllocationTrackerTest, FreeOfAnUnknownAddressIsCountedNotFatal) {
  AllocationTracker tracker;
  mem_free(tracker, kBase);
  EXPECT_EQ(tracker.stats().unknown_frees, 1u);
}

TEST(AllocationTrackerTest, ReallocationAtTheSameAddressGetsANewGeneration) {
  AllocationTracker tracker;
  mem_alloc(tracker, kBase, 4096);
  mem_free(tracker, kBase);
  mem_alloc(tracker, kBase, 4096);
  ASSERT_EQ(tracker.allocations().size(), 1u);
  EXPECT_EQ(tracker.allocations()[0].generation, 2u);
}

TEST(AllocationTrackerTest, AsyncFormsUseTheirPoolsAndFreeAsyncRemoves) {
  AllocationTracker tracker;
  CUdeviceptr first = kBase;
  CUdeviceptr second = kBase + 0x10000;
  CUdeviceptr third = kBase + 0x20000;
  drive(tracker, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
        cuMemAllocAsync_params{&first, 256, nullptr});
  drive(tracker, CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
        cuMemAllocAsync_ptsz_params{&second, 512, nullptr});
  auto* pool = reinterpret_cast<CUmemoryPool>(std::uintptr_t{0xabc0});
  drive(tracker, CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
        cuMemAllocFromPoolAsync_params{&third, 1024, pool, nullptr});
  const auto allocations = tracker.allocations();
  ASSERT_EQ(allocations.size(), 3u);
  EXPECT_EQ(allocations[0].pool, "async");
  EXPECT_EQ(allocations[1].pool, "async");
  EXPECT_EQ(allocations[1].size, 512u);
  EXPECT_EQ(allocations[2].pool, "async:0xabc0");
  EXPECT_EQ(allocations[2].label, "cuMemAllocFromPoolAsync #3");
  drive(tracker, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, cuMemFreeAsync_params{first, nullptr});
  drive(tracker, CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
        cuMemFreeAsync_ptsz_params{second, nullptr});
  ASSERT_EQ(tracker.allocations().size(), 1u);
  EXPECT_EQ(tracker.allocations()[0].begin, third);
}

TEST(AllocationTrackerTest, MappingInsideAReservationIsAVmmAllocation) {
  AllocationTracker tracker;
  Vmm vmm{tracker};
  vmm.reserve(kBase, 2 * kTwoMiB);
  EXPECT_TRUE(tracker.allocations().empty()) << "a reservation alone holds no memory";
  vmm.create_and_map(kBase, kTwoMiB, 11);
  ASSERT_EQ(tracker.allocations().size(), 1u);
  EXPECT_EQ(tracker.allocations()[0].pool, "vmm");
  EXPECT_EQ(tracker.allocations()[0].size, kTwoMiB);
  EXPECT_EQ(tracker.allocations()[0].label, "cuMemMap #1");
  EXPECT_EQ(tracker.stats().untagged_maps, 0u);
}

TEST(AllocationTrackerTest, UnmapAndMapAgainAtTheSameAddressBumpsTheGeneration) {
  AllocationTracker tracker;
  Vmm vmm{tracker};
  vmm.reserve(kBase, kTwoMiB);
  vmm.create_and_map(kBase, kTwoMiB, 11);
  const std::uint64_t before = tracker.allocations().at(0).generation;
  vmm.unmap_and_release(kBase, kTwoMiB, 11);
  EXPECT_TRUE(tracker.allocations().empty()) << "asleep: the range is reserved, not mapped";
  vmm.create_and_map(kBase, kTwoMiB, 12);
  ASSERT_EQ(tracker.allocations().size(), 1u);
  EXPECT_EQ(tracker.allocations()[0].begin, kBase);
  EXPECT_NE(tracker.allocations()[0].generation, before);
  // The same allocation mapped again: its label stays, so the checker matches it.
  EXPECT_EQ(tracker.allocations()[0].label, "cuMemMap #1");
}

TEST(AllocationTrackerTest, MarkRestoredKeepsThePreSleepGeneration) {
  AllocationTracker tracker;
  Vmm vmm{tracker};
  vmm.reserve(kBase, kTwoMiB);
  vmm.create_and_map(kBase, kTwoMiB, 11);
  const std::uint64_t before = tracker.allocations().at(0).generation;
  vmm.unmap_and_release(kBase, kTwoMiB, 11);
  vmm.create_and_map(kBase, kTwoMiB, 12);
  tracker.mark_restored(kBase, kTwoMiB);
  EXPECT_EQ(tracker.allocations().at(0).generation, before);
}

TEST(AllocationTrackerTest, RestorePolicyOfATaggedReservationKeepsGenerations) {
  AllocationTracker tracker;
  Vmm vmm{tracker};
  vmm.reserve(kBase, kTwoMiB);
  vmm.create_and_map(kBase, kTwoMiB, 11);
  tracker.tag_reservation(kBase + 100, "weights", RestorePolicy::kRestore);
  EXPECT_EQ(tracker.allocations().at(0).pool, "weights") << "the tag renames live mappings";
  const std::uint64_t before = tracker.allocations().at(0).generation;
  vmm.unmap_and_release(kBase, kTwoMiB, 11);
  vmm.create_and_map(kBase, kTwoMiB, 12);
  EXPECT_EQ(tracker.allocations().at(0).generation, before);
  EXPECT_EQ(tracker.allocations().at(0).pool, "weights");
}

TEST(AllocationTrackerTest, DefaultRestorePolicyAppliesToUntaggedReservations) {
  AllocationTracker tracker({SiteCapture::kNone, RestorePolicy::kRestore});
  Vmm vmm{tracker};
  vmm.reserve(kBase, kTwoMiB);
  vmm.create_and_map(kBase, kTwoMiB, 11);
  const std::uint64_t before = tracker.allocations().at(0).generation;
  vmm.unmap_and_release(kBase, kTwoMiB, 11);
  vmm.create_and_map(kBase, kTwoMiB, 12);
  EXPECT_EQ(tracker.allocations().at(0).generation, before);
}

TEST(AllocationTrackerTest, PartialUnmapKeepsTheRestMapped) {
  AllocationTracker tracker;
  Vmm vmm{tracker};
  vmm.reserve(kBase, 2 * kTwoMiB);
  vmm.create_and_map(kBase, 2 * kTwoMiB, 11);
  drive(tracker, CUPTI_DRIVER_TRACE_CBID_cuMemUnmap, cuMemUnmap_params{kBase + kTwoMiB, kTwoMiB});
  ASSERT_EQ(tracker.allocations().size(), 1u);
  EXPECT_EQ(tracker.allocations()[0].begin, kBase);
  EXPECT_EQ(tracker.allocations()[0].size, kTwoMiB);
}

TEST(AllocationTrackerTest, AddressFreeForgetsTheRemapHistory) {
  AllocationTracker tracker;
  Vmm vmm{tracker};
  vmm.reserve(kBase, kTwoMiB);
  vmm.create_and_map(kBase, kTwoMiB, 11);
  vmm.unmap_and_release(kBase, kTwoMiB, 11);
  drive(tracker, CUPTI_DRIVER_TRACE_CBID_cuMemAddressFree, cuMemAddressFree_params{kBase, kTwoMiB});
  vmm.reserve(kBase, kTwoMiB);
  vmm.create_and_map(kBase, kTwoMiB, 12);
  EXPECT_THAT(test_support::thrown_message([&] {
                tracker.tag_reservation(kBase + 2 * kTwoMiB, "x", RestorePolicy::kRestore);
              }),
              HasSubstr("tag_reservation: no reserved VA range contains " +
                        format_address(kBase + 2 * kTwoMiB)));
  // A fresh reservation: nothing to restore from, mark_restored leaves the new generation.
  const std::uint64_t fresh = tracker.allocations().at(0).generation;
  tracker.mark_restored(kBase, kTwoMiB);
  EXPECT_EQ(tracker.allocations().at(0).generation, fresh);
}

TEST(AllocationTrackerTest, MapOutsideAnyReservationIsCountedAndPooledAsVmm) {
  AllocationTracker tracker;
  Vmm vmm{tracker};
  vmm.create_and_map(kBase, kTwoMiB, 11);
  EXPECT_EQ(tracker.stats().untagged_maps, 1u);
  EXPECT_EQ(tracker.allocations().at(0).pool, "vmm");
}

TEST(AllocationTrackerTest, TagReservationOfAnUnknownAddressNamesIt) {
  AllocationTracker tracker;
  try {
    tracker.tag_reservation(kBase, "weights", RestorePolicy::kDiscard);
    FAIL() << "expected graphcheck::Error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("0x7f0000000000"));
    EXPECT_THAT(error.what(), HasSubstr("cuMemAddressReserve"));
  }
}

TEST(AllocationTrackerTest, MarkRestoredWithNothingMappedNamesTheRange) {
  AllocationTracker tracker;
  try {
    tracker.mark_restored(kBase, 4096);
    FAIL() << "expected graphcheck::Error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("mark_restored(0x7f0000000000, 4096)"));
    EXPECT_THAT(error.what(), HasSubstr("no live VMM mapping"));
  }
}

TEST(AllocationTrackerTest, IgnoresOtherDomainsAndNullData) {
  AllocationTracker tracker;
  tracker.on_callback(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, nullptr);
  CUdeviceptr out = kBase;
  testing::DriverCall<cuMemAlloc_v2_params> call({&out, 64});
  tracker.on_callback(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
                      call.at(CUPTI_API_EXIT));
  EXPECT_TRUE(tracker.allocations().empty());
  EXPECT_EQ(tracker.events(), 0u);
}

TEST(AllocationTrackerTest, BacktraceSiteCaptureKeepsTheApiPrefix) {
  AllocationTracker tracker({SiteCapture::kBacktrace, RestorePolicy::kDiscard});
  mem_alloc(tracker, kBase, 64);
  // The test binary links graphcheck statically, so every frame may be "ours": the suffix is
  // optional, the prefix is not.
  EXPECT_THAT(tracker.allocations().at(0).label, ::testing::StartsWith("cuMemAlloc_v2 #1"));
}

// A 64-byte cuMemAlloc at `address`, made from libsite_probe.so's frame (site_probe_call).
struct ProbeCall {
  AllocationTracker* tracker;
  Address address;
};
void allocate_from_probe(void* argument) {
  const auto* call = static_cast<const ProbeCall*>(argument);
  mem_alloc(*call->tracker, call->address, 64);
}

// The site is the first frame outside the CUDA, CUPTI and graphcheck code (here all of the
// test binary): libsite_probe.so's caller. Its second allocation is named from the frames
// already described, the same way.
TEST(AllocationTrackerTest, TheSiteIsTheFirstFrameOutsideCudaCuptiAndGraphcheck) {
  AllocationTracker tracker({SiteCapture::kBacktrace, RestorePolicy::kDiscard});
  ProbeCall first{&tracker, kBase};
  ProbeCall second{&tracker, kBase + 4096};
  site_probe_call(&allocate_from_probe, &first);
  site_probe_call(&allocate_from_probe, &second);
  const auto allocations = tracker.allocations();
  ASSERT_EQ(allocations.size(), 2U);
  EXPECT_THAT(allocations[0].label,
              ::testing::StartsWith("cuMemAlloc_v2 #1 from libsite_probe.so(site_probe_call+0x"));
  EXPECT_EQ(allocations[1].label.substr(std::string_view("cuMemAlloc_v2 #2").size()),
            allocations[0].label.substr(std::string_view("cuMemAlloc_v2 #1").size()));
}

// Allocations on several threads at once share the table of described frames (one mutex):
// each is named the same way, whatever thread described its frames first.
TEST(AllocationTrackerTest, ThreadsAllocatingAtOnceNameTheSameSite) {
  AllocationTracker tracker({SiteCapture::kBacktrace, RestorePolicy::kDiscard});
  constexpr int kThreads = 4;
  constexpr int kEach = 200;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kEach; ++i) {
        ProbeCall call{&tracker, kBase + (static_cast<Address>(t * kEach + i) << 8)};
        site_probe_call(&allocate_from_probe, &call);
      }
    });
  }
  for (std::thread& thread : threads) {
    thread.join();
  }
  const auto allocations = tracker.allocations();
  ASSERT_EQ(allocations.size(), static_cast<std::size_t>(kThreads * kEach));
  for (const Allocation& allocation : allocations) {
    EXPECT_THAT(allocation.label,
                ::testing::HasSubstr(" from libsite_probe.so(site_probe_call+0x"));
  }
}

TEST(AllocationTrackerTest, EnablesExactlyTheDriverCallbacksItHandles) {
  AllocationTracker tracker;
  const auto ids = tracker.callbacks();
  // 16 allocation calls, 8 stream-capture begin/end forms, 10 IPC and pinned host calls
  EXPECT_EQ(ids.size(), 34u);
  for (const auto& id : ids) {
    EXPECT_EQ(id.domain, CUPTI_CB_DOMAIN_DRIVER_API);
  }
}

}  // namespace
}  // namespace graphcheck::cupti
