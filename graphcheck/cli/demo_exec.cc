// `graphcheck demo ...`: runs the sibling executable `graphcheck-demo` with the same
// arguments. The demo needs LibTorch (hundreds of MB mapped at start); keeping it in its own
// executable lets `graphcheck check` link the core only.
#include <graphcheck/error.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <system_error>
#include <vector>

#include "graphcheck/cli/commands.h"

namespace graphcheck::cli {

void add_demo_command(CLI::App& app) {
  app.add_subcommand(
      "demo",
      "Run the reference model story on the CPU (capture, sleep/wake at levels 1 and 2, "
      "reloads) for the legacy and registered variants: runs graphcheck-demo (built with "
      "LibTorch) next to this executable. Options: graphcheck demo --help.");
}

std::filesystem::path demo_executable_path() {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    throw Error("demo: cannot find this executable's folder (reading /proc/self/exe: " +
                error.message() + "); run " + kDemoExecutable + " directly");
  }
  return self.parent_path() / kDemoExecutable;
}

void exec_demo(std::span<const char* const> args) {
  const std::filesystem::path demo = demo_executable_path();
  std::error_code error;
  if (!std::filesystem::exists(demo, error)) {
    throw Error("demo: " + demo.string() +
                " not found (looked next to this executable): graphcheck-demo is built only "
                "when LibTorch is found (GRAPHCHECK_TORCH, GRAPHCHECK_TORCH_VENV; see "
                "scripts/bootstrap.sh) and a partial build or install may lack it; `graphcheck "
                "check` works without it");
  }
  const std::string path = demo.string();
  std::vector<char*> argv;
  argv.reserve(args.size() + 2);
  // execv takes char* const[] for C compatibility; it does not modify the strings.
  argv.push_back(const_cast<char*>(path.c_str()));
  for (const char* arg : args) {
    argv.push_back(const_cast<char*>(arg));
  }
  argv.push_back(nullptr);
  std::cout.flush();
  std::cerr.flush();
  std::fflush(nullptr);
  ::execv(path.c_str(), argv.data());
  throw Error("demo: cannot run " + path + ": " + std::strerror(errno) +
              "; check that it is an executable file");
}

}  // namespace graphcheck::cli
