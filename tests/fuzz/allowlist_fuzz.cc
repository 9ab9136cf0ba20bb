// Fuzz target: an allowlist file as `graphcheck check --allow` and GRAPHCHECK_ALLOW read it, and
// its globs matched against owner names. The file is refused with graphcheck::Error (one
// line), or each glob read is non-empty UTF-8 text without a NUL, trimmed, and not a comment;
// then every glob is matched against every other glob and a few census paths, and
// `glob_matches` must agree with a second matcher written from its documented rules (top-down
// over tokens rather than its row-by-row program).
#include <graphcheck/checker.h>
#include <graphcheck/error.h>

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "graphcheck/detail/glob.h"
#include "graphcheck/detail/utf8.h"
#include "tests/fuzz/fuzz_support.h"

namespace graphcheck::fuzz {
namespace {

// glob_matches' rules (detail/glob.h), read as tokens: `**` any run, `*` any run without
// '.', `?` one character but '.', anything else itself. memo[t][j]: 0 unknown, 1 no, 2 yes.
class ReferenceGlob {
 public:
  ReferenceGlob(std::string_view glob, std::string_view name) : name_(name) {
    for (std::size_t i = 0; i < glob.size(); ++i) {
      if (glob[i] == '*' && i + 1 < glob.size() && glob[i + 1] == '*') {
        tokens_.push_back(kAnyDepth);
        ++i;
      } else if (glob[i] == '*') {
        tokens_.push_back(kAnyInComponent);
      } else if (glob[i] == '?') {
        tokens_.push_back(kOne);
      } else {
        tokens_.push_back(static_cast<unsigned char>(glob[i]));
      }
    }
    memo_.assign((tokens_.size() + 1) * (name.size() + 1), 0);
  }

  bool matches() { return match(0, 0); }

 private:
  static constexpr int kAnyDepth = 256;
  static constexpr int kAnyInComponent = 257;
  static constexpr int kOne = 258;

  bool match(std::size_t t, std::size_t j) {
    char& seen = memo_[t * (name_.size() + 1) + j];
    if (seen == 0) {
      seen = decide(t, j) ? 2 : 1;
    }
    return seen == 2;
  }

  bool decide(std::size_t t, std::size_t j) {
    if (t == tokens_.size()) {
      return j == name_.size();
    }
    const int token = tokens_[t];
    if (token == kAnyDepth || token == kAnyInComponent) {
      // The run is empty, or it takes name_[j] and goes on.
      if (match(t + 1, j)) {
        return true;
      }
      return j < name_.size() && (token == kAnyDepth || name_[j] != '.') && match(t, j + 1);
    }
    if (j == name_.size()) {
      return false;
    }
    const bool one =
        token == kOne ? name_[j] != '.' : static_cast<unsigned char>(name_[j]) == token;
    return one && match(t + 1, j + 1);
  }

  std::string_view name_;
  std::vector<int> tokens_;
  std::vector<char> memo_;
};

void require_glob_text(std::string_view glob) {
  constexpr std::string_view kSpace = " \t\r\n\f\v";
  require(!glob.empty(), "an empty glob");
  require(glob.front() != '#', "a comment read as a glob");
  require(kSpace.find(glob.front()) == std::string_view::npos &&
              kSpace.find(glob.back()) == std::string_view::npos,
          "a glob not trimmed");
  require(glob.find('\0') == std::string_view::npos, "a NUL in a glob");
  require(!detail::first_invalid_utf8(glob).has_value(), "a glob that is not UTF-8");
}

}  // namespace

void allowlist_input(std::string_view bytes) {
  const std::filesystem::path path = scratch_folder() / "allowlist.txt";
  write_file(path, bytes);
  std::vector<std::string> globs;
  try {
    globs = read_allowlist(path.string());
  } catch (const Error& error) {
    require_one_line(error);
    return;
  }
  std::vector<std::string> names = {"", "layers.0.mlp.scale", "experts[0].weight", "a.b", "."};
  for (const std::string& glob : globs) {
    require_glob_text(glob);
    if (names.size() < 16) {
      names.push_back(glob);
    }
  }
  for (std::size_t g = 0; g < globs.size() && g < 16; ++g) {
    for (const std::string& name : names) {
      const bool fast = detail::glob_matches(globs[g], name);
      require(fast == ReferenceGlob(globs[g], name).matches(),
              "glob_matches disagrees with its documented rules");
    }
  }
}

}  // namespace graphcheck::fuzz
