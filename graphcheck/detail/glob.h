// Owner globs: the one glob language of allowlists (the checker's, the census', the zoo's).
#ifndef GRAPHCHECK_DETAIL_GLOB_H_
#define GRAPHCHECK_DETAIL_GLOB_H_

#include <string>
#include <string_view>
#include <vector>

namespace graphcheck::detail {

/// True if `glob` matches the whole of `name`. `*` matches any run of characters except
/// `.` (one component of an attribute path: `layers.*.scale` names the layers' own
/// attribute, not `layers.0.mlp.scale`), `**` any run at all, `?` one character except `.`;
/// every other character, `[`, `]` and `\` included, matches itself (census paths such as
/// `experts[0].weight` are pasted as they are). Python's census and zoo match with it too
/// (`_core.glob_matches`, `graphcheck._utils.PathGlob`).
/// Time O(|glob| * |name|) whatever the glob (no backtracking: a hostile allowlist cannot
/// make a check slow). Thread safety: a pure function.
[[nodiscard]] bool glob_matches(std::string_view glob, std::string_view name);

/// Why `glob`, an allowlist entry that matched nothing, was probably meant otherwise, as a
/// clause for a report ("" when no reason is found): a ` #` inside it (a comment on the glob's
/// line became part of the glob), or a `*` where `**` would match some of `names`, the owners
/// that have findings (`*` stays within one dotted component). Thread safety: a pure function.
[[nodiscard]] std::string stale_glob_hint(std::string_view glob,
                                          const std::vector<std::string>& names);

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_GLOB_H_
