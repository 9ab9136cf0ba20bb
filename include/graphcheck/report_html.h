// The HTML report: one self-contained page (inline CSS and JS, nothing fetched) that shows a
// report's counts and findings and, given the snapshot, an address-space map per graph and
// epoch (docs/report-format.md, "HTML report").
#ifndef GRAPHCHECK_REPORT_HTML_H_
#define GRAPHCHECK_REPORT_HTML_H_

#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>

#include <string>

namespace graphcheck {

/// @brief The report as one HTML page. With `snapshot` (the one `report` was checked from)
/// the page also draws each graph's references on a map of its epochs' spans and
/// allocations; with nullptr it shows the counts, findings and stale allowlist entries only.
/// The data is embedded as JSON in which every `<` is escaped, so no name can end the script.
/// @throws Error if `snapshot` breaks an invariant of `parse_snapshot` (a graph naming an
/// epoch it lacks).
/// Thread safety: pure function.
[[nodiscard]] std::string to_html(const Report& report, const Snapshot* snapshot = nullptr);

}  // namespace graphcheck

#endif  // GRAPHCHECK_REPORT_HTML_H_
