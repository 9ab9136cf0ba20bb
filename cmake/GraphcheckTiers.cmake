# What the configure step decided about the test tiers, for the table `make test` prints after
# CTest (scripts/tier_table.py). A tier that is not registered leaves no trace in CTest, so each
# place that leaves one out records why here; CTest's own results say what ran.
#
# <build>/graphcheck-tiers.txt, one tab-separated record a line:
#   skipped <tier> <reason>            the tier (or a part of it) is not registered
#   pytest  <ctest test> <junit file>  a CTest test that runs pytest and where its JUnit report goes
# Written anew by every configure of a top-level build with tests; a no-op otherwise.
set(GRAPHCHECK_TIERS_FILE ${PROJECT_BINARY_DIR}/graphcheck-tiers.txt)
if(PROJECT_IS_TOP_LEVEL AND GRAPHCHECK_BUILD_TESTS)
  file(WRITE ${GRAPHCHECK_TIERS_FILE} "")
endif()

# graphcheck_tier_skipped(<tier> <reason>): prints the reason as a STATUS line and records it.
function(graphcheck_tier_skipped tier reason)
  message(STATUS "graphcheck: the ${tier} tier is skipped: ${reason}")
  if(PROJECT_IS_TOP_LEVEL AND GRAPHCHECK_BUILD_TESTS)
    string(REPLACE "\n" " " reason "${reason}")
    file(APPEND ${GRAPHCHECK_TIERS_FILE} "skipped\t${tier}\t${reason}\n")
  endif()
endfunction()

# graphcheck_tier_pytest(<ctest test> <junit file>): the test's pytest writes its JUnit report
# (--junitxml) to <junit file>, where the table reads its passed, failed and skipped tests.
function(graphcheck_tier_pytest test junit)
  if(PROJECT_IS_TOP_LEVEL AND GRAPHCHECK_BUILD_TESTS)
    file(APPEND ${GRAPHCHECK_TIERS_FILE} "pytest\t${test}\t${junit}\n")
  endif()
endfunction()
