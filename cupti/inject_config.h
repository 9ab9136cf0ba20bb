// Configuration of the injection library (libgraphcheck_inject.so) from environment
// variables; docs/inject.md documents each one.
#ifndef GRAPHCHECK_CUPTI_INJECT_CONFIG_H_
#define GRAPHCHECK_CUPTI_INJECT_CONFIG_H_

#include <functional>
#include <string>
#include <vector>

#include "cupti/allocation_table.h"
#include "cupti/checker_session.h"

namespace graphcheck::cupti {

/// @brief When the injected library checks.
enum class CheckWhen : std::uint8_t {
  kOff,     ///< never; with GRAPHCHECK_OUT set, the snapshot is still written at exit
  kExit,    ///< once, at process exit (the default)
  kLaunch,  ///< at every graph launch (cuGraphLaunch entry), and at exit
};

/// @brief The injection library's settings, parsed from the environment.
struct InjectConfig {
  CheckWhen check = CheckWhen::kExit;
  FindingPolicy policy = FindingPolicy::kWarn;
  std::string out_dir;                                  ///< GRAPHCHECK_OUT; empty: stderr only
  std::string allow_file;                               ///< GRAPHCHECK_ALLOW; empty: none
  std::vector<std::string> allow;                       ///< globs read from `allow_file`
  RestorePolicy vmm_restore = RestorePolicy::kDiscard;  ///< GRAPHCHECK_VMM_RESTORE
  /// True when there is nothing to do (check off, no output folder): do not subscribe.
  [[nodiscard]] bool idle() const { return check == CheckWhen::kOff && out_dir.empty(); }
};

/// @brief Looks up one environment variable; nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

/// @brief Parses GRAPHCHECK_CHECK, GRAPHCHECK_POLICY, GRAPHCHECK_OUT, GRAPHCHECK_ALLOW and
/// GRAPHCHECK_VMM_RESTORE. An unset or empty variable takes its default. Creates the output
/// folder and reads the allowlist file.
/// @throws Error naming the variable, the value and the accepted values (or the path and the
/// I/O failure); the injection library then prints it and disables itself.
/// Thread safety: reentrant if `lookup` is.
[[nodiscard]] InjectConfig parse_inject_config(const EnvLookup& lookup);

/// @brief The `std::getenv` lookup.
[[nodiscard]] EnvLookup process_environment();

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_INJECT_CONFIG_H_
