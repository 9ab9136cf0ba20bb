// The callback fan-out.
#include "cupti/dispatcher.h"

#include <graphcheck/error.h>

#include <algorithm>
#include <exception>
#include <string>

namespace graphcheck::cupti {
namespace {

// Set while this thread is inside on_callback. Handlers call the driver (cuGraphGetNodes,
// ...); should CUPTI report one of those calls back to us, the nested callback is ignored:
// it is graphcheck's own query, and re-entering a handler would deadlock on its lock.
thread_local bool t_in_dispatch = false;

}  // namespace

void Dispatcher::add_handler(CallbackHandler& handler) { handlers_.push_back(&handler); }

std::vector<CallbackId> Dispatcher::callbacks() const {
  std::vector<CallbackId> all;
  for (const CallbackHandler* handler : handlers_) {
    for (const CallbackId& id : handler->callbacks()) {
      if (std::find(all.begin(), all.end(), id) == all.end()) {
        all.push_back(id);
      }
    }
  }
  return all;
}

void Dispatcher::on_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                             const void* data) noexcept {
  if (t_in_dispatch || data == nullptr) {
    return;
  }
  t_in_dispatch = true;
  for (CallbackHandler* handler : handlers_) {
    try {
      handler->on_callback(domain, cbid, data);
    } catch (const std::exception& error) {
      first_error_.record(error.what());
    } catch (...) {
      first_error_.record("a graphcheck CUPTI callback threw a non-standard exception");
    }
  }
  t_in_dispatch = false;
}

void Dispatcher::record_error(const char* message) noexcept {
  first_error_.record(message == nullptr ? "unknown error" : message);
}

void Dispatcher::throw_pending_error() {
  Status status = first_error_.take();
  if (!status.ok()) {
    throw Error("graphcheck: a CUPTI callback failed earlier (the CUDA call went on unchecked): " +
                status.message());
  }
}

}  // namespace graphcheck::cupti
