// The allowlist of one check: globs, and which of them allowed a reference.
#ifndef GRAPHCHECK_DETAIL_ALLOWLIST_H_
#define GRAPHCHECK_DETAIL_ALLOWLIST_H_

#include <cstddef>
#include <string>
#include <vector>

namespace graphcheck::detail {

/// Globs (fnmatch, no flags) matched against owner names and allocation labels.
/// Thread safety: not thread-safe (records use); one per check.
class Allowlist {
 public:
  /// Keeps the first of duplicate globs; empty globs are dropped.
  explicit Allowlist(const std::vector<std::string>& globs);

  /// True if a glob matches any of the non-empty `names`; every matching glob is marked as
  /// used. Empty names (no owner, no label) match nothing.
  bool allows(const std::string* const* names, std::size_t count);

  /// The globs that allowed no reference, in list order.
  [[nodiscard]] std::vector<std::string> unused() const;

  [[nodiscard]] bool empty() const { return globs_.empty(); }

 private:
  std::vector<std::string> globs_;
  std::vector<char> used_;
};

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_ALLOWLIST_H_
