// Fuzz target: a watch folder as `graphcheck report DIR` reads it (docs/server.md). The input
// is the folder's index.jsonl and, after a line `#report`, the bytes of the report file
// `r.json` beside it (index lines naming "r.json" reach it). The folder is refused with
// graphcheck::Error (one line), or it is summarized, and then the text summary holds no
// control byte but line breaks, and the JSON summary is JSON whose "findings" is the
// summary's.
#include <graphcheck/error.h>
#include <graphcheck/report.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "graphcheck/cli/watch_summary.h"
#include "tests/fuzz/fuzz_support.h"

namespace graphcheck::fuzz {
namespace {

constexpr std::string_view kReportLine = "\n#report\n";

// The watch folder, in this process's scratch folder.
const std::filesystem::path& folder() {
  static const std::filesystem::path path = [] {
    std::filesystem::path watch = scratch_folder() / "watch";
    std::filesystem::create_directory(watch);
    return watch;
  }();
  return path;
}

}  // namespace

void watch_input(std::string_view bytes) {
  const std::size_t split = bytes.find(kReportLine);
  write_file(folder() / "index.jsonl", bytes.substr(0, split));
  write_file(folder() / "r.json", split == std::string_view::npos
                                      ? std::string_view()
                                      : bytes.substr(split + kReportLine.size()));
  cli::WatchSummary summary;
  try {
    summary = cli::summarize_watch(folder(), StaleAllowPolicy::kFail);
  } catch (const Error& error) {
    require_one_line(error);
    return;
  }
  require_terminal_text(cli::to_text(summary), "the text summary");
  const nlohmann::json json = nlohmann::json::parse(cli::to_json(summary), nullptr, false);
  require(!json.is_discarded(), "the JSON summary is not JSON");
  require(json.value("findings", std::uint64_t{0}) == summary.findings(),
          "the JSON summary's findings differ from the summary's");
}

}  // namespace graphcheck::fuzz
