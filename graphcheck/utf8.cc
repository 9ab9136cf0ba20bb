// UTF-8 decoding (detail/utf8.h) and `printable` (report.h): what a terminal is given.
#include "graphcheck/detail/utf8.h"

#include <graphcheck/report.h>

#include <array>
#include <cstdint>
#include <string>

namespace graphcheck {
namespace detail {
namespace {

bool continuation(unsigned char byte) { return (byte & 0xC0U) == 0x80U; }

}  // namespace

std::size_t utf8_sequence(std::string_view text, std::size_t at, char32_t& code) {
  const auto lead = static_cast<unsigned char>(text[at]);
  if (lead < 0x80U) {
    code = lead;
    return 1;
  }
  std::size_t length = 0;
  char32_t min = 0;
  if (lead >= 0xC2U && lead <= 0xDFU) {
    length = 2;
    code = lead & 0x1FU;
    min = 0x80;
  } else if (lead >= 0xE0U && lead <= 0xEFU) {
    length = 3;
    code = lead & 0x0FU;
    min = 0x800;
  } else if (lead >= 0xF0U && lead <= 0xF4U) {
    length = 4;
    code = lead & 0x07U;
    min = 0x10000;
  } else {
    return 0;  // a continuation byte, an overlong lead (C0, C1) or F5..FF
  }
  if (text.size() - at < length) {
    return 0;
  }
  for (std::size_t i = 1; i < length; ++i) {
    const auto byte = static_cast<unsigned char>(text[at + i]);
    if (!continuation(byte)) {
      return 0;
    }
    code = (code << 6U) | (byte & 0x3FU);
  }
  constexpr char32_t kSurrogateFirst = 0xD800;
  constexpr char32_t kSurrogateLast = 0xDFFF;
  constexpr char32_t kMax = 0x10FFFF;
  if (code < min || code > kMax || (code >= kSurrogateFirst && code <= kSurrogateLast)) {
    return 0;
  }
  return length;
}

std::optional<std::size_t> first_invalid_utf8(std::string_view text) {
  char32_t code = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t length = utf8_sequence(text, at, code);
    if (length == 0) {
      return at;
    }
    at += length;
  }
  return std::nullopt;
}

}  // namespace detail

std::string printable(std::string_view text) {
  constexpr std::array<char, 16> kHex = {'0', '1', '2', '3', '4', '5', '6', '7',
                                         '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'};
  constexpr char32_t kDelete = 0x7F;
  constexpr char32_t kC1Last = 0x9F;
  std::string out;
  out.reserve(text.size());
  auto escape_byte = [&out, &kHex](unsigned char byte) {
    out += "\\x";
    out += kHex[byte >> 4U];
    out += kHex[byte & 0x0FU];
  };
  char32_t code = 0;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t length = detail::utf8_sequence(text, at, code);
    if (length == 0) {
      escape_byte(static_cast<unsigned char>(text[at]));
      ++at;
      continue;
    }
    if (code >= 0x20 && code != kDelete && (code < 0x80 || code > kC1Last)) {
      out.append(text.substr(at, length));
    } else if (code == '\n') {
      out += "\\n";
    } else if (code == '\r') {
      out += "\\r";
    } else if (code == '\t') {
      out += "\\t";
    } else if (code == 0) {
      out += "\\0";
    } else {
      // C0, DEL and C1 (U+0080..U+009F: 0x9B alone is a CSI on some terminals): by code point.
      escape_byte(static_cast<unsigned char>(code));
    }
    at += length;
  }
  return out;
}

}  // namespace graphcheck
