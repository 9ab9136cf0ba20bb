// The fuzz targets' corpora, replayed in the unit tier (and under ASan and UBSan in the asan
// build): every committed input, among them each input a campaign found a bug with, must
// still keep every promise its target checks. A broken promise aborts the test binary; the
// input being replayed is printed first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "common/test_paths.h"
#include "tests/fuzz/fuzz_support.h"

namespace graphcheck::fuzz {
namespace {

// The corpus of one target, in name order (a failure reproduces in the same order).
std::vector<std::filesystem::path> corpus(std::string_view target) {
  const std::filesystem::path folder =
      std::filesystem::path(test_paths::data_dir()) / "fuzz" / target;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    if (entry.is_regular_file()) {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

template <typename Target>
std::size_t replay(std::string_view target, Target&& input) {
  const std::vector<std::filesystem::path> files = corpus(target);
  for (const std::filesystem::path& path : files) {
    std::fprintf(stderr, "replaying %s\n", path.string().c_str());
    input(read_bytes(path));
  }
  return files.size();
}

// Each corpus holds its seeds at least (tests/fuzz/README.md), so an emptied or moved folder
// fails instead of passing on nothing.
constexpr std::size_t kLeastInputs = 8;

TEST(FuzzCorpusTest, EverySnapshotInputKeepsItsPromises) {
  EXPECT_GE(replay("snapshot", snapshot_input), kLeastInputs);
}

TEST(FuzzCorpusTest, EveryReportInputKeepsItsPromises) {
  EXPECT_GE(replay("report", report_input), kLeastInputs);
}

TEST(FuzzCorpusTest, EveryAllowlistInputKeepsItsPromises) {
  EXPECT_GE(replay("allowlist", allowlist_input), kLeastInputs);
}

TEST(FuzzCorpusTest, EveryWatchFolderInputKeepsItsPromises) {
  EXPECT_GE(replay("watch", watch_input), kLeastInputs);
}

}  // namespace
}  // namespace graphcheck::fuzz
