// The human report: what an engineer debugging an inference server reads first.
//
// First what to fix: one line per fix sentence, with the owners it covers, most urgent first.
// Then the findings grouped by kernel (the code that reads the memory), then by owner (the
// tensor it reads), so that one forgotten tensor read by 32 layers' kernels appears once per
// kernel with its node list, not 32 times. Each group carries one example detail and the
// number of its fix; the counts come last so `tail -n 2` answers "how bad is it". Every name,
// label, detail and note goes through `printable`: a name may hold any bytes, and a terminal must
// get none of its control bytes (a newline would also split the report's lines).
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

#include "graphcheck/detail/text_groups.h"

namespace graphcheck {
namespace {

using detail::append_fixes;
using detail::compact_ids;
using detail::FixGroup;
using detail::group_fixes;
using detail::group_owner;
using detail::owner_family;
using detail::plural;
using detail::precedence;

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
  // Graphs whose nodes are the same are one entry ("graphs 2-10 nodes 31, 160"): an engine's
  // graphs of one model, one per batch size, repeated one node list per graph (a review saw
  // the line grow with every graph; vLLM captures dozens).
  std::map<std::set<std::uint64_t>, std::set<std::uint64_t>> graphs_by_nodes;
  for (const auto& [graph, nodes] : nodes_by_graph) {
    graphs_by_nodes[nodes].insert(graph);
  }
  std::vector<std::pair<const std::set<std::uint64_t>*, const std::set<std::uint64_t>*>> entries;
  entries.reserve(graphs_by_nodes.size());
  for (const auto& [nodes, graphs] : graphs_by_nodes) {
    entries.emplace_back(&graphs, &nodes);
  }
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return *a.first->begin() < *b.first->begin(); });
  std::string out;
  for (const auto& [graphs, nodes] : entries) {
    if (!out.empty()) {
      out += "; ";
    }
    out += fmt::format("{} {} node{} {}", graphs->size() == 1 ? "graph" : "graphs",
                       compact_ids(*graphs), nodes->size() == 1 ? "" : "s", compact_ids(*nodes));
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

std::string owner_text(const std::vector<Finding>& findings, const Group& group) {
  const Finding& finding = findings[group.members.front()];
  if (finding.owner.empty()) {
    return "<no owner or label>";
  }
  std::string owner = group_owner(findings, group.members);
  if (finding.owner_kind.has_value()) {
    return fmt::format("{} ({})", owner, to_string(*finding.owner_kind));
  }
  // No owner kind: the name is an allocation label found by a census walk or a stack trace.
  return fmt::format("{} (allocation label)", owner);
}

void append_section(std::string& out, const std::vector<Finding>& findings,
                    const KernelSection& section,
                    const std::map<std::string_view, std::size_t>& fix_numbers) {
  out += fmt::format("\n{}: {} in {}\n", section.heading, plural(section.findings, "finding"),
                     plural(section.owners.size(), "owner"));
  for (const Group& group : section.groups) {
    const Finding& first = findings[group.members.front()];
    // The fix's sentence is in the to-do list at the top, once: here its number.
    out += fmt::format("  {} {}: {} (fix {})\n", upper(to_string(group.verdict)),
                       owner_text(findings, group), plural(group.members.size(), "reference"),
                       fix_numbers.at(first.fix));
    out += fmt::format("      where: {}\n", where_line(findings, group));
    const std::string access = access_text(first);
    out += fmt::format("      e.g.   {}{}{}{}{}\n", format_address(first.address),
                       access.empty() ? "" : " ", access, first.detail.empty() ? "" : ": ",
                       printable(first.detail));
  }
}

// The nodes listed by name at most; a server's report stays readable with thousands.
constexpr std::size_t kUnattributedShown = 20;

// Words that look like pointers into memory the capture epoch does not know: not findings
// (docs/report-format.md, "unattributed"), but what the check could not see.
void append_unattributed(std::string& out, const std::vector<UnattributedWords>& nodes) {
  if (nodes.empty()) {
    return;
  }
  std::uint64_t words = 0;
  for (const UnattributedWords& node : nodes) {
    words += node.words;
  }
  out += fmt::format(
      "\npointer-like words in no known memory ({} in {}): not judged, not findings; a "
      "library's own allocation or memory the capture did not record (a tensor there is "
      "unchecked)\n",
      plural(words, "word"), plural(nodes.size(), "kernel node"));
  for (std::size_t i = 0; i < nodes.size() && i < kUnattributedShown; ++i) {
    const UnattributedWords& node = nodes[i];
    out += fmt::format("  graph {} node {} (kernel {}): {}, first {}\n", node.graph, node.node,
                       node.kernel.empty() ? std::string("?") : printable(node.kernel),
                       plural(node.words, "word"), format_address(node.first));
  }
  if (nodes.size() > kUnattributedShown) {
    out += fmt::format("  ... and {} (the JSON report lists every one)\n",
                       plural(nodes.size() - kUnattributedShown, "more node"));
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
    const std::vector<FixGroup> fixes = group_fixes(report.findings);
    std::map<std::string_view, std::size_t> fix_numbers;
    for (std::size_t i = 0; i < fixes.size(); ++i) {
      fix_numbers.emplace(fixes[i].fix, i + 1);
    }
    append_fixes(out, report.findings, fixes);
    for (const KernelSection& section : group_findings(report.findings)) {
      append_section(out, report.findings, section, fix_numbers);
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
  append_unattributed(out, report.unattributed);
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
        "epoch; fix (a hint below says how, where one applies) or remove them ({})\n",
        report.stale_allow.size(),
        stale_fails ? "they fail the check; --keep-stale-allow keeps them"
                    : "kept on purpose: --keep-stale-allow");
    // A glob that matched nothing is often a slip: say which, against the owners found.
    const std::vector<std::string> hints = detail::stale_allow_hints(report);
    for (std::size_t i = 0; i < report.stale_allow.size(); ++i) {
      out += fmt::format(
          "  {}{}\n", printable(report.stale_allow[i]),
          hints[i].empty() ? std::string() : fmt::format("  ({})", printable(hints[i])));
    }
  }

  // The verdicts that occur, findings most urgent first, then the others in DESIGN.md's order:
  // nine counts, most of them 0, buried the one that mattered.
  std::vector<std::string> counts;
  const auto add_count = [&](Verdict verdict) {
    if (summary.count(verdict) > 0) {
      counts.push_back(fmt::format("{} {}", to_string(verdict), summary.count(verdict)));
    }
  };
  std::for_each(detail::kFindingsByUrgency.begin(), detail::kFindingsByUrgency.end(), add_count);
  for (std::size_t i = 0; i < kVerdictCount; ++i) {
    const auto verdict = static_cast<Verdict>(i);
    if (detail::precedence(verdict) == static_cast<int>(detail::kFindingsByUrgency.size())) {
      add_count(verdict);
    }
  }
  out += counts.empty()
             ? fmt::format("\nreferences: {}\n", summary.references)
             : fmt::format("\nreferences: {} ({})\n", summary.references, fmt::join(counts, ", "));
  out += fmt::format("findings: {}{}\n", report.findings.size(),
                     stale_fails ? fmt::format(" (the check fails: {} stale allowlist {})",
                                               report.stale_allow.size(),
                                               report.stale_allow.size() == 1 ? "entry" : "entries")
                                 : "");
  return out;
}

}  // namespace graphcheck
