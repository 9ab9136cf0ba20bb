// UTF-8 decoding for the two places that need it: text printed on a terminal (`printable`)
// and allowlist files, which must be text (read_allowlist).
#ifndef GRAPHCHECK_DETAIL_UTF8_H_
#define GRAPHCHECK_DETAIL_UTF8_H_

#include <cstddef>
#include <optional>
#include <string_view>

namespace graphcheck::detail {

/// The length (1 to 4) of the well-formed UTF-8 sequence starting at `text[at]` (RFC 3629:
/// no overlong forms, no surrogates, nothing past U+10FFFF), storing its code point in
/// `code`; 0 when the bytes there are not one (`code` is then unspecified).
/// Precondition: at < text.size().
[[nodiscard]] std::size_t utf8_sequence(std::string_view text, std::size_t at, char32_t& code);

/// The offset of the first byte of `text` that is not part of well-formed UTF-8, or nullopt.
[[nodiscard]] std::optional<std::size_t> first_invalid_utf8(std::string_view text);

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_UTF8_H_
