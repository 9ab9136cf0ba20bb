// `Report` to JSON (report format version 1) and back.
#include <graphcheck/error.h>
#include <graphcheck/report.h>

#include <functional>
#include <limits>
#include <string>
#include <string_view>

#include "graphcheck/detail/json_access.h"
#include "graphcheck/detail/report_stream.h"

namespace graphcheck {
namespace {

using Json = nlohmann::ordered_json;
using detail::JsonField;

constexpr std::string_view kFormat = "graphcheck-report";

// A kernel finding is identified by argument index and offset; any other node by its operand
// role (op nodes also carry the op name as "kernel"). A field outside that scheme is still
// written when it is set, so that parse_report(to_json(r)) == r holds for every report.
Json finding_json(const Finding& finding) {
  const bool kernel = finding.node_type == NodeType::kKernel;
  Json json = Json::object();
  json["graph"] = finding.graph;
  json["node"] = finding.node;
  json["node_type"] = to_string(finding.node_type);
  if (kernel || finding.node_type == NodeType::kOp || !finding.kernel.empty()) {
    json["kernel"] = finding.kernel;
  }
  if (kernel || finding.param) {
    json["param"] = finding.param ? Json(*finding.param) : Json(nullptr);
  }
  if (kernel || finding.offset) {
    json["offset"] = finding.offset ? Json(*finding.offset) : Json(nullptr);
  }
  if (!kernel || !finding.operand.empty()) {
    json["operand"] = finding.operand;
  }
  json["address"] = format_address(finding.address);
  if (finding.access != Access::kUnknown) {
    json["access"] = to_string(finding.access);
  }
  if (finding.range_size != 0) {
    json["range_begin"] = format_address(finding.range_begin);
    json["range_size"] = finding.range_size;
  }
  json["verdict"] = to_string(finding.verdict);
  json["owner"] = finding.owner;
  json["owner_kind"] = finding.owner_kind ? Json(to_string(*finding.owner_kind)) : Json(nullptr);
  json["detail"] = finding.detail;
  json["fix"] = finding.fix;
  return json;
}

std::optional<std::uint32_t> read_index(const std::optional<JsonField>& field) {
  if (!field || field->json().is_null()) {
    return std::nullopt;
  }
  const JsonField& value = *field;
  if (!value.json().is_number_unsigned() ||
      value.json().get<std::uint64_t>() > std::numeric_limits<std::uint32_t>::max()) {
    value.fail("an integer from 0 to 4294967295, or null");
  }
  return static_cast<std::uint32_t>(value.json().get<std::uint64_t>());
}

std::string read_optional_string(const JsonField& parent, std::string_view key) {
  const auto field = parent.optional(key);
  return field ? field->as_string() : std::string();
}

Finding read_finding(const JsonField& field) {
  Finding finding;
  finding.graph = field.required("graph").as_uint();
  finding.node = field.required("node").as_uint();
  const JsonField node_type = field.required("node_type");
  std::optional<NodeType> type;
  if (node_type.json().is_string()) {
    type = parse_node_type(node_type.json().get_ref<const std::string&>());
  }
  if (!type) {
    node_type.fail("a node type (\"kernel\", \"memcpy\", ...)");
  }
  finding.node_type = *type;
  finding.kernel = read_optional_string(field, "kernel");
  finding.param = read_index(field.optional("param"));
  finding.offset = read_index(field.optional("offset"));
  finding.operand = read_optional_string(field, "operand");
  finding.address = field.required("address").as_address();
  if (const auto access = field.optional("access")) {
    std::optional<Access> parsed_access;
    if (access->json().is_string()) {
      parsed_access = parse_access(access->json().get_ref<const std::string&>());
    }
    if (!parsed_access) {
      access->fail(R"(an access ("read", "write", "read-write" or "unknown"))");
    }
    finding.access = *parsed_access;
  }
  if (const auto range_begin = field.optional("range_begin")) {
    finding.range_begin = range_begin->as_address();
    finding.range_size = field.required("range_size").as_uint();
  }
  const JsonField verdict = field.required("verdict");
  std::optional<Verdict> parsed;
  if (verdict.json().is_string()) {
    parsed = parse_verdict(verdict.json().get_ref<const std::string&>());
  }
  // Only references with a finding verdict are findings: an "allowed" one made a summary
  // say "no findings" while it exited 1.
  if (!parsed || !is_finding(*parsed)) {
    verdict.fail(R"(a finding verdict ("unregistered", "dangling", "stale" or "lost"))");
  }
  finding.verdict = *parsed;
  finding.owner = read_optional_string(field, "owner");
  if (const auto owner_kind = field.optional("owner_kind");
      owner_kind && !owner_kind->json().is_null()) {
    std::optional<OwnerKind> kind;
    if (owner_kind->json().is_string()) {
      kind = parse_owner_kind(owner_kind->json().get_ref<const std::string&>());
    }
    if (!kind) {
      owner_kind->fail(
          "an owner kind (\"parameter\", \"buffer\", \"runtime\", \"graph\", \"input\") or null");
    }
    finding.owner_kind = kind;
  }
  finding.detail = read_optional_string(field, "detail");
  finding.fix = read_optional_string(field, "fix");
  return finding;
}

std::vector<std::string> read_strings(const JsonField& field) {
  const std::size_t count = field.array_size();
  std::vector<std::string> strings;
  strings.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    strings.push_back(field.element(i).as_string());
  }
  return strings;
}

// The members before "findings", in report order.
Json head_json(const Report& report) {
  Json json = Json::object();
  json["format"] = kFormat;
  json["version"] = kReportVersion;
  json["epoch"] = report.epoch;
  json["baseline"] = report.baseline;
  Json summary = Json::object();
  summary["graphs"] = report.summary.graphs;
  summary["nodes"] = report.summary.nodes;
  summary["references"] = report.summary.references;
  for (std::size_t i = 0; i < kVerdictCount; ++i) {
    summary[std::string(to_string(static_cast<Verdict>(i)))] = report.summary.counts[i];
  }
  json["summary"] = std::move(summary);
  return json;
}

// The members after "findings".
Json tail_json(const Report& report) {
  Json json = Json::object();
  json["stale_allow"] = report.stale_allow;
  json["warnings"] = report.warnings;
  json["stale_allow_policy"] =
      report.stale_allow_policy == StaleAllowPolicy::kKeep ? "keep" : "fail";
  if (!report.unattributed.empty()) {  // optional key: reports without such words unchanged
    Json unattributed = Json::array();
    for (const UnattributedWords& node : report.unattributed) {
      Json item = Json::object();
      item["graph"] = node.graph;
      item["node"] = node.node;
      item["kernel"] = node.kernel;
      item["words"] = node.words;
      item["first"] = format_address(node.first);
      unattributed.push_back(std::move(item));
    }
    json["unattributed"] = std::move(unattributed);
  }
  return json;
}

// Names come from kernels and Python attributes; a byte that is not UTF-8 becomes U+FFFD
// rather than failing the whole report.
std::string compact(const Json& json) {
  return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace

std::uint64_t Summary::findings() const {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < kVerdictCount; ++i) {
    if (is_finding(static_cast<Verdict>(i))) {
      total += counts[i];
    }
  }
  return total;
}

bool Summary::counts_add_up() const {
  std::uint64_t total = 0;
  for (const std::uint64_t count : counts) {
    if (__builtin_add_overflow(total, count, &total)) {
      return false;
    }
  }
  return total == references;
}

namespace detail {

void stream_report_json(const Report& report, const std::function<void(std::string_view)>& out) {
  // The head's text without its closing brace, the findings one by one, then the tail's text
  // with its opening brace turned into the comma that joins it: the one-line dump, exactly.
  std::string head = compact(head_json(report));
  head.pop_back();
  out(head);
  out(",\"findings\":[");
  for (std::size_t i = 0; i < report.findings.size(); ++i) {
    if (i > 0) {
      out(",");
    }
    out(compact(finding_json(report.findings[i])));
  }
  out("]");
  std::string tail = compact(tail_json(report));
  tail.front() = ',';
  out(tail);
}

}  // namespace detail

namespace {

Json report_tree(const Report& report) {
  Json json = head_json(report);
  Json findings = Json::array();
  for (const Finding& finding : report.findings) {
    findings.push_back(finding_json(finding));
  }
  json["findings"] = std::move(findings);
  const Json tail = tail_json(report);
  for (const auto& [key, value] : tail.items()) {
    json[key] = value;
  }
  return json;
}

}  // namespace

std::string to_json(const Report& report, int indent) {
  if (indent > kMaxJsonIndent) {
    throw Error("to_json: indent " + std::to_string(indent) + " is wider than " +
                std::to_string(kMaxJsonIndent) + " spaces; pass 0 to " +
                std::to_string(kMaxJsonIndent) + ", or a negative indent for one line");
  }
  if (indent < 0) {
    std::string text;
    detail::stream_report_json(report, [&text](std::string_view piece) { text += piece; });
    return text;
  }
  return report_tree(report).dump(indent, ' ', false, Json::error_handler_t::replace);
}

Report parse_report(std::string_view json) {
  constexpr std::string_view kSource = "report";
  const nlohmann::json document = detail::parse_json_document(json, kSource);
  const JsonField root(document, "", kSource);
  root.expect_object();
  const JsonField format = root.required("format");
  if (!format.json().is_string() || format.json().get_ref<const std::string&>() != kFormat) {
    format.fail("\"graphcheck-report\"");
  }
  const JsonField version = root.required("version");
  if (!version.json().is_number_unsigned() ||
      version.json().get<std::uint64_t>() != static_cast<std::uint64_t>(kReportVersion)) {
    version.fail("1 (this build reads report format version 1)");
  }
  Report report;
  report.epoch = root.required("epoch").as_string();
  report.baseline = root.required("baseline").as_string();
  const JsonField summary = root.required("summary");
  report.summary.graphs = summary.required("graphs").as_uint();
  report.summary.nodes = summary.required("nodes").as_uint();
  report.summary.references = summary.required("references").as_uint();
  for (std::size_t i = 0; i < kVerdictCount; ++i) {
    report.summary.counts[i] = summary.required(to_string(static_cast<Verdict>(i))).as_uint();
  }
  if (!report.summary.counts_add_up()) {
    summary.required("references")
        .fail("the verdict counts' sum (every reference has one verdict)");
  }
  const JsonField findings = root.required("findings");
  const std::size_t count = findings.array_size();
  report.findings.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    report.findings.push_back(read_finding(findings.element(i)));
  }
  report.stale_allow = read_strings(root.required("stale_allow"));
  if (const auto policy = root.optional("stale_allow_policy")) {
    const std::string text = policy->as_string();
    if (text != "fail" && text != "keep") {
      policy->fail(R"("fail" or "keep")");
    }
    report.stale_allow_policy = text == "keep" ? StaleAllowPolicy::kKeep : StaleAllowPolicy::kFail;
  }
  if (const auto warnings = root.optional("warnings")) {
    report.warnings = read_strings(*warnings);
  }
  if (const auto unattributed = root.optional("unattributed")) {
    const std::size_t nodes = unattributed->array_size();
    for (std::size_t i = 0; i < nodes; ++i) {
      const JsonField item = unattributed->element(i);
      item.expect_object();
      UnattributedWords node;
      node.graph = item.required("graph").as_uint();
      node.node = item.required("node").as_uint();
      node.kernel = read_optional_string(item, "kernel");
      node.words = item.required("words").as_positive();
      node.first = item.required("first").as_address();
      report.unattributed.push_back(std::move(node));
    }
  }
  return report;
}

}  // namespace graphcheck
