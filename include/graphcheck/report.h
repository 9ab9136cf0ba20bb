// Reports: the findings of one check, and their JSON (format version 1, specified in
// docs/report-format.md) and human forms.
#ifndef GRAPHCHECK_REPORT_H_
#define GRAPHCHECK_REPORT_H_

#include <graphcheck/address.h>
#include <graphcheck/epoch.h>
#include <graphcheck/graph.h>
#include <graphcheck/verdict.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace graphcheck {

/// @brief The report format version this build writes.
inline constexpr int kReportVersion = 1;

/// @brief One reference whose verdict is a finding.
struct Finding {
  std::uint64_t graph = 0;
  std::uint64_t node = 0;
  NodeType node_type = NodeType::kKernel;
  std::string kernel;  ///< kernel or op name ("" for memcpy, memset, ...)
  /// Kernel references: argument index and byte offset within that argument.
  std::optional<std::uint32_t> param;
  std::optional<std::uint32_t> offset;
  std::string operand;  ///< other node kinds: the operand role ("src", "reads[0]", ...)
  Address address = 0;
  /// How the node uses the memory, where the node says (op, memcpy, memset operands).
  Access access = Access::kUnknown;
  /// Operands with an extent: the part `[range_begin, range_begin + range_size)` this finding
  /// judges (a part of the operand that some other owner holds, or the whole operand). Both
  /// 0 for kernel argument words and operands without an extent.
  Address range_begin = 0;
  std::uint64_t range_size = 0;
  Verdict verdict = Verdict::kUnregistered;
  std::string owner;  ///< owner name, else the allocation label, else ""
  std::optional<OwnerKind> owner_kind;
  std::string detail;  ///< what happened ("moved to 0x7f3c00000000 after capture")
  std::string fix;     ///< one sentence: what to change in the model or engine
  friend bool operator==(const Finding&, const Finding&) = default;
};

/// @brief Counts over every reference checked.
struct Summary {
  std::uint64_t graphs = 0;
  std::uint64_t nodes = 0;
  std::uint64_t references = 0;
  std::array<std::uint64_t, kVerdictCount> counts{};  ///< indexed by `Verdict`

  [[nodiscard]] std::uint64_t count(Verdict verdict) const {
    return counts[static_cast<std::size_t>(verdict)];
  }
  /// Sum of the four finding verdicts.
  [[nodiscard]] std::uint64_t findings() const;
  /// True when the verdict counts add up to `references` without passing 2^64 - 1: every
  /// reference has one verdict. A summary read from a file is refused otherwise (a count of
  /// 2^64 - 1 wrapped the findings' sum to 0: a row showing "dangling 1" passed).
  [[nodiscard]] bool counts_add_up() const;
  friend bool operator==(const Summary&, const Summary&) = default;
};

/// @brief Kernel argument words of one node that look like device pointers the check could
/// not attribute: each lies in a hole of the capture epoch's known memory (in no span,
/// allocation or graph range, with known memory within 4 GiB below and above it), at or above
/// 4 GiB, and is not one past the end of a range. Memory nothing recorded (a
/// library's own `cudaMalloc`, memory the process got outside the allocator the backend
/// reads) is not judged: these are not findings and enter no summary count; they say how
/// much of a node's memory the check could not see (docs/report-format.md).
struct UnattributedWords {
  std::uint64_t graph = 0;
  std::uint64_t node = 0;
  std::string kernel;       ///< the kernel's name
  std::uint64_t words = 0;  ///< such words in the node's arguments (at least 1)
  Address first = 0;        ///< the first of them, in argument order
  friend bool operator==(const UnattributedWords&, const UnattributedWords&) = default;
};

/// @brief What stale allowlist globs (globs that match the owner of no reference in any
/// epoch) do to a check's outcome.
enum class StaleAllowPolicy : std::uint8_t {
  kFail,  ///< they fail the check, as findings do: fixed sites must leave the allowlist
  kKeep,  ///< they are listed but do not fail the check (`--keep-stale-allow`)
};

/// @brief The result of checking a snapshot's graphs in one epoch.
/// Thread safety: a value type; concurrent reads are safe.
struct Report {
  std::string epoch;     ///< the epoch checked
  std::string baseline;  ///< the epoch compared against (each graph's capture epoch by default)
  Summary summary;
  std::vector<Finding> findings;         ///< in graph, node, reference order
  std::vector<std::string> stale_allow;  ///< allowlist globs that allowed no reference
  /// One line per address range covered by spans of different owners (resolved, not a finding).
  std::vector<std::string> warnings;
  /// Kernel nodes with argument words that look like pointers into memory the capture epoch
  /// does not know, in graph and node order (not findings; see `UnattributedWords`).
  std::vector<UnattributedWords> unattributed;
  /// Whether `stale_allow` fails the check (`CheckOptions::stale_allow`).
  StaleAllowPolicy stale_allow_policy = StaleAllowPolicy::kFail;

  [[nodiscard]] bool has_findings() const { return !findings.empty(); }
  /// True when the check fails: findings, or stale allowlist globs under `kFail`. The CLI
  /// exits 1 exactly then.
  [[nodiscard]] bool failed() const {
    return has_findings() ||
           (!stale_allow.empty() && stale_allow_policy == StaleAllowPolicy::kFail);
  }
  friend bool operator==(const Report&, const Report&) = default;
};

/// @brief The widest indent `to_json` takes (spaces per level).
inline constexpr int kMaxJsonIndent = 64;

/// @brief The report as JSON text (report format version 1), pretty-printed when
/// `indent` >= 0, on one line when it is negative. Throws graphcheck::Error for an indent
/// past kMaxJsonIndent (nlohmann's serializer read past its indent buffer beyond 1,024).
/// Thread-safe for concurrent calls on one report.
[[nodiscard]] std::string to_json(const Report& report, int indent = 2);

/// @brief The human report: findings grouped by kernel and owner, each group with its fix,
/// warnings and stale allowlist entries, and the verdict counts on the last lines. Every name
/// in it goes through `printable` (no control byte reaches a terminal); `to_json` is exact.
[[nodiscard]] std::string to_text(const Report& report);

/// @brief `text` safe to print on a terminal, one line: control characters (C0, DEL and the
/// C1 range U+0080..U+009F) and bytes that are not part of valid UTF-8 become visible escapes
/// (`\n`, `\r`, `\t`, `\0`, `\x1b`, `\xff`); everything else, backslashes included, is kept.
/// Thread safety: pure function.
[[nodiscard]] std::string printable(std::string_view text);

/// @brief Parses report JSON (version 1), as written by `to_json(const Report&, int)`.
/// @throws Error naming the JSON path of a bad field.
[[nodiscard]] Report parse_report(std::string_view json);

}  // namespace graphcheck

#endif  // GRAPHCHECK_REPORT_H_
