// The HTML page's buffered writer (page_stream.h).
#include "graphcheck/detail/page_stream.h"

#include <graphcheck/error.h>

#include <array>
#include <charconv>
#include <system_error>

#include "graphcheck/detail/utf8.h"

namespace graphcheck::detail {
namespace {

constexpr std::string_view kEscapedLess = "\\u003c";
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

}  // namespace

PageStream::PageStream(std::ostream& out) : out_(out) { buffer_.reserve(kBlock + 4096); }

void PageStream::drain() {
  out_.write(buffer_.data(), static_cast<std::streamsize>(buffer_.size()));
  flushed_ += buffer_.size();
  buffer_.clear();
}

void PageStream::raw(std::string_view text) {
  buffer_ += text;
  flush_if_full();
}

void PageStream::script_json(std::string_view json) {
  while (!json.empty()) {
    const std::size_t less = json.find('<');
    buffer_ += json.substr(0, less);
    if (less == std::string_view::npos) {
      break;
    }
    buffer_ += kEscapedLess;
    json.remove_prefix(less + 1);
    flush_if_full();
  }
  flush_if_full();
}

void PageStream::json_string(std::string_view text) {
  constexpr std::array<char, 16> kHex = {'0', '1', '2', '3', '4', '5', '6', '7',
                                         '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
  buffer_ += '"';
  char32_t code = 0;
  for (std::size_t at = 0; at < text.size();) {
    const char c = text[at];
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x80U) {
      const std::size_t length = utf8_sequence(text, at, code);
      if (length == 0) {
        buffer_ += kReplacement;
        ++at;
      } else {
        buffer_.append(text.substr(at, length));
        at += length;
      }
      continue;
    }
    ++at;
    if (c == '"' || c == '\\') {
      buffer_ += '\\';
      buffer_ += c;
    } else if (c == '<') {
      buffer_ += kEscapedLess;
    } else if (byte < 0x20U) {
      buffer_ += "\\u00";
      buffer_ += kHex[byte >> 4U];
      buffer_ += kHex[byte & 0x0FU];
    } else {
      buffer_ += c;
    }
  }
  buffer_ += '"';
  flush_if_full();
}

void PageStream::number(std::uint64_t value) {
  std::array<char, 24> digits{};
  const auto [end, error] = std::to_chars(digits.begin(), digits.end(), value);
  buffer_.append(digits.data(), end);
  (void)error;  // 24 characters hold any 64-bit number
}

void PageStream::number(std::int64_t value) {
  std::array<char, 24> digits{};
  const auto [end, error] = std::to_chars(digits.begin(), digits.end(), value);
  buffer_.append(digits.data(), end);
  (void)error;
}

void PageStream::finish() {
  drain();
  out_.flush();
  if (!out_) {
    throw Error("to_html: writing the page failed");
  }
}

}  // namespace graphcheck::detail
