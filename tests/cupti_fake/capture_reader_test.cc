// Reading the graph a stream is capturing (issue 18 §1: the server flag reads what the graph
// captured, not only dispatcher ops): what graphcheck._cuda.read_capture returns for the
// Python watch, through the fake driver, and what the checker makes of it.
#include "cupti/capture_reader.h"

#include <gmock/gmock.h>
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cupti_fake/capture_fixture.h"
#include "cupti_fake/fake_driver.h"

namespace graphcheck::cupti {
namespace {

using testing::bytes_of;
using ::testing::ElementsAre;
using testing::FakeDriver;
using testing::FakeNode;
using ::testing::HasSubstr;

constexpr CUdeviceptr kWeight = 0x7f3a00000000;     // a registered parameter
constexpr CUdeviceptr kWorkspace = 0x7f3a00100000;  // live memory no span covers
constexpr std::uint64_t kSize = 4096;

class CaptureReaderTest : public ::testing::Test {
 protected:
  FakeNode kernel_node(std::uint64_t id, CUfunction func, void** args) {
    FakeNode node;
    node.type = CU_GRAPH_NODE_TYPE_KERNEL;
    node.id = id;
    node.kernel.func = func;
    node.kernel.kernelParams = args;
    return node;
  }
  FakeNode memset_node(std::uint64_t id, CUdeviceptr dst) {
    FakeNode node;
    node.type = CU_GRAPH_NODE_TYPE_MEMSET;
    node.id = id;
    node.memset = {dst, 0, 0, 1, 256, 1};
    return node;
  }
  // The graph under capture: a kernel launched outside the dispatcher (a Triton kernel of
  // inductor, say) reading the weight and writing the workspace, then a memset of the
  // workspace (a cudaMemsetAsync no ATen op made), then a child graph with an empty node.
  CUgraph capture_graph() {
    CUgraph graph = api_.add_graph(7);
    api_.add_node(graph, kernel_node(1, scale_, args_.data()));
    api_.add_node(graph, memset_node(2, kWorkspace + 64));
    CUgraph child = api_.add_graph(8);
    FakeNode empty;
    empty.id = 4;
    api_.add_node(child, empty);
    FakeNode holder;
    holder.type = CU_GRAPH_NODE_TYPE_GRAPH;
    holder.id = 3;
    holder.child = child;
    api_.add_node(graph, holder);
    api_.set_capturing(stream_, graph);
    return graph;
  }
  // One epoch: the weight registered, the workspace an allocation without a span.
  static Snapshot snapshot_of(NodeList nodes) {
    Snapshot snapshot;
    snapshot.producer.backend = "aten";
    Epoch epoch;
    epoch.label = "capture";
    epoch.spans.push_back(Span{kWeight, kSize, OwnerKind::kParameter, "layers.0.weight", ""});
    epoch.allocations.push_back(Allocation{kWeight, kSize, "default", 1, "aten:mm"});
    epoch.allocations.push_back(Allocation{kWorkspace, kSize, "default", 1, "workspace"});
    snapshot.epochs.push_back(epoch);
    GraphRecord graph{1, "capture", std::move(nodes)};
    graph.reader = std::string(kReaderCudaGraph);
    snapshot.graphs.push_back(std::move(graph));
    return snapshot;
  }

  FakeDriver api_;
  CUstream stream_ = reinterpret_cast<CUstream>(0x51);
  CUfunction scale_ = api_.add_function("_Z5scalePfS_", {{0, 8}, {8, 8}});
  std::uint64_t weight_word_ = kWeight + 128;
  std::uint64_t workspace_word_ = kWorkspace + 8;
  std::array<void*, 2> args_{&weight_word_, &workspace_word_};
};

TEST_F(CaptureReaderTest, ReadsTheNodesOfTheGraphTheStreamCapturesInto) {
  (void)capture_graph();
  const ReadGraph read = read_capturing_stream(api_, stream_);
  EXPECT_EQ(read.capture_id, 7U);
  EXPECT_TRUE(read.unreadable.empty());
  EXPECT_TRUE(read.conditionals_without_bodies.empty());
  ASSERT_EQ(read.nodes.size(), 3U);
  const Node& kernel = read.nodes[0];
  EXPECT_EQ(kernel.type, NodeType::kKernel);
  EXPECT_EQ(kernel.id, 1U);
  EXPECT_EQ(kernel.name, "scale(float*, float*)");
  EXPECT_EQ(kernel.params, (std::vector<KernelParam>{{0, bytes_of(weight_word_)},
                                                     {8, bytes_of(workspace_word_)}}));
  EXPECT_EQ(read.nodes[1].type, NodeType::kMemset);
  EXPECT_EQ(read.nodes[1].operands,
            (std::vector<Operand>{{"dst", kWorkspace + 64, 256, Access::kWrite}}));
  ASSERT_EQ(read.nodes[2].bodies.size(), 1U);
  ASSERT_EQ(read.nodes[2].bodies[0].size(), 1U);
  EXPECT_EQ(read.nodes[2].bodies[0][0].id, 4U);
}

// The references the checker finds in what was read: the weight word is registered, the
// workspace word and the memset are unregistered, each naming its node.
TEST_F(CaptureReaderTest, TheCheckerJudgesTheWordsOfTheNodesRead) {
  (void)capture_graph();
  const Report report = check(snapshot_of(read_capturing_stream(api_, stream_).nodes));
  EXPECT_EQ(report.summary.references, 3U);
  EXPECT_EQ(report.summary.count(Verdict::kRegistered), 1U);
  ASSERT_EQ(report.findings.size(), 2U);
  const Finding& word = report.findings[0];
  EXPECT_EQ(word.verdict, Verdict::kUnregistered);
  EXPECT_EQ(word.node, 1U);
  EXPECT_EQ(word.kernel, "scale(float*, float*)");
  EXPECT_EQ(word.param, 1U);
  EXPECT_EQ(word.address, kWorkspace + 8);
  EXPECT_EQ(word.owner, "workspace");
  const Finding& memset = report.findings[1];
  EXPECT_EQ(memset.verdict, Verdict::kUnregistered);
  EXPECT_EQ(memset.node, 2U);
  EXPECT_EQ(memset.node_type, NodeType::kMemset);
  EXPECT_EQ(memset.address, kWorkspace + 64);
}

// The snapshot says which backend read the graph, and a snapshot without the key still reads.
TEST_F(CaptureReaderTest, TheSnapshotSaysWhichBackendReadTheGraph) {
  (void)capture_graph();
  const Snapshot snapshot = snapshot_of(read_capturing_stream(api_, stream_).nodes);
  const std::string json = to_json(snapshot);
  EXPECT_THAT(json, HasSubstr("\"reader\": \"cuda-graph\""));
  EXPECT_EQ(parse_snapshot(json), snapshot);
  Snapshot unsaid = snapshot;
  unsaid.graphs[0].reader.clear();
  const std::string old_form = to_json(unsaid);
  EXPECT_THAT(old_form, ::testing::Not(HasSubstr("\"reader\"")));
  EXPECT_EQ(parse_snapshot(old_form).graphs[0].reader, "");
}

TEST_F(CaptureReaderTest, AStreamThatIsNotCapturingIsAnError) {
  try {
    (void)read_capturing_stream(api_, stream_);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("not capturing"));
    EXPECT_THAT(error.what(), HasSubstr("before its capture ends"));
  }
}

TEST_F(CaptureReaderTest, AFailingCaptureQueryNamesTheCall) {
  (void)capture_graph();
  api_.fail["cu_stream_get_capture_info"] = CUDA_ERROR_INVALID_HANDLE;
  try {
    (void)read_capturing_stream(api_, stream_);
    FAIL() << "expected an error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("cuStreamGetCaptureInfo failed with "
                                        "CUDA_ERROR_INVALID_HANDLE"));
  }
}

// An unreadable kernel stays a kernel without arguments; a conditional's bodies are unknown
// outside a CUPTI subscription. Both are listed for the watch to say so.
TEST_F(CaptureReaderTest, ListsUnreadableKernelsAndConditionalsWithoutBodies) {
  CUgraph graph = capture_graph();
  std::array<void*, 2> broken_args{&weight_word_, nullptr};
  api_.add_node(graph, kernel_node(5, scale_, broken_args.data()));
  FakeNode conditional;
  conditional.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
  conditional.id = 6;
  api_.add_node(graph, conditional);
  const ReadGraph read = read_capturing_stream(api_, stream_);
  ASSERT_EQ(read.nodes.size(), 5U);
  EXPECT_TRUE(read.nodes[3].params.empty());
  ASSERT_EQ(read.unreadable.size(), 1U);
  EXPECT_EQ(read.unreadable[0].id, 5U);
  EXPECT_EQ(read.unreadable[0].kernel, "scale(float*, float*)");
  EXPECT_THAT(read.unreadable[0].cause, HasSubstr("kernelParams[1] is null"));
  EXPECT_THAT(read.conditionals_without_bodies, ElementsAre(6U));
}

TEST_F(CaptureReaderTest, ReadsAGraphByHandle) {
  CUgraph graph = capture_graph();
  const ReadGraph read = read_graph_nodes(api_, graph);
  EXPECT_EQ(read.capture_id, 0U);
  ASSERT_EQ(read.nodes.size(), 3U);
  EXPECT_EQ(read.nodes[0].params.size(), 2U);
  EXPECT_EQ(api_.calls["cu_stream_get_capture_info"], 0);
}

}  // namespace
}  // namespace graphcheck::cupti
