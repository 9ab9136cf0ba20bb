// The JSON report (format version 1) written piece by piece, one finding at a time, so that a
// writer that streams (the HTML page) never holds the report's JSON tree or its text whole.
#ifndef GRAPHCHECK_DETAIL_REPORT_STREAM_H_
#define GRAPHCHECK_DETAIL_REPORT_STREAM_H_

#include <graphcheck/report.h>

#include <functional>
#include <string_view>

namespace graphcheck::detail {

/// Calls `out` with consecutive pieces of `to_json(report, -1)` (the same text, byte for
/// byte). Memory: one finding's JSON at a time.
void stream_report_json(const Report& report, const std::function<void(std::string_view)>& out);

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_REPORT_STREAM_H_
