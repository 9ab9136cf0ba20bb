// The gpu tier (label gpu; every test skips without a device), issue 18 section 5: every
// way a kernel reaches a graph (cudaLaunchKernelExC, a cudaGetKernel handle launched through
// cuLaunchKernel, the packed `extra` form, a __grid_constant__ TMA descriptor), the
// driver-level setters of an instantiated graph, and two threads instantiating at once. Each
// record is compared with what the test launched and judged against verdicts known by
// construction. Ran on an H200 on 2026-12-04: the TMA and driver-setter tests failed there
// and are fixed since, not yet run again (docs/gpu-check.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <barrier>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gpu/gpu_fixture.h"

namespace graphcheck::gpu_testing {
namespace {

using ::testing::HasSubstr;

class GpuLaunchStylesTest : public GpuFixture {
 protected:
  static constexpr unsigned kBlocks = (kElements + 255) / 256;

  void SetUp() override {
    GpuFixture::SetUp();
    if (IsSkipped() || HasFatalFailure()) {
      return;
    }
    weight_ = buffer();
    scratch_ = buffer();
    out_ = buffer();
    ASSERT_NE(out_, nullptr);
    register_weight_and_out(weight_, out_);
  }

  Pointers pointers() const { return Pointers{weight_, scratch_, out_, kElements}; }

  // Ends the capture begun by the test, instantiates, launches, and checks the one kernel
  // node: struct_kernel with `pointers()` as its one argument, the weight registered, the
  // output an input, the scratch buffer unregistered.
  void expect_struct_kernel_judged(const std::string& name) {
    cudaGraph_t graph = nullptr;
    GRAPHCHECK_CUDA_OK(cudaStreamEndCapture(stream_, &graph));
    const cudaGraphExec_t exec = instantiate(graph);
    ASSERT_NE(exec, nullptr);
    launch(exec);
    const auto rec = record(exec);
    ASSERT_NE(rec, nullptr);
    ASSERT_EQ(rec->nodes.size(), 1u);
    const Node& node = rec->nodes[0];
    EXPECT_EQ(node.type, NodeType::kKernel);
    EXPECT_THAT(node.name, HasSubstr("struct_kernel"));
    ASSERT_EQ(node.params.size(), 1u);
    EXPECT_EQ(node.params[0].bytes.size(), sizeof(Pointers));
    EXPECT_EQ(param_word(node, 0, 0), address_of(weight_));
    EXPECT_EQ(param_word(node, 0, 8), address_of(scratch_));
    EXPECT_EQ(param_word(node, 0, 16), address_of(out_));
    const Report report = backend().session().check_now("check");
    EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1u);
    EXPECT_EQ(report.summary.count(Verdict::kInput), 1u);
    EXPECT_EQ(verdict_at(report, address_of(scratch_)), Verdict::kUnregistered);
    finish(name);
  }

  float* weight_ = nullptr;
  float* scratch_ = nullptr;
  float* out_ = nullptr;
};

TEST_F(GpuLaunchStylesTest, LaunchKernelExCWithAnAttribute) {
  Pointers p = pointers();
  void* args[] = {&p};
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributePriority;
  attribute.val.priority = 0;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(kBlocks);
  config.blockDim = dim3(256);
  config.stream = stream_;
  config.attrs = &attribute;
  config.numAttrs = 1;
  GRAPHCHECK_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  GRAPHCHECK_CUDA_OK(cudaLaunchKernelExC(&config, struct_kernel_entry(), args));
  expect_struct_kernel_judged("launch_kernel_ex_c");
}

TEST_F(GpuLaunchStylesTest, ACudaGetKernelHandleLaunchedThroughTheDriver) {
  const auto launch_kernel = driver_entry<decltype(&cuLaunchKernel)>("cuLaunchKernel");
  ASSERT_NE(launch_kernel, nullptr);
  cudaKernel_t kernel = nullptr;  // a CUkernel: the node may carry it cast to CUfunction
  GRAPHCHECK_CUDA_OK(cudaGetKernel(&kernel, struct_kernel_entry()));
  Pointers p = pointers();
  void* args[] = {&p};
  GRAPHCHECK_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  GRAPHCHECK_CU_OK(launch_kernel(reinterpret_cast<CUfunction>(kernel), kBlocks, 1, 1, 256, 1, 1, 0,
                                 stream_, args, nullptr));
  expect_struct_kernel_judged("cuda_get_kernel");
}

TEST_F(GpuLaunchStylesTest, ThePackedExtraForm) {
  const auto launch_kernel = driver_entry<decltype(&cuLaunchKernel)>("cuLaunchKernel");
  ASSERT_NE(launch_kernel, nullptr);
  cudaFunction_t function = nullptr;
  GRAPHCHECK_CUDA_OK(cudaGetFuncBySymbol(&function, struct_kernel_entry()));
  alignas(8) Pointers packed = pointers();  // one argument at offset 0: the buffer is it
  std::size_t size = sizeof(packed);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  GRAPHCHECK_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  GRAPHCHECK_CU_OK(launch_kernel(reinterpret_cast<CUfunction>(function), kBlocks, 1, 1, 256, 1, 1,
                                 0, stream_, nullptr, extra));
  expect_struct_kernel_judged("extra_launch");
}

TEST_F(GpuLaunchStylesTest, AGridConstantTmaDescriptorIsAttributedToItsGlobalAddress) {
  const auto encode = driver_entry<decltype(&cuTensorMapEncodeTiled)>("cuTensorMapEncodeTiled");
  ASSERT_NE(encode, nullptr);
  // A 32x32 float tile of the weight (4 KiB, the whole buffer), boxes of 16x16.
  const std::array<cuuint64_t, 2> dims{32, 32};
  const std::array<cuuint64_t, 1> strides{32 * sizeof(float)};
  const std::array<cuuint32_t, 2> box{16, 16};
  const std::array<cuuint32_t, 2> element_strides{1, 1};
  CUtensorMap map{};
  GRAPHCHECK_CU_OK(encode(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, weight_, dims.data(),
                          strides.data(), box.data(), element_strides.data(),
                          CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                          CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  cudaGraph_t graph = nullptr;
  GRAPHCHECK_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  GRAPHCHECK_CUDA_OK(launch_tma_kernel(map, out_, stream_));
  GRAPHCHECK_CUDA_OK(cudaStreamEndCapture(stream_, &graph));
  const cudaGraphExec_t exec = instantiate(graph);
  ASSERT_NE(exec, nullptr);
  launch(exec);

  const auto rec = record(exec);
  ASSERT_NE(rec, nullptr);
  ASSERT_EQ(rec->nodes.size(), 1u);
  const Node& node = rec->nodes[0];
  EXPECT_THAT(node.name, HasSubstr("tma_kernel"));
  ASSERT_EQ(node.params.size(), 2u);
  EXPECT_EQ(node.params[0].bytes.size(), sizeof(CUtensorMap));
  // The node's argument is the descriptor as encoded: a mismatch here, not the search below,
  // explains an empty operand list.
  EXPECT_EQ(std::memcmp(node.params[0].bytes.data(), &map, sizeof(CUtensorMap)), 0);
  EXPECT_EQ(param_word(node, 1), address_of(out_));
  // The operand is found whatever the argument's packed offset (112 on the H200, not a
  // multiple of 64: the first GPU run found none) and is a read, as a snapshot spells it.
  const std::vector<Operand> expected{
      {"param[0]+0:tensor_map", address_of(weight_), 0, Access::kRead}};
  EXPECT_EQ(node.operands, expected);
  // Driver 580 stores the global address as the descriptor's first word: that word is a
  // reference of its own (docs/cupti.md). Counted when the bytes hold it, so the test holds
  // for an encoding that does not.
  std::size_t plain_words = 0;
  for (std::size_t at = 0; at + sizeof(Address) <= sizeof(CUtensorMap); at += sizeof(Address)) {
    plain_words += param_word(node, 0, at) == address_of(weight_) ? 1U : 0U;
  }
  const Report report = backend().session().check_now("check");
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1u + plain_words) << to_text(report);
  EXPECT_EQ(report.summary.count(Verdict::kInput), 1u);
  finish("tma_grid_constant");
}

TEST_F(GpuLaunchStylesTest, DriverSettersOfAnInstantiatedGraphAreFollowed) {
  const auto get_kernel =
      driver_entry<decltype(&cuGraphKernelNodeGetParams)>("cuGraphKernelNodeGetParams");
  const auto set_kernel =
      driver_entry<decltype(&cuGraphExecKernelNodeSetParams)>("cuGraphExecKernelNodeSetParams");
  const auto get_memset =
      driver_entry<decltype(&cuGraphMemsetNodeGetParams)>("cuGraphMemsetNodeGetParams");
  const auto set_memset =
      driver_entry<decltype(&cuGraphExecMemsetNodeSetParams)>("cuGraphExecMemsetNodeSetParams");
  const auto set_node =
      driver_entry<decltype(&cuGraphExecNodeSetParams)>("cuGraphExecNodeSetParams");
  const auto current = driver_entry<decltype(&cuCtxGetCurrent)>("cuCtxGetCurrent");
  // One assertion per entry point: the first GPU run stopped at a combined one that did not
  // say which entry point was missing.
  ASSERT_NE(get_kernel, nullptr) << "cuGraphKernelNodeGetParams";
  ASSERT_NE(set_kernel, nullptr) << "cuGraphExecKernelNodeSetParams";
  ASSERT_NE(get_memset, nullptr) << "cuGraphMemsetNodeGetParams";
  ASSERT_NE(set_memset, nullptr) << "cuGraphExecMemsetNodeSetParams";
  ASSERT_NE(set_node, nullptr) << "cuGraphExecNodeSetParams";
  ASSERT_NE(current, nullptr) << "cuCtxGetCurrent";
  float* cleared = buffer();
  float* cleared_next = buffer();
  float* weight_next = buffer();
  float* weight_last = buffer();
  ASSERT_NE(weight_last, nullptr);

  // The template stays alive: the setters name its nodes.
  cudaGraph_t graph = nullptr;
  GRAPHCHECK_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  GRAPHCHECK_CUDA_OK(launch_struct_kernel(pointers(), stream_));
  GRAPHCHECK_CUDA_OK(cudaMemsetAsync(cleared, 0, kBytes, stream_));
  GRAPHCHECK_CUDA_OK(cudaStreamEndCapture(stream_, &graph));
  cudaGraphExec_t exec = nullptr;
  GRAPHCHECK_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  keep(exec);
  std::array<cudaGraphNode_t, 2> nodes{};
  std::size_t count = nodes.size();
  GRAPHCHECK_CUDA_OK(cudaGraphGetNodes(graph, nodes.data(), &count));
  ASSERT_EQ(count, 2u);
  cudaGraphNodeType first = cudaGraphNodeTypeEmpty;
  GRAPHCHECK_CUDA_OK(cudaGraphNodeGetType(nodes[0], &first));
  const CUgraphNode kernel_node = first == cudaGraphNodeTypeKernel ? nodes[0] : nodes[1];
  const CUgraphNode memset_node = first == cudaGraphNodeTypeKernel ? nodes[1] : nodes[0];
  // The exec record's first node of `type` (an empty node when there is none).
  auto node_of = [&](NodeType type) {
    const auto rec = record(exec);
    for (const Node& node : rec != nullptr ? rec->nodes : NodeList{}) {
      if (node.type == type) {
        return node;
      }
    }
    return Node{};
  };

  CUDA_KERNEL_NODE_PARAMS kernel{};
  GRAPHCHECK_CU_OK(get_kernel(kernel_node, &kernel));
  Pointers next{weight_next, scratch_, out_, kElements};
  void* next_args[] = {&next};
  kernel.kernelParams = next_args;
  kernel.extra = nullptr;
  // A record that cannot follow a setter fails in the callback; say which setter it was.
  const auto followed = [&](const char* setter) {
    const cupti::Status error = backend().dispatcher().take_error();
    EXPECT_TRUE(error.ok()) << setter << ": " << error.message();
  };
  GRAPHCHECK_CU_OK(set_kernel(exec, kernel_node, &kernel));
  followed("cuGraphExecKernelNodeSetParams");
  EXPECT_EQ(param_word(node_of(NodeType::kKernel), 0), address_of(weight_next));

  CUDA_MEMSET_NODE_PARAMS clear{};
  GRAPHCHECK_CU_OK(get_memset(memset_node, &clear));
  clear.dst = address_of(cleared_next);
  CUcontext context = nullptr;
  GRAPHCHECK_CU_OK(current(&context));
  GRAPHCHECK_CU_OK(set_memset(exec, memset_node, &clear, context));
  followed("cuGraphExecMemsetNodeSetParams");
  const Node memset_record = node_of(NodeType::kMemset);
  ASSERT_EQ(memset_record.operands.size(), 1u);
  EXPECT_EQ(memset_record.operands[0].begin, address_of(cleared_next));

  // The generic setter (cuGraphExecNodeSetParams) with the kernel's parameters again.
  Pointers last{weight_last, scratch_, out_, kElements};
  void* last_args[] = {&last};
  CUgraphNodeParams generic{};
  generic.type = CU_GRAPH_NODE_TYPE_KERNEL;
  generic.kernel.func = kernel.func;
  generic.kernel.kern = kernel.kern;
  generic.kernel.ctx = kernel.ctx;
  generic.kernel.gridDimX = kernel.gridDimX;
  generic.kernel.gridDimY = kernel.gridDimY;
  generic.kernel.gridDimZ = kernel.gridDimZ;
  generic.kernel.blockDimX = kernel.blockDimX;
  generic.kernel.blockDimY = kernel.blockDimY;
  generic.kernel.blockDimZ = kernel.blockDimZ;
  generic.kernel.sharedMemBytes = kernel.sharedMemBytes;
  generic.kernel.kernelParams = last_args;
  GRAPHCHECK_CU_OK(set_node(exec, kernel_node, &generic));
  followed("cuGraphExecNodeSetParams");
  EXPECT_EQ(param_word(node_of(NodeType::kKernel), 0), address_of(weight_last));
  launch(exec);
  cudaGraphDestroy(graph);

  backend().session().set_spans(
      {Span{address_of(weight_last), kBytes, OwnerKind::kParameter, "model.weight", ""},
       Span{address_of(out_), kBytes, OwnerKind::kInput, "out", "graph output"},
       Span{address_of(cleared_next), kBytes, OwnerKind::kInput, "cleared", "graph output"}});
  const Report report = backend().session().check_now("check");
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1u);
  EXPECT_EQ(report.summary.count(Verdict::kInput), 2u);
  EXPECT_EQ(verdict_at(report, address_of(scratch_)), Verdict::kUnregistered);
  finish("driver_setters");
}

TEST_F(GpuLaunchStylesTest, TwoThreadsInstantiatingAtOnceKeepTheirOwnRecords) {
  constexpr int kGraphsPerThread = 16;
  struct Work {
    Pointers pointers{};
    cudaStream_t stream = nullptr;
    std::vector<cudaGraphExec_t> execs;
    cudaError_t error = cudaSuccess;
  };
  std::array<Work, 2> work{};
  work[0].pointers = pointers();
  work[1].pointers = Pointers{buffer(), scratch_, buffer(), kElements};
  ASSERT_NE(work[1].pointers.out, nullptr);
  for (Work& w : work) {
    GRAPHCHECK_CUDA_OK(cudaStreamCreateWithFlags(&w.stream, cudaStreamNonBlocking));
  }
  std::barrier both(2);
  auto run = [&both](Work& w) {
    for (int i = 0; i < kGraphsPerThread; ++i) {
      cudaGraph_t graph = nullptr;
      cudaError_t status = cudaStreamBeginCapture(w.stream, cudaStreamCaptureModeThreadLocal);
      const cudaError_t launched = launch_struct_kernel(w.pointers, w.stream);
      status = status == cudaSuccess ? cudaStreamEndCapture(w.stream, &graph) : status;
      both.arrive_and_wait();  // both threads instantiate now
      cudaGraphExec_t exec = nullptr;
      if (status == cudaSuccess && launched == cudaSuccess) {
        status = cudaGraphInstantiate(&exec, graph, 0);
        cudaGraphDestroy(graph);
      }
      if (status != cudaSuccess || launched != cudaSuccess) {
        w.error = status != cudaSuccess ? status : launched;
      } else {
        w.execs.push_back(exec);
      }
    }
  };
  std::thread other(run, std::ref(work[1]));
  run(work[0]);
  other.join();

  for (Work& w : work) {
    EXPECT_EQ(w.error, cudaSuccess) << cudaGetErrorString(w.error);
    ASSERT_EQ(w.execs.size(), static_cast<std::size_t>(kGraphsPerThread));
    for (const cudaGraphExec_t exec : w.execs) {
      keep(exec);
      const auto rec = record(exec);
      ASSERT_NE(rec, nullptr);
      ASSERT_EQ(rec->nodes.size(), 1u);
      EXPECT_EQ(param_word(rec->nodes[0], 0), address_of(w.pointers.weight));
      EXPECT_EQ(param_word(rec->nodes[0], 0, 16), address_of(w.pointers.out));
    }
    GRAPHCHECK_CUDA_OK(cudaGraphLaunch(w.execs.back(), w.stream));
    GRAPHCHECK_CUDA_OK(cudaStreamSynchronize(w.stream));
    cudaStreamDestroy(w.stream);
  }
  const Report report = backend().session().check_now("check");
  EXPECT_EQ(report.summary.graphs, 2u * kGraphsPerThread);
  // Thread 0's graphs read the registered weight; thread 1's an unregistered buffer.
  EXPECT_EQ(report.summary.count(Verdict::kRegistered),
            static_cast<std::uint64_t>(kGraphsPerThread));
  EXPECT_EQ(verdict_at(report, address_of(work[1].pointers.weight)), Verdict::kUnregistered);
  finish("two_threads_instantiating");
}

}  // namespace
}  // namespace graphcheck::gpu_testing
