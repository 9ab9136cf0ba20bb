// Entry point of the `graphcheck` tool: parses the command line and maps every outcome to
// the documented exit codes (0 no findings, 1 findings, 2 bad input or usage).
//
// Every failure ends as one stderr line "graphcheck: error: <message>", never a crash or a
// traceback (entry.h). This executable links the core only; `demo` runs graphcheck-demo.
#include <graphcheck/config.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "graphcheck/cli/commands.h"
#include "graphcheck/cli/entry.h"
#include "graphcheck/detail/closest.h"

namespace {

CLI::App* command_of(CLI::App& app, const std::string& name) {
  try {
    return app.get_subcommand(name);
  } catch (const CLI::OptionNotFound&) {
    return nullptr;
  }
}

std::vector<std::string> command_names(CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* command : app.get_subcommands({})) {
    names.push_back(command->get_name());
  }
  return names;
}

// The first `--word` (before `--`) that names no long option of `command`, or "". CLI11
// calls it an extra argument beside the positionals after it and may take the word after it
// as the snapshot ("The following arguments were not expected: x.json --epcoh").
std::string unknown_option(CLI::App& command, std::span<const char* const> words,
                           std::vector<std::string>& known) {
  for (const CLI::Option* option : command.get_options()) {
    for (const std::string& name : option->get_lnames()) {
      known.push_back("--" + name);
    }
  }
  for (const char* word : words) {
    const std::string_view text(word);
    if (text == "--") {
      break;
    }
    if (!text.starts_with("--")) {
      continue;
    }
    std::string name(text.substr(0, text.find('=')));
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return name;
    }
  }
  return {};
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
    CLI::App* command = args.size() > 1 && args[1][0] != '-' ? command_of(app, args[1]) : nullptr;
    if (args.size() > 1 && args[1][0] != '-' && command == nullptr) {
      cli::print_error(std::string("unknown command '") + args[1] + "'" +
                       graphcheck::detail::did_you_mean(args[1], command_names(app)) +
                       " (run 'graphcheck --help' for the commands)");
      return cli::kExitUsage;
    }
    // A command's own help lists its options; the top-level help does not (a review followed
    // it from `graphcheck check --format txt`).
    const std::string help = command != nullptr ? "graphcheck " + std::string(args[1]) + " --help"
                                                : std::string("graphcheck --help");
    std::vector<std::string> options;
    if (command != nullptr) {
      if (const std::string unknown = unknown_option(*command, args.subspan(2), options);
          !unknown.empty()) {
        cli::print_error("unknown option '" + unknown + "' of graphcheck " + args[1] +
                         graphcheck::detail::did_you_mean(unknown, options) + " (run '" + help +
                         "' for its options)");
        return cli::kExitUsage;
      }
    }
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
