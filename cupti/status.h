// Status values for the CUPTI backend's non-throwing paths, and the first-error slot that
// CUPTI callbacks (which must never throw) use to hand an error to the next API call.
#ifndef GRAPHCHECK_CUPTI_STATUS_H_
#define GRAPHCHECK_CUPTI_STATUS_H_

#include <array>
#include <atomic>
#include <string>
#include <string_view>

namespace graphcheck::cupti {

/// @brief Success, or an error with a one-line message naming the cause and the fix.
///
/// Used where the backend must not throw (callback paths, loading the driver in a host
/// process that should keep running without graphcheck). `throw_if_error()` turns it into a
/// `graphcheck::Error` where throwing is right.
/// Thread safety: an immutable value once constructed.
class [[nodiscard]] Status {
 public:
  /// @brief Success.
  Status() = default;
  /// @brief An error; `message` must not be empty.
  [[nodiscard]] static Status error(std::string message);

  [[nodiscard]] bool ok() const noexcept { return message_.empty(); }
  /// @brief The error message; empty on success.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }
  /// @brief Throws `graphcheck::Error(message())` unless `ok()`.
  void throw_if_error() const;

 private:
  std::string message_;
};

/// @brief Keeps the first error raised where exceptions cannot propagate (a CUPTI callback),
/// until an API call collects it.
///
/// `record` never allocates and never blocks: the message is copied into a fixed buffer
/// (truncated to `kCapacity - 1` bytes) and later errors are dropped while one is pending,
/// because the first error is usually the cause of the rest.
/// Thread safety: `record` and `take` may be called from any threads concurrently.
class FirstError {
 public:
  static constexpr std::size_t kCapacity = 1024;

  /// @brief Stores `message` unless an error is already pending. Returns true if stored.
  bool record(std::string_view message) noexcept;
  /// @brief Whether an error is pending (cheap; for polling).
  [[nodiscard]] bool pending() const noexcept;
  /// @brief Returns the pending error (and clears it), or success.
  [[nodiscard]] Status take();

 private:
  // 0: empty, 1: a writer is copying, 2: a message is ready.
  std::atomic<int> state_{0};
  std::array<char, kCapacity> message_{};
};

}  // namespace graphcheck::cupti

#endif  // GRAPHCHECK_CUPTI_STATUS_H_
