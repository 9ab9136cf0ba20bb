// Graphs checked as their exec graphs are destroyed (issue 18 §1): the injection library's
// exit check runs from a C atexit handler after PyTorch has destroyed its graphs, so a
// graph must be checked when it is destroyed, and the exit report must hold that result and
// say when nothing was checked at all.
#include <gmock/gmock.h>
#include <graphcheck/report.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <sstream>
#include <string>

#include "cupti/backend.h"
#include "cupti/injection.h"
#include "cupti_fake/fake_driver.h"

namespace graphcheck::cupti {
namespace {

using testing::FakeDriver;
using testing::FakeNode;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr CUdeviceptr kBuffer = 0x7f0000100000;
constexpr CUdeviceptr kWeight = 0x7f0000200000;

void api_call(Dispatcher& dispatcher, CUpti_CallbackId cbid, const void* params,
              CUpti_ApiCallbackSite site) {
  CUresult result = CUDA_SUCCESS;
  CUpti_CallbackData data{};
  data.callbackSite = site;
  data.functionParams = params;
  data.functionReturnValue = site == CUPTI_API_EXIT ? &result : nullptr;
  dispatcher.on_callback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
}

void resource(Dispatcher& dispatcher, CUpti_CallbackId cbid, CUgraph graph, CUgraphExec exec) {
  CUpti_GraphData graph_data{};
  graph_data.graph = graph;
  graph_data.graphExec = exec;
  const CUpti_ResourceData data{nullptr, {nullptr}, &graph_data};
  dispatcher.on_callback(CUPTI_CB_DOMAIN_RESOURCE, cbid, &data);
}

// A buffer allocated through cuMemAlloc, then a graph "scale(weight, buffer)" instantiated
// as exec graph 9: the buffer is registered nowhere, so the graph has one finding
// (unregistered).
CUgraphExec allocate_and_instantiate(FakeDriver& api, Dispatcher& dispatcher, void** args) {
  CUdeviceptr out = kBuffer;
  cuMemAlloc_v2_params alloc{&out, 1024};
  api_call(dispatcher, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &alloc, CUPTI_API_EXIT);
  CUgraph graph = api.add_graph(3);
  FakeNode node;
  node.type = CU_GRAPH_NODE_TYPE_KERNEL;
  node.id = 1;
  node.kernel.func = api.add_function("scale", {{0, 8}, {8, 8}});
  node.kernel.kernelParams = args;
  api.add_node(graph, node);
  CUgraphExec exec = api.add_exec(9);
  resource(dispatcher, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, graph, exec);
  cuGraphInstantiateWithFlags_params params{&exec, graph, 0};
  api_call(dispatcher, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &params,
           CUPTI_API_EXIT);
  return exec;
}

class DestroyCheckTest : public ::testing::Test {
 protected:
  std::unique_ptr<Backend> make_backend(bool check_at_destroy = true) {
    BackendOptions options;
    options.session.check_at_destroy = check_at_destroy;
    options.session.log = [this](std::string_view text) { log_ << text; };
    auto backend = std::make_unique<Backend>(api_, std::move(options));
    backend->session().set_spans(
        {Span{kWeight, 4096, OwnerKind::kParameter, "layers.0.weight", ""}});
    return backend;
  }

  FakeDriver api_;
  std::ostringstream log_;
  CUdeviceptr weight_arg_ = kWeight;
  CUdeviceptr buffer_arg_ = kBuffer;
  void* args_[2] = {&weight_arg_, &buffer_arg_};
};

TEST_F(DestroyCheckTest, AGraphDestroyedBeforeTheExitCheckIsInItsReport) {
  auto backend = make_backend();
  Dispatcher& dispatcher = backend->dispatcher();
  const CUgraphExec exec = allocate_and_instantiate(api_, dispatcher, args_);
  resource(dispatcher, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, nullptr, exec);
  ASSERT_TRUE(dispatcher.take_error().ok());
  EXPECT_EQ(backend->capture().exec_graph(exec), nullptr) << "the record is gone";

  const Report report = backend->session().check_now("exit");
  ASSERT_EQ(report.findings.size(), 1u) << "the destroyed graph's finding is lost";
  EXPECT_EQ(report.findings[0].graph, 9u);
  EXPECT_EQ(report.findings[0].verdict, Verdict::kUnregistered);
  EXPECT_EQ(report.summary.graphs, 1u);
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1u);
  EXPECT_THAT(
      report.warnings,
      ::testing::Contains(HasSubstr("1 graph was checked as its exec graph was destroyed")));
  EXPECT_THAT(to_text(report), HasSubstr("notes (1):"));
  EXPECT_THAT(log_.str(), HasSubstr("checked as it was destroyed"));

  const std::vector<DestroyedCheck> checks = backend->session().destroyed_checks();
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].graph, 9u);
  EXPECT_EQ(checks[0].epoch, "destroy");
  EXPECT_EQ(checks[0].exec, reinterpret_cast<std::uintptr_t>(exec));
  EXPECT_EQ(checks[0].report->baseline, "capture") << "judged against its capture epoch";
}

TEST_F(DestroyCheckTest, FreedBeforeTheDestroyIsDanglingAtTheDestroy) {
  auto backend = make_backend();
  Dispatcher& dispatcher = backend->dispatcher();
  const CUgraphExec exec = allocate_and_instantiate(api_, dispatcher, args_);
  cuMemFree_v2_params free{kBuffer};
  api_call(dispatcher, CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &free, CUPTI_API_ENTER);
  resource(dispatcher, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, nullptr, exec);
  const Report report = backend->session().check_now("exit");
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].verdict, Verdict::kDangling);
}

TEST_F(DestroyCheckTest, ALiveGraphIsCheckedOnceAtExitAndNotAsDestroyed) {
  auto backend = make_backend();
  allocate_and_instantiate(api_, backend->dispatcher(), args_);
  const Report report = backend->session().check_now("exit");
  EXPECT_EQ(report.summary.graphs, 1u);
  EXPECT_EQ(report.findings.size(), 1u);
  EXPECT_THAT(report.warnings, Not(::testing::Contains(HasSubstr("note: "))));
  EXPECT_TRUE(backend->session().destroyed_checks().empty());
}

TEST_F(DestroyCheckTest, OffTheDestroyedGraphIsNotChecked) {
  auto backend = make_backend(/*check_at_destroy=*/false);
  Dispatcher& dispatcher = backend->dispatcher();
  const CUgraphExec exec = allocate_and_instantiate(api_, dispatcher, args_);
  resource(dispatcher, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, nullptr, exec);
  EXPECT_TRUE(backend->session().destroyed_checks().empty());
  EXPECT_TRUE(backend->capture().take_retired().empty()) << "taken by the hook, not kept";
}

TEST_F(DestroyCheckTest, AnExitCheckWithNoGraphSaysNothingWasChecked) {
  auto backend = make_backend();
  const Report report = backend->session().check_now("exit");
  EXPECT_EQ(report.summary.graphs, 0u);
  EXPECT_THAT(report.warnings, ::testing::Contains(HasSubstr("nothing was checked")));
  EXPECT_THAT(log_.str(), HasSubstr("graphcheck: no graph was recorded while graphcheck was "
                                    "attached, so nothing was checked"));
}

// The injection library end to end: GRAPHCHECK_CHECK=exit, the graph destroyed before
// at_exit (as PyTorch does during interpreter shutdown), the exit report written.
TEST(InjectionDestroyCheckTest, TheExitReportHoldsTheGraphDestroyedBeforeExit) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("graphcheck-destroy-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const std::map<std::string, std::string> env = {{"GRAPHCHECK_OUT", dir.string()}};
  std::string err;
  FakeDriver* fake = nullptr;
  InjectionDeps deps;
  deps.env = [&env](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  deps.load_api = [&fake] {
    auto api = std::make_unique<FakeDriver>();
    fake = api.get();
    DriverApiLoad load;
    load.api = std::move(api);
    return load;
  };
  deps.err = [&err](std::string_view text) { err += std::string(text) + "\n"; };
  deps.pid = 77;
  Injection injection(std::move(deps));
  ASSERT_EQ(injection.initialize(), InjectionState::kActive) << err;
  Dispatcher& dispatcher = injection.backend()->dispatcher();
  CUdeviceptr buffer = kBuffer;
  CUdeviceptr weight = kWeight;
  void* args[2] = {&weight, &buffer};
  const CUgraphExec exec = allocate_and_instantiate(*fake, dispatcher, args);
  resource(dispatcher, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, nullptr, exec);
  injection.at_exit();

  std::ifstream stream(dir / "graphcheck-77-exit-report.json");
  const std::string json((std::istreambuf_iterator<char>(stream)),
                         std::istreambuf_iterator<char>());
  const Report report = parse_report(json);
  EXPECT_EQ(report.summary.graphs, 1u);
  // The buffer: no spans in an injected process (the weight is in no allocation there, so
  // it is no reference at all).
  ASSERT_EQ(report.findings.size(), 1u);
  EXPECT_EQ(report.findings[0].verdict, Verdict::kUnregistered);
  EXPECT_THAT(report.warnings, ::testing::Contains(HasSubstr("checked as its exec graph")));
  EXPECT_TRUE(std::filesystem::exists(dir / "graphcheck-77-destroy-report.json"));
  EXPECT_THAT(err, HasSubstr("checked as it was destroyed"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace graphcheck::cupti
