// The gpu tier (label gpu; every test skips without a device), issue 18 section 5: every
// node type a captured or built graph can hold, each read through CUPTI on a real driver and
// judged against verdicts known by construction (a registered span, an unregistered
// allocation, memory freed after capture, graph-owned memory). Ran on an H200 on 2026-12-04:
// the pinned-host memcpy and stream-ordered allocation tests failed there (the snapshot
// writer refused their nodes) and are fixed since, not yet run again (docs/gpu-check.md).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gpu/gpu_fixture.h"

namespace graphcheck::gpu_testing {
namespace {

using GpuNodeTypesTest = GpuFixture;

// Every operand of every node of `nodes` (bodies included), by role.
void collect_operands(const NodeList& nodes, std::vector<Operand>& out) {
  for (const Node& node : nodes) {
    out.insert(out.end(), node.operands.begin(), node.operands.end());
    for (const NodeList& body : node.bodies) {
      collect_operands(body, out);
    }
  }
}

std::size_t count_type(const NodeList& nodes, NodeType type) {
  std::size_t count = 0;
  for (const Node& node : nodes) {
    count += node.type == type ? 1 : 0;
  }
  return count;
}

TEST_F(GpuNodeTypesTest, DeviceToDeviceMemcpyReadsItsSourceAndWritesItsDestination) {
  float* weight = buffer();
  float* dst = nullptr;  // freed by hand below: the reference must then read dangling
  ASSERT_NE(weight, nullptr);
  GRAPHCHECK_CUDA_OK(cudaMalloc(&dst, kBytes));
  backend().session().set_spans(
      {Span{address_of(weight), kBytes, OwnerKind::kParameter, "model.weight", ""}});
  cudaGraph_t graph = nullptr;
  GRAPHCHECK_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  GRAPHCHECK_CUDA_OK(cudaMemcpyAsync(dst, weight, kBytes, cudaMemcpyDeviceToDevice, stream_));
  GRAPHCHECK_CUDA_OK(cudaStreamEndCapture(stream_, &graph));
  const cudaGraphExec_t exec = instantiate(graph);
  ASSERT_NE(exec, nullptr);
  launch(exec);

  const auto rec = record(exec);
  ASSERT_NE(rec, nullptr);
  ASSERT_EQ(rec->nodes.size(), 1u);
  EXPECT_EQ(rec->nodes[0].type, NodeType::kMemcpy);
  const std::vector<Operand> expected{{"src", address_of(weight), kBytes, Access::kRead},
                                      {"dst", address_of(dst), kBytes, Access::kWrite}};
  EXPECT_EQ(rec->nodes[0].operands, expected);

  const Report live = backend().session().check_now("live");
  EXPECT_EQ(live.summary.count(Verdict::kRegistered), 1u);
  EXPECT_EQ(verdict_at(live, address_of(dst)), Verdict::kUnregistered);
  GRAPHCHECK_CUDA_OK(cudaFree(dst));  // the graph still copies into it
  const Report freed = backend().session().check_now("after_free");
  EXPECT_EQ(verdict_at(freed, address_of(dst)), Verdict::kDangling);
  EXPECT_EQ(freed.summary.count(Verdict::kRegistered), 1u);
  finish("memcpy_device_to_device");
}

// A 2D copy between different pitches (found in a desk check before the second GPU run: the
// snapshot writer wanted one size for both sides): each side's own extent, written and judged.
TEST_F(GpuNodeTypesTest, APitchedCopyKeepsEachSidesExtent) {
  // Bytes per row, a multiple of no pitch alignment (256 was one: the driver might pad
  // nothing, and the test would fail for the layout, not for graphcheck).
  constexpr std::size_t kWidth = 100;
  constexpr std::size_t kRows = 4;
  float* dense = buffer();
  ASSERT_NE(dense, nullptr);
  void* pitched = nullptr;
  std::size_t pitch = 0;
  GRAPHCHECK_CUDA_OK(cudaMallocPitch(&pitched, &pitch, kWidth, kRows));
  ASSERT_GT(pitch, kWidth) << "the driver padded no row: the sides would not differ";
  backend().session().set_spans(
      {Span{address_of(pitched), pitch * kRows, OwnerKind::kBuffer, "model.pitched", ""},
       Span{address_of(dense), kBytes, OwnerKind::kInput, "out", "static graph output"}});
  cudaGraph_t graph = nullptr;
  GRAPHCHECK_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  GRAPHCHECK_CUDA_OK(cudaMemcpy2DAsync(dense, kWidth, pitched, pitch, kWidth, kRows,
                                       cudaMemcpyDeviceToDevice, stream_));
  GRAPHCHECK_CUDA_OK(cudaStreamEndCapture(stream_, &graph));
  const auto rec = run_captured(graph);
  ASSERT_NE(rec, nullptr);
  ASSERT_EQ(rec->nodes.size(), 1u);
  const std::vector<Operand> expected{
      {"src", address_of(pitched), (kRows - 1) * pitch + kWidth, Access::kRead},
      {"dst", address_of(dense), kRows * kWidth, Access::kWrite}};
  EXPECT_EQ(rec->nodes[0].operands, expected);
  const Report report = backend().session().check_now("check");
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1u);
  EXPECT_EQ(report.summary.count(Verdict::kInput), 1u);
  EXPECT_FALSE(report.has_findings());
  finish("memcpy_2d_pitches");  // writes the snapshot: the node must be one the writer takes
  GRAPHCHECK_CUDA_OK(cudaFree(pitched));
}

TEST_F(GpuNodeTypesTest, PinnedHostSidesOfMemcpyNodesAreNotReferences) {
  float* weight = buffer();
  float* out = buffer();
  ASSERT_NE(weight, nullptr);
  ASSERT_NE(out, nullptr);
  float* pinned = nullptr;
  GRAPHCHECK_CUDA_OK(cudaMallocHost(&pinned, kBytes));
  register_weight_and_out(weight, out);
  cudaGraph_t graph = nullptr;
  GRAPHCHECK_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  // An explicit direction (host type in the node) and cudaMemcpyDefault (unified: the
  // driver's pointer attribute says host): both host sides must be skipped.
  GRAPHCHECK_CUDA_OK(cudaMemcpyAsync(pinned, weight, kBytes, cudaMemcpyDeviceToHost, stream_));
  GRAPHCHECK_CUDA_OK(cudaMemcpyAsync(out, pinned, kBytes, cudaMemcpyDefault, stream_));
  GRAPHCHECK_CUDA_OK(cudaStreamEndCapture(stream_, &graph));
  const cudaGraphExec_t exec = instantiate(graph);
  ASSERT_NE(exec, nullptr);
  launch(exec);

  const auto rec = record(exec);
  ASSERT_NE(rec, nullptr);
  ASSERT_EQ(rec->nodes.size(), 2u);
  EXPECT_EQ(count_type(rec->nodes, NodeType::kMemcpy), 2u);
  std::vector<Operand> operands;
  collect_operands(rec->nodes, operands);
  ASSERT_EQ(operands.size(), 2u) << "one device side per node";
  for (const Operand& operand : operands) {
    EXPECT_NE(operand.begin, address_of(pinned)) << operand.role;
    EXPECT_EQ(operand.size, kBytes) << operand.role;
  }
  const Report report = backend().session().check_now("check");
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1u);
  EXPECT_EQ(report.summary.count(Verdict::kInput), 1u);
  EXPECT_TRUE(report.findings.empty());
  finish("memcpy_pinned_host");
  cudaFreeHost(pinned);
}

TEST_F(GpuNodeTypesTest, TwoDimensionalMemsetCoversItsPitchedExtent) {
  constexpr std::size_t kWidth = 1000;  // bytes per row, less than the pitch
  constexpr std::size_t kHeight = 16;
  void* rows = nullptr;
  std::size_t pitch = 0;
  GRAPHCHECK_CUDA_OK(cudaMallocPitch(&rows, &pitch, kWidth, kHeight));
  ASSERT_GE(pitch, kWidth);
  backend().session().set_spans(
      {Span{address_of(rows), pitch * kHeight, OwnerKind::kBuffer, "model.table", ""}});
  cudaGraph_t graph = nullptr;
  GRAPHCHECK_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  GRAPHCHECK_CUDA_OK(cudaMemset2DAsync(rows, pitch, 0, kWidth, kHeight, stream_));
  GRAPHCHECK_CUDA_OK(cudaStreamEndCapture(stream_, &graph));
  const cudaGraphExec_t exec = instantiate(graph);
  ASSERT_NE(exec, nullptr);
  launch(exec);

  const auto rec = record(exec);
  ASSERT_NE(rec, nullptr);
  ASSERT_EQ(rec->nodes.size(), 1u);
  EXPECT_EQ(rec->nodes[0].type, NodeType::kMemset);
  ASSERT_EQ(rec->nodes[0].operands.size(), 1u);
  const Operand& dst = rec->nodes[0].operands[0];
  EXPECT_EQ(dst.role, "dst");
  EXPECT_EQ(dst.begin, address_of(rows));
  EXPECT_EQ(dst.size, (kHeight - 1) * pitch + kWidth) << "pitch " << pitch;
  const Report report = backend().session().check_now("check");
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1u);
  EXPECT_TRUE(report.findings.empty());
  finish("memset_2d");
  cudaFree(rows);
}

TEST_F(GpuNodeTypesTest, StreamOrderedAllocationInACaptureIsGraphMemory) {
  float* weight = buffer();
  float* out = buffer();
  ASSERT_NE(weight, nullptr);
  ASSERT_NE(out, nullptr);
  register_weight_and_out(weight, out);
  void* scratch = nullptr;
  cudaGraph_t graph = nullptr;
  GRAPHCHECK_CUDA_OK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal));
  GRAPHCHECK_CUDA_OK(cudaMallocAsync(&scratch, kBytes, stream_));
  GRAPHCHECK_CUDA_OK(launch_struct_kernel(
      Pointers{weight, static_cast<const float*>(scratch), out, kElements}, stream_));
  GRAPHCHECK_CUDA_OK(cudaFreeAsync(scratch, stream_));
  GRAPHCHECK_CUDA_OK(cudaStreamEndCapture(stream_, &graph));
  const cudaGraphExec_t exec = instantiate(graph);
  ASSERT_NE(exec, nullptr);
  launch(exec);

  const auto rec = record(exec);
  ASSERT_NE(rec, nullptr);
  ASSERT_EQ(rec->nodes.size(), 3u);
  EXPECT_EQ(count_type(rec->nodes, NodeType::kMemAlloc), 1u);
  EXPECT_EQ(count_type(rec->nodes, NodeType::kKernel), 1u);
  EXPECT_EQ(count_type(rec->nodes, NodeType::kMemFree), 1u);
  std::vector<Operand> operands;
  collect_operands(rec->nodes, operands);
  ASSERT_EQ(operands.size(), 2u);
  for (const Operand& operand : operands) {
    EXPECT_EQ(operand.begin, address_of(scratch)) << operand.role;
  }
  // The kernel's scratch word, the alloc and the free: graph memory, not unregistered nor
  // (after the free node) dangling.
  const Report report = backend().session().check_now("check");
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1u);
  EXPECT_EQ(report.summary.count(Verdict::kInput), 1u);
  EXPECT_GE(report.summary.count(Verdict::kGraph), 2u);
  EXPECT_TRUE(report.findings.empty()) << report.findings.size() << " findings";
  finish("malloc_async_in_capture");
}

// A graph of one struct_kernel node reading `p`, captured on `stream` (the caller owns it).
cudaGraph_t kernel_graph(const Pointers& p, cudaStream_t stream) {
  cudaGraph_t graph = nullptr;
  return capture_struct_kernel(p, stream, &graph) == cudaSuccess ? graph : nullptr;
}

TEST_F(GpuNodeTypesTest, AChildGraphsKernelIsReadAndJudged) {
  float* weight = buffer();
  float* scratch = buffer();
  float* out = buffer();
  ASSERT_NE(out, nullptr);
  register_weight_and_out(weight, out);
  const cudaGraph_t child = kernel_graph(Pointers{weight, scratch, out, kElements}, stream_);
  ASSERT_NE(child, nullptr);
  cudaGraph_t parent = nullptr;
  GRAPHCHECK_CUDA_OK(cudaGraphCreate(&parent, 0));
  cudaGraphNode_t node = nullptr;
  GRAPHCHECK_CUDA_OK(cudaGraphAddChildGraphNode(&node, parent, nullptr, 0, child));
  cudaGraphDestroy(child);  // the parent holds a copy
  const cudaGraphExec_t exec = instantiate(parent);
  ASSERT_NE(exec, nullptr);
  launch(exec);

  const auto rec = record(exec);
  ASSERT_NE(rec, nullptr);
  ASSERT_EQ(rec->nodes.size(), 1u);
  EXPECT_EQ(rec->nodes[0].type, NodeType::kChildGraph);
  ASSERT_EQ(rec->nodes[0].bodies.size(), 1u);
  ASSERT_EQ(rec->nodes[0].bodies[0].size(), 1u);
  const Node& kernel = rec->nodes[0].bodies[0][0];
  EXPECT_EQ(kernel.type, NodeType::kKernel);
  EXPECT_EQ(param_word(kernel, 0), address_of(weight));
  const Report report = backend().session().check_now("check");
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1u);
  EXPECT_EQ(report.summary.count(Verdict::kInput), 1u);
  EXPECT_EQ(verdict_at(report, address_of(scratch)), Verdict::kUnregistered);
  finish("child_graph");
}

TEST_F(GpuNodeTypesTest, AnIfConditionalsBodyIsReadAndJudged) {
  float* weight = buffer();
  float* scratch = buffer();
  float* out = buffer();
  ASSERT_NE(out, nullptr);
  register_weight_and_out(weight, out);
  cudaGraph_t graph = nullptr;
  GRAPHCHECK_CUDA_OK(cudaGraphCreate(&graph, 0));
  cudaGraphConditionalHandle handle = 0;
  // Default value 1, assigned at every launch: the body runs.
  GRAPHCHECK_CUDA_OK(
      cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault));
  cudaGraphNodeParams params{};
  params.type = cudaGraphNodeTypeConditional;
  params.conditional.handle = handle;
  params.conditional.type = cudaGraphCondTypeIf;
  params.conditional.size = 1;
  cudaGraphNode_t conditional = nullptr;
  GRAPHCHECK_CUDA_OK(cudaGraphAddNode(&conditional, graph, nullptr, nullptr, 0, &params));
  const cudaGraph_t body = params.conditional.phGraph_out[0];
  ASSERT_NE(body, nullptr);
  Pointers pointers{weight, scratch, out, kElements};
  void* args[] = {&pointers};
  cudaKernelNodeParams kernel{};
  kernel.func = const_cast<void*>(struct_kernel_entry());
  kernel.gridDim = dim3((kElements + 255) / 256);
  kernel.blockDim = dim3(256);
  kernel.kernelParams = args;
  cudaGraphNode_t kernel_node = nullptr;
  GRAPHCHECK_CUDA_OK(cudaGraphAddKernelNode(&kernel_node, body, nullptr, 0, &kernel));
  const cudaGraphExec_t exec = instantiate(graph);
  ASSERT_NE(exec, nullptr);
  launch(exec);

  const auto rec = record(exec);
  ASSERT_NE(rec, nullptr);
  ASSERT_EQ(rec->nodes.size(), 1u);
  EXPECT_EQ(rec->nodes[0].type, NodeType::kConditional);
  ASSERT_EQ(rec->nodes[0].bodies.size(), 1u) << "the body noted at cuGraphAddNode";
  ASSERT_EQ(rec->nodes[0].bodies[0].size(), 1u);
  EXPECT_EQ(param_word(rec->nodes[0].bodies[0][0], 0), address_of(weight));
  const Report report = backend().session().check_now("check");
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1u);
  EXPECT_EQ(verdict_at(report, address_of(scratch)), Verdict::kUnregistered);
  finish("conditional_if");
}

}  // namespace
}  // namespace graphcheck::gpu_testing
