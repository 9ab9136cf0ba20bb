// "Did you mean" (closest.h).
#include "graphcheck/detail/closest.h"

#include <graphcheck/report.h>

#include <algorithm>
#include <cstddef>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace graphcheck::detail {
namespace {

// Edit distance over bytes where a swap of two neighbours is one edit, as typing makes it
// ("epcoh"): optimal string alignment, three rows (the one before last for swaps).
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> before(b.size() + 1);
  std::vector<std::size_t> last(b.size() + 1);
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(last.begin(), last.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t change = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({last[j] + 1, row[j - 1] + 1, last[j - 1] + change});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        row[j] = std::min(row[j], before[j - 2] + 1);
      }
    }
    std::swap(before, last);
    std::swap(last, row);
  }
  return last[b.size()];
}

}  // namespace

std::string closest_word(std::string_view word, const std::vector<std::string>& candidates) {
  // Names people type are short; a table of 20 KB labels against a 20 KB word took seconds.
  constexpr std::size_t kLongest = 256;
  if (word.size() > kLongest) {
    return {};
  }
  const std::string* best = nullptr;
  std::size_t best_distance = 0;
  bool tie = false;
  for (const std::string& candidate : candidates) {
    const std::size_t limit = std::max<std::size_t>(1, std::max(word.size(), candidate.size()) / 4);
    const std::size_t apart =
        std::max(word.size(), candidate.size()) - std::min(word.size(), candidate.size());
    if (candidate.size() > kLongest || apart > limit) {
      continue;  // at least `apart` edits away: too far, whatever the letters
    }
    const std::size_t distance = edit_distance(word, candidate);
    if (distance == 0) {
      return {};  // known: nothing to suggest
    }
    if (distance > limit) {
      continue;
    }
    if (best == nullptr || distance < best_distance) {
      best = &candidate;
      best_distance = distance;
      tie = false;
    } else if (distance == best_distance && candidate != *best) {
      tie = true;
    }
  }
  return best == nullptr || tie ? std::string() : *best;
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string closest = closest_word(word, candidates);
  return closest.empty() ? std::string() : "; did you mean \"" + printable(closest) + "\"?";
}

}  // namespace graphcheck::detail
