// The backend's one lock order (cupti/lock_order.h, issue 18 §3): the checker session's
// mutex is never held while a source waits for GraphCapture's lock or calls the driver, so
// a resource callback that waits for the session mutex (an exec graph created or destroyed,
// fired inside a driver call, perhaps under the driver's own locks) cannot close a cycle.
#include "cupti/lock_order.h"

#include <gmock/gmock.h>
#include <graphcheck/error.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include "cupti/backend.h"
#include "cupti_fake/capture_fixture.h"
#include "cupti_fake/fake_driver.h"

namespace graphcheck::cupti {
namespace {

using testing::FakeDriver;
using testing::FakeNode;
using ::testing::HasSubstr;

// Runs `other` on a second thread and says whether it finished within 2 s. The thread is
// joined later by the caller (`thread`), once whatever blocked it is released.
bool finishes_in_time(std::thread& thread, const std::function<void()>& other) {
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  thread = std::thread([other, done = std::move(done)]() mutable {
    other();
    done.set_value();
  });
  return finished.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
}

// Whether thread `tid` of this process is asleep (state 'S' in /proc: blocked in a wait)
// within 2 s: the sign that it reached the lock it waits for, where a fixed sleep only hoped
// so (on a busy machine the thread may not even have started).
bool sleeps_within_2s(const std::atomic<pid_t>& tid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < deadline) {
    if (const pid_t id = tid.load(); id != 0) {
      std::ifstream stat("/proc/self/task/" + std::to_string(id) + "/stat");
      std::string line;
      std::getline(stat, line);
      // "<tid> (<name>) <state> ...": the name may hold spaces, the state follows its ')'.
      const std::size_t close = line.rfind(')');
      if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'S') {
        return true;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

// A session's sources run without its mutex: a thread that needs the mutex meanwhile (the
// GRAPHEXEC_CREATED callback's note_graph_capture) is not held up by them.
TEST(LockOrderTest, SessionSourcesRunWithoutTheSessionMutex) {
  CheckerSession* session_ptr = nullptr;
  std::thread other;
  bool in_time = false;
  SessionSources sources;
  sources.graphs = [&] {
    if (!other.joinable()) {
      in_time = finishes_in_time(other, [&] { (void)session_ptr->note_graph_capture(5); });
    }
    return std::vector<GraphRecord>{};
  };
  CheckerSession session({}, std::move(sources));
  session_ptr = &session;
  (void)session.check_now("now");
  other.join();
  EXPECT_TRUE(in_time) << "check_now called a source with the session mutex held";
}

// The cycle of the issue, with the fake driver: thread A instantiates a graph (GraphCapture's
// lock held, in a driver call that on a real driver could wait for a lock held by thread B);
// thread D runs the exit check; thread B's driver call fires GRAPHEXEC_CREATED, whose hook
// waits for the session mutex. Before the fix D held that mutex while it waited for A's
// lock, so B waited for D, D for A, and A for B.
TEST(LockOrderTest, ACallbackWaitingForTheSessionNeverWaitsForAGraphRead) {
  FakeDriver api;
  Backend backend(api, {});
  CUdeviceptr x = 0x7f3a00000000;
  void* args[] = {&x};
  const CUgraph graph = api.add_graph(1);
  FakeNode node;
  node.type = CU_GRAPH_NODE_TYPE_KERNEL;
  node.id = 10;
  node.kernel.func = api.add_function("axpy", {{0, 8}});
  node.kernel.kernelParams = args;
  api.add_node(graph, node);
  CUgraphExec exec = api.add_exec(20);
  const CUgraphExec other_exec = api.add_exec(30);

  std::thread checker;
  std::thread callback;
  std::atomic<pid_t> checker_tid{0};
  bool checker_waits = false;
  bool in_time = false;
  api.on_call = [&](const std::string& name) {
    if (name != "cu_graph_get_nodes" || checker.joinable()) {
      return;
    }
    checker = std::thread([&] {
      checker_tid = static_cast<pid_t>(::syscall(SYS_gettid));
      (void)backend.session().check_now("exit");
    });
    checker_waits = sleeps_within_2s(checker_tid);  // D waits for A's lock now
    in_time = finishes_in_time(callback, [&] {
      CUpti_GraphData created{};
      created.graphExec = other_exec;
      const CUpti_ResourceData data{nullptr, {nullptr}, &created};
      backend.dispatcher().on_callback(CUPTI_CB_DOMAIN_RESOURCE,
                                       CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, &data);
    });
  };
  cuGraphInstantiateWithFlags_params params{&exec, graph, 0};
  CUresult ok = CUDA_SUCCESS;
  CUpti_CallbackData data{};
  data.callbackSite = CUPTI_API_EXIT;
  data.functionParams = &params;
  data.functionReturnValue = &ok;
  backend.dispatcher().on_callback(CUPTI_CB_DOMAIN_DRIVER_API,
                                   CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags, &data);
  api.on_call = nullptr;
  checker.join();
  callback.join();
  EXPECT_TRUE(checker_waits) << "the exit check never waited for the graph read: no cycle to "
                                "break";
  EXPECT_TRUE(in_time) << "the GRAPHEXEC_CREATED callback waited for a check that waited for "
                          "the graph read";
  EXPECT_TRUE(backend.dispatcher().take_error().ok());
  EXPECT_NE(backend.capture().exec_graph(exec), nullptr);
}

// The order is asserted: waiting for GraphCapture's lock with the session mutex held throws
// at once, in every build, instead of deadlocking some day on a GPU.
TEST(LockOrderTest, WaitingForTheCaptureLockUnderTheSessionMutexThrows) {
  FakeDriver api;
  GraphCapture capture(api);
  EXPECT_NO_THROW((void)capture.exec_graphs());
  const detail::SessionLockScope held;
  EXPECT_TRUE(detail::session_lock_held());
  try {
    (void)capture.exec_graphs();
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("lock order violated"));
  }
}

}  // namespace
}  // namespace graphcheck::cupti
