// libgraphcheck_inject.so: attaches graphcheck to any CUDA process through
// CUDA_INJECTION64_PATH. The driver loads the library during initialisation and calls
// InitializeInjection; configuration comes from GRAPHCHECK_* variables (docs/inject.md).
#include <cstdlib>
#include <mutex>

#include "cupti/injection.h"

namespace {

// Leaked on purpose: CUPTI may call back into the backend until the process is gone, and
// static destructors would race with that.
graphcheck::cupti::Injection* g_injection = nullptr;

void run_exit_check() { g_injection->at_exit(); }

}  // namespace

/// The entry point the CUDA driver calls when CUDA_INJECTION64_PATH names this library.
/// Returns 1 in every case: graphcheck never makes the host's CUDA initialisation fail.
// NOLINTNEXTLINE(readability-identifier-naming): the name the CUDA driver looks up
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::once_flag once;
  try {
    std::call_once(once, [] {
      g_injection = new graphcheck::cupti::Injection();  // NOLINT: leaked, see above
      if (g_injection->initialize() == graphcheck::cupti::InjectionState::kActive) {
        std::atexit(run_exit_check);
      }
    });
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory at start-up; stay out of the way
  }
  return 1;
}
