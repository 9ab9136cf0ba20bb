// Entry point of `graphcheck-demo`, the LibTorch half of the CLI: `graphcheck demo ARGS...`
// runs it with ARGS, and it can be run directly. Exit 0 when the story ran (legacy findings
// are its point), 2 on bad usage or errors, each one "graphcheck: error: ..." line (entry.h).
#include <CLI/CLI.hpp>

#include "graphcheck/cli/commands.h"
#include "graphcheck/cli/entry.h"

int main(int argc, char** argv) {
  namespace cli = graphcheck::cli;
  return cli::run_guarded([argc, argv] {
    // Named "graphcheck demo" in its usage line: that is how users run it.
    CLI::App app{
        "graphcheck demo: the reference model story on the CPU (capture, sleep/wake at levels "
        "1 and 2, reloads) for the legacy and registered variants, with a real LibTorch model. "
        "Exit 0: the story ran (legacy findings are expected); 2: errors.",
        "graphcheck demo"};
    cli::Action run;
    cli::add_demo_options(app, run);
    if (const auto done = cli::parse_command_line(app, argc, argv, "graphcheck demo --help")) {
      return *done;
    }
    return run();
  });
}
