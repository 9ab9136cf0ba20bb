// GraphCapture across threads. A resource callback runs on the thread of a driver call,
// possibly under the driver's own locks, while another thread may be reading a graph with
// GraphCapture's lock held and waiting in a driver call: the callback must not wait for that
// lock, or both threads wait for each other.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
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
    api_.add_node(graph, kernel_node(std::uint64_t{id} * 10, axpy_, params_.data()));
    return graph;
  }

  // Runs `read` here. Its first cuGraphGetNodes, a driver call that on a real driver could
  // wait for a lock the other thread holds while its callback runs, starts `other` on a
  // second thread and waits up to 2 s for it. Returns whether `other` ran and finished in
  // that time (a callback that waits for the reader's lock does not).
  bool other_finishes_during_a_read(const std::function<void()>& read,
                                    const std::function<void()>& other) {
    std::thread thread;
    bool in_time = false;
    api_.on_call = [&](const std::string& name) {
      if (name != "cu_graph_get_nodes" || thread.joinable()) {
        return;
      }
      std::promise<void> done;
      std::future<void> finished = done.get_future();
      thread = std::thread([&other, done = std::move(done)]() mutable {
        other();
        done.set_value();
      });
      in_time = finished.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
    };
    read();
    api_.on_call = nullptr;
    if (thread.joinable()) {
      thread.join();
    }
    return in_time;
  }
};

// Thread A instantiates a graph; inside its read, its cuGraphGetNodes waits for thread B,
// which destroys another exec graph, as the real driver would make A wait for a lock B
// holds while B's GRAPHEXEC_DESTROY_STARTING callback runs.
TEST_F(GraphCaptureThreadsTest, AResourceCallbackDoesNotWaitForAReaderHoldingTheLock) {
  const CUgraph old_graph = graph_with_one_kernel(1);
  const CUgraphExec old_exec = api_.add_exec(10);
  instantiate(old_exec, old_graph);
  ASSERT_NE(capture_.exec_graph(old_exec), nullptr);

  const CUgraphExec exec = api_.add_exec(20);
  const CUgraph graph = graph_with_one_kernel(2);
  const auto destroy_old_exec = [&] {
    CUpti_GraphData data{};
    data.graphExec = old_exec;
    resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, data);
  };
  EXPECT_TRUE(other_finishes_during_a_read([&] { instantiate(exec, graph); }, destroy_old_exec))
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
  const auto create_and_destroy = [&] {
    CUpti_GraphData data{};
    data.graph = graph;
    data.graphExec = short_lived;
    resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, data);
    resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_DESTROY_STARTING, data);
  };
  // Both events queue: the reading thread holds the lock (the captured graph is read when
  // its record is asked for).
  const auto read_captured = [&] {
    end_capture(graph);
    ASSERT_EQ(capture_.captured_graphs().size(), 1U);
  };
  EXPECT_TRUE(other_finishes_during_a_read(read_captured, create_and_destroy));
  ASSERT_EQ(callback_error(), "");
  const CUgraphExec exec = api_.add_exec(31);
  instantiate(exec, graph);
  EXPECT_EQ(callback_error(), "");
  EXPECT_EQ(capture_.exec_graph(short_lived), nullptr);
  EXPECT_NE(capture_.exec_graph(exec), nullptr);
  EXPECT_EQ(capture_.stats().execs_created, 2U);
  EXPECT_EQ(capture_.stats().execs_destroyed, 1U);
}

// Thread B is inside its instantiate call (its GRAPHEXEC_CREATED has fired, its EXIT has
// not): thread A's instantiate EXIT must not read B's graph, which B's call may still be
// using (CUDA forbids using one graph from two threads at once). B reads it at its own EXIT.
TEST_F(GraphCaptureThreadsTest, AnotherThreadsExecGraphIsReadOnlyAtThatThreadsExit) {
  const CUgraph graph_b = graph_with_one_kernel(4);
  CUgraphExec exec_b = api_.add_exec(40);
  std::thread thread_b([&] {
    CUpti_GraphData created{};
    created.graph = graph_b;
    created.graphExec = exec_b;
    resource(CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED, created);
  });
  thread_b.join();  // B is "still instantiating": no EXIT yet

  const CUgraph graph_a = graph_with_one_kernel(5);
  const CUgraphExec exec_a = api_.add_exec(50);
  const int nodes_before = api_.calls["cu_graph_get_nodes"];
  instantiate(exec_a, graph_a);
  EXPECT_EQ(callback_error(), "");
  EXPECT_NE(capture_.exec_graph(exec_a), nullptr);
  EXPECT_EQ(capture_.exec_graph(exec_b), nullptr)
      << "thread A read the graph thread B was still instantiating";
  EXPECT_EQ(api_.calls["cu_graph_get_nodes"] - nodes_before, 2) << "only graph A (count, list)";

  std::thread exit_b([&] {
    cuGraphInstantiateWithFlags_params params{&exec_b, graph_b, 0};
    api_exit(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphInstantiateWithFlags,
             &params);
  });
  exit_b.join();
  EXPECT_EQ(callback_error(), "");
  ASSERT_NE(capture_.exec_graph(exec_b), nullptr);
  EXPECT_EQ(capture_.exec_graph(exec_b)->id, 40U);
  EXPECT_EQ(capture_.stats().exec_templates_matched, 2U) << "each EXIT met its own CREATED";
}

}  // namespace
}  // namespace graphcheck::cupti
