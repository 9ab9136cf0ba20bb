// "Did you mean": the closest of a few known words to one that matched none of them (an
// epoch label, a command, an option), for error messages.
#ifndef GRAPHCHECK_DETAIL_CLOSEST_H_
#define GRAPHCHECK_DETAIL_CLOSEST_H_

#include <string>
#include <string_view>
#include <vector>

namespace graphcheck::detail {

/// The one candidate nearest to `word` by edit distance (insertions, deletions,
/// substitutions and swaps of neighbouring bytes), if it is within a quarter of the longer
/// word's length (at least 1 edit) and no other candidate is as near; "" otherwise, and when
/// `word` is a candidate (a guess between two is no help, nor "after_nap" -> "after_wake").
/// Words and candidates past 256 bytes are not compared (no one types them); time
/// O(|word| * |candidate|) per candidate compared. Thread safety: a pure function.
[[nodiscard]] std::string closest_word(std::string_view word,
                                       const std::vector<std::string>& candidates);

/// "; did you mean \"<closest>\"?", or "" when closest_word finds none: the clause an
/// error message adds after the word it refused.
[[nodiscard]] std::string did_you_mean(std::string_view word,
                                       const std::vector<std::string>& candidates);

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_CLOSEST_H_
