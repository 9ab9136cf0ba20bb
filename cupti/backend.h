// The assembled CUPTI backend: graph capture, allocation tracking and checks behind one
// CUPTI subscription. The injection library and the GPU tests use it; CPU tests drive its
// dispatcher with constructed callback structures.
#ifndef GRAPHCHECK_CUPTI_BACKEND_H_
#define GRAPHCHECK_CUPTI_BACKEND_H_

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "cupti/allocation_tracker.h"
#include "cupti/checker_session.h"
#include "cupti/dispatcher.h"
#include "cupti/driver_api.h"
#include "cupti/graph_capture.h"
#include "cupti/status.h"
#include "cupti/subscriber.h"

namespace graphcheck::cupti {

/// @brief Binds instantiated graphs to capture epochs (RESOURCE GRAPHEXEC_CREATED), checks
/// each exec graph as it is destroyed (GRAPHEXEC_DESTROY_STARTING, after `GraphCapture` has
/// retired its record: `CheckerSession::check_destroyed`) and, in debug mode, checks every
/// graph launch (cuGraphLaunch and cuGraphLaunch_ptsz at API ENTER, before the launch is
/// queued). The resource callbacks wait only for the session mutex, which no holder keeps
/// while it waits for anything but the allocation tracker (cupti/lock_order.h).
///
/// The launch callback is enabled only with `LaunchCheck::kEveryLaunch`, so the default
/// mode adds nothing to the launch path. A failing launch check under
/// `ErrorAction::kReturnStatus` is thrown into the dispatcher's first-error slot (the
/// launch itself proceeds: CUPTI cannot veto a call).
/// Thread safety: as `CheckerSession`. Lifetime: `api`, `session` and `capture` outlive the
/// hook, which must be dispatched after `capture`.
class LaunchHook final : public CallbackHandler {
 public:
  LaunchHook(DriverApi& api, CheckerSession& session, GraphCapture& capture);

  [[nodiscard]] std::vector<CallbackId> callbacks() const override;
  void on_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) override;
  /// @brief Launch callbacks seen (checked or not).
  [[nodiscard]] std::uint64_t launches() const { return launches_.load(std::memory_order_relaxed); }

 private:
  DriverApi& api_;
  CheckerSession& session_;
  GraphCapture& capture_;
  std::atomic<std::uint64_t> launches_{0};
};

/// @brief Settings of a `Backend`.
struct BackendOptions {
  SessionOptions session;
  TrackerOptions tracker;
  GraphCaptureOptions capture;
};

/// @brief Graph capture, allocation tracking, the checker session and the launch hook, on
/// one dispatcher and one subscription.
///
/// The session reads the allocation tracker's table and the capture's exec-graph records
/// (captured template graphs are not added: their exec graphs carry the same nodes).
/// Thread safety: members may be called from any thread. Lifetime: `api` outlives the
/// backend; the destructor unsubscribes.
class Backend {
 public:
  Backend(DriverApi& api, BackendOptions options);
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;
  ~Backend() = default;

  /// @brief Subscribes (see `Subscriber::enable`); never throws. Cached kernel layouts are
  /// dropped first: a module may have been unloaded while the callbacks were off.
  Status enable() {
    capture_.forget_layouts();
    return subscriber_.enable();
  }
  /// @brief Unsubscribes; never throws.
  Status disable() { return subscriber_.disable(); }

  [[nodiscard]] Dispatcher& dispatcher() { return dispatcher_; }
  [[nodiscard]] GraphCapture& capture() { return capture_; }
  [[nodiscard]] AllocationTracker& tracker() { return tracker_; }
  [[nodiscard]] CheckerSession& session() { return session_; }
  [[nodiscard]] LaunchHook& launch_hook() { return hook_; }
  [[nodiscard]] Subscriber& subscriber() { return subscriber_; }

 private:
  Dispatcher dispatcher_;
  GraphCapture capture_;
  AllocationTracker tracker_;
  CheckerSession session_;
  LaunchHook hook_;
  Subscriber subscriber_;  // last: destroyed (unsubscribed) first
};

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_BACKEND_H_
