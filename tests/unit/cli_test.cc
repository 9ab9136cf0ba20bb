// The `graphcheck` binary end to end: exit codes, error lines, text and JSON reports.
// Each test runs the built tool through the shell and captures stdout, stderr and the exit
// status; files go to a per-test temporary directory.
#include <gmock/gmock.h>
#include <graphcheck/checker.h>
#include <graphcheck/config.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/test_paths.h"
#include "unit/cli_run_helpers.h"

namespace graphcheck {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

fs::path data_dir() { return test_paths::data_dir(); }

using testing_cli::read_text;
using testing_cli::RunResult;
using testing_cli::write_text;

std::size_t count_lines(const std::string& text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n'));
}

std::string last_line(const std::string& text) {
  std::string trimmed = text.substr(0, text.find_last_not_of('\n') + 1);
  return trimmed.substr(trimmed.rfind('\n') + 1);
}

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("graphcheck_cli_" + std::string(info->name()) + "_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Runs `graphcheck ARGS...` (optionally with `stdin_path` as standard input).
  RunResult run(const std::vector<std::string>& args, const std::string& stdin_path = "") {
    return run_program(test_paths::cli_path(), args, stdin_path);
  }

  // Runs `program ARGS...` (optionally with `stdin_path` as standard input).
  RunResult run_program(const std::string& program, const std::vector<std::string>& args,
                        const std::string& stdin_path = "") {
    return testing_cli::run_program(program, args, dir_ / "stderr.txt", stdin_path);
  }

  static std::string data(const std::string& name) { return (data_dir() / name).string(); }

  // A copy of the built `graphcheck` alone in its own folder, so that tests decide what
  // `graphcheck-demo` next to it is (nothing, a stand-in script, a file it cannot run).
  fs::path copy_cli_alone() {
    const fs::path bin = dir_ / "bin";
    fs::create_directories(bin);
    const fs::path copy = bin / "graphcheck";
    fs::copy_file(test_paths::cli_path(), copy, fs::copy_options::overwrite_existing);
    fs::permissions(copy, fs::perms::owner_all);
    return copy;
  }

  // Expects exit 2 and exactly one "graphcheck: error: " line on stderr, nothing on stdout.
  static void expect_usage_error(const RunResult& result, const std::string& needle) {
    EXPECT_EQ(result.status, 2) << result.err;
    EXPECT_THAT(result.err, StartsWith("graphcheck: error: "));
    EXPECT_EQ(count_lines(result.err), 1U) << result.err;
    EXPECT_THAT(result.err, HasSubstr(needle));
    EXPECT_EQ(result.out, "");
  }

  fs::path dir_;
};

TEST_F(CliTest, ExitsZeroAndSaysSoWithoutFindings) {
  RunResult result = run({"check", data("verdict_registered.json")});
  EXPECT_EQ(result.status, 0) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_THAT(result.out, HasSubstr("no findings"));
  EXPECT_EQ(last_line(result.out), "findings: 0");
}

TEST_F(CliTest, AllowedReferencesAreNotFindings) {
  RunResult result = run({"check", data("verdict_allowed.json")});
  EXPECT_EQ(result.status, 0) << result.out;
  EXPECT_THAT(result.out, HasSubstr("allowed 1"));
}

TEST_F(CliTest, ExitsOneWithFindingsGroupedByKernelAndOwner) {
  RunResult result = run({"check", data("verdict_unregistered.json")});
  EXPECT_EQ(result.status, 1) << result.err;
  EXPECT_EQ(result.err, "");
  EXPECT_THAT(result.out, StartsWith("graphcheck report: epoch \"capture\""));
  EXPECT_THAT(result.out, HasSubstr("kernel cutlass_fp8_gemm_kernel: 1 finding in 1 owner\n"));
  EXPECT_THAT(result.out, HasSubstr("  UNREGISTERED model.layers.0.mlp.gate_up_proj.gemm1_alpha "
                                    "(allocation label): 1 reference (fix 1)\n"));
  EXPECT_THAT(result.out, HasSubstr("where: graph 1 node 0 | param 1 @ +0\n"));
  EXPECT_THAT(result.out, HasSubstr("\nto fix (1), most urgent first:\n  fix 1: register it"));
  EXPECT_THAT(result.out, HasSubstr("\nreferences: 2 (unregistered 1, registered 1)\n"));
  EXPECT_EQ(last_line(result.out), "findings: 1");
}

TEST_F(CliTest, NonKernelFindingsNameTheNodeKindAndOperand) {
  RunResult result = run({"check", data("node_memcpy.json")});
  EXPECT_EQ(result.status, 1) << result.err;
  EXPECT_THAT(result.out, HasSubstr("memcpy node: 1 finding"));
  EXPECT_THAT(result.out, HasSubstr("operand src"));
}

TEST_F(CliTest, DecodeStepTextReportListsEveryFindingKindAndTheStaleGlob) {
  RunResult result = run({"check", data("decode_step.json")});
  EXPECT_EQ(result.status, 1) << result.err;
  EXPECT_THAT(result.out, StartsWith("graphcheck report: epoch \"after_reload\" checked against "
                                     "\"capture\"\n1 graph, 613 nodes, 2416 references\n"));
  EXPECT_THAT(result.out, HasSubstr("  STALE model.layers.7.self_attn.qkv_proj.weight "
                                    "(parameter): 1 reference (fix 1)\n"));
  EXPECT_THAT(result.out, HasSubstr("  LOST model.layers.{0-31}.mlp.gate_up_proj.gemm1_alpha "
                                    "(allocation label): 32 references (fix 2)\n"));
  EXPECT_THAT(result.out, HasSubstr("  LOST vllm.model_executor.layers.rotary_embedding."));
  EXPECT_THAT(result.out, HasSubstr("  DANGLING sampler.topk_workspace (allocation label)"));
  EXPECT_THAT(result.out, HasSubstr("  UNREGISTERED lm_head.quant_method.workspace"));
  // The RoPE cache is one owner read by all 32 rotary kernels: one group, nodes compacted.
  EXPECT_THAT(result.out, HasSubstr("(allocation label): 32 references (fix 2)\n"));
  // Four fixes, each sentence once, the stale parameters' first.
  EXPECT_THAT(result.out,
              HasSubstr("\nto fix (4), most urgent first:\n  fix 1: reload the parameter"));
  EXPECT_THAT(result.out, HasSubstr("\n         8 parameters, 8 references: "
                                    "model.layers.7.self_attn.qkv_proj.weight, "));
  EXPECT_THAT(result.out, HasSubstr("stale allowlist entries (1)"));
  EXPECT_THAT(result.out, HasSubstr("\n  model.layers.*.self_attn.mla_attn.W_UV\n"));
  EXPECT_THAT(result.out,
              HasSubstr("\nreferences: 2416 (stale 8, lost 64, dangling 1, unregistered 1, "
                        "registered 411, runtime 128, graph 1606, input 133, allowed 64)\n"));
  EXPECT_EQ(last_line(result.out), "findings: 74 (the check fails: 1 stale allowlist entry)");
}

TEST_F(CliTest, JsonFormatPrintsTheReportThatCheckReturns) {
  RunResult result = run({"check", data("decode_step.json"), "--format", "json"});
  EXPECT_EQ(result.status, 1) << result.err;
  Report expected = check(read_snapshot(data_dir() / "decode_step.json"));
  Report printed = parse_report(result.out);
  EXPECT_EQ(printed, expected);
  EXPECT_EQ(printed.summary.count(Verdict::kStale), 8U);
}

TEST_F(CliTest, EpochAndBaselineOptionsReachTheChecker) {
  RunResult result = run({"check", data("decode_step.json"), "--epoch", "after_sleep", "--baseline",
                          "capture", "--format", "json"});
  EXPECT_EQ(result.status, 1) << result.err;
  Report report = parse_report(result.out);
  EXPECT_EQ(report.epoch, "after_sleep");
  EXPECT_EQ(report.baseline, "capture");
  EXPECT_EQ(report.summary.count(Verdict::kLost), 64U);
  EXPECT_EQ(report.summary.count(Verdict::kStale), 0U);

  CheckOptions options;
  options.epoch = "after_sleep";
  options.baseline = "after_sleep";
  RunResult same = run({"check", data("decode_step.json"), "--epoch", "after_sleep", "--baseline",
                        "after_sleep", "--format", "json"});
  EXPECT_EQ(parse_report(same.out), check(read_snapshot(data_dir() / "decode_step.json"), options));
}

TEST_F(CliTest, ThreadsReadTheGraphsAndLeaveTheReportAsItIs) {
  // Four copies of the decode step's graph: a check point of four graphs.
  Snapshot snapshot = read_snapshot(data_dir() / "decode_step.json");
  ASSERT_EQ(snapshot.graphs.size(), 1U);
  for (std::uint64_t id = 2; id <= 4; ++id) {
    snapshot.graphs.push_back(snapshot.graphs.front());
    snapshot.graphs.back().id = id;
  }
  const fs::path path = dir_ / "four_graphs.json";
  write_snapshot(snapshot, path);
  const Report expected = check(snapshot);
  ASSERT_EQ(expected.summary.graphs, 4U);
  for (const char* threads : {"0", "1", "3"}) {
    RunResult result = run({"check", path.string(), "--threads", threads, "--format", "json"});
    EXPECT_EQ(result.status, 1) << threads << ": " << result.err;
    EXPECT_EQ(parse_report(result.out), expected) << threads;
  }
}

TEST_F(CliTest, OutputWritesTheReportToAFileInsteadOfStdout) {
  const fs::path text_path = dir_ / "report.txt";
  const fs::path json_path = dir_ / "report.json";
  RunResult text = run({"check", data("verdict_stale.json"), "--output", text_path.string()});
  EXPECT_EQ(text.status, 1) << text.err;
  EXPECT_EQ(text.out, "");
  Report expected = check(read_snapshot(data_dir() / "verdict_stale.json"));
  EXPECT_EQ(read_text(text_path), to_text(expected));

  RunResult json =
      run({"check", data("verdict_stale.json"), "--format=json", "--output", json_path.string()});
  EXPECT_EQ(json.status, 1) << json.err;
  EXPECT_EQ(json.out, "");
  EXPECT_EQ(parse_report(read_text(json_path)), expected);
}

TEST_F(CliTest, AllowFileTurnsUnregisteredIntoAllowed) {
  const fs::path allow = dir_ / "allow.txt";
  write_text(allow, "# known sites\n\n  model.layers.*.mlp.gate_up_proj.gemm1_alpha  \n");
  RunResult result = run({"check", data("verdict_unregistered.json"), "--allow", allow.string()});
  EXPECT_EQ(result.status, 0) << result.out << result.err;
  EXPECT_THAT(result.out, HasSubstr("\nreferences: 2 (registered 1, allowed 1)\n"));
}

TEST_F(CliTest, StaleAllowGlobsFailTheCheckUnlessKept) {
  // verdict_registered.json has no findings; a glob matching no reference's owner is stale.
  const fs::path allow = dir_ / "stale.txt";
  write_text(allow, "model.layers.*.fixed_long_ago\n");
  RunResult failed = run({"check", data("verdict_registered.json"), "--allow", allow.string()});
  EXPECT_EQ(failed.status, 1) << failed.out << failed.err;
  EXPECT_THAT(failed.out, HasSubstr("stale allowlist entries (1)"));
  EXPECT_EQ(last_line(failed.out), "findings: 0 (the check fails: 1 stale allowlist entry)");
  RunResult json = run(
      {"check", data("verdict_registered.json"), "--allow", allow.string(), "--format", "json"});
  EXPECT_EQ(json.status, 1);
  EXPECT_THAT(json.out, HasSubstr(R"("stale_allow": [)"));
  RunResult kept = run(
      {"check", data("verdict_registered.json"), "--allow", allow.string(), "--keep-stale-allow"});
  EXPECT_EQ(kept.status, 0) << kept.out << kept.err;
  EXPECT_THAT(kept.out, HasSubstr("kept on purpose: --keep-stale-allow"));
  EXPECT_EQ(last_line(kept.out), "findings: 0");
}

TEST_F(CliTest, ReadsTheSnapshotFromStdinWhenThePathIsDash) {
  RunResult result = run({"check", "-"}, data("verdict_lost.json"));
  EXPECT_EQ(result.status, 1) << result.err;
  EXPECT_THAT(result.out, HasSubstr("LOST model.layers.0.self_attn.W_UV"));
}

TEST_F(CliTest, MissingSnapshotFileIsOneErrorLineNamingThePath) {
  const std::string missing = (dir_ / "no_such_snapshot.json").string();
  expect_usage_error(run({"check", missing}), missing);
}

TEST_F(CliTest, MalformedJsonIsOneErrorLineNamingTheJsonPath) {
  std::string text = read_text(data_dir() / "verdict_registered.json");
  const std::string good_hex = "\"hex\": \"004000003a7f0000\"";
  ASSERT_NE(text.find(good_hex), std::string::npos);
  text.replace(text.find(good_hex), good_hex.size(), "\"hex\": \"00zz\"");
  const fs::path bad_hex = dir_ / "bad_hex.json";
  write_text(bad_hex, text);
  expect_usage_error(run({"check", bad_hex.string()}), "graphs[0].nodes[0].params[0].hex");

  const fs::path truncated = dir_ / "truncated.json";
  write_text(truncated, read_text(data_dir() / "verdict_registered.json").substr(0, 200));
  expect_usage_error(run({"check", truncated.string()}), "truncated.json");

  const fs::path no_epochs = dir_ / "no_epochs.json";
  write_text(no_epochs,
             R"({"format": "graphcheck-snapshot", "version": 1, "graphs": [], "allow": []})");
  expect_usage_error(run({"check", no_epochs.string()}), "epochs");
}

TEST_F(CliTest, UnknownEpochIsAUsageErrorListingTheKnownLabels) {
  RunResult result = run({"check", data("decode_step.json"), "--epoch", "after_nap"});
  expect_usage_error(result, "after_nap");
  EXPECT_THAT(result.err, HasSubstr("after_reload"));
  expect_usage_error(run({"check", data("decode_step.json"), "--baseline", "before"}), "before");
}

TEST_F(CliTest, AMistypedCommandOptionOrEpochGetsTheNearestKnownOne) {
  const std::string snapshot = data("decode_step.json");
  RunResult result = run({"chek", snapshot});
  expect_usage_error(result,
                     "unknown command 'chek'; did you mean \"check\"? (run 'graphcheck "
                     "--help' for the commands)");
  // CLI11 took the word after an unknown option for the snapshot and named both as extras.
  result = run({"check", "--epcoh", "after_reload", snapshot});
  expect_usage_error(result,
                     "unknown option '--epcoh' of graphcheck check; did you mean "
                     "\"--epoch\"? (run 'graphcheck check --help' for its options)");
  expect_usage_error(run({"check", snapshot, "--formt=json"}), "did you mean \"--format\"?");
  result = run({"check", snapshot, "--epoch", "after_relaod"});
  expect_usage_error(result,
                     "epoch \"after_relaod\" is not an epoch of the snapshot; did you "
                     "mean \"after_reload\"? (it has: ");
  // Nothing near, or two as near: no guess.
  EXPECT_THAT(run({"check", snapshot, "--epoch", "after_nap"}).err, Not(HasSubstr("did you mean")));
  EXPECT_THAT(run({"check", snapshot, "--zzzzzz"}).err, Not(HasSubstr("did you mean")));
}

TEST_F(CliTest, OutputNeverReplacesAnInputAndEmptyValuesAreRefused) {
  // `--output snap.json` one argument too early replaced the snapshot (often the only copy of
  // a GPU run) by the report; a link to it did too.
  const fs::path snapshot = dir_ / "snap.json";
  fs::copy_file(data("verdict_stale.json"), snapshot);
  const std::string before = read_text(snapshot);
  fs::create_symlink(snapshot, dir_ / "link.json");
  expect_usage_error(run({"check", snapshot.string(), "--output", snapshot.string()}),
                     "--output " + snapshot.string() + ": is the snapshot being checked (" +
                         snapshot.string() + "); write the report to another file");
  expect_usage_error(run({"check", snapshot.string(), "--output", (dir_ / "link.json").string()}),
                     "is the snapshot being checked");
  const fs::path allow = dir_ / "allow.txt";
  write_text(allow, "model.*\n");
  expect_usage_error(
      run({"check", snapshot.string(), "--allow", allow.string(), "--output", allow.string()}),
      "is an allowlist file of this check");
  EXPECT_EQ(read_text(snapshot), before);
  EXPECT_EQ(read_text(allow), "model.*\n");
  // An unset variable in a CI step: "" named another epoch than meant (the default one).
  expect_usage_error(run({"check", snapshot.string(), "--epoch", ""}),
                     "--epoch: expected an epoch label, found an empty string");
  expect_usage_error(run({"check", snapshot.string(), "--baseline", ""}),
                     "--baseline: expected an epoch label, found an empty string");
  expect_usage_error(run({"check", snapshot.string(), "--output", ""}),
                     "--output: expected a file name, found an empty string");
  // Standard input of NULs (< /dev/zero) is refused at its first byte, not read to the end.
  expect_usage_error(run({"check", "-"}, "/dev/zero"),
                     "<stdin>: not valid JSON: a NUL byte at line 1, column 1 (byte 1)");
}

TEST_F(CliTest, BadFlagsAndMissingArgumentsExitTwo) {
  expect_usage_error(run({"check", data("verdict_registered.json"), "--frobnicate"}),
                     "--frobnicate");
  expect_usage_error(run({"check", data("verdict_registered.json"), "--format", "xml"}), "xml");
  // The command's own help lists its options; the top-level one does not.
  expect_usage_error(run({"check", data("verdict_registered.json"), "--format", "xml"}),
                     "(run 'graphcheck check --help' for usage)");
  expect_usage_error(run({"report", "--frobnicate", "x"}),
                     "unknown option '--frobnicate' of graphcheck report (run 'graphcheck "
                     "report --help' for its options)");
  expect_usage_error(run({"check"}), "SNAPSHOT");
  for (const char* threads : {"-1", "many", "257"}) {
    expect_usage_error(run({"check", data("verdict_registered.json"), "--threads", threads}),
                       "--threads");
  }
  expect_usage_error(run({}), "graphcheck --help");
  expect_usage_error(run({"frobnicate"}), "frobnicate");
  expect_usage_error(run({"check", data("verdict_registered.json"), "--allow",
                          (dir_ / "missing_allow.txt").string()}),
                     "missing_allow.txt");
  expect_usage_error(run({"check", data("verdict_registered.json"), "--output",
                          (dir_ / "no_dir" / "report.txt").string()}),
                     "no_dir");
}

TEST_F(CliTest, HelpPrintsUsageAndExitsZero) {
  RunResult top = run({"--help"});
  EXPECT_EQ(top.status, 0);
  EXPECT_THAT(top.out, HasSubstr("check"));
  EXPECT_THAT(top.out, HasSubstr("demo"));
  EXPECT_EQ(top.err, "");
  RunResult check_help = run({"check", "--help"});
  EXPECT_EQ(check_help.status, 0);
  for (const char* option :
       {"SNAPSHOT", "--epoch", "--baseline", "--allow", "--threads", "--format", "--output"}) {
    EXPECT_THAT(check_help.out, HasSubstr(option));
  }
}

TEST_F(CliTest, VersionPrintsTheProjectVersion) {
  RunResult result = run({"--version"});
  EXPECT_EQ(result.status, 0);
  EXPECT_EQ(result.out, "graphcheck " GRAPHCHECK_VERSION_STRING "\n");
  EXPECT_EQ(std::string(GRAPHCHECK_VERSION_STRING), "0.1.0");
}

// The libraries the dynamic loader maps for `program`, dependencies of dependencies included
// (glibc's loader lists them and exits when LD_TRACE_LOADED_OBJECTS is set; this is `ldd`).
std::string loaded_libraries(const std::string& program) {
  const std::string command =
      "LD_TRACE_LOADED_OBJECTS=1 " + testing_cli::shell_quote(program) + " 2>&1";
  std::string out;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "popen failed: " << command;
    return out;
  }
  std::array<char, 4096> buffer{};
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    out.append(buffer.data(), n);
  }
  EXPECT_EQ(::pclose(pipe), 0) << out;
  return out;
}

// `graphcheck check` must start like a small tool and run where LibTorch is absent (the
// installed CLI once failed with "libtorch.so: cannot open shared object file").
TEST_F(CliTest, CheckLoadsNoLibTorch) {
  const std::string libraries = loaded_libraries(test_paths::cli_path());
  EXPECT_THAT(libraries, HasSubstr("libc.so"));  // the probe lists what is loaded
  for (const char* library : {"libtorch", "libc10", "libcudart", "libcuda.so"}) {
    EXPECT_THAT(libraries, ::testing::Not(HasSubstr(library))) << libraries;
  }
  // Where the demo is built, the same probe finds LibTorch in it: the probe can see it.
  const fs::path demo = fs::path(test_paths::cli_path()).parent_path() / "graphcheck-demo";
  if (fs::exists(demo)) {
    EXPECT_THAT(loaded_libraries(demo.string()), HasSubstr("libtorch"));
  }
}

TEST_F(CliTest, DemoRunsTheSiblingExecutableWithEveryArgument) {
  const fs::path cli = copy_cli_alone();
  const fs::path demo = cli.parent_path() / "graphcheck-demo";
  write_text(demo, "#!/bin/sh\nprintf '[%s]' \"$0\" \"$@\"\necho 'demo stderr' >&2\nexit 7\n");
  fs::permissions(demo, fs::perms::owner_all);
  RunResult result = run_program(cli.string(), {"demo", "--out", "a b'c", "--help", "--seed=3"});
  // The exit status, stdout and stderr are the demo's own: graphcheck became it.
  EXPECT_EQ(result.status, 7) << result.err;
  EXPECT_EQ(result.out, "[" + demo.string() + "][--out][a b'c][--help][--seed=3]");
  EXPECT_EQ(result.err, "demo stderr\n");
  RunResult bare = run_program(cli.string(), {"demo"});
  EXPECT_EQ(bare.out, "[" + demo.string() + "]");
}

TEST_F(CliTest, DemoWithoutTheSiblingExecutableIsOneErrorLineNamingWhereItLooked) {
  const fs::path cli = copy_cli_alone();
  const fs::path demo = cli.parent_path() / "graphcheck-demo";
  RunResult result = run_program(cli.string(), {"demo", "--out", (dir_ / "out").string()});
  expect_usage_error(result, "demo: " + demo.string() + " not found");
  EXPECT_THAT(result.err, HasSubstr("LibTorch"));
  EXPECT_FALSE(fs::exists(dir_ / "out"));
  // `check` in the same copy works: it never needed the demo.
  EXPECT_EQ(run_program(cli.string(), {"check", data("verdict_registered.json")}).status, 0);

  // Present but not executable: the system's reason, still one line and exit 2.
  write_text(demo, "not a program\n");
  fs::permissions(demo, fs::perms::owner_read | fs::perms::owner_write);
  RunResult not_executable = run_program(cli.string(), {"demo"});
  expect_usage_error(not_executable, "demo: cannot run " + demo.string() + ": ");
}

}  // namespace
}  // namespace graphcheck
