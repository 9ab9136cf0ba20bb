// Fan-out of the single CUPTI callback to the backend's handlers, separated from the CUPTI
// registration so that CPU tests drive the handlers with constructed callback structures.
#ifndef GRAPHCHECK_CUPTI_DISPATCHER_H_
#define GRAPHCHECK_CUPTI_DISPATCHER_H_

#include <cupti.h>

#include <vector>

#include "cupti/status.h"

namespace graphcheck::cupti {

/// @brief One CUPTI callback: a domain and an id within it.
struct CallbackId {
  CUpti_CallbackDomain domain = CUPTI_CB_DOMAIN_INVALID;
  CUpti_CallbackId cbid = 0;
  friend bool operator==(const CallbackId&, const CallbackId&) = default;
};

/// @brief A part of the backend that reacts to CUPTI callbacks (graph capture, allocation
/// tracking, launch checks).
///
/// `on_callback` runs on the application thread that made the CUDA call, inside that call;
/// it may throw (the dispatcher catches and keeps the first error), but must keep paths that
/// run per kernel or graph launch free of allocation, logging and contended locks.
/// `data` is what CUPTI passes: a `CUpti_CallbackData*` for the DRIVER_API and RUNTIME_API
/// domains, a `CUpti_ResourceData*` for RESOURCE (graph callbacks: its `resourceDescriptor`
/// is a `CUpti_GraphData*`).
/// Thread safety: `on_callback` may be called from several threads at once.
class CallbackHandler {
 public:
  CallbackHandler() = default;
  CallbackHandler(const CallbackHandler&) = delete;
  CallbackHandler& operator=(const CallbackHandler&) = delete;
  virtual ~CallbackHandler() = default;

  /// @brief The callbacks this handler needs; the subscriber enables exactly the union.
  [[nodiscard]] virtual std::vector<CallbackId> callbacks() const = 0;
  virtual void on_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                           const void* data) = 0;
};

/// @brief Forwards each callback to every registered handler (in registration order),
/// catching whatever they throw.
///
/// The first error (an exception's message) is kept in a `FirstError` slot until an API
/// call collects it with `take_error()` / `throw_pending_error()`; the CUDA call that
/// triggered it proceeds normally (graphcheck never breaks the host process).
/// Thread safety: `add_handler` only before subscribing (not concurrently with
/// `on_callback`); `on_callback`, `take_error` and `throw_pending_error` from any thread.
/// Lifetime: handlers are not owned and must outlive every `on_callback` call (i.e. the
/// subscription).
class Dispatcher {
 public:
  Dispatcher() = default;
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  void add_handler(CallbackHandler& handler);
  /// @brief The union of the handlers' callbacks, without duplicates, in first-seen order.
  [[nodiscard]] std::vector<CallbackId> callbacks() const;

  /// @brief The entry point the CUPTI trampoline calls; tests call it directly.
  void on_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) noexcept;

  /// @brief Records an error from a path that cannot throw (e.g. the trampoline itself).
  void record_error(const char* message) noexcept;
  /// @brief Whether a callback failed since the last `take_error`.
  [[nodiscard]] bool error_pending() const noexcept { return first_error_.pending(); }
  /// @brief The first error since the last call (cleared), or success.
  [[nodiscard]] Status take_error() { return first_error_.take(); }
  /// @brief Throws `graphcheck::Error` ("a CUPTI callback failed: ...") if one is pending.
  void throw_pending_error();

 private:
  std::vector<CallbackHandler*> handlers_;
  FirstError first_error_;
};

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_DISPATCHER_H_
