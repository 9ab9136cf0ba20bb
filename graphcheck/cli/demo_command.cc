// `graphcheck demo --out DIR`: the reference model story on the CPU for both variants
// (capture, sleep level 1, sleep level 2 with an in-place reload, a reload by rebinding), a
// short human report per step, one snapshot per variant and a summary of the verdict counts.
// Findings in the legacy variant are the point of the demo, so they do not change the exit
// code: 0 when the story ran, 2 on errors (demo_main.cc maps exceptions). Built into its own
// executable, graphcheck-demo, so that `graphcheck check` does not link LibTorch.
#include <graphcheck/detail/text_groups.h>
#include <graphcheck/error.h>
#include <graphcheck/report.h>
#include <graphcheck/report_html.h>
#include <graphcheck/snapshot.h>
#include <graphcheck/torch/graph_replay.h>
#include <graphcheck/torch/reference_model.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "graphcheck/cli/commands.h"

namespace graphcheck::cli {
namespace {

struct DemoArgs {
  std::string out = "build/demo";
  std::int64_t hidden = 64;
  std::uint64_t seed = 11;
};

// No fmt here: LibTorch ships its own fmt headers, which would shadow the system fmt that
// this executable links.
std::string summary_json(const Summary& summary) {
  std::ostringstream out;
  out << R"({"graphs": )" << summary.graphs << R"(, "nodes": )" << summary.nodes
      << R"(, "references": )" << summary.references;
  for (std::size_t i = 0; i < kVerdictCount; ++i) {
    const auto verdict = static_cast<Verdict>(i);
    out << R"(, ")" << to_string(verdict) << R"(": )" << summary.count(verdict);
  }
  out << "}";
  return out.str();
}

std::string step_json(const libtorch::ReplayStep& step) {
  std::ostringstream out;
  out << R"({"label": ")" << step.label << R"(", "outputs_equal": )"
      << (step.outputs_equal ? "true" : "false") << ", ";
  if (std::isfinite(step.max_abs_diff)) {
    out << R"("max_abs_diff": )" << std::setprecision(17) << step.max_abs_diff << ", ";
  }
  out << R"("summary": )" << summary_json(step.report.summary) << "}";
  return out.str();
}

// One line per step, then what to fix: each fix once, with the owners it covers.
void print_step(const libtorch::ReplayStep& step) {
  const Summary& s = step.report.summary;
  std::ostringstream outputs;
  if (step.outputs_equal) {
    outputs << "outputs equal";
  } else {
    outputs << "outputs DIFFER (max |diff| ";
    if (std::isnan(step.max_abs_diff)) {
      outputs << "nan";  // not "-nan": the sign of a NaN says nothing here
    } else {
      outputs << std::setprecision(3) << step.max_abs_diff;
    }
    outputs << ")";
  }
  std::cout << "  " << std::left << std::setw(22) << step.label << ' ' << std::setw(36)
            << outputs.str() << std::right << " findings " << std::setw(3) << s.findings() << " (";
  // Every finding verdict, 0 too (the rows are a table), most urgent first as the reports.
  const char* separator = "";
  for (const Verdict verdict : detail::kFindingsByUrgency) {
    std::cout << separator << to_string(verdict) << ' ' << s.count(verdict);
    separator = ", ";
  }
  std::cout << ")\n";
  // What to fix, each fix once with the owners it covers, as the report's to-do list.
  std::string fixes;
  detail::append_fix_lines(fixes, step.report.findings, detail::group_fixes(step.report.findings),
                           "      ");
  std::cout << fixes;
}

void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << text;
  file.close();
  if (!file) {
    throw Error("--out: cannot write " + path.string() + ": " + std::strerror(errno) +
                "; check that the directory is writable");
  }
}

int run_demo(const DemoArgs& args) {
  const std::filesystem::path out(args.out);
  std::error_code error;
  std::filesystem::create_directories(out, error);
  if (error) {
    throw Error("--out " + args.out + ": cannot create the directory: " + error.message());
  }
  std::string summary = R"({"variants": {)";
  bool first_variant = true;
  for (const auto variant :
       {libtorch::ModelVariant::kLegacy, libtorch::ModelVariant::kRegistered}) {
    libtorch::ReferenceConfig config;
    config.hidden = args.hidden;
    config.variant = variant;
    const std::string name = libtorch::to_string(variant);
    std::cout << "== " << name << " variant (hidden " << config.hidden << ", " << config.layers
              << " layers) ==\n";
    const libtorch::ReplayResult result =
        libtorch::run_graph_replay(libtorch::reference_replay_factory(config, args.seed, 8));
    std::string steps;
    for (const auto& step : result.steps) {
      print_step(step);
      steps.append(steps.empty() ? "" : ", ").append(step_json(step));
    }
    write_snapshot(result.snapshot, out / (name + ".json"));
    // The page of the last step (the rebinding reload) draws every epoch of the story.
    if (!result.steps.empty()) {
      HtmlOptions page;
      page.subject.append("reference model, ").append(name).append(" variant (");
      page.subject.append(name).append(".json)");
      write_text(out / (name + ".html"),
                 to_html(result.steps.back().report, &result.snapshot, page));
    }
    summary.append(first_variant ? "" : ", ").append("\"").append(name);
    summary.append(R"(": {"steps": [)").append(steps).append("]}");
    first_variant = false;
  }
  write_text(out / "summary.json", summary + "}}\n");
  std::cout << "wrote " << args.out << "/legacy.json, " << args.out << "/registered.json and "
            << args.out << "/summary.json; check one with `graphcheck check " << args.out
            << "/legacy.json --epoch after_wake_l2_reload`; open " << args.out
            << "/legacy.html and " << args.out
            << "/registered.html in a browser for each story's memory map\n";
  return 0;
}

}  // namespace

void add_demo_options(CLI::App& app, Action& run) {
  auto args = std::make_shared<DemoArgs>();
  app.add_option("--out", args->out, "Output directory (default: build/demo)")->type_name("DIR");
  app.add_option("--hidden", args->hidden, "Hidden size of the reference model (default 64)")
      ->check(CLI::Range(std::int64_t{16}, std::int64_t{4096}))
      ->type_name("N");
  app.add_option("--seed", args->seed, "Seed of the weights and inputs (default 11)")
      ->type_name("N");
  run = [args] { return run_demo(*args); };
}

}  // namespace graphcheck::cli
