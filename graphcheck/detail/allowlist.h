// The allowlist of one check: globs, and which of them allowed a reference.
#ifndef GRAPHCHECK_DETAIL_ALLOWLIST_H_
#define GRAPHCHECK_DETAIL_ALLOWLIST_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace graphcheck::detail {

/// Globs (`glob_matches`: `*` within a path component, `**` across) matched against owner
/// names and allocation labels.
/// Thread safety: not thread-safe (records use); one per check.
class Allowlist {
 public:
  /// Keeps the first of duplicate globs; empty globs are dropped.
  explicit Allowlist(const std::vector<std::string>& globs);

  /// True if a glob matches any of the non-empty `names`. Empty names (no owner, no label)
  /// match nothing. Does not mark globs as used: use is decided over every epoch
  /// (`note_owner`), not by the verdicts of one check.
  [[nodiscard]] bool allows(const std::string* const* names, std::size_t count) const;

  /// Marks every glob that matches `owner` (non-empty) as used.
  void note_owner(std::string_view owner);

  /// The globs no noted owner matched, in list order.
  [[nodiscard]] std::vector<std::string> unused() const;

  [[nodiscard]] bool empty() const { return globs_.empty(); }
  /// True when every glob has been marked used (nothing left to learn).
  [[nodiscard]] bool all_used() const { return unused_count_ == 0; }

 private:
  // A glob can match only names that start with the text before its first wildcard and end
  // with the text after its last: two cheap tests before the matcher (7k globs against 7k
  // owners took 13 s, nearly all of it in matching globs that could not match).
  struct Compiled {
    std::size_t prefix = 0;  // bytes before the first '*' or '?'
    std::size_t suffix = 0;  // bytes after the last one
    bool literal = false;    // no wildcard: the name must equal it
  };
  [[nodiscard]] bool matches(std::size_t glob, std::string_view name) const;

  std::vector<std::string> globs_;
  std::vector<Compiled> compiled_;
  std::vector<char> used_;
  std::size_t unused_count_ = 0;
};

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_ALLOWLIST_H_
