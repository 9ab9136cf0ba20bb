// What the CheckSession tests compare: a report as text (JSON, then the human report), or the
// error a check threw, from graphcheck::check of a snapshot or from a session.
#ifndef GRAPHCHECK_TESTS_UNIT_CHECK_SESSION_HELPERS_H_
#define GRAPHCHECK_TESTS_UNIT_CHECK_SESSION_HELPERS_H_

#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>

#include <string>

namespace graphcheck::testing_helpers {

// A report as the tests compare it: JSON, then the human report.
inline std::string report_text(const Report& report) { return to_json(report) + to_text(report); }

// What `run()` returns, or "error: " and the message of the graphcheck::Error it threw.
template <typename Run>
std::string outcome(const Run& run) {
  try {
    return run();
  } catch (const Error& error) {
    return std::string("error: ") + error.what();
  }
}

// What graphcheck::check says for `snapshot`.
inline std::string expected(const Snapshot& snapshot, const CheckOptions& options) {
  return outcome([&] { return report_text(check(snapshot, options)); });
}

}  // namespace graphcheck::testing_helpers

#endif  // GRAPHCHECK_TESTS_UNIT_CHECK_SESSION_HELPERS_H_
