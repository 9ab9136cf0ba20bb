// `graphcheck report DIR`: merges the folder a GRAPHCHECK=1 server writes (index.jsonl, one
// report per check point and process) into one summary, text or JSON, on stdout or a file.
#include <graphcheck/report.h>

#include <CLI/CLI.hpp>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "graphcheck/cli/commands.h"
#include "graphcheck/cli/entry.h"
#include "graphcheck/cli/output.h"
#include "graphcheck/cli/watch_summary.h"

namespace graphcheck::cli {
namespace {

struct ReportArgs {
  std::string dir;
  std::string format = "text";
  std::string output;
  bool keep_stale_allow = false;
};

int run_report(const ReportArgs& args) {
  const WatchSummary summary = summarize_watch(
      args.dir, args.keep_stale_allow ? StaleAllowPolicy::kKeep : StaleAllowPolicy::kFail);
  // The folder's index and every report the summary read stay as they are.
  std::vector<InputFile> inputs = {
      {(std::filesystem::path(args.dir) / "index.jsonl").string(), "the folder's index"}};
  for (const CheckpointSummary& checkpoint : summary.checkpoints) {
    for (const ProcessRow& row : checkpoint.processes) {
      for (const std::string& read : {row.report_path, row.text_path}) {
        if (!read.empty()) {
          inputs.push_back({read, "a report of the folder"});
        }
      }
    }
  }
  write_output(args.format == "json" ? to_json(summary) : to_text(summary), args.output, inputs);
  return summary.failed() ? kExitFindings : kExitClean;
}

}  // namespace

void add_report_command(CLI::App& app, Action& run) {
  auto args = std::make_shared<ReportArgs>();
  CLI::App* command = app.add_subcommand(
      "report",
      "Summarize the folder a server run with GRAPHCHECK=1 writes (index.jsonl and the "
      "reports of every process): check points by label, findings by owner across processes. "
      "Exit 0: no findings; 1: findings or stale allowlist entries; 2: bad input or usage.");
  command->add_option("DIR", args->dir, "The watch folder (GRAPHCHECK_DIR), holding index.jsonl")
      ->required()
      ->check(non_empty("a watch folder"))
      ->type_name("DIR");
  command->add_flag("--keep-stale-allow", args->keep_stale_allow,
                    "List allowlist globs that were stale in a check point, but do not fail "
                    "for them");
  command->add_option("--format", args->format, "Summary format: text (default) or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->type_name("FORMAT");
  command
      ->add_option("--output", args->output, "Write the summary to FILE instead of standard output")
      ->check(non_empty("a file name"))
      ->type_name("FILE");
  command->callback([args, &run] { run = [args] { return run_report(*args); }; });
}

}  // namespace graphcheck::cli
