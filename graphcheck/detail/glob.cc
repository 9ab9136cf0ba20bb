// Owner globs: a dynamic program over (glob position, name position), one row per glob token.
#include "graphcheck/detail/glob.h"

#include <fmt/format.h>

#include <cstddef>
#include <string>
#include <vector>

namespace graphcheck::detail {

bool glob_matches(std::string_view glob, std::string_view name) {
  const std::size_t n = name.size();
  // row[j]: the glob consumed so far matches name[0, j).
  std::vector<char> row(n + 1, 0);
  std::vector<char> next(n + 1, 0);
  row[0] = 1;
  for (std::size_t g = 0; g < glob.size(); ++g) {
    const char c = glob[g];
    const bool any_depth = c == '*' && g + 1 < glob.size() && glob[g + 1] == '*';
    next[0] = static_cast<char>(c == '*' && row[0] != 0);
    for (std::size_t j = 1; j <= n; ++j) {
      const char s = name[j - 1];
      if (any_depth) {
        next[j] = static_cast<char>(row[j] != 0 || next[j - 1] != 0);
      } else if (c == '*') {
        next[j] = static_cast<char>(row[j] != 0 || (next[j - 1] != 0 && s != '.'));
      } else if (c == '?') {
        next[j] = static_cast<char>(row[j - 1] != 0 && s != '.');
      } else {
        next[j] = static_cast<char>(row[j - 1] != 0 && s == c);
      }
    }
    row.swap(next);
    if (any_depth) {
      ++g;  // the second '*' of '**'
    }
  }
  return row[n] != 0;
}

std::string stale_glob_hint(std::string_view glob, const std::vector<std::string>& names) {
  if (const std::size_t at = glob.find(" #"); at != std::string_view::npos) {
    return fmt::format("a comment must be on a line of its own: this glob ends in '{}'",
                       glob.substr(at + 1));
  }
  // Every lone `*` made `**`; a glob already written with `**` only is left alone.
  std::string wider;
  bool widened = false;
  for (std::size_t i = 0; i < glob.size(); ++i) {
    if (glob[i] == '*' && i + 1 < glob.size() && glob[i + 1] == '*') {
      wider += "**";
      ++i;
    } else if (glob[i] == '*') {
      wider += "**";
      widened = true;
    } else {
      wider += glob[i];
    }
  }
  if (!widened) {
    return {};
  }
  std::size_t matched = 0;
  for (const std::string& name : names) {
    if (glob_matches(wider, name)) {
      ++matched;
    }
  }
  if (matched == 0) {
    return {};
  }
  return fmt::format("'*' stays within one dotted name: {} would match {} owner(s) with findings",
                     wider, matched);
}

}  // namespace graphcheck::detail
