// Subscribing, the single-subscriber conflict, the trampoline and the callback error slot.
#include "cupti/subscriber.h"

#include <gmock/gmock.h>
#include <graphcheck/error.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "cupti/dispatcher.h"
#include "cupti_fake/fake_driver.h"

namespace graphcheck::cupti {
namespace {

using ::testing::ElementsAre;
using testing::FakeDriver;
using ::testing::HasSubstr;
using ::testing::Not;

// Records what it is given; throws `throw_message` if set.
class RecordingHandler : public CallbackHandler {
 public:
  explicit RecordingHandler(std::vector<CallbackId> ids) : ids_(std::move(ids)) {}
  std::vector<CallbackId> callbacks() const override { return ids_; }
  void on_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) override {
    seen.push_back({domain, cbid});
    last_data = data;
    if (reenter != nullptr) {
      reenter->on_callback(domain, cbid, data);  // as if our own driver call called back
    }
    if (!throw_message.empty()) {
      throw std::runtime_error(throw_message);
    }
  }
  std::vector<CallbackId> seen;
  const void* last_data = nullptr;
  std::string throw_message;
  Dispatcher* reenter = nullptr;

 private:
  std::vector<CallbackId> ids_;
};

constexpr CallbackId kCreated{CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CREATED};
constexpr CallbackId kLaunch{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch};
constexpr CallbackId kEnd{CUPTI_CB_DOMAIN_RUNTIME_API,
                          CUPTI_RUNTIME_TRACE_CBID_cudaStreamEndCapture_v10000};

class SubscriberTest : public ::testing::Test {
 protected:
  SubscriberTest() : first_({kCreated, kLaunch}), second_({kLaunch, kEnd}) {
    dispatcher_.add_handler(first_);
    dispatcher_.add_handler(second_);
  }
  FakeDriver api_;
  RecordingHandler first_;
  RecordingHandler second_;
  Dispatcher dispatcher_;
};

TEST_F(SubscriberTest, EnableSubscribesUnderItsNameAndEnablesTheUnionOfCallbacks) {
  Subscriber subscriber(api_, dispatcher_);
  EXPECT_EQ(subscriber.state(), SubscriberState::kDisabled);
  EXPECT_FALSE(api_.subscribed);  // nothing is held before enable()
  ASSERT_TRUE(subscriber.enable().ok());
  EXPECT_EQ(subscriber.state(), SubscriberState::kEnabled);
  EXPECT_TRUE(api_.subscribed);
  EXPECT_EQ(api_.subscriber_name, "graphcheck");
  EXPECT_THAT(api_.enabled, ElementsAre(kCreated, kLaunch, kEnd));
  EXPECT_TRUE(subscriber.enable().ok());  // idempotent
  EXPECT_EQ(api_.calls["cupti_subscribe_v2"], 1);
}

TEST_F(SubscriberTest, DisableAndDestructionReleaseCupti) {
  {
    Subscriber subscriber(api_, dispatcher_);
    ASSERT_TRUE(subscriber.enable().ok());
    ASSERT_TRUE(subscriber.disable().ok());
    EXPECT_FALSE(api_.subscribed);
    EXPECT_EQ(subscriber.state(), SubscriberState::kDisabled);
    ASSERT_TRUE(subscriber.enable().ok());
  }
  EXPECT_FALSE(api_.subscribed);
  EXPECT_EQ(api_.calls["cupti_unsubscribe"], 2);
}

TEST_F(SubscriberTest, KinetoHoldingCuptiIsNamedWithTheWayOut) {
  api_.fail_cupti["cupti_subscribe_v2"] = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  api_.other_subscriber = "CUPTI for Kineto";
  Subscriber subscriber(api_, dispatcher_);
  const Status status = subscriber.enable();
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), HasSubstr("CUPTI is held by \"CUPTI for Kineto\" (the PyTorch "
                                          "profiler, Kineto)"));
  EXPECT_THAT(status.message(), HasSubstr("TEARDOWN_CUPTI=1"));
  EXPECT_THAT(status.message(), HasSubstr("without torch.profiler"));
  EXPECT_THAT(status.message(), HasSubstr("process continues unchecked"));
  EXPECT_EQ(subscriber.state(), SubscriberState::kUnavailable);
  EXPECT_EQ(subscriber.holder(), "CUPTI for Kineto");
  try {
    subscriber.enable_or_throw();
    FAIL() << "enable_or_throw did not throw";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("CUPTI for Kineto"));
  }
}

TEST_F(SubscriberTest, NsightAndUnnamedHoldersGetTheirOwnAdvice) {
  EXPECT_THAT(describe_subscriber_conflict("Nsight Systems"), HasSubstr("(an Nsight tool)"));
  EXPECT_THAT(describe_subscriber_conflict("compute-sanitizer"),
              HasSubstr("outside compute-sanitizer"));
  const std::string unnamed = describe_subscriber_conflict("");
  EXPECT_THAT(unnamed, HasSubstr("another CUPTI client (CUPTI did not name it)"));
  EXPECT_THAT(unnamed, HasSubstr("TEARDOWN_CUPTI=1"));
}

TEST_F(SubscriberTest, OtherSubscribeFailuresNameTheCallAndResult) {
  api_.fail_cupti["cupti_subscribe_v2"] = CUPTI_ERROR_NOT_INITIALIZED;
  Subscriber subscriber(api_, dispatcher_);
  const Status status = subscriber.enable();
  EXPECT_THAT(status.message(),
              HasSubstr("cuptiSubscribe_v2 failed with CUPTI_ERROR_NOT_INITIALIZED"));
  EXPECT_EQ(subscriber.state(), SubscriberState::kUnavailable);
  EXPECT_EQ(api_.calls["cupti_subscribe_v2"], 1);
}

TEST_F(SubscriberTest, AFailedEnableCallbackLeavesNothingSubscribed) {
  api_.fail_cupti["cupti_enable_callback"] = CUPTI_ERROR_INVALID_PARAMETER;
  Subscriber subscriber(api_, dispatcher_);
  const Status status = subscriber.enable();
  EXPECT_THAT(status.message(),
              HasSubstr("cuptiEnableCallback failed with CUPTI_ERROR_INVALID_PARAMETER"));
  EXPECT_THAT(status.message(), HasSubstr("(domain 3, callback id 13)"));
  EXPECT_FALSE(api_.subscribed);
  EXPECT_EQ(subscriber.state(), SubscriberState::kUnavailable);
}

TEST_F(SubscriberTest, TheTrampolineForwardsToEveryHandler) {
  Subscriber subscriber(api_, dispatcher_);
  ASSERT_TRUE(subscriber.enable().ok());
  const int payload = 7;
  api_.deliver(kLaunch.domain, kLaunch.cbid, &payload);
  EXPECT_THAT(first_.seen, ElementsAre(kLaunch));
  EXPECT_THAT(second_.seen, ElementsAre(kLaunch));
  EXPECT_EQ(first_.last_data, &payload);
}

TEST_F(SubscriberTest, AnExceptionInACallbackIsCaughtAndReportedByTheNextCall) {
  Subscriber subscriber(api_, dispatcher_);
  ASSERT_TRUE(subscriber.enable().ok());
  first_.throw_message = "first failure";
  second_.throw_message = "second failure";
  const int payload = 0;
  api_.deliver(kLaunch.domain, kLaunch.cbid, &payload);  // must not throw into "CUPTI"
  EXPECT_THAT(second_.seen, ElementsAre(kLaunch));       // later handlers still run
  EXPECT_TRUE(dispatcher_.error_pending());
  try {
    dispatcher_.throw_pending_error();
    FAIL() << "no pending error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("a CUPTI callback failed earlier"));
    EXPECT_THAT(error.what(), HasSubstr("first failure"));
    EXPECT_THAT(error.what(), Not(HasSubstr("second failure")));
  }
  EXPECT_NO_THROW(dispatcher_.throw_pending_error());  // reported once
}

TEST_F(SubscriberTest, CallbacksCausedByOurOwnDriverCallsAreIgnored) {
  first_.reenter = &dispatcher_;
  const int payload = 0;
  dispatcher_.on_callback(kLaunch.domain, kLaunch.cbid, &payload);
  EXPECT_EQ(first_.seen.size(), 1U);
  EXPECT_EQ(second_.seen.size(), 1U);
}

}  // namespace
}  // namespace graphcheck::cupti
