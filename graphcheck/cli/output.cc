// The report's destination for `graphcheck check` and `graphcheck report` (output.h).
#include "graphcheck/cli/output.h"

#include <fmt/format.h>
#include <graphcheck/error.h>
#include <graphcheck/report.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

namespace graphcheck::cli {

void write_output(const std::string& text, const std::string& path) {
  write_output([&text](std::ostream& out) { out << text; }, path);
}

void write_output(const std::function<void(std::ostream&)>& write, const std::string& path) {
  if (path.empty()) {
    write(std::cout);
    std::cout.flush();
    if (!std::cout) {
      throw Error("cannot write the report to standard output");
    }
    return;
  }
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) {
    throw Error(
        fmt::format("--output {}: cannot open for writing: {}; check that the "
                    "directory exists and is writable",
                    printable(path), std::strerror(errno)));
  }
  write(file);
  file.close();
  if (!file) {
    throw Error(
        fmt::format("--output {}: write failed: {}", printable(path), std::strerror(errno)));
  }
}

}  // namespace graphcheck::cli
