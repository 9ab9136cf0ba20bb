#include "cupti/backend.h"

#include <graphcheck/error.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

namespace graphcheck::cupti {

LaunchHook::LaunchHook(DriverApi& api, CheckerSession& session, GraphCapture& capture)
    : api_(api), session_(session), capture_(capture) {}

std::vector<CallbackId> LaunchHook::callbacks() const {
  std::vector<CallbackId> ids = {
      {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED},
      {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING}};
  if (session_.options().launch_check == LaunchCheck::kEveryLaunch) {
    // Only the driver entry points: cudaGraphLaunch reaches cuGraphLaunch, and enabling the
    // runtime one as well would check each launch twice [verify on a GPU].
    ids.push_back({CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch});
    ids.push_back({CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz});
  }
  return ids;
}

void LaunchHook::on_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
  if (data == nullptr) {
    return;
  }
  if (domain == CUPTI_CB_DOMAIN_RESOURCE && cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED) {
    const auto& resource = *static_cast<const CUpti_ResourceData*>(data);
    const auto* graph = static_cast<const CUpti_GraphData*>(resource.resourceDescriptor);
    if (graph == nullptr || graph->graphExec == nullptr) {
      return;
    }
    std::uint32_t id = 0;
    GRAPHCHECK_CUPTI_CHECK(api_, cupti_get_graph_exec_id(graph->graphExec, &id));
    session_.note_graph_capture(id);
    return;
  }
  if (domain == CUPTI_CB_DOMAIN_RESOURCE &&
      cbid == CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING) {
    // Checked now: PyTorch destroys its graphs before the injection library's exit check.
    // No driver call: the record was read at instantiate.
    Status failed;
    for (const RetiredGraph& retired : capture_.take_retired()) {
      Status status = session_.check_destroyed(retired.record, retired.warnings,
                                               reinterpret_cast<std::uintptr_t>(retired.exec));
      if (failed.ok()) {
        failed = std::move(status);
      }
    }
    failed.throw_if_error();
    return;
  }
  if (domain != CUPTI_CB_DOMAIN_DRIVER_API) {
    return;
  }
  const auto& callback = *static_cast<const CUpti_CallbackData*>(data);
  if (callback.callbackSite != CUPTI_API_ENTER || callback.functionParams == nullptr) {
    return;
  }
  CUgraphExec exec = nullptr;
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch) {
    exec = static_cast<const cuGraphLaunch_params*>(callback.functionParams)->hGraph;
  } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz) {
    exec = static_cast<const cuGraphLaunch_ptsz_params*>(callback.functionParams)->hGraphExec;
  } else {
    return;
  }
  launches_.fetch_add(1, std::memory_order_relaxed);
  const Status status = session_.on_graph_launch(reinterpret_cast<std::uintptr_t>(exec));
  status.throw_if_error();
}

namespace {

SessionSources make_sources(GraphCapture& capture, AllocationTracker& tracker) {
  SessionSources sources;
  sources.allocations = [&tracker] { return tracker.allocations(); };
  sources.graphs = [&capture] {
    std::vector<GraphRecord> graphs;
    for (const auto& record : capture.exec_graphs()) {
      if (record != nullptr) {
        graphs.push_back(*record);
      }
    }
    return graphs;
  };
  sources.graph_for_exec = [&capture](std::uint64_t exec) -> std::optional<GraphRecord> {
    // The session keys exec graphs by handle value; turn it back into the handle.
    const auto record = capture.exec_graph(
        reinterpret_cast<CUgraphExec>(exec));  // NOLINT(performance-no-int-to-ptr)
    if (record == nullptr) {
      return std::nullopt;
    }
    return *record;
  };
  sources.shared_graph_for_exec = [&capture](std::uint64_t exec) {
    return capture.exec_graph(
        reinterpret_cast<CUgraphExec>(exec));  // NOLINT(performance-no-int-to-ptr)
  };
  sources.graph_warnings = [&capture](std::uint64_t id) { return capture.exec_warnings(id); };
  return sources;
}

GraphCaptureOptions keeping_retired(GraphCaptureOptions options) {
  options.keep_retired = true;  // the launch hook takes them at each destroy
  return options;
}

}  // namespace

Backend::Backend(DriverApi& api, BackendOptions options)
    : capture_(api, keeping_retired(std::move(options.capture))),
      tracker_(options.tracker, &api),
      session_(std::move(options.session), make_sources(capture_, tracker_)),
      hook_(api, session_, capture_),
      subscriber_(api, dispatcher_) {
  // Capture first: at one callback, the record a later handler reads is already updated.
  dispatcher_.add_handler(capture_);
  dispatcher_.add_handler(tracker_);
  dispatcher_.add_handler(hook_);
}

}  // namespace graphcheck::cupti
