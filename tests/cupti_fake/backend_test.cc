// The assembled backend through the fake driver: a fabricated graph is instantiated, its
// buffer is allocated and freed through driver callbacks, and launches are checked under
// the warn and error policies.
#include "cupti/backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>

#include "cupti_fake/fake_driver.h"

namespace graphcheck::cupti {
namespace {

using testing::FakeDriver;
using testing::FakeNode;
using ::testing::HasSubstr;

constexpr CUdeviceptr kBuffer = 0x7f0000100000;
constexpr CUdeviceptr kWeight = 0x7f0000200000;

class BackendTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> make_backend(LaunchCheck launch, FindingPolicy policy) {
    BackendOptions options;
    options.session.launch_check = launch;
    options.session.policy = policy;
    options.session.log = [this](std::string_view text) { log_ << text; };
    auto backend = std::make_unique<Backend>(api_, std::move(options));
    backend->session().set_spans(
        {Span{kWeight, 4096, OwnerKind::kParameter, "layers.0.weight", ""}});
    return backend;
  }
  static void api(Backend& backend, CUpti_CallbackId cbid, const void* params,
                  CUpti_ApiCallbackSite site) {
    CUresult result = CUDA_SUCCESS;
    CUpti_CallbackData data{};
    data.callbackSite = site;
    data.functionParams = params;
    data.functionReturnValue = site == CUPTI_API_EXIT ? &result : nullptr;
    backend.dispatcher().on_callback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
  }
  static void both(Backend& backend, CUpti_CallbackId cbid, const void* params) {
    api(backend, cbid, params, CUPTI_API_ENTER);
    api(backend, cbid, params, CUPTI_API_EXIT);
  }
  void allocate(Backend& backend, CUdeviceptr address, std::size_t size) {
    CUdeviceptr out = address;
    cuMemAlloc_v2_params params{&out, size};
    both(backend, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &params);
  }
  void free(Backend& backend, CUdeviceptr address) {
    cuMemFree_v2_params params{address};
    both(backend, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &params);
  }
  // A graph with one kernel "scale(const float* weight, float* buffer)", instantiated.
  CUgraphExec instantiate(Backend& backend) {
    CUgraph graph = api_.add_graph(3);
    CUfunction scale = api_.add_function("scale", {{0, 8}, {8, 8}});
    FakeNode node;
    node.type = CU_GRAPH_NODE_TYPE_KERNEL;
    node.id = 1;
    node.kernel.func = scale;
    node.kernel.kernelParams = args_;
    api_.add_node(graph, node);
    CUgraphExec exec = api_.add_exec(9);
    CUpti_GraphData created{};
    created.graph = graph;
    created.graphExec = exec;
    const CUpti_ResourceData resource{nullptr, {nullptr}, &created};
    backend.dispatcher().on_callback(CUPTI_CB_DOMAIN_RESOURCE,
                                     CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, &resource);
    cuGraphInstantiateWithFlags_params params{&exec, graph, 0};
    api(backend, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &params, CUPTI_API_EXIT);
    return exec;
  }
  static void launch(Backend& backend, CUgraphExec exec) {
    cuGraphLaunch_params params{exec, nullptr};
    api(backend, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &params, CUPTI_API_ENTER);
  }

  FakeDriver api_;
  std::ostringstream log_;
  CUdeviceptr weight_arg_ = kWeight;
  CUdeviceptr buffer_arg_ = kBuffer;
  void* args_[2] = {&weight_arg_, &buffer_arg_};
};

TEST_F(BackendTest, InstantiatedGraphIsBoundToACaptureEpochAndChecked) {
  auto backend = make_backend(LaunchCheck::kOff, FindingPolicy::kWarn);
  allocate(*backend, kBuffer, 1024);
  instantiate(*backend);
  ASSERT_TRUE(backend->dispatcher().take_error().ok());
  const Snapshot snapshot = backend->session().snapshot("now");
  ASSERT_EQ(snapshot.graphs.size(), 1u);
  EXPECT_EQ(snapshot.graphs[0].id, 9u) << "exec records carry CUPTI's graph-exec id";
  EXPECT_EQ(snapshot.graphs[0].epoch, "capture");
  ASSERT_EQ(snapshot.epochs.front().allocations.size(), 1u);
  EXPECT_EQ(snapshot.epochs.front().allocations[0].label, "cuMemAlloc_v2 #1");

  const Report report = backend->session().check_now("exit");
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].verdict, Verdict::kUnregistered);
  EXPECT_EQ(report.findings[0].kernel, "scale");
  EXPECT_EQ(report.findings[0].param, 1u);
  EXPECT_EQ(report.findings[0].owner, "cuMemAlloc_v2 #1");
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1u);
}

TEST_F(BackendTest, FreedBufferIsDanglingAtTheNextLaunchUnderWarn) {
  auto backend = make_backend(LaunchCheck::kEveryLaunch, FindingPolicy::kWarn);
  allocate(*backend, kBuffer, 1024);
  const CUgraphExec exec = instantiate(*backend);
  launch(*backend, exec);
  EXPECT_EQ(backend->session().launches_checked(), 1u);
  EXPECT_EQ(backend->session().launches_with_findings(), 1u);  // unregistered already
  free(*backend, kBuffer);
  log_.str("");
  launch(*backend, exec);
  EXPECT_EQ(backend->launch_hook().launches(), 2u);
  EXPECT_THAT(log_.str(), HasSubstr("dangling"));
  EXPECT_TRUE(backend->dispatcher().take_error().ok()) << "warn never fails the launch";
}

TEST_F(BackendTest, ErrorPolicyLeavesTheFailureInTheDispatcher) {
  auto backend = make_backend(LaunchCheck::kEveryLaunch, FindingPolicy::kError);
  allocate(*backend, kBuffer, 1024);
  const CUgraphExec exec = instantiate(*backend);
  launch(*backend, exec);
  const Status status = backend->dispatcher().take_error();
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("finding(s) at launch of graph 9"));
}

TEST_F(BackendTest, LaunchCallbacksAreEnabledOnlyInLaunchMode) {
  const auto has_launch = [](const std::vector<CallbackId>& ids) {
    return std::any_of(ids.begin(), ids.end(), [](const CallbackId& id) {
      return id.domain == CUPTI_CB_DOMAIN_DRIVER_API &&
             id.cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch;
    });
  };
  {
    auto backend = make_backend(LaunchCheck::kOff, FindingPolicy::kWarn);
    ASSERT_TRUE(backend->enable().ok());
    EXPECT_FALSE(has_launch(api_.enabled));
    EXPECT_EQ(api_.subscriber_name, "graphcheck");
    ASSERT_TRUE(backend->disable().ok());
  }
  api_.enabled.clear();
  auto backend = make_backend(LaunchCheck::kEveryLaunch, FindingPolicy::kWarn);
  ASSERT_TRUE(backend->enable().ok());
  EXPECT_TRUE(has_launch(api_.enabled));
}

TEST_F(BackendTest, FailingGraphExecIdIsReportedThroughTheDispatcher) {
  auto backend = make_backend(LaunchCheck::kOff, FindingPolicy::kWarn);
  api_.fail_cupti["cupti_get_graph_exec_id"] = CUPTI_ERROR_INVALID_PARAMETER;
  CUpti_GraphData created{};
  created.graphExec = api_.add_exec(4);
  const CUpti_ResourceData resource{nullptr, {nullptr}, &created};
  backend->dispatcher().on_callback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED,
                                    &resource);
  const Status status = backend->dispatcher().take_error();
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("cuptiGetGraphExecId"));
}

}  // namespace
}  // namespace graphcheck::cupti
