// The CUPTI backend's one lock order (issue 18, launch-mode lock-order inversion).
//
// Driver callbacks, resource ones included, may run inside a driver call and perhaps under
// the driver's own locks. A callback that waits for a lock whose holder waits for another
// lock whose holder calls the driver can wait forever. So the locks are ordered:
//
//   GraphCapture's state lock  ->  (driver calls)
//   CheckerSession's mutex     ->  AllocationTracker's mutex (a leaf: no call, no other lock)
//
// and the session mutex is never held while the capture's lock is waited for or the driver
// is called: the session gathers what its sources return (graph records, allocations,
// warnings) before it locks. A resource callback that waits for the session mutex (a graph
// exec created or destroyed) therefore waits only for work that needs no other lock.
// `SessionLockScope` marks the session mutex as held on this thread, and the capture's
// blocking lock calls `check_not_under_session_lock` first: a change that breaks the order
// throws at once (in every build) instead of deadlocking on a GPU some day.
#ifndef GRAPHCHECK_CUPTI_LOCK_ORDER_H_
#define GRAPHCHECK_CUPTI_LOCK_ORDER_H_

#include <string_view>

namespace graphcheck::cupti::detail {

/// @brief Marks the checker session's mutex as held by this thread for its lifetime.
/// Thread safety: per thread (a thread-local count). Lifetime: a scope inside the lock.
class SessionLockScope {
 public:
  SessionLockScope();
  ~SessionLockScope();
  SessionLockScope(const SessionLockScope&) = delete;
  SessionLockScope& operator=(const SessionLockScope&) = delete;
};

/// @brief Whether this thread holds the checker session's mutex.
[[nodiscard]] bool session_lock_held() noexcept;

/// @brief Throws `graphcheck::Error` naming `what` and the lock order when this thread holds
/// the checker session's mutex (`what` would wait for a lock whose holder calls the driver).
void check_not_under_session_lock(std::string_view what);

}  // namespace graphcheck::cupti::detail

#endif  // GRAPHCHECK_CUPTI_LOCK_ORDER_H_
