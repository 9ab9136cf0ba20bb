// The injection library's logic (libgraphcheck_inject.so: cupti/inject.cc holds only the
// exported entry point), separated so that CPU tests drive it with a fake environment and a
// fake driver.
#ifndef GRAPHCHECK_CUPTI_INJECTION_H_
#define GRAPHCHECK_CUPTI_INJECTION_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "cupti/backend.h"
#include "cupti/driver_api.h"
#include "cupti/inject_config.h"

namespace graphcheck::cupti {

/// @brief Where an injection stands after `initialize`.
enum class InjectionState : std::uint8_t {
  kDisabled,  ///< bad configuration, no driver/CUPTI, or another CUPTI subscriber: inactive
  kIdle,      ///< GRAPHCHECK_CHECK=off and no GRAPHCHECK_OUT: nothing to do, not subscribed
  kActive,    ///< subscribed; checks per the configuration
};

/// @brief What an injection needs from the process; tests replace each part.
struct InjectionDeps {
  EnvLookup env;                              ///< default: the process environment
  std::function<DriverApiLoad()> load_api;    ///< default: `load_driver_api()`
  std::function<void(std::string_view)> err;  ///< default: stderr
  long pid = 0;                               ///< file names; default: getpid()
};

/// @brief One process's graphcheck: reads the configuration, loads the driver and CUPTI,
/// subscribes the backend, and checks at exit and (optionally) at every graph launch.
///
/// Never throws and never ends the host process except as `GRAPHCHECK_POLICY=error` asks
/// (exit status 1 after printing the report). Every failure is one line on stderr starting
/// "graphcheck: " and ending "graphcheck is disabled for this process".
/// Thread safety: `initialize` once (the entry point guards it); `at_exit` once, after it.
/// Lifetime: the entry point leaks the object on purpose: CUPTI may call back until the
/// process is gone.
class Injection {
 public:
  explicit Injection(InjectionDeps deps = {});
  Injection(const Injection&) = delete;
  Injection& operator=(const Injection&) = delete;
  ~Injection();

  /// @brief Configures and subscribes. Never throws.
  InjectionState initialize() noexcept;
  /// @brief The exit check (GRAPHCHECK_CHECK=exit|launch) or snapshot (off with
  /// GRAPHCHECK_OUT). Never throws; may `std::_Exit(1)` under GRAPHCHECK_POLICY=error.
  /// Nothing in a forked child (which inherits the atexit handler): CUDA does not carry over
  /// into a child, its records are the parent's, and so would its files' names be.
  void at_exit() noexcept;

  [[nodiscard]] InjectionState state() const { return state_; }
  [[nodiscard]] const InjectConfig& config() const { return config_; }
  /// @brief The backend while active (tests drive its dispatcher), else null.
  [[nodiscard]] Backend* backend() { return backend_.get(); }

 private:
  void disable(std::string_view reason) noexcept;

  InjectionDeps deps_;
  long process_ = 0;  // the process that made it (getpid): a forked child is another
  InjectConfig config_;
  InjectionState state_ = InjectionState::kDisabled;
  std::unique_ptr<DriverApi> api_;
  std::unique_ptr<Backend> backend_;
};

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_INJECTION_H_
