#include "cupti/injection.h"

#include <graphcheck/error.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <utility>

namespace graphcheck::cupti {
namespace {

void print_to_stderr(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
  if (text.empty() || text.back() != '\n') {
    std::fputc('\n', stderr);
  }
  std::fflush(stderr);
}

}  // namespace

Injection::Injection(InjectionDeps deps) : deps_(std::move(deps)) {
  if (!deps_.env) {
    deps_.env = process_environment();
  }
  if (!deps_.load_api) {
    deps_.load_api = [] { return load_driver_api(); };
  }
  if (!deps_.err) {
    deps_.err = print_to_stderr;
  }
  process_ = static_cast<long>(::getpid());
  if (deps_.pid == 0) {
    deps_.pid = process_;
  }
}

Injection::~Injection() = default;

void Injection::disable(std::string_view reason) noexcept {
  state_ = InjectionState::kDisabled;
  // Messages from the loader and subscriber carry their own prefix and full stop.
  constexpr std::string_view kPrefix = "graphcheck: ";
  if (reason.substr(0, kPrefix.size()) == kPrefix) {
    reason.remove_prefix(kPrefix.size());
  }
  while (!reason.empty() && (reason.back() == '.' || reason.back() == ' ')) {
    reason.remove_suffix(1);
  }
  try {
    deps_.err("graphcheck: " + std::string(reason) + "; graphcheck is disabled for this process");
  } catch (...) {  // NOLINT(bugprone-empty-catch): nothing left to report to
  }
}

InjectionState Injection::initialize() noexcept {
  try {
    config_ = parse_inject_config(deps_.env);
  } catch (const std::exception& error) {
    disable(error.what());
    return state_;
  }
  if (config_.idle()) {
    state_ = InjectionState::kIdle;
    return state_;
  }
  try {
    DriverApiLoad load = deps_.load_api();
    if (!load.status.ok() || load.api == nullptr) {
      disable(load.status.ok() ? std::string("the driver API could not be loaded")
                               : load.status.message());
      return state_;
    }
    api_ = std::move(load.api);

    BackendOptions options;
    options.tracker.site = SiteCapture::kBacktrace;
    options.tracker.default_policy = config_.vmm_restore;
    options.session.allow = config_.allow;
    options.session.policy = config_.policy;
    options.session.error_action = ErrorAction::kExitProcess;
    options.session.launch_check =
        config_.check == CheckWhen::kLaunch ? LaunchCheck::kEveryLaunch : LaunchCheck::kOff;
    // Check each graph as it is destroyed: the exit check runs from an atexit handler, after
    // PyTorch has destroyed its graphs (issue 18).
    options.session.check_at_destroy = config_.check != CheckWhen::kOff;
    options.session.out_dir = config_.out_dir;
    options.session.file_prefix = "graphcheck-" + std::to_string(deps_.pid);
    options.session.log = deps_.err;
    backend_ = std::make_unique<Backend>(*api_, std::move(options));
    const Status subscribed = backend_->enable();
    if (!subscribed.ok()) {
      backend_.reset();
      disable(subscribed.message());
      return state_;
    }
  } catch (const std::exception& error) {
    backend_.reset();
    disable(error.what());
    return state_;
  } catch (...) {
    backend_.reset();
    disable("unknown failure while attaching");
    return state_;
  }
  state_ = InjectionState::kActive;
  return state_;
}

void Injection::at_exit() noexcept {
  if (state_ != InjectionState::kActive || backend_ == nullptr ||
      static_cast<long>(::getpid()) != process_) {
    return;
  }
  try {
    if (const Status pending = backend_->dispatcher().take_error(); !pending.ok()) {
      deps_.err("graphcheck: a callback failed during the run: " + pending.message());
    }
    CheckerSession& session = backend_->session();
    if (config_.check == CheckWhen::kOff) {
      write_snapshot(session.snapshot("exit"),
                     std::filesystem::path(config_.out_dir) /
                         ("graphcheck-" + std::to_string(deps_.pid) + "-exit-snapshot.json"));
      return;
    }
    const Report report = session.check_now("exit");
    if (report.has_findings() && config_.policy == FindingPolicy::kError) {
      std::fflush(nullptr);
      std::_Exit(1);
    }
  } catch (const std::exception& error) {
    deps_.err(std::string("graphcheck: the exit check failed: ") + error.what());
  } catch (...) {
    deps_.err("graphcheck: the exit check failed with an unknown exception");
  }
}

}  // namespace graphcheck::cupti
