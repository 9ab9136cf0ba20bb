#include "cupti/inject_config.h"

#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace graphcheck::cupti {
namespace {

template <typename T, std::size_t N>
T parse_choice(const EnvLookup& lookup, const char* variable, T fallback,
               const std::array<std::pair<std::string_view, T>, N>& choices) {
  const char* raw = lookup(variable);
  if (raw == nullptr || *raw == '\0') {
    return fallback;
  }
  const std::string_view value(raw);
  std::string accepted;
  for (const auto& [name, choice] : choices) {
    if (value == name) {
      return choice;
    }
    accepted += accepted.empty() ? "" : ", ";
    accepted += name;
  }
  throw Error(std::string(variable) + "='" + std::string(value) + "' is not accepted; use one of " +
              accepted);
}

std::string read_string(const EnvLookup& lookup, const char* variable) {
  const char* raw = lookup(variable);
  return raw == nullptr ? std::string() : std::string(raw);
}

// A folder the program may not write (read-only, /proc, another user's) passed the checks
// above: under GRAPHCHECK_POLICY=error the exit check's files then failed to write, and that
// failure ended the check before its exit status (a CI run with findings exited 0). A file
// made and removed now says whether writing works.
void require_writable(const std::string& folder) {
  const std::filesystem::path probe =
      std::filesystem::path(folder) / (".graphcheck-probe-" + std::to_string(::getpid()));
  std::FILE* file = std::fopen(probe.c_str(), "wb");
  if (file == nullptr) {
    throw Error("GRAPHCHECK_OUT='" + folder + "' is a folder graphcheck cannot write (" +
                std::error_code(errno, std::generic_category()).message() +
                "); set it to a writable folder or unset it");
  }
  (void)std::fclose(file);
  std::error_code ignored;
  std::filesystem::remove(probe, ignored);
}

}  // namespace

InjectConfig parse_inject_config(const EnvLookup& lookup) {
  InjectConfig config;
  config.check = parse_choice<CheckWhen, 3>(
      lookup, "GRAPHCHECK_CHECK", CheckWhen::kExit,
      {{{"off", CheckWhen::kOff}, {"exit", CheckWhen::kExit}, {"launch", CheckWhen::kLaunch}}});
  config.policy = parse_choice<FindingPolicy, 2>(
      lookup, "GRAPHCHECK_POLICY", FindingPolicy::kWarn,
      {{{"warn", FindingPolicy::kWarn}, {"error", FindingPolicy::kError}}});
  config.vmm_restore = parse_choice<RestorePolicy, 2>(
      lookup, "GRAPHCHECK_VMM_RESTORE", RestorePolicy::kDiscard,
      {{{"discard", RestorePolicy::kDiscard}, {"restore", RestorePolicy::kRestore}}});
  config.out_dir = read_string(lookup, "GRAPHCHECK_OUT");
  if (!config.out_dir.empty()) {
    std::error_code error;
    std::filesystem::create_directories(config.out_dir, error);
    if (error || !std::filesystem::is_directory(config.out_dir)) {
      throw Error("GRAPHCHECK_OUT='" + config.out_dir +
                  "' is not a folder graphcheck can create (" +
                  (error ? error.message() : std::string("not a directory")) +
                  "); set it to a writable folder or unset it");
    }
    require_writable(config.out_dir);
    // The files are written at exit, perhaps after the program changed its working folder.
    const std::filesystem::path absolute = std::filesystem::absolute(config.out_dir, error);
    if (!error) {
      config.out_dir = absolute.string();
    }
  }
  config.allow_file = read_string(lookup, "GRAPHCHECK_ALLOW");
  if (!config.allow_file.empty()) {
    try {
      config.allow = read_allowlist(config.allow_file);
    } catch (const Error& error) {
      throw Error("GRAPHCHECK_ALLOW='" + config.allow_file + "': " + error.what());
    }
  }
  return config;
}

EnvLookup process_environment() {
  // std::getenv is not guaranteed thread-safe against setenv; the library reads the
  // environment once, from InitializeInjection.
  return [](const char* name) -> const char* { return std::getenv(name); };  // NOLINT
}

}  // namespace graphcheck::cupti
