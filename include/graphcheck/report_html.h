// The HTML report: one self-contained page (inline CSS and JS, nothing fetched) that shows a
// report's counts and findings and, given the snapshot, an address-space map per graph and
// epoch (docs/report-format.md, "HTML report").
#ifndef GRAPHCHECK_REPORT_HTML_H_
#define GRAPHCHECK_REPORT_HTML_H_

#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>

#include <ostream>
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

/// @brief `to_html`, written to `out` as it is made: the page is never held in memory (its
/// data is streamed one span, allocation and reference at a time), so a snapshot of any size
/// costs the snapshot, the report and a 1 MiB buffer (docs/report-format.md, "HTML report").
/// @throws Error as `to_html`, before anything is written for a bad snapshot; Error when
/// `out` fails.
/// Thread safety: as `to_html`, with `out` owned by the caller's thread.
void write_html(std::ostream& out, const Report& report, const Snapshot* snapshot = nullptr);

}  // namespace graphcheck

#endif  // GRAPHCHECK_REPORT_HTML_H_
