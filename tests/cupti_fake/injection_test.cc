// The injection library's logic with a fake environment and a fake driver: configuration
// errors name the variable, failures disable graphcheck without harming the host, and an
// active injection writes its exit snapshot and report.
#include "cupti/injection.h"

#include <gmock/gmock.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>

#include "cupti_fake/fake_driver.h"

namespace graphcheck::cupti {
namespace {

using testing::FakeDriver;
using ::testing::HasSubstr;
using ::testing::Not;

class InjectionTest : public ::testing::Test {
 protected:
  InjectionDeps deps() {
    InjectionDeps deps;
    deps.env = [this](const char* name) -> const char* {
      const auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    };
    deps.load_api = [this] {
      ++loads_;
      DriverApiLoad load;
      if (!load_error_.empty()) {
        load.status = Status::error(load_error_);
        return load;
      }
      auto fake = std::make_unique<FakeDriver>();
      fake_ = fake.get();
      fake_->other_subscriber = other_subscriber_;
      if (!other_subscriber_.empty()) {
        fake_->fail_cupti["cupti_subscribe_v2"] = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
      }
      load.api = std::move(fake);
      return load;
    };
    deps.err = [this](std::string_view text) { err_ += std::string(text) + "\n"; };
    deps.pid = 4242;
    return deps;
  }
  // Unique per process and test: CTest runs tests in parallel processes, and under ASan a
  // fixture's address is the same in each of them (its heap is not randomized).
  static std::filesystem::path temp_dir() {
    auto dir = std::filesystem::temp_directory_path() /
               ("graphcheck-inject-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir);
    return dir;
  }

  // A graph whose kernel reads a buffer allocated and registered nowhere, instantiated.
  void plant_unregistered_read(Injection& injection);
  // A graph of one kernel reading the planted buffer, instantiated as exec `id`.
  CUgraphExec instantiate_planted_read(Injection& injection, std::uint32_t id);
  // A driver call's API EXIT callback, succeeded, as CUPTI delivers it.
  static void driver_exit(Injection& injection, CUpti_CallbackId cbid, const void* params);
  CUdeviceptr planted_buffer_ = 0x7f0000000000;
  std::array<void*, 1> planted_args_{&planted_buffer_};

  std::map<std::string, std::string> env_;
  std::string err_;
  std::string load_error_;
  std::string other_subscriber_;
  int loads_ = 0;
  FakeDriver* fake_ = nullptr;
};

TEST_F(InjectionTest, DefaultsCheckAtExitWithWarnings) {
  const InjectConfig config = parse_inject_config(deps().env);
  EXPECT_EQ(config.check, CheckWhen::kExit);
  EXPECT_EQ(config.policy, FindingPolicy::kWarn);
  EXPECT_EQ(config.vmm_restore, RestorePolicy::kDiscard);
  EXPECT_TRUE(config.out_dir.empty());
  EXPECT_FALSE(config.idle());
}

TEST_F(InjectionTest, EmptyValuesTakeTheDefault) {
  env_ = {{"GRAPHCHECK_CHECK", ""}, {"GRAPHCHECK_POLICY", ""}};
  const InjectConfig config = parse_inject_config(deps().env);
  EXPECT_EQ(config.check, CheckWhen::kExit);
  EXPECT_EQ(config.policy, FindingPolicy::kWarn);
}

TEST_F(InjectionTest, BadCheckValueNamesVariableValueAndChoicesAndDisables) {
  env_ = {{"GRAPHCHECK_CHECK", "sometimes"}};
  Injection injection(deps());
  EXPECT_EQ(injection.initialize(), InjectionState::kDisabled);
  EXPECT_THAT(err_, HasSubstr("GRAPHCHECK_CHECK='sometimes' is not accepted; use one of off, "
                              "exit, launch"));
  EXPECT_THAT(err_, HasSubstr("graphcheck is disabled for this process"));
  EXPECT_EQ(loads_, 0) << "a bad configuration must not touch the driver";
}

TEST_F(InjectionTest, BadPolicyValueIsRejected) {
  env_ = {{"GRAPHCHECK_POLICY", "strict"}};
  Injection injection(deps());
  EXPECT_EQ(injection.initialize(), InjectionState::kDisabled);
  EXPECT_THAT(err_,
              HasSubstr("GRAPHCHECK_POLICY='strict' is not accepted; use one of warn, error"));
}

TEST_F(InjectionTest, BadRestoreValueIsRejected) {
  env_ = {{"GRAPHCHECK_VMM_RESTORE", "yes"}};
  Injection injection(deps());
  EXPECT_EQ(injection.initialize(), InjectionState::kDisabled);
  EXPECT_THAT(err_, HasSubstr("GRAPHCHECK_VMM_RESTORE='yes'"));
  EXPECT_THAT(err_, HasSubstr("discard, restore"));
}

TEST_F(InjectionTest, MissingAllowFileNamesVariableAndPath) {
  env_ = {{"GRAPHCHECK_ALLOW", "/nonexistent/allow.txt"}};
  Injection injection(deps());
  EXPECT_EQ(injection.initialize(), InjectionState::kDisabled);
  EXPECT_THAT(err_, HasSubstr("GRAPHCHECK_ALLOW='/nonexistent/allow.txt'"));
}

TEST_F(InjectionTest, UncreatableOutputFolderNamesTheVariable) {
  env_ = {{"GRAPHCHECK_OUT", "/proc/graphcheck/out"}};
  Injection injection(deps());
  EXPECT_EQ(injection.initialize(), InjectionState::kDisabled);
  EXPECT_THAT(err_, HasSubstr("GRAPHCHECK_OUT='/proc/graphcheck/out'"));
}

// A folder that exists but cannot be written passed before, and the exit check's write then
// failed under GRAPHCHECK_POLICY=error before its exit status.
TEST_F(InjectionTest, AnUnwritableOutputFolderNamesTheVariableAndWhy) {
  env_ = {{"GRAPHCHECK_OUT", "/proc"}};
  Injection injection(deps());
  EXPECT_EQ(injection.initialize(), InjectionState::kDisabled);
  EXPECT_THAT(err_, HasSubstr("GRAPHCHECK_OUT='/proc' is a folder graphcheck cannot write ("));
}

// The files are written at exit, after the program may have changed its working folder.
TEST_F(InjectionTest, ARelativeOutputFolderIsWhereItWasAtStart) {
  const auto dir = temp_dir();
  std::filesystem::create_directories(dir);
  const auto start = std::filesystem::current_path();
  std::filesystem::current_path(dir);
  env_ = {{"GRAPHCHECK_OUT", "out"}, {"GRAPHCHECK_CHECK", "off"}};
  Injection injection(deps());
  ASSERT_EQ(injection.initialize(), InjectionState::kActive) << err_;
  std::filesystem::current_path(start);  // the program moves on
  injection.at_exit();
  EXPECT_TRUE(std::filesystem::exists(dir / "out" / "graphcheck-4242-exit-snapshot.json"));
  EXPECT_FALSE(std::filesystem::exists(start / "out"));
  std::filesystem::remove_all(dir);
}

TEST_F(InjectionTest, CheckOffWithoutOutputStaysIdleAndUnsubscribed) {
  env_ = {{"GRAPHCHECK_CHECK", "off"}};
  Injection injection(deps());
  EXPECT_EQ(injection.initialize(), InjectionState::kIdle);
  EXPECT_EQ(loads_, 0);
  EXPECT_TRUE(err_.empty());
  injection.at_exit();  // nothing to do, must not crash
}

TEST_F(InjectionTest, NoDriverDisablesWithTheLoaderMessageOnce) {
  load_error_ = "graphcheck: no CUDA driver: could not load libcuda.so.1.";
  Injection injection(deps());
  EXPECT_EQ(injection.initialize(), InjectionState::kDisabled);
  EXPECT_EQ(err_,
            "graphcheck: no CUDA driver: could not load libcuda.so.1; graphcheck is "
            "disabled for this process\n");
}

TEST_F(InjectionTest, AnotherSubscriberDisablesAndNamesTheHolder) {
  other_subscriber_ = "kineto";
  Injection injection(deps());
  EXPECT_EQ(injection.initialize(), InjectionState::kDisabled);
  EXPECT_THAT(err_, HasSubstr("kineto"));
  EXPECT_THAT(err_, HasSubstr("graphcheck is disabled for this process"));
  EXPECT_EQ(injection.backend(), nullptr);
}

TEST_F(InjectionTest, ActiveInjectionWritesExitFilesNamedWithThePid) {
  const auto dir = temp_dir();
  env_ = {{"GRAPHCHECK_OUT", dir.string()}, {"GRAPHCHECK_CHECK", "launch"}};
  Injection injection(deps());
  ASSERT_EQ(injection.initialize(), InjectionState::kActive) << err_;
  EXPECT_EQ(fake_->subscriber_name, "graphcheck");
  EXPECT_TRUE(std::any_of(fake_->enabled.begin(), fake_->enabled.end(), [](const CallbackId& id) {
    return id.cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch &&
           id.domain == CUPTI_CB_DOMAIN_DRIVER_API;
  }));
  injection.at_exit();
  EXPECT_TRUE(std::filesystem::exists(dir / "graphcheck-4242-exit-report.json"));
  const Snapshot snapshot = read_snapshot(dir / "graphcheck-4242-exit-snapshot.json");
  EXPECT_EQ(snapshot.producer.backend, "cupti");
  EXPECT_THAT(err_, Not(HasSubstr("failed")));
  std::filesystem::remove_all(dir);
}

TEST_F(InjectionTest, CheckOffWithOutputWritesOnlyTheSnapshot) {
  const auto dir = temp_dir();
  env_ = {{"GRAPHCHECK_OUT", dir.string()}, {"GRAPHCHECK_CHECK", "off"}};
  Injection injection(deps());
  ASSERT_EQ(injection.initialize(), InjectionState::kActive) << err_;
  injection.at_exit();
  EXPECT_TRUE(std::filesystem::exists(dir / "graphcheck-4242-exit-snapshot.json"));
  EXPECT_FALSE(std::filesystem::exists(dir / "graphcheck-4242-exit-report.json"));
  std::filesystem::remove_all(dir);
}

TEST_F(InjectionTest, ErrorPolicyExitsWithCodeOneWhenTheExitCheckFinds) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  env_ = {{"GRAPHCHECK_POLICY", "error"}};
  Injection injection(deps());
  ASSERT_EQ(injection.initialize(), InjectionState::kActive) << err_;
  plant_unregistered_read(injection);
  EXPECT_EXIT(injection.at_exit(), ::testing::ExitedWithCode(1), "");
}

// A forked child inherits the atexit handler but not CUDA: before, it ran the parent's exit
// check, printed the parent's report and, under GRAPHCHECK_POLICY=error, exited 1.
TEST_F(InjectionTest, AForkedChildRunsNoExitCheck) {
  env_ = {{"GRAPHCHECK_POLICY", "error"}};
  Injection injection(deps());
  ASSERT_EQ(injection.initialize(), InjectionState::kActive) << err_;
  plant_unregistered_read(injection);
  const pid_t child = ::fork();
  if (child == 0) {
    injection.at_exit();
    std::_Exit(0);
  }
  ASSERT_GT(child, 0);
  int status = -1;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

void InjectionTest::plant_unregistered_read(Injection& injection) {
  // A buffer the graph uses, allocated but registered nowhere: unregistered at exit.
  CUdeviceptr out = planted_buffer_;
  cuMemAlloc_v2_params alloc{&out, 256};
  driver_exit(injection, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &alloc);
  (void)instantiate_planted_read(injection, 2);
}

CUgraphExec InjectionTest::instantiate_planted_read(Injection& injection, std::uint32_t id) {
  CUgraph graph = fake_->add_graph(id + 100);
  testing::FakeNode node;
  node.type = CU_GRAPH_NODE_TYPE_KERNEL;
  node.kernel.func = fake_->add_function("k", {{0, 8}});
  node.kernel.kernelParams = planted_args_.data();  // the fixture's: read until the test ends
  fake_->add_node(graph, node);
  CUgraphExec exec = fake_->add_exec(id);
  cuGraphInstantiateWithFlags_params instantiate{&exec, graph, 0};
  driver_exit(injection, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &instantiate);
  return exec;
}

void InjectionTest::driver_exit(Injection& injection, CUpti_CallbackId cbid, const void* params) {
  CUresult ok = CUDA_SUCCESS;
  CUpti_CallbackData data{};
  data.callbackSite = CUPTI_API_EXIT;
  data.functionParams = params;
  data.functionReturnValue = &ok;
  injection.backend()->dispatcher().on_callback(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &data);
}

// The exit check runs in an atexit handler, after glibc's exit() destroyed the exiting
// thread's thread_locals. A graph checked at its destroy on that thread had made the address
// index's thread cache there, and the exit check then built its indexes in the destroyed cache:
// the host process segfaulted at exit (5 runs in 5, found by a review helper).
Injection* g_exiting = nullptr;

void run_exit_check() { g_exiting->at_exit(); }

TEST_F(InjectionTest, TheExitCheckRunsAfterTheExitingThreadsThreadLocalsAreGone) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The death test's child runs this body again in a process of its own: it takes the
  // parent's folder (its own pid would name another, which nobody read or removed).
  constexpr const char* kShared = "GRAPHCHECK_TEST_EXIT_CHECK_DIR";
  const char* shared = std::getenv(kShared);  // NOLINT(concurrency-mt-unsafe): one thread
  const std::filesystem::path dir = shared != nullptr ? std::filesystem::path(shared) : temp_dir();
  ::setenv(kShared, dir.c_str(), 1);  // NOLINT(concurrency-mt-unsafe): before the child starts
  // Under the error policy the exit check's finding (graph 2 reads the planted buffer) ends
  // the process with 1: an exit 0 would mean the check never ran, a signal that it crashed.
  env_ = {{"GRAPHCHECK_OUT", dir.string()}, {"GRAPHCHECK_POLICY", "error"}};
  const auto exits_cleanly = [&] {
    auto* injection = new Injection(deps());  // NOLINT(cppcoreguidelines-owning-memory)
    if (injection->initialize() != InjectionState::kActive) {
      std::_Exit(3);
    }
    g_exiting = injection;  // lives until the process ends, as the injection's own does
    plant_unregistered_read(*injection);  // the buffer, and graph 2 reading it: lives on
    const CUgraphExec destroyed_exec = instantiate_planted_read(*injection, 1);
    CUpti_GraphData destroyed{};
    destroyed.graphExec = destroyed_exec;
    const CUpti_ResourceData resource{nullptr, {nullptr}, &destroyed};
    injection->backend()->dispatcher().on_callback(
        CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING,
        &resource);  // checked here, on this thread (its finding only logged: warn at destroy)
    std::atexit(run_exit_check);
    std::exit(0);
  };
  EXPECT_EXIT(exits_cleanly(), ::testing::ExitedWithCode(1), "");
  ::unsetenv(kShared);  // NOLINT(concurrency-mt-unsafe): the child is gone
  // What the exit check wrote: graph 2 (alive at exit) judged, its read unregistered.
  std::ifstream report(dir / "graphcheck-4242-exit-report.txt");
  const std::string text((std::istreambuf_iterator<char>(report)), {});
  EXPECT_THAT(text, HasSubstr("0x7f0000000000")) << "no exit report in " << dir;
  EXPECT_THAT(text, HasSubstr("UNREGISTERED"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace graphcheck::cupti
