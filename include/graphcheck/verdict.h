// Verdicts: what graphcheck concludes about one reference in one epoch.
#ifndef GRAPHCHECK_VERDICT_H_
#define GRAPHCHECK_VERDICT_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace graphcheck {

/// @brief The verdicts of DESIGN.md, in report order. The first five are `ok`-class; the
/// last four are findings. Precedence among findings: stale, lost, dangling, unregistered.
enum class Verdict : std::uint8_t {
  kRegistered,    ///< inside a parameter or buffer span
  kRuntime,       ///< inside a declared runtime span
  kGraph,         ///< graph-owned memory
  kInput,         ///< a declared static input or output
  kAllowed,       ///< would be unregistered or lost, but an allowlist glob matches it
  kUnregistered,  ///< inside a live allocation that no span covers
  kDangling,      ///< inside no span and no live allocation
  kStale,         ///< its registered owner moved, or the address now has another owner
  kLost,          ///< generation changed and nothing registered restores it
};

/// @brief Number of `Verdict` values.
inline constexpr std::size_t kVerdictCount = 9;

/// @brief The report spelling: "registered", "runtime", ..., "lost".
[[nodiscard]] std::string_view to_string(Verdict verdict);
/// @brief Inverse of `to_string(Verdict)`; `std::nullopt` for any other text.
[[nodiscard]] std::optional<Verdict> parse_verdict(std::string_view text);
/// @brief True for unregistered, dangling, stale and lost.
[[nodiscard]] constexpr bool is_finding(Verdict verdict) {
  return verdict >= Verdict::kUnregistered;
}

}  // namespace graphcheck

#endif  // GRAPHCHECK_VERDICT_H_
