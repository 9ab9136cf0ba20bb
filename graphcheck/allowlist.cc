// Allowlist globs: reading them from a file, and matching them during a check.
#include "graphcheck/detail/allowlist.h"

#include <graphcheck/checker.h>
#include <graphcheck/error.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "graphcheck/detail/glob.h"

namespace graphcheck {
namespace detail {

Allowlist::Allowlist(const std::vector<std::string>& globs) {
  for (const std::string& glob : globs) {
    if (!glob.empty() && std::find(globs_.begin(), globs_.end(), glob) == globs_.end()) {
      globs_.push_back(glob);
    }
  }
  used_.assign(globs_.size(), 0);
  unused_count_ = globs_.size();
}

bool Allowlist::allows(const std::string* const* names, std::size_t count) const {
  for (const std::string& glob : globs_) {
    for (std::size_t n = 0; n < count; ++n) {
      const std::string* name = names[n];
      if (name != nullptr && !name->empty() && glob_matches(glob, *name)) {
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
    if (used_[g] == 0 && glob_matches(globs_[g], owner)) {
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

std::vector<std::string> read_allowlist(const std::string& path) {
  std::error_code ignored;
  std::ifstream in(path);
  if (!in || std::filesystem::is_directory(path, ignored)) {
    throw Error("allowlist " + path +
                ": cannot be read (expected a text file with one glob per line); check the "
                "path and its permissions");
  }
  std::vector<std::string> globs;
  std::string line;
  constexpr std::string_view kSpace = " \t\r\n\f\v";
  while (std::getline(in, line)) {
    const std::size_t first = line.find_first_not_of(kSpace);
    if (first == std::string::npos) {
      continue;
    }
    const std::size_t last = line.find_last_not_of(kSpace);
    std::string glob = line.substr(first, last - first + 1);
    if (glob.front() == '#') {
      continue;
    }
    globs.push_back(std::move(glob));
  }
  if (in.bad()) {
    throw Error("allowlist " + path + ": read failed part way; check the file");
  }
  return globs;
}

}  // namespace graphcheck
