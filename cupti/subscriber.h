// The CUPTI subscription: held only while graphcheck is enabled, because CUPTI (up to CUDA
// 13.2 / drivers before r610) allows one subscriber per process.
#ifndef GRAPHCHECK_CUPTI_SUBSCRIBER_H_
#define GRAPHCHECK_CUPTI_SUBSCRIBER_H_

#include <cupti.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "cupti/dispatcher.h"
#include "cupti/driver_api.h"
#include "cupti/status.h"

namespace graphcheck::cupti {

/// @brief The name graphcheck subscribes under (CUPTI shows it as "CUPTI for graphcheck").
inline constexpr char kSubscriberName[] = "graphcheck";

/// @brief Where the subscription stands.
enum class SubscriberState : std::uint8_t {
  kDisabled,     ///< not subscribed (initial state, or after `disable()`)
  kEnabled,      ///< subscribed; the dispatcher's callbacks are enabled
  kUnavailable,  ///< the last `enable()` failed (another subscriber, no CUPTI); not subscribed
};

/// @brief Subscribes `dispatcher` to CUPTI with `cuptiSubscribe_v2` under `kSubscriberName`
/// and enables exactly `dispatcher.callbacks()`.
///
/// While enabled, graphcheck holds the process's only CUPTI subscription: `torch.profiler`
/// (Kineto) records no GPU activity meanwhile, and if graphcheck subscribes before Kineto's
/// one-shot initialisation, Kineto stays CPU-only for the life of the process. Enable only
/// around the code to check. When another tool holds CUPTI (Kineto after a profiler run,
/// Nsight Systems/Compute, compute-sanitizer, cuda-gdb), `enable()` fails with a message
/// naming the holder (CUPTI's `oldSubscriberName`) and the way out, and the state becomes
/// `kUnavailable`: the host process keeps running without graphcheck.
///
/// Thread safety: all methods may be called from any thread (serialized internally).
/// Lifetime: `api` and `dispatcher` must outlive the subscriber; the destructor disables.
class Subscriber {
 public:
  Subscriber(DriverApi& api, Dispatcher& dispatcher);
  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;
  ~Subscriber();

  /// @brief Subscribes and enables the callbacks; success if already enabled. Never throws
  /// for CUPTI failures (returns them; on failure nothing stays subscribed).
  Status enable();
  /// @brief `enable()`, throwing `graphcheck::Error` with its message on failure.
  void enable_or_throw();
  /// @brief Unsubscribes (callbacks stop before this returns); no-op unless enabled.
  /// Failures are kept for `take_error`-style reporting via the returned status.
  Status disable();

  [[nodiscard]] SubscriberState state() const;
  /// @brief The other subscriber's name from the last failed `enable()` ("" if none given).
  [[nodiscard]] std::string holder() const;

  /// @brief The C callback registered with CUPTI: forwards to
  /// `static_cast<Dispatcher*>(user_data)->on_callback(...)`; never throws.
  static void CUPTIAPI trampoline(void* user_data, CUpti_CallbackDomain domain,
                                  CUpti_CallbackId cbid, const void* data) noexcept;

 private:
  Status enable_locked();

  DriverApi& api_;
  Dispatcher& dispatcher_;
  mutable std::mutex mutex_;
  CUpti_SubscriberHandle handle_ = nullptr;
  SubscriberState state_ = SubscriberState::kDisabled;
  std::string holder_;
};

/// @brief The advice for a failed subscribe, naming `holder` (may be empty): who it probably
/// is (Kineto/torch.profiler, Nsight, sanitizer) and what to do. Exposed for tests and docs.
[[nodiscard]] std::string describe_subscriber_conflict(const std::string& holder);

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_SUBSCRIBER_H_
