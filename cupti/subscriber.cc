// The CUPTI subscription and the C trampoline.
#include "cupti/subscriber.h"

#include <graphcheck/error.h>

#include <array>
#include <string>

namespace graphcheck::cupti {
namespace {

bool contains(const std::string& text, const char* word) {
  return text.find(word) != std::string::npos;
}

}  // namespace

std::string describe_subscriber_conflict(const std::string& holder) {
  std::string lower;
  for (const char c : holder) {
    lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  }
  std::string who = holder.empty() ? std::string("another CUPTI client (CUPTI did not name it)")
                                   : "\"" + holder + "\"";
  std::string advice;
  if (contains(lower, "kineto") || contains(lower, "pytorch") || contains(lower, "torch")) {
    who += " (the PyTorch profiler, Kineto)";
    advice =
        "run graphcheck in a process without torch.profiler, or run the profiler with "
        "TEARDOWN_CUPTI=1 so Kineto releases CUPTI when it stops, or use graphcheck's ATen "
        "backend";
  } else if (contains(lower, "nsight") || contains(lower, "nsys") || contains(lower, "ncu")) {
    who += " (an Nsight tool)";
    advice = "run graphcheck without Nsight Systems/Compute, or use graphcheck's ATen backend";
  } else if (contains(lower, "sanitizer") || contains(lower, "memcheck") ||
             contains(lower, "gdb")) {
    who += " (a debugger or sanitizer)";
    advice = "run graphcheck outside compute-sanitizer/cuda-gdb, or use graphcheck's ATen backend";
  } else {
    advice =
        "stop the other CUPTI client (torch.profiler/Kineto: set TEARDOWN_CUPTI=1; Nsight, "
        "compute-sanitizer), or use graphcheck's ATen backend";
  }
  return "graphcheck: CUPTI is held by " + who +
         "; CUPTI allows one subscriber per process (before CUDA 13.3 with driver r610), so "
         "graphcheck stays disabled and the process continues unchecked. To check graphs, " +
         advice + ".";
}

Subscriber::Subscriber(DriverApi& api, Dispatcher& dispatcher)
    : api_(api), dispatcher_(dispatcher) {}

Subscriber::~Subscriber() { (void)disable(); }

void CUPTIAPI Subscriber::trampoline(void* user_data, CUpti_CallbackDomain domain,
                                     CUpti_CallbackId cbid, const void* data) noexcept {
  // Dispatcher::on_callback is itself noexcept and catches every handler exception; nothing
  // here can throw, so no C++ exception ever unwinds into CUPTI.
  if (user_data != nullptr) {
    static_cast<Dispatcher*>(user_data)->on_callback(domain, cbid, data);
  }
}

Status Subscriber::enable() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (state_ == SubscriberState::kEnabled) {
    return {};
  }
  Status status = enable_locked();
  state_ = status.ok() ? SubscriberState::kEnabled : SubscriberState::kUnavailable;
  return status;
}

Status Subscriber::enable_locked() {
  std::array<char, 256> old_name{};
  CUpti_SubscriberParams params{};
  params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
  params.subscriberName = kSubscriberName;
  params.oldSubscriberName = old_name.data();
  params.oldSubscriberSize = old_name.size();
  CUpti_SubscriberHandle handle = nullptr;
  const CUptiResult result =
      api_.cupti_subscribe_v2(&handle, &Subscriber::trampoline, &dispatcher_, &params);
  if (result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    old_name.back() = '\0';
    holder_ = old_name.data();
    return Status::error(describe_subscriber_conflict(holder_));
  }
  holder_.clear();
  if (result != CUPTI_SUCCESS) {
    return detail::cupti_status(api_, result,
                                "cupti_subscribe_v2(&handle, trampoline, &dispatcher, &params)",
                                __FILE__, __LINE__);
  }
  for (const CallbackId& id : dispatcher_.callbacks()) {
    Status enabled =
        GRAPHCHECK_CUPTI_STATUS(api_, cupti_enable_callback(1, handle, id.domain, id.cbid));
    if (!enabled.ok()) {
      (void)api_.cupti_unsubscribe(handle);  // leave nothing half-enabled behind
      return Status::error(enabled.message() + " (domain " + std::to_string(id.domain) +
                           ", callback id " + std::to_string(id.cbid) + ")");
    }
  }
  handle_ = handle;
  return {};
}

void Subscriber::enable_or_throw() { enable().throw_if_error(); }

Status Subscriber::disable() {
  const std::lock_guard<std::mutex> lock(mutex_);
  if (state_ != SubscriberState::kEnabled) {
    state_ = SubscriberState::kDisabled;
    return {};
  }
  CUpti_SubscriberHandle handle = handle_;
  handle_ = nullptr;
  state_ = SubscriberState::kDisabled;
  return GRAPHCHECK_CUPTI_STATUS(api_, cupti_unsubscribe(handle));
}

SubscriberState Subscriber::state() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return state_;
}

std::string Subscriber::holder() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return holder_;
}

}  // namespace graphcheck::cupti
