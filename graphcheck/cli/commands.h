// The subcommands of the graphcheck executables. Each adds itself to a CLI11 app and sets
// `run` to the action that main() calls after a successful parse; the action returns the
// process exit code (0 no findings, 1 findings, 2 bad input or usage).
//
// `graphcheck` links the core only (check_command.cc, report_command.cc, demo_exec.cc): it
// starts like any small tool and runs where LibTorch is absent. The demo needs LibTorch, so it
// is its own executable, `graphcheck-demo` (demo_command.cc, demo_main.cc), which
// `graphcheck demo ...` runs.
#ifndef GRAPHCHECK_CLI_COMMANDS_H_
#define GRAPHCHECK_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <filesystem>
#include <functional>
#include <span>

namespace graphcheck::cli {

/// The action chosen by the parsed subcommand.
using Action = std::function<int()>;

/// `graphcheck check SNAPSHOT ...`: check a snapshot and print a report.
void add_check_command(CLI::App& app, Action& run);

/// `graphcheck report DIR ...`: summarize the folder a GRAPHCHECK=1 server writes.
void add_report_command(CLI::App& app, Action& run);

/// The file name of the demo executable, installed and built next to `graphcheck`.
inline constexpr const char* kDemoExecutable = "graphcheck-demo";

/// `graphcheck demo ...` in `graphcheck --help`. The command itself never reaches CLI11:
/// main() hands every argument after "demo" to `exec_demo`, so the demo's own options and
/// `graphcheck demo --help` are those of `graphcheck-demo`.
void add_demo_command(CLI::App& app);

/// The demo executable `graphcheck` runs: `kDemoExecutable` in the folder of the running
/// executable (/proc/self/exe), whether or not it exists.
/// @throws Error when /proc/self/exe cannot be read.
[[nodiscard]] std::filesystem::path demo_executable_path();

/// Replaces this process with `graphcheck-demo ARGS...` (the arguments after "demo"); stdout
/// and stderr are flushed first. Returns only by throwing.
/// @throws Error naming the path looked at and why the demo may be missing (a build or an
/// install without LibTorch) when it is absent, or the system error when exec fails.
[[noreturn]] void exec_demo(std::span<const char* const> args);

/// The options of `graphcheck-demo` (also shown by `graphcheck demo --help`), added to the
/// demo executable's top-level `app`: --out, --hidden, --seed. Sets `run` to the story.
void add_demo_options(CLI::App& app, Action& run);

}  // namespace graphcheck::cli

#endif  // GRAPHCHECK_CLI_COMMANDS_H_
