// What every graphcheck executable (`graphcheck`, `graphcheck-demo`) does around its commands:
// parse the command line, run the chosen action, and turn every failure into one stderr line
// "graphcheck: error: <message>" and exit 2. Users paste that line into bug reports and CI
// greps it, so both executables print it the same way.
#ifndef GRAPHCHECK_CLI_ENTRY_H_
#define GRAPHCHECK_CLI_ENTRY_H_

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace graphcheck::cli {

/// Exit code of a check without findings.
inline constexpr int kExitClean = 0;
/// Exit code of a check with findings (or stale allowlist globs that fail it).
inline constexpr int kExitFindings = 1;
/// Exit code of bad input or usage.
inline constexpr int kExitUsage = 2;

/// Prints "graphcheck: error: <message>" as one line on stderr (newlines in `message` become
/// spaces), after flushing stdout so that the line comes after any report text.
void print_error(std::string_view message);

/// Parses `argv` into `app`. Returns nullopt when the program should go on to run its action,
/// else the exit code to return now: 0 after --help or --version (printed on stdout), 2 after
/// a usage error (printed by `print_error`, naming `help_hint`, e.g. "graphcheck --help").
[[nodiscard]] std::optional<int> parse_command_line(CLI::App& app, int argc,
                                                    const char* const* argv,
                                                    std::string_view help_hint);

/// A validator for an option whose value names something (a file, an epoch label): an empty
/// value is a usage error, "expected <what>, found an empty string". Without it `--epoch ""`
/// (an unset CI variable) read as no option and checked another epoch than meant.
[[nodiscard]] CLI::Validator non_empty(const std::string& what);

/// Runs `body` and returns its exit code; a graphcheck::Error, any other exception or an
/// unknown throw is printed by `print_error` and returns 2, so a program never ends in a crash
/// or a traceback.
[[nodiscard]] int run_guarded(const std::function<int()>& body);

}  // namespace graphcheck::cli

#endif  // GRAPHCHECK_CLI_ENTRY_H_
