// Opening an input file without trusting what the path names: the allowlist reader and the
// snapshot reader refuse a device or a socket (a read of /dev/zero never ends) and open a FIFO
// without waiting for its writer.
#ifndef GRAPHCHECK_DETAIL_POSIX_FILE_H_
#define GRAPHCHECK_DETAIL_POSIX_FILE_H_

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <string_view>

namespace graphcheck::detail {

/// @brief What is at a path that is not a regular file ("a folder", "a FIFO (named pipe)",
/// "a socket", "a device"), for the message that refuses it. Thread safety: a pure function.
[[nodiscard]] inline std::string_view file_kind(mode_t mode) {
  if (S_ISDIR(mode)) {
    return "a folder";
  }
  if (S_ISFIFO(mode)) {
    return "a FIFO (named pipe)";
  }
  if (S_ISSOCK(mode)) {
    return "a socket";
  }
  if (S_ISCHR(mode) || S_ISBLK(mode)) {
    return "a device";
  }
  return "not a regular file";
}

/// @brief An open file descriptor, closed on every path out. Lifetime: owns `fd` (negative:
/// none). Thread safety: one owner.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor(Descriptor&&) = delete;
  Descriptor& operator=(Descriptor&&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

/// @brief Reads `fd` to its end, 64 KiB at a time, handing each chunk to `on_chunk` (which
/// may throw to stop). Returns 0 at the end, else the errno of the read that failed (a read
/// interrupted by a signal is retried).
template <typename OnChunk>
[[nodiscard]] int read_to_end(int fd, const OnChunk& on_chunk) {
  std::array<char, std::size_t{1} << 16U> buffer{};
  while (true) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0) {
      return errno;
    }
    if (got == 0) {
      return 0;
    }
    on_chunk(std::string_view(buffer.data(), static_cast<std::size_t>(got)));
  }
}

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_POSIX_FILE_H_
