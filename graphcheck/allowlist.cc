// Allowlist globs: reading them from a file (UTF-8 text, refused otherwise), and matching them
// during a check.
#include "graphcheck/detail/allowlist.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/report.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_set>

#include "graphcheck/detail/glob.h"
#include "graphcheck/detail/posix_file.h"
#include "graphcheck/detail/utf8.h"

namespace graphcheck {
namespace detail {

Allowlist::Allowlist(const std::vector<std::string>& globs) {
  std::unordered_set<std::string_view> seen;  // views of `globs`, which outlives the loop
  for (const std::string& glob : globs) {
    if (!glob.empty() && seen.insert(glob).second) {
      globs_.push_back(glob);
      const std::size_t first = glob.find_first_of("*?");
      Compiled compiled;
      compiled.literal = first == std::string::npos;
      compiled.prefix = compiled.literal ? glob.size() : first;
      compiled.suffix = compiled.literal ? 0 : glob.size() - glob.find_last_of("*?") - 1;
      compiled_.push_back(compiled);
    }
  }
  used_.assign(globs_.size(), 0);
  unused_count_ = globs_.size();
}

bool Allowlist::matches(std::size_t glob, std::string_view name) const {
  const std::string_view text = globs_[glob];
  const Compiled& compiled = compiled_[glob];
  if (compiled.literal) {
    return name == text;
  }
  return name.size() >= compiled.prefix + compiled.suffix &&
         name.starts_with(text.substr(0, compiled.prefix)) &&
         name.ends_with(text.substr(text.size() - compiled.suffix)) && glob_matches(text, name);
}

bool Allowlist::allows(const std::string* const* names, std::size_t count) const {
  for (std::size_t g = 0; g < globs_.size(); ++g) {
    for (std::size_t n = 0; n < count; ++n) {
      const std::string* name = names[n];
      if (name != nullptr && !name->empty() && matches(g, *name)) {
        return true;
      }
    }
  }
  return false;
}

void Allowlist::note_owner(std::string_view owner) {
  if (owner.empty()) {
    return;
  }
  for (std::size_t g = 0; g < globs_.size(); ++g) {
    if (used_[g] == 0 && matches(g, owner)) {
      used_[g] = 1;
      --unused_count_;
    }
  }
}

std::vector<std::string> Allowlist::unused() const {
  std::vector<std::string> result;
  for (std::size_t g = 0; g < globs_.size(); ++g) {
    if (used_[g] == 0) {
      result.push_back(globs_[g]);
    }
  }
  return result;
}

}  // namespace detail

namespace {

// The file's bytes, at most kMaxAllowlistBytes. Opened without blocking (a FIFO's open waits
// for a writer otherwise) and refused unless it is a regular file.
std::string read_text_file(const std::string& path, const std::string& shown) {
  const detail::Descriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));  // NOLINT
  if (fd.get() < 0) {
    throw Error(fmt::format(
        "allowlist {}: cannot be read: {} (expected a text file with one glob per line); check "
        "the path and its permissions",
        shown, std::strerror(errno)));
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    throw Error(fmt::format("allowlist {}: cannot be read: {}", shown, std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) {
    throw Error(fmt::format("allowlist {}: expected a text file with one glob per line, found {}",
                            shown, detail::file_kind(info.st_mode)));
  }
  std::string text;
  const int error = detail::read_to_end(fd.get(), [&](std::string_view chunk) {
    const std::size_t total = text.size() + chunk.size();
    if (total > kMaxAllowlistBytes) {
      throw Error(fmt::format(
          "allowlist {}: {} bytes, more than the {} an allowlist may hold (4 MiB); expected a "
          "text file with one glob per line: is this the right file?",
          shown, std::max(static_cast<std::uint64_t>(info.st_size), std::uint64_t{total}),
          kMaxAllowlistBytes));
    }
    text.append(chunk);
  });
  if (error != 0) {
    throw Error(fmt::format("allowlist {}: read failed part way: {}; check the file", shown,
                            std::strerror(error)));
  }
  return text;
}

// Refuses a line that is not text: bytes that are not UTF-8, or a NUL (no owner name holds
// one, and a C string of the glob would end there: a shorter glob than the one written).
void require_text_line(std::string_view line, std::size_t line_start, std::size_t number,
                       const std::string& shown) {
  std::optional<std::size_t> bad = detail::first_invalid_utf8(line);
  std::string_view what = "not valid UTF-8";
  const std::size_t nul = line.find('\0');
  if (nul != std::string_view::npos && (!bad || nul < *bad)) {
    bad = nul;
    what = "a NUL byte";
  }
  if (!bad) {
    return;
  }
  throw Error(fmt::format(
      "allowlist {}:{}: {} (byte 0x{:02x} at byte offset {} of the file, column {}); an "
      "allowlist is UTF-8 text, one glob per line: fix or remove the line",
      shown, number, what, static_cast<unsigned char>(line[*bad]), line_start + *bad, *bad + 1));
}

}  // namespace

std::vector<std::string> read_allowlist(const std::string& path) {
  const std::string shown = printable(path);
  const std::string text = read_text_file(path, shown);
  constexpr std::string_view kBom = "\xEF\xBB\xBF";
  constexpr std::string_view kSpace = " \t\r\n\f\v";
  std::vector<std::string> globs;
  std::size_t start = text.starts_with(kBom) ? kBom.size() : 0;
  for (std::size_t number = 1; start < text.size(); ++number) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) {
      end = text.size();
    }
    const std::string_view line = std::string_view(text).substr(start, end - start);
    require_text_line(line, start, number, shown);
    start = end + 1;
    const std::size_t first = line.find_first_not_of(kSpace);
    if (first == std::string_view::npos || line[first] == '#') {
      continue;
    }
    const std::size_t last = line.find_last_not_of(kSpace);
    globs.emplace_back(line.substr(first, last - first + 1));
  }
  return globs;
}

}  // namespace graphcheck
