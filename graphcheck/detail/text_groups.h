// Helpers of the text report (report_text.cc): owner families, compacted id lists, verdict
// precedence, and the list of fixes the report starts with.
#ifndef GRAPHCHECK_DETAIL_TEXT_GROUPS_H_
#define GRAPHCHECK_DETAIL_TEXT_GROUPS_H_

#include <graphcheck/report.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace graphcheck::detail {

/// "1 reference", "3 references".
std::string plural(std::uint64_t count, std::string_view noun);

/// The owner with each numeric dotted component replaced by '#': owners of one family differ
/// only in their numbers ("model.layers.3.x" and "model.layers.4.x").
std::string owner_family(std::string_view owner);

/// The finding verdicts, most urgent first (DESIGN.md precedence): the order of every list
/// of findings a person reads (the report's groups and counts, the pages, the watch's rows).
inline constexpr std::array<Verdict, 4> kFindingsByUrgency = {
    Verdict::kStale, Verdict::kLost, Verdict::kDangling, Verdict::kUnregistered};

/// Findings first by precedence (kFindingsByUrgency): stale 0, lost 1, dangling 2,
/// unregistered 3; ok verdicts 4.
int precedence(Verdict verdict);

/// "3-5, 9, 12": sorted ids with runs collapsed.
std::string compact_ids(const std::set<std::uint64_t>& ids, std::string_view separator = ", ");

/// One name for `names` (at least one, one owner_family): the name itself, or the family with
/// each varying numeric component shown as the set of its values
/// ("model.layers.{0-6,8-31}.mlp.alpha"), printable.
std::string family_name(const std::vector<std::string_view>& names);

/// family_name of the owners of `members` (indexes into `findings`, one family).
std::string group_owner(const std::vector<Finding>& findings,
                        const std::vector<std::size_t>& members);

/// A fix sentence and its findings (indexes into Report::findings).
struct FixGroup {
  std::string_view fix;
  int worst = 4;  // precedence of its worst verdict
  std::size_t first = 0;
  std::vector<std::size_t> members;
};

/// The report's fixes, most urgent first: by the worst verdict among a fix's findings, then
/// by references (most first), then by first appearance.
std::vector<FixGroup> group_fixes(const std::vector<Finding>& findings);

/// "to fix (N), most urgent first:", then per fix its number, its sentence once and the
/// owners it covers ("7 parameters, 7 references: embed_tokens.weight, ...").
void append_fixes(std::string& out, const std::vector<Finding>& findings,
                  const std::vector<FixGroup>& fixes);

/// Per fix, the lines of `append_fixes` without its heading, each starting with `indent`:
/// "fix N: <sentence>", then the owners it covers (the demo prints them under each step).
void append_fix_lines(std::string& out, const std::vector<Finding>& findings,
                      const std::vector<FixGroup>& fixes, std::string_view indent);

/// For each of `report.stale_allow`, why it was probably meant otherwise against the owners
/// of `report.findings` (`stale_glob_hint`), or "" (the text report and the watch's log).
std::vector<std::string> stale_allow_hints(const Report& report);

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_TEXT_GROUPS_H_
