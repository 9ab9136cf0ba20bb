// Consumer of graphcheck::core: checks the snapshot named on the command line and prints one
// line per verdict with a count, then "findings N".
#include <graphcheck/checker.h>
#include <graphcheck/config.h>
#include <graphcheck/error.h>
#include <graphcheck/snapshot.h>
#include <graphcheck/verdict.h>

#include <cstddef>
#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: consumer_check SNAPSHOT\n";
    return 2;
  }
  try {
    const graphcheck::Report report = graphcheck::check(graphcheck::read_snapshot(argv[1]));
    std::cout << "graphcheck " << GRAPHCHECK_VERSION_STRING << "\n";
    for (std::size_t i = 0; i < graphcheck::kVerdictCount; ++i) {
      const auto verdict = static_cast<graphcheck::Verdict>(i);
      if (report.summary.count(verdict) > 0) {
        std::cout << graphcheck::to_string(verdict) << " " << report.summary.count(verdict) << "\n";
      }
    }
    std::cout << "findings " << report.findings.size() << "\n";
  } catch (const graphcheck::Error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  return 0;
}
