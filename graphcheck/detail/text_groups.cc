// The text report's helpers (text_groups.h).
#include "graphcheck/detail/text_groups.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <utility>

#include "graphcheck/detail/glob.h"

namespace graphcheck::detail {
namespace {

bool is_number(std::string_view text) {
  return !text.empty() && text.size() <= 9 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<std::string_view> split_dots(std::string_view name) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (std::size_t dot = name.find('.'); dot != std::string_view::npos;
       dot = name.find('.', start)) {
    parts.push_back(name.substr(start, dot - start));
    start = dot + 1;
  }
  parts.push_back(name.substr(start));
  return parts;
}

// What an owner is, for the to-do line's noun: its kind, or an allocation's label.
std::string_view owner_noun(const Finding& finding) {
  if (finding.owner_kind.has_value()) {
    return to_string(*finding.owner_kind);
  }
  return finding.owner.empty() ? std::string_view() : std::string_view("allocation label");
}

// "7 parameters", "2 allocation labels", "3 owners" (kinds mixed).
std::string owners_text(const std::vector<Finding>& findings, const FixGroup& group,
                        std::size_t owners) {
  std::set<std::string_view> nouns;
  for (std::size_t index : group.members) {
    nouns.insert(owner_noun(findings[index]));
  }
  std::string noun = nouns.size() == 1 && !nouns.begin()->empty() ? std::string(*nouns.begin())
                                                                  : std::string("owner");
  if (noun == "runtime" || noun == "graph") {
    noun += " span";
  }
  return plural(owners, noun);
}

constexpr std::size_t kTodoOwnerFamilies = 8;

}  // namespace

std::string plural(std::uint64_t count, std::string_view noun) {
  return fmt::format("{} {}{}", count, noun, count == 1 ? "" : "s");
}

// The owner with each numeric dotted component replaced by '#'.
std::string owner_family(std::string_view owner) {
  std::string family;
  for (std::string_view part : split_dots(owner)) {
    if (!family.empty()) {
      family += '.';
    }
    family += is_number(part) ? std::string_view("#") : part;
  }
  return family.empty() ? std::string(owner) : family;
}

int precedence(Verdict verdict) {
  return static_cast<int>(std::find(kFindingsByUrgency.begin(), kFindingsByUrgency.end(), verdict) -
                          kFindingsByUrgency.begin());
}

// "3-5, 9, 12": sorted ids with runs collapsed.
std::string compact_ids(const std::set<std::uint64_t>& ids, std::string_view separator) {
  std::string out;
  for (auto it = ids.begin(); it != ids.end();) {
    std::uint64_t first = *it;
    std::uint64_t last = first;
    ++it;
    while (it != ids.end() && *it == last + 1) {
      last = *it;
      ++it;
    }
    if (!out.empty()) {
      out += separator;
    }
    out += first == last ? fmt::format("{}", first) : fmt::format("{}-{}", first, last);
  }
  return out;
}

std::string group_owner(const std::vector<Finding>& findings,
                        const std::vector<std::size_t>& members) {
  std::vector<std::string_view> names;
  names.reserve(members.size());
  for (std::size_t index : members) {
    names.emplace_back(findings[index].owner);
  }
  return family_name(names);
}

std::string family_name(const std::vector<std::string_view>& names) {
  std::vector<std::string_view> parts = split_dots(names.front());
  std::vector<std::set<std::uint64_t>> values(parts.size());
  for (std::string_view name : names) {
    std::vector<std::string_view> other = split_dots(name);
    for (std::size_t i = 0; i < parts.size() && i < other.size(); ++i) {
      if (is_number(other[i])) {
        values[i].insert(std::stoull(std::string(other[i])));
      }
    }
  }
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) {
      out += '.';
    }
    // Appended piece by piece: GCC 12 reports a false -Wrestrict on "{" + std::string.
    if (values[i].size() > 1) {
      out += '{';
      out += compact_ids(values[i], ",");
      out += '}';
    } else {
      out += parts[i];
    }
  }
  return printable(out);
}

// A fix and what it covers: the to-do list at the top of the report, most urgent first (by
// the worst verdict among its findings, then by references, then by first appearance).
std::vector<FixGroup> group_fixes(const std::vector<Finding>& findings) {
  std::vector<FixGroup> groups;
  std::map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < findings.size(); ++i) {
    const auto [it, added] = index.try_emplace(findings[i].fix, groups.size());
    if (added) {
      groups.push_back(FixGroup{findings[i].fix, 4, i, {}});
    }
    FixGroup& group = groups[it->second];
    group.members.push_back(i);
    group.worst = std::min(group.worst, precedence(findings[i].verdict));
  }
  std::stable_sort(groups.begin(), groups.end(), [](const FixGroup& a, const FixGroup& b) {
    return std::make_tuple(a.worst, b.members.size(), a.first) <
           std::make_tuple(b.worst, a.members.size(), b.first);
  });
  return groups;
}

// "to fix (N), most urgent first:", then the fixes' lines.
void append_fixes(std::string& out, const std::vector<Finding>& findings,
                  const std::vector<FixGroup>& fixes) {
  out += fmt::format("\nto fix ({}), most urgent first:\n", fixes.size());
  append_fix_lines(out, findings, fixes, "  ");
}

// Per fix its sentence once and the owners it covers (families compacted as in the report's
// groups: "layers.{0-1}.scale").
void append_fix_lines(std::string& out, const std::vector<Finding>& findings,
                      const std::vector<FixGroup>& fixes, std::string_view indent) {
  for (std::size_t n = 0; n < fixes.size(); ++n) {
    const FixGroup& fix = fixes[n];
    std::set<std::pair<std::string_view, std::string_view>> owners;
    std::vector<std::vector<std::size_t>> families;
    std::map<std::pair<std::string, bool>, std::size_t> family_index;
    for (std::size_t index : fix.members) {
      const Finding& finding = findings[index];
      owners.emplace(owner_noun(finding), finding.owner);
      const auto key = std::make_pair(owner_family(finding.owner), finding.owner_kind.has_value());
      const auto [it, added] = family_index.try_emplace(key, families.size());
      if (added) {
        families.emplace_back();
      }
      families[it->second].push_back(index);
    }
    std::vector<std::string> names;
    for (std::size_t i = 0; i < families.size() && i < kTodoOwnerFamilies; ++i) {
      const Finding& first = findings[families[i].front()];
      names.push_back(first.owner.empty() ? std::string("<no owner or label>")
                                          : group_owner(findings, families[i]));
    }
    // The names are owner groups ("layers.{0-1}.scale"), fewer than the owners counted: the
    // rest are counted as groups too, not as owners.
    const std::string more =
        families.size() > kTodoOwnerFamilies
            ? fmt::format(", and {}", plural(families.size() - kTodoOwnerFamilies, "more group"))
            : std::string();
    out += fmt::format("{}fix {}: {}\n", indent, n + 1,
                       fix.fix.empty() ? std::string("(no fix given)") : printable(fix.fix));
    out += fmt::format("{}       {}, {}: {}{}\n", indent, owners_text(findings, fix, owners.size()),
                       plural(fix.members.size(), "reference"), fmt::join(names, ", "), more);
  }
}

std::vector<std::string> stale_allow_hints(const Report& report) {
  std::vector<std::string> owners;
  owners.reserve(report.findings.size());
  for (const Finding& finding : report.findings) {
    owners.push_back(finding.owner);
  }
  std::sort(owners.begin(), owners.end());
  owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
  std::vector<std::string> hints;
  hints.reserve(report.stale_allow.size());
  for (const std::string& glob : report.stale_allow) {
    hints.push_back(stale_glob_hint(glob, owners));
  }
  return hints;
}

}  // namespace graphcheck::detail
