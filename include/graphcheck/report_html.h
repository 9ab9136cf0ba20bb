// The HTML report: one self-contained page (inline CSS and JS, nothing fetched) that shows a
// report's counts and findings and, given the snapshot, an address-space map per graph and
// epoch (docs/report-format.md, "HTML report").
#ifndef GRAPHCHECK_REPORT_HTML_H_
#define GRAPHCHECK_REPORT_HTML_H_

#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace graphcheck {

/// @brief Links from a page to its neighbours in a folder of check points (the server
/// flag's GRAPHCHECK_DIR): relative hrefs, so that the folder can be moved. The page keeps
/// them in a block of `kHtmlNavigationBytes` bytes near its start, padded with spaces, so that
/// a writer can fill in `next` later by rewriting those bytes in place
/// (docs/report-format.md, "Navigation").
struct HtmlNavigation {
  std::string index;     ///< the folder's index page ("index.html")
  std::string previous;  ///< the previous check point of the same process; "" when none
  std::string next;      ///< the next one; "" when none (yet)
};

/// @brief The size of the navigation block (its JSON and the padding after it).
inline constexpr std::size_t kHtmlNavigationBytes = 1024;

/// @brief What the page says about its context, beside the report and the snapshot.
struct HtmlOptions {
  /// What was checked, for the tab title and the heading: the snapshot's file name, or the
  /// model a check point of the server flag checked. Empty: "graphcheck report".
  std::string subject;
  /// Lines shown under the heading (the server flag's check point header: process, role,
  /// model, time, notes), each as it is.
  std::vector<std::string> header;
  /// Allowlist globs the report was checked with beyond the snapshot's own `allow` list
  /// (`CheckOptions::allow`): the page's checks of the other epochs use them too.
  std::vector<std::string> allow;
  /// Links to the folder's index and the neighbouring check points; none when empty.
  std::optional<HtmlNavigation> navigation;
  /// Whether the page embeds the checker's report of every other epoch of the snapshot (against
  /// the report's baseline), so that the epoch buttons show each epoch's own verdicts.
  bool other_epochs = true;
  /// The bytes of other epochs' reports a page carries: once past it, the rest are listed as
  /// skipped with the command that checks them (16 reports of 20k kernels' findings made a
  /// 606 MB page no browser opens). At most 16 other epochs are carried in any case.
  std::uint64_t other_epoch_bytes = std::uint64_t{64} << 20U;
};

/// @brief The report as one HTML page. With `snapshot` (the one `report` was checked from)
/// the page also draws each graph's references on a map of its epochs' spans and
/// allocations, and carries each other epoch's report (`HtmlOptions::other_epochs`); with
/// nullptr it shows the counts, findings and stale allowlist entries only.
/// The data is embedded as JSON in which every `<` is escaped, so no name can end the script.
/// @throws Error if `snapshot` breaks an invariant of `parse_snapshot` (a graph naming an
/// epoch it lacks), or if a navigation href does not fit its block.
/// Thread safety: pure function.
[[nodiscard]] std::string to_html(const Report& report, const Snapshot* snapshot = nullptr,
                                  const HtmlOptions& options = {});

/// @brief `to_html`, written to `out` as it is made: the page is never held in memory (its
/// data is streamed one span, allocation and reference at a time; the other epochs are
/// checked one at a time, each report written and freed before the next), so a snapshot of
/// any size costs the snapshot, the report, one other epoch's report and a 1 MiB buffer
/// (docs/report-format.md, "HTML report").
/// @throws Error as `to_html`, before anything is written for a bad snapshot; Error when
/// `out` fails.
/// Thread safety: as `to_html`, with `out` owned by the caller's thread.
void write_html(std::ostream& out, const Report& report, const Snapshot* snapshot = nullptr,
                const HtmlOptions& options = {});

}  // namespace graphcheck

#endif  // GRAPHCHECK_REPORT_HTML_H_
