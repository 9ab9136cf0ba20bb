// GraphCapture across threads. A resource callback runs on the thread of a driver call,
// possibly under the driver's own locks, while another thread may be reading a graph with
// GraphCapture's lock held and waiting in a driver call: the callback must not wait for that
// lock, or both threads wait for each other.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <thread>

#include "cupti_fake/capture_fixture.h"

namespace graphcheck::cupti {
namespace {

using testing::CaptureTest;

class GraphCaptureThreadsTest : public CaptureTest {
 protected:
  CUfunction axpy_ = api_.add_function("axpy", {{0, 8}});
  std::uint64_t x_ = 0x7f3a00000000;
  std::array<void*, 1> params_{&x_};

  CUgraph graph_with_one_kernel(std::uint32_t id) {
    CUgraph graph = api_.add_graph(id);
    api_.add_node(graph, kernel_node(id * 10, axpy_, params_.data()));
    return graph;
  }
};

// Thread A instantiates a graph; inside its read, its cuGraphGetNodes waits (up to 2 s) for
// thread B, which destroys another exec graph, as the real driver would make A wait for a
// lock B holds while B's GRAPHEXEC_DESTROY_STARTING callback runs.
TEST_F(GraphCaptureThreadsTest, AResourceCallbackDoesNotWaitForAReaderHoldingTheLock) {
  const CUgraph old_graph = graph_with_one_kernel(1);
  const CUgraphExec old_exec = api_.add_exec(10);
  instantiate(old_exec, old_graph);
  ASSERT_NE(capture_.exec_graph(old_exec), nullptr);

  std::thread other;
  bool other_finished_in_time = false;
  api_.on_call = [&](const std::string& name) {
    if (name != "cu_graph_get_nodes" || other.joinable()) {
      return;
    }
    std::promise<void> done;
    std::future<void> finished = done.get_future();
    other = std::thread([this, old_exec, done = std::move(done)]() mutable {
      CUpti_GraphData data{};
      data.graphExec = old_exec;
      resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, data);
      done.set_value();
    });
    other_finished_in_time =
        finished.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
  };
  const CUgraphExec exec = api_.add_exec(20);
  instantiate(exec, graph_with_one_kernel(2));
  ASSERT_TRUE(other.joinable());
  other.join();
  api_.on_call = nullptr;

  EXPECT_TRUE(other_finished_in_time)
      << "the destroy callback waited for the lock the reading thread held";
  EXPECT_EQ(callback_error(), "");
  // The queued destroy was applied before anyone could look: the old record is gone.
  EXPECT_EQ(capture_.exec_graph(old_exec), nullptr);
  ASSERT_NE(capture_.exec_graph(exec), nullptr);
  EXPECT_EQ(capture_.exec_graph(exec)->nodes.size(), 1U);
  EXPECT_EQ(capture_.stats().execs_destroyed, 1U);
  EXPECT_EQ(capture_.stats().execs_created, 2U);
}

// Events queued while the lock was busy are applied in their order: an exec graph created
// and destroyed during someone else's read is not read at the next instantiate.
TEST_F(GraphCaptureThreadsTest, QueuedEventsAreAppliedInOrder) {
  const CUgraph graph = graph_with_one_kernel(3);
  const CUgraphExec short_lived = api_.add_exec(30);
  std::thread other;
  bool queued_in_time = false;
  api_.on_call = [&](const std::string& name) {
    if (name != "cu_graph_get_nodes" || other.joinable()) {
      return;
    }
    std::promise<void> done;
    std::future<void> finished = done.get_future();
    other = std::thread([this, graph, short_lived, done = std::move(done)]() mutable {
      CUpti_GraphData data{};
      data.graph = graph;
      data.graphExec = short_lived;
      resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, data);
      resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, data);
      done.set_value();
    });
    // Both events queue: this thread holds the lock.
    queued_in_time = finished.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
  };
  end_capture(graph);
  ASSERT_TRUE(other.joinable());
  other.join();
  api_.on_call = nullptr;
  EXPECT_TRUE(queued_in_time);
  ASSERT_EQ(callback_error(), "");
  const CUgraphExec exec = api_.add_exec(31);
  instantiate(exec, graph);
  EXPECT_EQ(callback_error(), "");
  EXPECT_EQ(capture_.exec_graph(short_lived), nullptr);
  EXPECT_NE(capture_.exec_graph(exec), nullptr);
  EXPECT_EQ(capture_.stats().execs_created, 2U);
  EXPECT_EQ(capture_.stats().execs_destroyed, 1U);
}

}  // namespace
}  // namespace graphcheck::cupti
