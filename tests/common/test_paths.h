// Where a test finds the repository's test data and the built `graphcheck` tool. The paths are
// compiled into one generated file (tests/CMakeLists.txt, `graphcheck_test_paths`), not into
// every test's flags, so that a compiler cache shares the tests' objects between clones.
#ifndef GRAPHCHECK_TESTS_COMMON_TEST_PATHS_H_
#define GRAPHCHECK_TESTS_COMMON_TEST_PATHS_H_

namespace graphcheck::test_paths {

/// @brief The absolute path of tests/data in the source tree. Thread-safe; a static string.
[[nodiscard]] const char* data_dir();

/// @brief The absolute path of the built `graphcheck` executable. Thread-safe; a static string.
[[nodiscard]] const char* cli_path();

}  // namespace graphcheck::test_paths

#endif  // GRAPHCHECK_TESTS_COMMON_TEST_PATHS_H_
