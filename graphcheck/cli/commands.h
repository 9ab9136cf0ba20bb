// The subcommands of the `graphcheck` tool. Each adds itself to the CLI11 app and sets
// `run` to the action that main() calls after a successful parse; the action returns the
// process exit code (0 no findings, 1 findings, 2 bad input or usage).
#ifndef GRAPHCHECK_CLI_COMMANDS_H_
#define GRAPHCHECK_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <functional>

namespace graphcheck::cli {

/// The action chosen by the parsed subcommand.
using Action = std::function<int()>;

/// `graphcheck check SNAPSHOT ...`: check a snapshot and print a report.
void add_check_command(CLI::App& app, Action& run);

#ifdef GRAPHCHECK_CLI_HAS_DEMO
/// `graphcheck demo --out DIR`: the reference model story on the CPU (needs LibTorch).
void add_demo_command(CLI::App& app, Action& run);
#endif

}  // namespace graphcheck::cli

#endif  // GRAPHCHECK_CLI_COMMANDS_H_
