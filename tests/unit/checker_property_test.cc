// A property test: random graphs over random objects whose verdicts are known by
// construction, checked in the capture epoch, in a later epoch whose ranges changed
// ("after": rebinding, reuse, frees) and in one that shares the capture's index ("wake":
// the same ranges, new generations). Fixed seed. The generator: checker_property_gen.h.
#include <graphcheck/checker.h>
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "checker_property_gen.h"

namespace graphcheck {
namespace {

using testing_helpers::Expected;
using testing_helpers::Verdicts;
using testing_helpers::World;

void expect_report(const Report& report, const std::vector<Expected>& expected,
                   Verdict Verdicts::*which) {
  ASSERT_EQ(report.summary.references, expected.size());
  std::array<std::uint64_t, kVerdictCount> counts{};
  std::vector<const Expected*> findings;
  for (const Expected& e : expected) {
    ++counts[static_cast<std::size_t>(e.verdicts.*which)];
    if (is_finding(e.verdicts.*which)) {
      findings.push_back(&e);
    }
  }
  EXPECT_EQ(report.summary.counts, counts);
  ASSERT_EQ(report.findings.size(), findings.size());
  for (std::size_t i = 0; i < findings.size(); ++i) {
    const Expected& e = *findings[i];
    const Finding& f = report.findings[i];
    ASSERT_EQ(f.verdict, e.verdicts.*which) << i;
    ASSERT_EQ(f.graph, e.graph) << i;
    ASSERT_EQ(f.node, e.node) << i;
    if (e.param >= 0) {
      ASSERT_EQ(f.param, static_cast<std::uint32_t>(e.param)) << i;
      ASSERT_EQ(f.offset, e.offset) << i;
    } else {
      ASSERT_EQ(f.operand, e.operand) << i;
    }
  }
}

CheckOptions in_epoch(const std::string& label, std::size_t threads) {
  CheckOptions options;
  options.epoch = label;
  options.threads = threads;
  return options;
}

TEST(CheckerPropertyTest, RandomGraphsGetTheirConstructedVerdicts) {
  const World world(20240611);
  const std::vector<Expected>& expected = world.expected();
  ASSERT_GE(expected.size(), 10000U);

  // The same reports whether the graphs are read on the calling thread or on several.
  for (const std::size_t threads : {std::size_t{1}, std::size_t{4}}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    const Report after = check(world.snapshot(), in_epoch("after", threads));
    EXPECT_EQ(after.epoch, "after");
    EXPECT_EQ(after.baseline, "capture");
    expect_report(after, expected, &Verdicts::after);
    // Allowlist use does not depend on the epoch checked.
    EXPECT_EQ(after.stale_allow, std::vector<std::string>{"unused.*"});
    EXPECT_FALSE(after.warnings.empty());  // nested runtime/parameter pairs were referenced

    const Report wake = check(world.snapshot(), in_epoch("", threads));  // the last epoch
    EXPECT_EQ(wake.epoch, "wake");
    expect_report(wake, expected, &Verdicts::wake);
    EXPECT_EQ(wake.stale_allow, std::vector<std::string>{"unused.*"});

    const Report at_capture = check(world.snapshot(), in_epoch("capture", threads));
    expect_report(at_capture, expected, &Verdicts::capture);
    EXPECT_EQ(at_capture.stale_allow, std::vector<std::string>{"unused.*"});
  }
}

}  // namespace
}  // namespace graphcheck
