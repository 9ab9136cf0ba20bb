// CPU cost of the CUPTI callback path per graph node, through the fake driver: the same
// callback sequence with graphcheck's handlers (capture, allocation tracking, launch hook)
// and with none (the baseline: dispatch only).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "cupti/backend.h"
#include "cupti_fake/fake_driver.h"

namespace graphcheck::cupti {
namespace {

using testing::FakeDriver;
using testing::FakeNode;

// kGraphcheckSites: as kGraphcheck, with allocation labels naming their call site (the
// injection's setting). In this program graphcheck is linked in, so every frame is
// graphcheck's own and the walk finds no site: the whole stack is walked, the worst case.
enum class Handlers : std::uint8_t { kNone, kGraphcheck, kGraphcheckSites };

// A graph of `nodes` kernel nodes, each "k(const float* in, float* out, int n)" with two
// pointers into one tracked allocation.
struct Fixture {
  explicit Fixture(int nodes, Handlers handlers, LaunchCheck launch = LaunchCheck::kOff,
                   bool check_at_destroy = true) {
    BackendOptions options;
    options.session.launch_check = launch;
    options.session.check_at_destroy = check_at_destroy;
    options.session.log = [](std::string_view) {};
    if (handlers == Handlers::kGraphcheckSites) {
      options.tracker.site = SiteCapture::kBacktrace;
    }
    backend = std::make_unique<Backend>(api, std::move(options));
    dispatcher = handlers == Handlers::kNone ? &empty : &backend->dispatcher();
    graph = api.add_graph(1);
    const CUfunction kernel = api.add_function("k", {{0, 8}, {8, 8}, {16, 4}});
    for (int i = 0; i < nodes; ++i) {
      args.push_back({0x7f0000000000 + 256 * static_cast<std::uint64_t>(i), 0x7f0000100000, 64});
    }
    for (std::size_t i = 0; i < args.size(); ++i) {
      pointers.push_back({&args[i].in, &args[i].out, &args[i].n});
      FakeNode node;
      node.type = CU_GRAPH_NODE_TYPE_KERNEL;
      node.id = i;
      node.kernel.func = kernel;
      node.kernel.kernelParams = pointers.back().data();
      handles.push_back(api.add_node(graph, node));
    }
    exec = api.add_exec(2);
    allocate(0x7f0000000000, 2 << 20);
  }
  void api_call(CUpti_CallbackId cbid, const void* params, CUpti_ApiCallbackSite site) {
    CUpti_CallbackData data{};
    data.callbackSite = site;
    data.functionParams = params;
    data.functionReturnValue = site == CUPTI_API_EXIT ? &success : nullptr;
    dispatcher->on_callback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
  }
  void allocate(CUdeviceptr address, std::size_t size) {
    CUdeviceptr out = address;
    cuMemAlloc_v2_params params{&out, size};
    api_call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &params, CUPTI_API_ENTER);
    api_call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &params, CUPTI_API_EXIT);
  }
  // What CUPTI sends while a graph is captured and instantiated: one CREATED per node,
  // GRAPHEXEC_CREATED, the instantiate EXIT (where the graph is read).
  void capture_and_instantiate() {
    send_created();
    instantiate();
  }
  void send_created() {
    for (CUgraphNode node : handles) {
      CUpti_GraphData data{};
      data.graph = graph;
      data.node = node;
      data.nodeType = CU_GRAPH_NODE_TYPE_KERNEL;
      const CUpti_ResourceData resource{nullptr, {nullptr}, &data};
      dispatcher->on_callback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED,
                              &resource);
    }
  }
  void instantiate() {
    CUpti_GraphData created{};
    created.graph = graph;
    created.graphExec = exec;
    const CUpti_ResourceData resource{nullptr, {nullptr}, &created};
    dispatcher->on_callback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED,
                            &resource);
    cuGraphInstantiateWithFlags_params params{&exec, graph, 0};
    api_call(CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &params, CUPTI_API_EXIT);
  }
  // A stream capture's whole life as CUPTI reports it, with the graph read every time: one
  // CREATED per node, the capture end, GRAPHEXEC_CREATED and the instantiate EXIT, then the
  // exec graph and the template destroyed (as torch.cuda.graph does right after).
  void capture_read_destroy() {
    send_created();
    cuStreamEndCapture_params end{nullptr, &graph};
    api_call(CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture, &end, CUPTI_API_EXIT);
    instantiate();
    CUpti_GraphData data{};
    data.graph = graph;
    data.graphExec = exec;
    const CUpti_ResourceData resource{nullptr, {nullptr}, &data};
    dispatcher->on_callback(CUPTI_CB_DOMAIN_RESOURCE,
                            CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, &resource);
    dispatcher->on_callback(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPH_DESTROY_STARTING,
                            &resource);
  }
  void launch() {
    cuGraphLaunch_params params{exec, nullptr};
    api_call(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &params, CUPTI_API_ENTER);
  }

  struct Args {
    std::uint64_t in;
    std::uint64_t out;
    std::int32_t n;
  };
  FakeDriver api;
  std::unique_ptr<Backend> backend;
  Dispatcher empty;
  Dispatcher* dispatcher = nullptr;
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  std::vector<Args> args;
  std::deque<std::vector<void*>> pointers;
  std::vector<CUgraphNode> handles;
  CUresult success = CUDA_SUCCESS;
};

void capture_path(benchmark::State& state, Handlers handlers) {
  Fixture fixture(static_cast<int>(state.range(0)), handlers);
  for (auto _ : state) {
    fixture.capture_and_instantiate();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["ns_per_node"] =
      benchmark::Counter(static_cast<double>(state.iterations() * state.range(0)),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
void capture_callbacks_baseline(benchmark::State& state) { capture_path(state, Handlers::kNone); }
void capture_callbacks_graphcheck(benchmark::State& state) {
  capture_path(state, Handlers::kGraphcheck);
}
BENCHMARK(capture_callbacks_baseline)->Arg(100)->Arg(1000);
BENCHMARK(capture_callbacks_graphcheck)->Arg(100)->Arg(1000);

// The same callbacks, the graph read each time (the exec graph and its template destroyed
// after each instantiation; no check at destroy): the reader's driver calls per node through
// the fake driver, which counts each by name, as a real driver call costs more than the
// callback around it.
void capture_read_path(benchmark::State& state, Handlers handlers) {
  const auto nodes = static_cast<int>(state.range(0));
  Fixture fixture(nodes, handlers, LaunchCheck::kOff, /*check_at_destroy=*/false);
  fixture.api.calls.clear();
  for (auto _ : state) {
    fixture.capture_read_destroy();
  }
  // Driver calls ("cu_...") apart from CUPTI's ("cupti_...": the node id, one per node).
  int driver = 0;
  int cupti = 0;
  for (const auto& [name, count] : fixture.api.calls) {
    (name.starts_with("cupti_") ? cupti : driver) += count;
  }
  const auto per_node = [&](int calls) {
    return static_cast<double>(calls) / static_cast<double>(state.iterations() * state.range(0));
  };
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.counters["ns_per_node"] =
      benchmark::Counter(static_cast<double>(state.iterations() * state.range(0)),
                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.counters["driver_calls_per_node"] = per_node(driver);
  state.counters["cupti_calls_per_node"] = per_node(cupti);
}
void capture_read_baseline(benchmark::State& state) { capture_read_path(state, Handlers::kNone); }
void capture_read_graphcheck(benchmark::State& state) {
  capture_read_path(state, Handlers::kGraphcheck);
}
BENCHMARK(capture_read_baseline)->Arg(100)->Arg(1000);
BENCHMARK(capture_read_graphcheck)->Arg(100)->Arg(1000);

void alloc_path(benchmark::State& state, Handlers handlers) {
  Fixture fixture(1, handlers);
  CUdeviceptr address = 0x7f1000000000;
  for (auto _ : state) {
    fixture.allocate(address, 4096);
    cuMemFree_v2_params params{address};
    fixture.api_call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &params, CUPTI_API_ENTER);
    fixture.api_call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &params, CUPTI_API_EXIT);
  }
  state.SetItemsProcessed(state.iterations());
}
void alloc_free_callbacks_baseline(benchmark::State& state) { alloc_path(state, Handlers::kNone); }
void alloc_free_callbacks_graphcheck(benchmark::State& state) {
  alloc_path(state, Handlers::kGraphcheck);
}
void alloc_free_callbacks_graphcheck_sites(benchmark::State& state) {
  alloc_path(state, Handlers::kGraphcheckSites);
}
BENCHMARK(alloc_free_callbacks_baseline);
BENCHMARK(alloc_free_callbacks_graphcheck);
BENCHMARK(alloc_free_callbacks_graphcheck_sites);

// A launch check in debug mode: one snapshot of the graph and the current state, checked.
void launch_check(benchmark::State& state) {
  Fixture fixture(static_cast<int>(state.range(0)), Handlers::kGraphcheck,
                  LaunchCheck::kEveryLaunch);
  fixture.capture_and_instantiate();
  for (auto _ : state) {
    fixture.launch();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(launch_check)->Arg(100)->Arg(1000);

}  // namespace
}  // namespace graphcheck::cupti

BENCHMARK_MAIN();
