// The HTML page's snapshot part (report_html.cc): the epochs' spans and allocations, each
// graph's references as the checker finds them, its node numbering, and the kernel names,
// streamed one record at a time (docs/report-format.md, "HTML report", for the layout).
#ifndef GRAPHCHECK_DETAIL_PAGE_SNAPSHOT_H_
#define GRAPHCHECK_DETAIL_PAGE_SNAPSHOT_H_

#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>

#include "graphcheck/detail/page_stream.h"

namespace graphcheck::detail {

/// @throws Error when a graph names a capture epoch the snapshot lacks: called before any of
/// the page is written, so that a failed page leaves no half-written file behind.
void require_capture_epochs(const Snapshot& snapshot);

/// Writes `{"epochs": [...], "graphs": [...], "names": [...]}`, each reference row with the
/// indexes of `report`'s findings about it. Memory: the graph's ranges and a name table.
void write_page_snapshot(PageStream& out, const Snapshot& snapshot, const Report& report);

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_PAGE_SNAPSHOT_H_
