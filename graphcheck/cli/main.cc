// Entry point of the `graphcheck` tool: parses the command line and maps every outcome to
// the documented exit codes (0 no findings, 1 findings, 2 bad input or usage).
//
// Every failure ends as one stderr line "graphcheck: error: <message>", never a crash or a
// traceback (entry.h). This executable links the core only; `demo` runs graphcheck-demo.
#include <graphcheck/config.h>

#include <CLI/CLI.hpp>
#include <span>
#include <string>
#include <string_view>

#include "graphcheck/cli/commands.h"
#include "graphcheck/cli/entry.h"

namespace {

bool is_command(CLI::App& app, const std::string& name) {
  try {
    return app.get_subcommand(name) != nullptr;
  } catch (const CLI::OptionNotFound&) {
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  namespace cli = graphcheck::cli;
  return cli::run_guarded([argc, argv] {
    const std::span<const char* const> args(argv, static_cast<std::size_t>(argc));
    // Everything after "demo" belongs to graphcheck-demo, --help included.
    if (args.size() > 1 && std::string_view(args[1]) == "demo") {
      cli::exec_demo(args.subspan(2));
    }
    CLI::App app{
        "graphcheck: checks that every address a captured CUDA graph uses belongs "
        "to registered, runtime or graph-owned memory",
        "graphcheck"};
    app.set_version_flag("--version", "graphcheck " GRAPHCHECK_VERSION_STRING,
                         "Print the version and exit");
    app.require_subcommand(1);
    cli::Action run;
    cli::add_check_command(app, run);
    cli::add_report_command(app, run);
    cli::add_demo_command(app);
    // CLI11 reports an unknown command word as "A subcommand is required"; name it instead.
    if (args.size() > 1 && args[1][0] != '-' && !is_command(app, args[1])) {
      cli::print_error(std::string("unknown command '") + args[1] +
                       "' (run 'graphcheck --help' for the commands)");
      return cli::kExitUsage;
    }
    // A command's own help lists its options; the top-level help does not (a review followed
    // it from `graphcheck check --format txt`).
    const std::string help = args.size() > 1 && args[1][0] != '-'
                                 ? "graphcheck " + std::string(args[1]) + " --help"
                                 : std::string("graphcheck --help");
    if (const auto done = cli::parse_command_line(app, argc, args.data(), help)) {
      return *done;
    }
    if (!run) {
      cli::print_error("no command given (run 'graphcheck --help' for usage)");
      return cli::kExitUsage;
    }
    return run();
  });
}
