// Status and the first-error slot.
#include "cupti/status.h"

#include <graphcheck/error.h>

#include <algorithm>
#include <utility>

namespace graphcheck::cupti {
namespace {

constexpr int kEmpty = 0;
constexpr int kWriting = 1;
constexpr int kReady = 2;

}  // namespace

Status Status::error(std::string message) {
  Status status;
  status.message_ = message.empty() ? std::string("unknown error") : std::move(message);
  return status;
}

void Status::throw_if_error() const {
  if (!ok()) {
    throw Error(message_);
  }
}

bool FirstError::record(std::string_view message) noexcept {
  int expected = kEmpty;
  if (!state_.compare_exchange_strong(expected, kWriting, std::memory_order_acquire)) {
    return false;  // an earlier error is pending (or being written): keep the first
  }
  const std::size_t n = std::min(message.size(), kCapacity - 1);
  std::copy_n(message.data(), n, message_.data());
  message_[n] = '\0';
  state_.store(kReady, std::memory_order_release);
  return true;
}

bool FirstError::pending() const noexcept {
  return state_.load(std::memory_order_acquire) != kEmpty;
}

Status FirstError::take() {
  if (state_.load(std::memory_order_acquire) != kReady) {
    return {};  // empty, or a writer is mid-copy: it will be collected by the next call
  }
  Status status = Status::error(std::string(message_.data()));
  state_.store(kEmpty, std::memory_order_release);
  return status;
}

}  // namespace graphcheck::cupti
