// torch's cudaMallocAsync backend takes no snapshot: the session keeps checking without the
// caching allocator's blocks. Run by CTest with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
// (torch picks its backend when its library loads), in a program of its own.
#include <gmock/gmock.h>
#include <graphcheck/report.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cupti/checker_session.h"
#include "cupti/torch_allocator_snapshot.h"

namespace graphcheck::cupti {
namespace {

using ::testing::HasSubstr;

TEST(TorchAllocatorBackendTest, AnotherBackendAddsNoBlocksAndTheSessionStillChecks) {
  const char* conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  ASSERT_NE(conf, nullptr) << "run with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync";
  ASSERT_THAT(std::string(conf), HasSubstr("cudaMallocAsync"));
  SessionSources sources;
  sources.allocations = [] { return std::vector<Allocation>{}; };
  CheckerSession session(SessionOptions{}, std::move(sources));
  const std::string why = add_torch_allocator(session);
  EXPECT_THAT(why, HasSubstr("torch's caching-allocator blocks are not added"));
  EXPECT_THAT(why, HasSubstr("cudaMallocAsync"));
  // Before, every check of the session failed with the snapshot's error.
  Report report;
  ASSERT_NO_THROW(report = session.check_now("now"));
  EXPECT_TRUE(report.findings.empty());
}

}  // namespace
}  // namespace graphcheck::cupti
