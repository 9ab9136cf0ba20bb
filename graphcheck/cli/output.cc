// The report's destination for `graphcheck check` and `graphcheck report` (output.h).
#include "graphcheck/cli/output.h"

#include <fmt/format.h>
#include <graphcheck/error.h>
#include <graphcheck/report.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <system_error>

namespace graphcheck::cli {

namespace {

// An --output that names a file the command read would replace it by the report: a snapshot
// recorded on a GPU is often the only copy, one argument typed too early destroys it.
void refuse_inputs(const std::string& path, const std::vector<InputFile>& inputs) {
  for (const InputFile& input : inputs) {
    std::error_code error;
    if (std::filesystem::equivalent(path, input.path, error) && !error) {
      throw Error(fmt::format("--output {}: is {} ({}); write the report to another file",
                              printable(path), input.what, printable(input.path)));
    }
  }
}

}  // namespace

void write_output(const std::string& text, const std::string& path,
                  const std::vector<InputFile>& inputs) {
  write_output([&text](std::ostream& out) { out << text; }, path, inputs);
}

void write_output(const std::function<void(std::ostream&)>& write, const std::string& path,
                  const std::vector<InputFile>& inputs) {
  if (path.empty()) {
    write(std::cout);
    std::cout.flush();
    if (!std::cout) {
      throw Error("cannot write the report to standard output");
    }
    return;
  }
  refuse_inputs(path, inputs);
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
