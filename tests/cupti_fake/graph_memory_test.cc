// Graph memory across graphs (issue 18 item 5): cuMemFreeAsync inside a stream capture adds a
// free node and frees nothing yet; it must be passed a graph allocation (cuda.h,
// cuMemFreeAsync), which may come from an earlier graph's alloc node. Such a free is
// legitimate: its address is graph memory (verdict `graph`), never `dangling`.
// A caching allocator's graph pools (issue 18 §4): the segments cuMemAlloc makes on the
// capturing thread while its capture is open are graph memory in every later graph.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <thread>

#include "cupti/backend.h"
#include "cupti_fake/fake_driver.h"

namespace graphcheck::cupti {
namespace {

using testing::FakeDriver;
using testing::FakeNode;

constexpr CUdeviceptr kGraphMemory = 0x7f0000400000;

class GraphMemoryTest : public ::testing::Test {
 protected:
  GraphMemoryTest() {
    BackendOptions options;
    options.session.log = [this](std::string_view text) { log_ << text; };
    backend_ = std::make_unique<Backend>(api_, std::move(options));
  }
  void call(CUpti_CallbackId cbid, const void* params) {
    CUresult result = CUDA_SUCCESS;
    CUpti_CallbackData data{};
    data.functionParams = params;
    data.callbackSite = CUPTI_API_ENTER;
    backend_->dispatcher().on_callback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
    data.callbackSite = CUPTI_API_EXIT;
    data.functionReturnValue = &result;
    backend_->dispatcher().on_callback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
  }
  void begin_capture() {
    cuStreamBeginCapture_v2_params params{stream_, CU_STREAM_CAPTURE_MODE_GLOBAL};
    call(CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2, &params);
  }
  void allocate(CUdeviceptr address, std::size_t bytes) {
    CUdeviceptr out = address;
    cuMemAlloc_v2_params params{&out, bytes};
    call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &params);
  }
  std::string pool_at(CUdeviceptr address) const {
    for (const Allocation& allocation : backend_->tracker().allocations()) {
      if (allocation.begin == address) {
        return allocation.pool;
      }
    }
    return "(none)";
  }
  void end_capture(CUgraph graph) {
    cuStreamEndCapture_params params{stream_, &graph};
    call(CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, &params);
  }
  void instantiate(CUgraphExec exec, CUgraph graph) {
    CUpti_GraphData created{};
    created.graph = graph;
    created.graphExec = exec;
    const CUpti_ResourceData resource{nullptr, {nullptr}, &created};
    backend_->dispatcher().on_callback(CUPTI_CB_DOMAIN_RESOURCE,
                                       CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, &resource);
    cuGraphInstantiateWithFlags_params params{&exec, graph, 0};
    call(CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &params);
  }

  FakeDriver api_;
  std::ostringstream log_;
  std::unique_ptr<Backend> backend_;
  CUstream stream_ = reinterpret_cast<CUstream>(0x5);
  CUdeviceptr argument_ = kGraphMemory;
  void* args_[1] = {&argument_};
};

TEST_F(GraphMemoryTest, AGraphFreeingAnEarlierGraphsAllocationHasNoFinding) {
  // Graph 1 allocates (cudaMallocAsync in the capture: an alloc node) and does not free.
  begin_capture();
  CUdeviceptr out = kGraphMemory;
  cuMemAllocAsync_params alloc{&out, 4096, stream_};
  call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, &alloc);
  CUgraph first = api_.add_graph(1);
  FakeNode alloc_node;
  alloc_node.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
  alloc_node.id = 1;
  alloc_node.alloc.dptr = kGraphMemory;
  alloc_node.alloc.bytesize = 4096;
  api_.add_node(first, alloc_node);
  end_capture(first);
  instantiate(api_.add_exec(11), first);

  // Graph 2, captured before graph 1 ever ran, reads the memory and frees it.
  begin_capture();
  cuMemFreeAsync_params free{kGraphMemory, stream_};
  call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, &free);
  CUgraph second = api_.add_graph(2);
  FakeNode kernel;
  kernel.type = CU_GRAPH_NODE_TYPE_KERNEL;
  kernel.id = 2;
  kernel.kernel.func = api_.add_function("consume", {{0, 8}});
  kernel.kernel.kernelParams = args_;
  api_.add_node(second, kernel);
  FakeNode free_node;
  free_node.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
  free_node.id = 3;
  free_node.freed = kGraphMemory;
  api_.add_node(second, free_node);
  end_capture(second);
  instantiate(api_.add_exec(12), second);
  ASSERT_TRUE(backend_->dispatcher().take_error().ok());

  const Report report = backend_->session().check_now("now");
  EXPECT_TRUE(report.findings.empty()) << to_text(report);
  // The alloc range, the kernel's word and the free node's address are graph memory.
  EXPECT_EQ(report.summary.count(Verdict::kGraph), 3U);
  EXPECT_EQ(report.summary.count(Verdict::kDangling), 0U);
}

TEST_F(GraphMemoryTest, AFreeOutsideACaptureStillEndsTheAllocation) {
  CUdeviceptr out = kGraphMemory;
  cuMemAllocAsync_params alloc{&out, 4096, stream_};
  call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, &alloc);
  EXPECT_EQ(backend_->tracker().allocations().size(), 1U);
  cuMemFreeAsync_params free{kGraphMemory, stream_};
  call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, &free);
  EXPECT_TRUE(backend_->tracker().allocations().empty());
}

TEST_F(GraphMemoryTest, SegmentsAllocatedDuringACaptureAreGraphMemoryInTheNextGraph) {
  constexpr CUdeviceptr kBefore = 0x7f0000800000;
  constexpr CUdeviceptr kPoolSegment = 0x7f0000a00000;
  constexpr CUdeviceptr kOtherThread = 0x7f0000c00000;
  constexpr CUdeviceptr kAfter = 0x7f0000e00000;
  allocate(kBefore, 2 << 20);  // the default pool, before any capture
  // Graph 1: the caching allocator grows the graph's pool by cudaMalloc on the capturing
  // thread; another thread's cudaMalloc meanwhile is no graph's.
  begin_capture();
  allocate(kPoolSegment, 2 << 20);
  std::thread([&] { allocate(kOtherThread, 2 << 20); }).join();
  CUgraph first = api_.add_graph(1);
  end_capture(first);
  instantiate(api_.add_exec(11), first);
  allocate(kAfter, 2 << 20);  // the capture ended: the default pool again
  EXPECT_EQ(pool_at(kBefore), "default");
  EXPECT_EQ(pool_at(kPoolSegment), "graph:capture_segment");
  EXPECT_EQ(pool_at(kOtherThread), "default");
  EXPECT_EQ(pool_at(kAfter), "default");

  // Graph 2 reads graph 1's output in the shared pool and a tensor of the default pool.
  begin_capture();
  CUgraph second = api_.add_graph(2);
  CUdeviceptr words[2] = {kPoolSegment + 4096, kBefore + 256};
  void* args[2] = {&words[0], &words[1]};
  FakeNode kernel;
  kernel.type = CU_GRAPH_NODE_TYPE_KERNEL;
  kernel.id = 2;
  kernel.kernel.func = api_.add_function("next_piece", {{0, 8}, {8, 8}});
  kernel.kernel.kernelParams = args;
  api_.add_node(second, kernel);
  end_capture(second);
  instantiate(api_.add_exec(12), second);
  ASSERT_TRUE(backend_->dispatcher().take_error().ok());

  const Report report = backend_->session().check_now("now");
  EXPECT_EQ(report.summary.count(Verdict::kGraph), 1U) << to_text(report);
  ASSERT_EQ(report.findings.size(), 1U) << to_text(report);
  EXPECT_EQ(report.findings[0].verdict, Verdict::kUnregistered);
  EXPECT_EQ(report.findings[0].address, kBefore + 256);
}

}  // namespace
}  // namespace graphcheck::cupti
