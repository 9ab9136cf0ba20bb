// Fuzz target: report JSON, as `graphcheck report` reads a watch folder's reports. An input is
// refused with graphcheck::Error (one line), or it parses to a report whose JSON parses back
// to the same report, whose text holds no control byte but line breaks, and whose HTML page
// (without a snapshot) is made.
#include <graphcheck/error.h>
#include <graphcheck/report.h>
#include <graphcheck/report_html.h>

#include <cstdio>
#include <string_view>

#include "tests/fuzz/fuzz_support.h"

namespace graphcheck::fuzz {

void report_input(std::string_view text) {
  Report report;
  try {
    report = parse_report(text);
  } catch (const Error& error) {
    require_one_line(error);
    return;
  }
  try {
    require(parse_report(to_json(report)) == report, "a report's JSON does not parse back to it");
  } catch (const Error& error) {
    std::fprintf(stderr, "%s\n", error.what());
    require(false, "the writer's report JSON is refused by the reader");
  }
  require_terminal_text(to_text(report), "the text report");
  static_cast<void>(to_html(report));
}

}  // namespace graphcheck::fuzz
