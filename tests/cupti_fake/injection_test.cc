// The injection library's logic with a fake environment and a fake driver: configuration
// errors name the variable, failures disable graphcheck without harming the host, and an
// active injection writes its exit snapshot and report.
#include "cupti/injection.h"

#include <gmock/gmock.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
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
  // A buffer the graph uses, allocated but registered nowhere: unregistered at exit.
  CUgraph graph = fake_->add_graph(1);
  CUfunction kernel = fake_->add_function("k", {{0, 8}});
  CUdeviceptr buffer = 0x7f0000000000;
  void* args[] = {&buffer};
  testing::FakeNode node;
  node.type = CU_GRAPH_NODE_TYPE_KERNEL;
  node.kernel.func = kernel;
  node.kernel.kernelParams = args;
  fake_->add_node(graph, node);
  CUdeviceptr out = buffer;
  cuMemAlloc_v2_params alloc{&out, 256};
  CUresult ok = CUDA_SUCCESS;
  CUpti_CallbackData data{};
  data.callbackSite = CUPTI_API_EXIT;
  data.functionParams = &alloc;
  data.functionReturnValue = &ok;
  injection.backend()->dispatcher().on_callback(CUPTI_CB_DOMAIN_DRIVER_API,
                                                CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &data);
  CUgraphExec exec = fake_->add_exec(2);
  cuGraphInstantiateWithFlags_params instantiate{&exec, graph, 0};
  data.functionParams = &instantiate;
  injection.backend()->dispatcher().on_callback(
      CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &data);
  EXPECT_EXIT(injection.at_exit(), ::testing::ExitedWithCode(1), "");
}

}  // namespace
}  // namespace graphcheck::cupti
