// A buffered writer for the HTML report's page: text goes to a std::ostream in large blocks,
// and data goes inside a <script> block as JSON in which no `<` appears (report_html.cc).
#ifndef GRAPHCHECK_DETAIL_PAGE_STREAM_H_
#define GRAPHCHECK_DETAIL_PAGE_STREAM_H_

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

namespace graphcheck::detail {

/// Writes to `out` through a buffer of `kBlock` bytes, so that the thousands of small
/// pieces of a page cost one write per block. Memory: the buffer, whatever the page's size.
/// Thread safety: one writer per thread. Lifetime: `out` must outlive the writer; the
/// destructor does not flush (a failed page must not look finished): call `finish`.
class PageStream {
 public:
  static constexpr std::size_t kBlock = std::size_t{1} << 20U;

  explicit PageStream(std::ostream& out);

  /// Text as it is (the page's markup and scripts).
  void raw(std::string_view text);
  /// JSON text inside the data block: every `<` becomes `\u003c` (the same inside a JSON
  /// string; JSON has no `<` elsewhere), so no `</script>` or `<!--` can end or hide it.
  void script_json(std::string_view json);
  /// `text` as a JSON string literal for the data block: quotes, backslashes and control
  /// characters escaped, `<` as `\u003c`, bytes that are not UTF-8 as U+FFFD (as the JSON
  /// report writes them).
  void json_string(std::string_view text);
  /// A number as JSON.
  void number(std::uint64_t value);
  void number(std::int64_t value);
  void put(char c) {
    buffer_ += c;
    flush_if_full();
  }

  /// Writes what is buffered and flushes `out`. @throws Error when the stream failed.
  void finish();
  /// Bytes written so far (buffered ones included).
  [[nodiscard]] std::uint64_t written() const { return flushed_ + buffer_.size(); }

 private:
  void flush_if_full() {
    if (buffer_.size() >= kBlock) {
      drain();
    }
  }
  void drain();

  std::ostream& out_;
  std::string buffer_;
  std::uint64_t flushed_ = 0;
};

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_PAGE_STREAM_H_
