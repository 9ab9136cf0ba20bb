// The shared command-line entry of the graphcheck executables (see entry.h). No fmt and no
// torch here: `graphcheck-demo` links this file next to LibTorch, whose bundled fmt headers
// would shadow the system fmt.
#include "graphcheck/cli/entry.h"

#include <graphcheck/error.h>
#include <graphcheck/report.h>

#include <algorithm>
#include <exception>
#include <iostream>
#include <string>

namespace graphcheck::cli {

void print_error(std::string_view message) {
  // Error messages are meant to be one line; a newline inside one (a CLI11 message, a path)
  // must not split the line that tools grep for, and a control byte of a name or path must
  // not reach the terminal: both become visible escapes.
  std::cout.flush();
  std::cerr << "graphcheck: error: " << printable(message) << '\n';
}

std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv,
                                      std::string_view help_hint) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);  // help on stdout, exit 0
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);  // the version on stdout, exit 0
  } catch (const CLI::ParseError& e) {
    // CLI11 breaks some of its messages into lines: one line, words apart.
    std::string message = e.what();
    std::replace(message.begin(), message.end(), '\n', ' ');
    print_error(message + " (run '" + std::string(help_hint) + "' for usage)");
    return kExitUsage;
  }
  return std::nullopt;
}

CLI::Validator non_empty(const std::string& what) {
  return {[what](const std::string& value) {
            return value.empty() ? "expected " + what + ", found an empty string" : std::string();
          },
          "", "non-empty"};
}

int run_guarded(const std::function<int()>& body) {
  try {
    return body();
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

}  // namespace graphcheck::cli
