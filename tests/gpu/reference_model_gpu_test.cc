// Ran on an H200 on 2026-12-04, built there against torch 2.11.0+cu130, and passed; the
// caching allocator's blocks have been added to its CUPTI session since, not yet run on a GPU
// (docs/gpu-check.md).
//
// The reference model on CUDA (gpu tier): each variant is built on the GPU and one forward is
// captured with at::cuda::CUDAGraph while graphcheck's CUPTI backend is subscribed and a
// CaptureWindow records the dispatcher ops. The verdicts come from the ATen record, as in the
// CPU story (tests/torch/graph_replay_test.cc): the registered variant has no unregistered or
// dangling reference at capture, the legacy variant has unregistered ones at its planted
// sites. Without a weights arena (CPU memory only) the planted storages are named by the
// first op that read them: aten::copy_ (the int8 weights of process_weights_after_loading),
// aten::mul (the sign tables of make_sign_table) and aten::index_select (the RoPE cache of
// compute_cos_sin_cache). The CUPTI side must record the graph and see registered weights in
// its kernel arguments; its other verdicts are recorded, not asserted: it sees the caching
// allocator's segments and blocks (cupti::add_torch_allocator), not what each block holds:
// activations read as graph memory (the graph's private pool), the cuBLAS workspace made at
// the warm-up (a 32 MiB default-pool block on the H200, 2026-12-04) as unregistered.
// Graph replay must reproduce the eager forward.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <graphcheck/checker.h>
#include <graphcheck/torch/aten_capture.h>
#include <graphcheck/torch/reference_model.h>
#include <graphcheck/torch/registry.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdint>
#include <string>

#include "cupti/torch_allocator_snapshot.h"
#include "gpu/gpu_support.h"

namespace graphcheck::gpu_testing {
namespace {

using libtorch::CaptureRecord;
using libtorch::CaptureWindow;
using libtorch::ModelVariant;
using libtorch::ReferenceConfig;
using libtorch::Registry;

constexpr std::uint64_t kSeed = 11;
constexpr std::int64_t kTokens = 8;

// Why the test cannot run here ("" when it can): torch must see a device, and the driver
// and CUPTI must load for the backend. CUDA is reached through torch only (gpu_support.h's
// skip_reason() calls the runtime that the other gpu binary links statically).
std::string torch_skip_reason() {
  if (!torch::cuda::is_available()) {
    return "torch::cuda::is_available() is false: no CUDA device or driver for torch";
  }
  const cupti::DriverApiLoad load = cupti::load_driver_api();
  return load.status.ok() ? std::string() : load.status.message();
}

bool any_owner_contains(const Report& report, Verdict verdict, const std::string& text) {
  for (const Finding& finding : report.findings) {
    if (finding.verdict == verdict && finding.owner.find(text) != std::string::npos) {
      return true;
    }
  }
  return false;
}

// What one capture of one variant produced.
struct CudaCapture {
  at::Tensor eager;     // the last eager forward before the capture (CPU copy)
  at::Tensor replayed;  // the captured output after a replay (CPU copy)
  Report aten_report;   // the ATen record checked in its capture epoch
  Snapshot cupti_snapshot;
  Report cupti_report;
};

class GpuReferenceModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = torch_skip_reason();
    if (!reason.empty()) {
      GTEST_SKIP() << reason;
    }
  }

  // Builds `variant` on the current CUDA device and captures one forward (see the top).
  void capture(ModelVariant variant, CudaCapture& out) {
    // Segments cached by an earlier test were allocated before this subscription: release
    // them so that the allocation tracker sees every segment this capture uses.
    c10::cuda::device_synchronize();
    c10::cuda::CUDACachingAllocator::emptyCache();
    LiveBackend live;
    GRAPHCHECK_SKIP_WHILE_INJECTED(live);
    ASSERT_TRUE(live.status.ok()) << live.status.message();
    cupti::Backend& backend = *live.backend;
    ASSERT_EQ(cupti::add_torch_allocator(backend.session()), "");

    ReferenceConfig config;
    config.variant = variant;
    config.device = at::Device(at::kCUDA, c10::cuda::current_device());
    const auto model = libtorch::build_reference_model(config, kSeed, nullptr);
    const at::Tensor ids =
        at::arange(kTokens, at::kLong).mul(13).remainder(config.vocab).to(config.device);
    const at::Tensor positions = at::arange(kTokens, at::kLong).to(config.device);
    Registry registry;
    registry.add_module(*model);
    model->declare_runtime_state(registry);
    Registry with_inputs = registry;  // the CUPTI session has no capture window to declare them
    with_inputs.declare_input("input_ids", ids, "static graph input");
    with_inputs.declare_input("positions", positions, "static graph input");
    backend.session().set_spans(with_inputs.spans());
    c10::cuda::device_synchronize();  // the model was built on the default stream

    at::Tensor eager;
    at::Tensor captured;
    CaptureRecord record;
    {
      at::cuda::CUDAGraph graph;
      const c10::cuda::CUDAStreamGuard guard(c10::cuda::getStreamFromPool());
      // Warm-up on the capture stream: cuBLAS handles and workspaces are created here, not
      // inside the capture (as torch.cuda.graph's documentation asks).
      for (int i = 0; i < 2; ++i) {
        eager = model->forward(ids, positions);
      }
      c10::cuda::device_synchronize();
      graph.capture_begin();
      {
        CaptureWindow window;
        window.declare_input("input_ids", ids);
        window.declare_input("positions", positions);
        captured = model->forward(ids, positions);
        record = window.finish();
      }
      graph.capture_end();
      captured.zero_();  // so that equality below proves the replay wrote the output
      graph.replay();
      c10::cuda::device_synchronize();
      out.eager = eager.cpu();
      out.replayed = captured.cpu();
      // While the graph lives: the backend may drop the records of a destroyed exec graph.
      out.cupti_snapshot = backend.session().snapshot("after_replay");
      out.cupti_report = backend.session().check_now("after_replay");
    }
    print_callback_counts(backend, "reference_model_" + libtorch::to_string(variant));
    const cupti::Status callback_error = backend.dispatcher().take_error();
    ASSERT_TRUE(callback_error.ok()) << callback_error.message();

    const std::string name = "reference_model_" + libtorch::to_string(variant);
    record_snapshot(out.cupti_snapshot, name + "_cupti");
    const Snapshot aten_snapshot =
        libtorch::make_snapshot(record, {libtorch::make_capture_epoch(registry, nullptr, record)});
    record_snapshot(aten_snapshot, name + "_aten");
    CheckOptions options;
    options.epoch = record.graph.epoch;
    out.aten_report = check(aten_snapshot, options);
  }

  static void expect_replay_equals_eager(const CudaCapture& run) {
    ASSERT_EQ(run.replayed.sizes(), run.eager.sizes());
    EXPECT_TRUE(at::isfinite(run.eager).all().item<bool>());
    // Same kernels on the same inputs; a tolerance only for a library choosing another
    // algorithm inside the capture.
    EXPECT_TRUE(at::allclose(run.replayed, run.eager, 1e-5, 1e-6))
        << "max abs diff " << (run.replayed - run.eager).abs().max().item<double>();
  }

  static void expect_cupti_saw_the_graph(const CudaCapture& run) {
    ASSERT_FALSE(run.cupti_snapshot.graphs.empty());
    std::size_t kernels = 0;
    for (const GraphRecord& graph : run.cupti_snapshot.graphs) {
      for (const Node& node : graph.nodes) {
        kernels += node.type == NodeType::kKernel ? 1 : 0;
      }
    }
    EXPECT_GT(kernels, 10U);
    EXPECT_GT(run.cupti_report.summary.count(Verdict::kRegistered), 0U)
        << to_text(run.cupti_report);
  }
};

TEST_F(GpuReferenceModelTest, RegisteredVariantHasNoUnregisteredOrDanglingReferenceAtCapture) {
  CudaCapture run;
  capture(ModelVariant::kRegistered, run);
  if (HasFatalFailure() || IsSkipped()) {
    return;
  }
  const Report& report = run.aten_report;
  EXPECT_EQ(report.summary.count(Verdict::kUnregistered), 0U) << to_text(report);
  EXPECT_EQ(report.summary.count(Verdict::kDangling), 0U) << to_text(report);
  EXPECT_GT(report.summary.count(Verdict::kRegistered), 0U);
  EXPECT_GT(report.summary.count(Verdict::kRuntime), 0U);
  EXPECT_GT(report.summary.count(Verdict::kInput), 0U);
  expect_replay_equals_eager(run);
  expect_cupti_saw_the_graph(run);
}

TEST_F(GpuReferenceModelTest, LegacyVariantNamesItsPlantedSitesAsUnregistered) {
  CudaCapture run;
  capture(ModelVariant::kLegacy, run);
  if (HasFatalFailure() || IsSkipped()) {
    return;
  }
  const Report& report = run.aten_report;
  EXPECT_GT(report.summary.count(Verdict::kUnregistered), 0U);
  EXPECT_EQ(report.summary.count(Verdict::kDangling), 0U) << to_text(report);
  EXPECT_TRUE(any_owner_contains(report, Verdict::kUnregistered, "aten::copy_")) << "int8 weights\n"
                                                                                 << to_text(report);
  EXPECT_TRUE(any_owner_contains(report, Verdict::kUnregistered, "aten::mul")) << "sign tables\n"
                                                                               << to_text(report);
  EXPECT_TRUE(any_owner_contains(report, Verdict::kUnregistered, "aten::index_select"))
      << "RoPE cache\n"
      << to_text(report);
  expect_replay_equals_eager(run);
  expect_cupti_saw_the_graph(run);
}

}  // namespace
}  // namespace graphcheck::gpu_testing
