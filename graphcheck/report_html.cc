// `Report` (and optionally its snapshot) to one self-contained HTML page. The page itself
// (markup, CSS, scripts) lives in report_html/ and is embedded at build time
// (cmake/GraphcheckEmbedText.cmake); this file fills it with the data as JSON.
//
// The page is streamed: the data is written piece by piece (one span, allocation or
// reference at a time) through a buffered writer, never built as a JSON tree or as one
// string, so that memory stays the snapshot, the report and a buffer, whatever the size of the
// graph (docs/report-format.md, "HTML report": the figures). The data block's layout:
//   {"report": <the JSON report>, "snapshot": null | <page_snapshot.h>,
//    "epochs": [{"epoch": label, "report": <JSON report>} | {"epoch": label, "error": text}
//               | {"epoch": label, "skipped": text}],
//    "context": {"subject": text, "header": [line, ...]}}
// `epochs` holds the checker's report of every other epoch of the snapshot against the
// report's baseline, each checked, written and freed before the next. The navigation block
// (HtmlNavigation) is a JSON script of its own near the top, padded to a fixed size.
#include <graphcheck/checker.h>
#include <graphcheck/error.h>
#include <graphcheck/report_html.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "graphcheck/detail/page_snapshot.h"
#include "graphcheck/detail/page_stream.h"
#include "graphcheck/detail/report_stream.h"
#include "graphcheck/report_html_assets.h"

namespace graphcheck {
namespace {

namespace assets = detail::report_html_assets;
using detail::PageStream;

// Markers in page.html, in this order: the navigation and the data go inside JSON <script>
// blocks, the scripts inside one <script>.
constexpr std::array<std::string_view, 3> kMarkers = {"@GRAPHCHECK_NAV@", "@GRAPHCHECK_DATA@",
                                                      "/*@GRAPHCHECK_SCRIPTS@*/"};

// The other epochs a page carries at most: a server that reloads its weights every few
// minutes makes hundreds of epochs, and each page would check them all again.
constexpr std::size_t kMaxOtherEpochs = 16;

// page.html's text and where each marker begins.
struct Template {
  std::string text;
  std::array<std::size_t, kMarkers.size()> at{};
};

Template page_template() {
  Template page;
  for (std::string_view chunk : assets::kPage) {
    page.text += chunk;
  }
  std::size_t from = 0;
  for (std::size_t i = 0; i < kMarkers.size(); ++i) {
    page.at[i] = page.text.find(kMarkers[i], from);
    if (page.at[i] == std::string::npos) {
      throw Error("to_html: the embedded page template lacks its markers; rebuild graphcheck");
    }
    from = page.at[i] + kMarkers[i].size();
  }
  return page;
}

void write_scripts(PageStream& out) {
  const std::array<std::span<const std::string_view>, 12> scripts = {
      assets::kFormatJs,    assets::kNamesJs,    assets::kStateJs,   assets::kSummaryJs,
      assets::kCompareJs,   assets::kFindingsJs, assets::kExportJs,  assets::kMapAxisJs,
      assets::kMapLayoutJs, assets::kMapDrawJs,  assets::kMapPageJs, assets::kMainJs};
  for (std::span<const std::string_view> script : scripts) {
    for (std::string_view chunk : script) {
      out.raw(chunk);
    }
  }
}

// {"index":...,"previous":...,"next":...} padded with spaces to kHtmlNavigationBytes, or
// `null` without navigation.
std::string navigation_block(const std::optional<HtmlNavigation>& navigation) {
  if (!navigation) {
    return "null";
  }
  std::ostringstream json;
  PageStream stream(json);
  stream.raw("{\"index\":");
  stream.json_string(navigation->index);
  stream.raw(",\"previous\":");
  stream.json_string(navigation->previous);
  stream.raw(",\"next\":");
  stream.json_string(navigation->next);
  stream.put('}');
  stream.finish();
  std::string block = std::move(json).str();
  if (block.size() > kHtmlNavigationBytes) {
    throw Error("to_html: the navigation links take " + std::to_string(block.size()) +
                " bytes, more than the " + std::to_string(kHtmlNavigationBytes) +
                " their block holds; use shorter (relative) hrefs");
  }
  block.resize(kHtmlNavigationBytes, ' ');
  return block;
}

// The epochs whose reports the page embeds: every one but the checked epoch, at most
// kMaxOtherEpochs: the baseline, then the latest before the checked one, then after it.
std::vector<const Epoch*> other_epochs(const Snapshot& snapshot, const Report& report) {
  std::vector<const Epoch*> out;
  std::vector<const Epoch*> before;
  std::vector<const Epoch*> after;
  bool seen_checked = false;
  for (const Epoch& epoch : snapshot.epochs) {
    if (epoch.label == report.epoch) {
      seen_checked = true;
    } else if (epoch.label == report.baseline) {
      out.push_back(&epoch);
    } else {
      (seen_checked ? after : before).push_back(&epoch);
    }
  }
  while (!before.empty() && out.size() < kMaxOtherEpochs) {
    out.push_back(before.back());
    before.pop_back();
  }
  for (const Epoch* epoch : after) {
    if (out.size() < kMaxOtherEpochs) {
      out.push_back(epoch);
    }
  }
  return out;
}

// One check per other epoch, written and freed before the next (the file comment).
void write_other_epochs(PageStream& out, const Snapshot& snapshot, const Report& report,
                        const HtmlOptions& options) {
  const std::vector<const Epoch*> epochs = other_epochs(snapshot, report);
  std::uint64_t carried = 0;  // bytes of the reports written so far
  bool first = true;
  for (const Epoch& epoch : snapshot.epochs) {
    if (epoch.label == report.epoch) {
      continue;
    }
    out.raw(first ? "{\"epoch\":" : ",{\"epoch\":");
    first = false;
    out.json_string(epoch.label);
    if (std::find(epochs.begin(), epochs.end(), &epoch) == epochs.end()) {
      out.raw(",\"skipped\":");
      out.json_string("the page carries the reports of " + std::to_string(kMaxOtherEpochs) +
                      " other epochs at most: graphcheck check --epoch checks this one");
      out.put('}');
      continue;
    }
    if (carried >= options.other_epoch_bytes) {
      out.raw(",\"skipped\":");
      out.json_string("the page carries " + std::to_string(options.other_epoch_bytes) +
                      " bytes of other epochs' reports at most: graphcheck check --epoch checks "
                      "this one");
      out.put('}');
      continue;
    }
    CheckOptions check_options;
    check_options.epoch = epoch.label;
    check_options.baseline = report.baseline;
    check_options.allow = options.allow;
    check_options.stale_allow = report.stale_allow_policy;
    try {
      const Report other = check(snapshot, check_options);
      out.raw(",\"report\":");
      const std::uint64_t before = out.written();
      detail::stream_report_json(other, [&out](std::string_view piece) { out.script_json(piece); });
      carried += out.written() - before;
    } catch (const Error& error) {
      // Findings are data: an epoch the checker refuses is said on the page, not thrown.
      out.raw(",\"error\":");
      out.json_string(error.what());
    }
    out.put('}');
  }
}

void write_context(PageStream& out, const HtmlOptions& options) {
  out.raw("{\"subject\":");
  out.json_string(options.subject);
  out.raw(",\"header\":[");
  for (std::size_t i = 0; i < options.header.size(); ++i) {
    if (i > 0) {
      out.put(',');
    }
    out.json_string(options.header[i]);
  }
  out.raw("]}");
}

}  // namespace

void write_html(std::ostream& out, const Report& report, const Snapshot* snapshot,
                const HtmlOptions& options) {
  if (snapshot != nullptr) {
    detail::require_capture_epochs(*snapshot);
  }
  const std::string navigation = navigation_block(options.navigation);
  const Template page = page_template();
  const std::string_view text(page.text);
  PageStream stream(out);
  stream.raw(text.substr(0, page.at[0]));
  stream.script_json(navigation);
  std::size_t next = page.at[0] + kMarkers[0].size();
  stream.raw(text.substr(next, page.at[1] - next));
  stream.raw("{\"report\":");
  // Names may hold any bytes: bad UTF-8 is U+FFFD in the JSON report, as in the snapshot.
  detail::stream_report_json(report,
                             [&stream](std::string_view piece) { stream.script_json(piece); });
  stream.raw(",\"snapshot\":");
  if (snapshot != nullptr) {
    detail::write_page_snapshot(stream, *snapshot, report);
  } else {
    stream.raw("null");
  }
  stream.raw(",\"epochs\":[");
  if (snapshot != nullptr && options.other_epochs) {
    write_other_epochs(stream, *snapshot, report, options);
  }
  stream.raw("],\"context\":");
  write_context(stream, options);
  stream.put('}');
  next = page.at[1] + kMarkers[1].size();
  stream.raw(text.substr(next, page.at[2] - next));
  write_scripts(stream);
  stream.raw(text.substr(page.at[2] + kMarkers[2].size()));
  stream.finish();
}

std::string to_html(const Report& report, const Snapshot* snapshot, const HtmlOptions& options) {
  std::ostringstream out;
  write_html(out, report, snapshot, options);
  return std::move(out).str();
}

}  // namespace graphcheck
