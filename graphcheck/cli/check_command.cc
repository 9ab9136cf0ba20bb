// `graphcheck check SNAPSHOT`: reads a snapshot, checks every graph in one epoch and prints
// the report (text, JSON or a self-contained HTML page) to stdout or a file.
#include <fmt/format.h>
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/report.h>
#include <graphcheck/report_html.h>
#include <graphcheck/snapshot.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "graphcheck/cli/commands.h"
#include "graphcheck/cli/entry.h"
#include "graphcheck/cli/output.h"
#include "graphcheck/detail/json_access.h"
#include "graphcheck/detail/posix_file.h"

namespace graphcheck::cli {
namespace {

struct CheckArgs {
  std::string snapshot;
  std::string epoch;
  std::string baseline;
  std::vector<std::string> allow_files;
  std::string format = "text";
  std::string output;
  bool keep_stale_allow = false;
  std::size_t threads = 0;
};

// How messages name standard input.
constexpr std::string_view kSource = "<stdin>";

// "-" reads the snapshot from stdin so that a backend can pipe into the checker. A NUL ends
// the reading at once (JSON holds none: `- < /dev/zero` read until memory ran out), and a
// read that fails says so (a folder or a closed stdin read as "unexpected end of input").
Snapshot load_snapshot(const std::string& path) {
  if (path != "-") {
    return read_snapshot(path);
  }
  std::string text;
  try {
    const int error = detail::read_to_end(STDIN_FILENO, [&text](std::string_view chunk) {
      text.append(chunk);
      if (chunk.find('\0') != std::string_view::npos) {
        detail::require_no_nul(text, kSource);  // throws, naming where
      }
    });
    if (error != 0) {
      throw Error(fmt::format("{}: cannot read the snapshot from standard input: {}", kSource,
                              std::strerror(error)));
    }
  } catch (const std::bad_alloc&) {
    throw Error(fmt::format("{}: out of memory reading the snapshot ({} bytes so far)", kSource,
                            text.size()));
  }
  return parse_snapshot(text, kSource);
}

int run_check(const CheckArgs& args) {
  Snapshot snapshot = load_snapshot(args.snapshot);
  CheckOptions options;
  options.epoch = args.epoch;
  options.baseline = args.baseline;
  options.stale_allow = args.keep_stale_allow ? StaleAllowPolicy::kKeep : StaleAllowPolicy::kFail;
  options.threads = args.threads;
  for (const std::string& file : args.allow_files) {
    std::vector<std::string> globs = read_allowlist(file);
    options.allow.insert(options.allow.end(), globs.begin(), globs.end());
  }
  Report report = check(snapshot, options);
  std::vector<InputFile> inputs;
  if (args.snapshot != "-") {
    inputs.push_back({args.snapshot, "the snapshot being checked"});
  }
  for (const std::string& file : args.allow_files) {
    inputs.push_back({file, "an allowlist file of this check"});
  }
  if (args.format == "html") {
    // The page draws the snapshot's address space, so it gets the snapshot too; it is
    // streamed (a big snapshot's page is larger than the snapshot). It checks the snapshot's
    // other epochs with the same globs, and is titled by the snapshot's file name (never its
    // folder: a page attached to a bug report names no path of the machine that wrote it).
    HtmlOptions page;
    page.subject = args.snapshot == "-" ? std::string("standard input")
                                        : std::filesystem::path(args.snapshot).filename().string();
    page.allow = options.allow;
    write_output([&](std::ostream& out) { write_html(out, report, &snapshot, page); }, args.output,
                 inputs);
  } else {
    write_output(args.format == "json" ? to_json(report) + "\n" : to_text(report), args.output,
                 inputs);
  }
  return report.failed() ? kExitFindings : kExitClean;
}

}  // namespace

void add_check_command(CLI::App& app, Action& run) {
  auto args = std::make_shared<CheckArgs>();
  CLI::App* command = app.add_subcommand(
      "check",
      "Check every graph of a snapshot in one epoch. Exit 0: no findings; 1: findings or "
      "stale allowlist entries; 2: bad input or usage.");
  command
      ->add_option("SNAPSHOT", args->snapshot,
                   "Snapshot JSON file (format version 1), or - for stdin")
      ->required()
      ->check(non_empty("a snapshot file or -"))
      ->type_name("FILE");
  command
      ->add_option("--epoch", args->epoch,
                   "Epoch label to check in (default: the snapshot's last epoch)")
      ->check(non_empty("an epoch label"))
      ->type_name("LABEL");
  command
      ->add_option("--baseline", args->baseline,
                   "Epoch label to compare against for stale and lost (default: each "
                   "graph's capture epoch)")
      ->check(non_empty("an epoch label"))
      ->type_name("LABEL");
  command
      ->add_option("--allow", args->allow_files,
                   "Allowlist file, one glob per line ('#' comments); added to the "
                   "snapshot's own list. May be repeated.")
      ->check(non_empty("an allowlist file"))
      ->type_name("FILE");
  command->add_flag("--keep-stale-allow", args->keep_stale_allow,
                    "List allowlist globs that match the owner of no reference in any epoch, "
                    "but do not fail the check for them");
  command
      ->add_option("--threads", args->threads,
                   "Threads that read the graphs' argument words (default 0: one per core, at "
                   "most 8, for snapshots large enough to gain from it); the report is the same "
                   "whatever the count")
      ->check(CLI::Range(std::size_t{0}, kMaxCheckThreads))
      ->type_name("N");
  command
      ->add_option("--format", args->format,
                   "Report format: text (default), json, or html (one self-contained page with "
                   "an address-space map; best with --output FILE.html)")
      ->check(CLI::IsMember({"text", "json", "html"}))
      ->type_name("FORMAT");
  command
      ->add_option("--output", args->output, "Write the report to FILE instead of standard output")
      ->check(non_empty("a file name"))
      ->type_name("FILE");
  command->callback([args, &run] { run = [args] { return run_check(*args); }; });
}

}  // namespace graphcheck::cli
