// The human report: what an engineer debugging an inference server reads first.
//
// Findings are grouped by kernel (the code that reads the memory), then by owner (the
// tensor it reads), so that one forgotten tensor read by 32 layers' kernels appears once per
// kernel with its node list, not 32 times. Each group carries one example detail and its
// fix; the counts come last so `tail -n 2` answers "how bad is it". Every name, label, detail
// and note goes through `printable`: a name may hold any bytes, and a terminal must get none
// of its control bytes (a newline would also split the report's lines).
#include <fmt/format.h>
#include <graphcheck/report.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace graphcheck {
namespace {

// A group of findings sharing kernel, verdict and owner family (owner names equal up to
// their numeric components: "model.layers.3.mlp.alpha" and "model.layers.4.mlp.alpha"), so
// that a tensor forgotten in every layer reads as one group, not 32. Indices into
// Report::findings.
struct Group {
  Verdict verdict = Verdict::kUnregistered;
  std::vector<std::size_t> members;
};

struct KernelSection {
  std::string heading;  // "kernel gemm", "op aten::mm", "memcpy node"
  std::vector<Group> groups;
  std::set<std::string> owners;
  std::size_t findings = 0;
};

// The heading a finding is grouped under: the kernel or op it belongs to, else its node kind
// ("memcpy", "memset", ...), so that copies are grouped apart from kernels.
std::string section_name(const Finding& finding) {
  if (finding.node_type == NodeType::kKernel) {
    return fmt::format("kernel {}", printable(finding.kernel));
  }
  if (!finding.kernel.empty()) {
    return fmt::format("{} {}", to_string(finding.node_type), printable(finding.kernel));
  }
  return fmt::format("{} node", to_string(finding.node_type));
}

// "read, bytes 0x1100..0x1800 (1792 bytes)" for a part of an operand, "" for a word.
std::string access_text(const Finding& finding) {
  std::string text;
  if (finding.access != Access::kUnknown) {
    text = to_string(finding.access);
  }
  if (finding.range_size != 0) {
    text += fmt::format(
        "{}bytes {}..{} ({} bytes)", text.empty() ? "" : ", ", format_address(finding.range_begin),
        format_address(finding.range_begin + finding.range_size), finding.range_size);
  }
  return text;
}

std::string upper(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](char c) {
    return (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  });
  return out;
}

std::string plural(std::uint64_t count, std::string_view noun) {
  return fmt::format("{} {}{}", count, noun, count == 1 ? "" : "s");
}

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

// Findings first by precedence (DESIGN.md): stale, lost, dangling, unregistered.
int precedence(Verdict verdict) {
  switch (verdict) {
    case Verdict::kStale:
      return 0;
    case Verdict::kLost:
      return 1;
    case Verdict::kDangling:
      return 2;
    case Verdict::kUnregistered:
      return 3;
    default:
      return 4;
  }
}

// Sections in order of first appearance, which follows graph and node order; groups within
// a section by precedence, then first appearance.
std::vector<KernelSection> group_findings(const std::vector<Finding>& findings) {
  std::vector<KernelSection> sections;
  std::map<std::string, std::size_t> section_index;
  std::map<std::tuple<std::size_t, std::string, Verdict>, std::size_t> group_index;
  for (std::size_t i = 0; i < findings.size(); ++i) {
    const Finding& finding = findings[i];
    std::string name = section_name(finding);
    auto [section_it, new_section] = section_index.try_emplace(name, sections.size());
    if (new_section) {
      sections.push_back(KernelSection{name, {}, {}, 0});
    }
    KernelSection& section = sections[section_it->second];
    ++section.findings;
    section.owners.insert(finding.owner);
    auto key = std::make_tuple(section_it->second, owner_family(finding.owner), finding.verdict);
    auto [group_it, new_group] = group_index.try_emplace(key, section.groups.size());
    if (new_group) {
      section.groups.push_back(Group{finding.verdict, {}});
    }
    section.groups[group_it->second].members.push_back(i);
  }
  for (KernelSection& section : sections) {
    std::stable_sort(section.groups.begin(), section.groups.end(),
                     [](const Group& a, const Group& b) {
                       return precedence(a.verdict) < precedence(b.verdict);
                     });
  }
  return sections;
}

// "3-5, 9, 12": sorted ids with runs collapsed.
std::string compact_ids(const std::set<std::uint64_t>& ids, std::string_view separator = ", ") {
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

// Where the group's references are: graphs and nodes, then argument words or operands.
std::string where_line(const std::vector<Finding>& findings, const Group& group) {
  std::map<std::uint64_t, std::set<std::uint64_t>> nodes_by_graph;
  std::map<std::uint32_t, std::set<std::uint32_t>> offsets_by_param;
  std::set<std::string> operands;
  for (std::size_t index : group.members) {
    const Finding& finding = findings[index];
    nodes_by_graph[finding.graph].insert(finding.node);
    if (finding.param.has_value()) {
      offsets_by_param[*finding.param].insert(finding.offset.value_or(0));
    } else if (!finding.operand.empty()) {
      operands.insert(finding.operand);
    }
  }
  std::string out;
  for (const auto& [graph, nodes] : nodes_by_graph) {
    if (!out.empty()) {
      out += "; ";
    }
    out +=
        fmt::format("graph {} node{} {}", graph, nodes.size() == 1 ? "" : "s", compact_ids(nodes));
  }
  std::string args;
  for (const auto& [param, offsets] : offsets_by_param) {
    std::vector<std::string> parts;
    parts.reserve(offsets.size());
    for (std::uint32_t offset : offsets) {
      parts.push_back(fmt::format("+{}", offset));
    }
    if (!args.empty()) {
      args += ", ";
    }
    args += fmt::format("param {} @ {}", param, fmt::join(parts, ","));
  }
  for (const std::string& operand : operands) {
    if (!args.empty()) {
      args += ", ";
    }
    args += fmt::format("operand {}", printable(operand));
  }
  if (!args.empty()) {
    out += " | " + args;
  }
  return out;
}

// The group's owner: the name itself, or the family with each varying numeric component
// shown as the set of its values ("model.layers.{0-6,8-31}.mlp.alpha").
std::string group_owner(const std::vector<Finding>& findings, const Group& group) {
  const std::string& first = findings[group.members.front()].owner;
  std::vector<std::string_view> parts = split_dots(first);
  std::vector<std::set<std::uint64_t>> values(parts.size());
  for (std::size_t index : group.members) {
    std::vector<std::string_view> other = split_dots(findings[index].owner);
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

std::string owner_text(const std::vector<Finding>& findings, const Group& group) {
  const Finding& finding = findings[group.members.front()];
  if (finding.owner.empty()) {
    return "<no owner or label>";
  }
  std::string owner = group_owner(findings, group);
  if (finding.owner_kind.has_value()) {
    return fmt::format("{} ({})", owner, to_string(*finding.owner_kind));
  }
  // No owner kind: the name is an allocation label found by a census walk or a stack trace.
  return fmt::format("{} (allocation label)", owner);
}

void append_section(std::string& out, const std::vector<Finding>& findings,
                    const KernelSection& section) {
  out += fmt::format("\n{}: {} in {}\n", section.heading, plural(section.findings, "finding"),
                     plural(section.owners.size(), "owner"));
  std::string previous_fix;
  for (const Group& group : section.groups) {
    const Finding& first = findings[group.members.front()];
    out += fmt::format("  {} {}: {}\n", upper(to_string(group.verdict)),
                       owner_text(findings, group), plural(group.members.size(), "reference"));
    out += fmt::format("      where: {}\n", where_line(findings, group));
    const std::string access = access_text(first);
    out += fmt::format("      e.g.   {}{}{}{}{}\n", format_address(first.address),
                       access.empty() ? "" : " ", access, first.detail.empty() ? "" : ": ",
                       printable(first.detail));
    // The fix is printed once per run of groups that share it: with one forgotten tensor
    // per layer, the same sentence 32 times would drown the node lists.
    if (!first.fix.empty() && first.fix != previous_fix) {
      out += fmt::format("      fix:   {}\n", printable(first.fix));
    }
    previous_fix = first.fix;
  }
}

}  // namespace

std::string to_text(const Report& report) {
  const Summary& summary = report.summary;
  std::string out;
  std::string baseline = report.baseline.empty()
                             ? std::string("each graph's capture epoch")
                             : fmt::format("\"{}\"", printable(report.baseline));
  out += fmt::format("graphcheck report: epoch \"{}\" checked against {}\n",
                     printable(report.epoch), baseline);
  out += fmt::format("{}, {}, {}\n", plural(summary.graphs, "graph"), plural(summary.nodes, "node"),
                     plural(summary.references, "reference"));

  if (report.findings.empty()) {
    out +=
        "\nno findings: every reference is registered, runtime, graph-owned, input or "
        "allowed\n";
  } else {
    for (const KernelSection& section : group_findings(report.findings)) {
      append_section(out, report.findings, section);
    }
  }

  // Backends add "not checked: ..." lines (nodes whose addresses could not be read, the
  // CUPTI backend's kernels with unreadable arguments); the others are the checker's own
  // overlap warnings (docs/report-format.md).
  // "note: " lines say what the check covered (graphs checked earlier, or none at all).
  constexpr std::string_view kNotChecked = "not checked: ";
  constexpr std::string_view kNote = "note: ";
  std::vector<std::string_view> overlaps;
  std::vector<std::string_view> unchecked;
  std::vector<std::string_view> notes;
  for (const std::string& warning : report.warnings) {
    const std::string_view line(warning);
    (line.starts_with(kNotChecked) ? unchecked
     : line.starts_with(kNote)     ? notes
                                   : overlaps)
        .push_back(line);
  }
  if (!overlaps.empty()) {
    out += fmt::format(
        "\noverlap warnings ({}): address ranges covered by spans of different "
        "owners, resolved as shown\n",
        overlaps.size());
    for (const std::string_view warning : overlaps) {
      out += fmt::format("  {}\n", printable(warning));
    }
  }
  if (!unchecked.empty()) {
    out += fmt::format(
        "\nnodes not checked ({}): their addresses could not be read; their references are "
        "missing from the counts above\n",
        unchecked.size());
    for (const std::string_view warning : unchecked) {
      out += fmt::format("  {}\n", printable(warning.substr(kNotChecked.size())));
    }
  }
  if (!notes.empty()) {
    out += fmt::format("\nnotes ({}):\n", notes.size());
    for (const std::string_view note : notes) {
      out += fmt::format("  {}\n", printable(note.substr(kNote.size())));
    }
  }
  const bool stale_fails =
      !report.stale_allow.empty() && report.stale_allow_policy == StaleAllowPolicy::kFail;
  if (!report.stale_allow.empty()) {
    out += fmt::format(
        "\nstale allowlist entries ({}): these globs match the owner of no reference in any "
        "epoch; remove them from the allowlist ({})\n",
        report.stale_allow.size(),
        stale_fails ? "they fail the check; --keep-stale-allow keeps them"
                    : "kept on purpose: --keep-stale-allow");
    for (const std::string& glob : report.stale_allow) {
      out += fmt::format("  {}\n", printable(glob));
    }
  }

  std::vector<std::string> counts;
  counts.reserve(kVerdictCount);
  for (std::size_t i = 0; i < kVerdictCount; ++i) {
    auto verdict = static_cast<Verdict>(i);
    counts.push_back(fmt::format("{} {}", to_string(verdict), summary.count(verdict)));
  }
  out += fmt::format("\nreferences: {} ({})\n", summary.references, fmt::join(counts, ", "));
  out += fmt::format("findings: {}{}\n", report.findings.size(),
                     stale_fails ? fmt::format(" (the check fails: {} stale allowlist {})",
                                               report.stale_allow.size(),
                                               report.stale_allow.size() == 1 ? "entry" : "entries")
                                 : "");
  return out;
}

}  // namespace graphcheck
