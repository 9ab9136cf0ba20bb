// Entry point of the `graphcheck` tool: parses the command line and maps every outcome to
// the documented exit codes (0 no findings, 1 findings, 2 bad input or usage).
//
// Every failure ends as one stderr line "graphcheck: error: <message>", never a crash or a
// traceback: users paste that line into bug reports, and CI greps it.
#include <graphcheck/config.h>
#include <graphcheck/error.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>

#include "graphcheck/cli/commands.h"

namespace {

constexpr int kExitUsage = 2;

// Error messages are meant to be one line; a newline inside one (a CLI11 message, a path)
// must not split the line that tools grep for.
void print_error(std::string_view message) {
  std::string line(message);
  for (char& c : line) {
    if (c == '\n' || c == '\r') {
      c = ' ';
    }
  }
  std::cout.flush();
  std::cerr << "graphcheck: error: " << line << '\n';
}

bool is_command(CLI::App& app, const std::string& name) {
  try {
    return app.get_subcommand(name) != nullptr;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{
        "graphcheck: checks that every address a captured CUDA graph uses belongs "
        "to registered, runtime or graph-owned memory",
        "graphcheck"};
    app.set_version_flag("--version", "graphcheck " GRAPHCHECK_VERSION_STRING,
                         "Print the version and exit");
    app.require_subcommand(1);
    graphcheck::cli::Action run;
    graphcheck::cli::add_check_command(app, run);
#ifdef GRAPHCHECK_CLI_HAS_DEMO
    graphcheck::cli::add_demo_command(app, run);
#endif
    // CLI11 reports an unknown command word as "A subcommand is required"; name it instead.
    if (argc > 1 && argv[1][0] != '-' && !is_command(app, argv[1])) {
      print_error(std::string("unknown command '") + argv[1] +
                  "' (run 'graphcheck --help' for the commands)");
      return kExitUsage;
    }
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      return app.exit(e);  // help on stdout, exit 0
    } catch (const CLI::CallForAllHelp& e) {
      return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
      return app.exit(e);  // the version on stdout, exit 0
    } catch (const CLI::ParseError& e) {
      print_error(std::string(e.what()) + " (run 'graphcheck --help' for usage)");
      return kExitUsage;
    }
    if (!run) {
      print_error("no command given (run 'graphcheck --help' for usage)");
      return kExitUsage;
    }
    return run();
  } catch (const graphcheck::Error& e) {
    print_error(e.what());
  } catch (const std::exception& e) {
    // Not a graphcheck::Error: a bug or an environment failure (out of memory). Still one
    // line and exit 2, so scripts never see a crash.
    print_error(std::string("internal error: ") + e.what());
  } catch (...) {
    print_error("internal error: unknown exception");
  }
  return kExitUsage;
}
