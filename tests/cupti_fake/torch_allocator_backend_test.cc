// torch's cudaMallocAsync backend takes no snapshot: the session keeps checking without the
// caching allocator's blocks. Run by CTest with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
// (torch picks its backend when its library loads), in a program of its own.
#include <gmock/gmock.h>
#include <graphcheck/address.h>
#include <graphcheck/epoch.h>
#include <graphcheck/report.h>
#include <graphcheck/snapshot.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/pointer_param.h"
#include "cupti/checker_session.h"
#include "cupti/torch_allocator_snapshot.h"

namespace graphcheck::cupti {
namespace {

using ::testing::HasSubstr;

TEST(TorchAllocatorBackendTest, AnotherBackendAddsNoBlocksAndTheSessionStillChecks) {
  const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  ASSERT_NE(conf, nullptr) << "run with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync";
  ASSERT_THAT(std::string(conf), HasSubstr("cudaMallocAsync"));
  // One kernel reading a live allocation that no span covers: one unregistered finding, which
  // only a session that still checks reports.
  constexpr Address kWorkspace = 0x7f0000000000;
  SessionSources sources;
  sources.allocations = [] {
    return std::vector<Allocation>{{kWorkspace, 4096, "default", 1, "workspace"}};
  };
  sources.graphs = [] {
    return std::vector<GraphRecord>{test_support::one_kernel_graph(1, "gemm", {kWorkspace + 16})};
  };
  CheckerSession session(SessionOptions{}, std::move(sources));
  const std::string why = add_torch_allocator(session);
  EXPECT_THAT(why, HasSubstr("torch's caching-allocator blocks are not added"));
  EXPECT_THAT(why, HasSubstr("cudaMallocAsync"));
  // Before, every check of the session failed with the snapshot's error.
  Report report;
  ASSERT_NO_THROW(report = session.check_now("now"));
  EXPECT_EQ(report.summary.references, 1U);
  ASSERT_EQ(report.findings.size(), 1U);
  EXPECT_EQ(report.findings[0].verdict, Verdict::kUnregistered);
  EXPECT_EQ(report.findings[0].owner, "workspace");
}

}  // namespace
}  // namespace graphcheck::cupti
