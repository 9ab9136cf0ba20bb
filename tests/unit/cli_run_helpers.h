// Running the built `graphcheck` tool from a test: the command line quoted for the shell,
// stdout captured, stderr through a file, and the exit status. For tests that drive the CLI
// end to end (cli_test.cc, cli_report_test.cc, report_html_test.cc).
#ifndef GRAPHCHECK_TESTS_UNIT_CLI_RUN_HELPERS_H_
#define GRAPHCHECK_TESTS_UNIT_CLI_RUN_HELPERS_H_

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace graphcheck::testing_cli {

/// What one run of the tool left: exit status, stdout, stderr.
struct RunResult {
  int status = -1;
  std::string out;
  std::string err;
};

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
}

/// `arg` as one single-quoted shell word.
inline std::string shell_quote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) {
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return out + "'";
}

/// Runs `program ARGS...` with stdin from `stdin_path` (empty: /dev/null); stderr goes
/// through `err_path`.
inline RunResult run_program(const std::string& program, const std::vector<std::string>& args,
                             const std::filesystem::path& err_path,
                             const std::string& stdin_path = "") {
  std::string command = shell_quote(program);
  for (const std::string& arg : args) {
    command += " " + shell_quote(arg);
  }
  command += " 2>" + shell_quote(err_path.string());
  command += " <" + shell_quote(stdin_path.empty() ? "/dev/null" : stdin_path);
  RunResult result;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen failed: " << command;
    return result;
  }
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.out.append(buffer.data(), n);
  }
  const int status = ::pclose(pipe);
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.err = read_text(err_path);
  return result;
}

}  // namespace graphcheck::testing_cli

#endif  // GRAPHCHECK_TESTS_UNIT_CLI_RUN_HELPERS_H_
