#include <graphcheck/address.h>

#include <charconv>

namespace graphcheck {

std::string format_address(Address address) {
  char buffer[2 + 16];
  buffer[0] = '0';
  buffer[1] = 'x';
  const auto result = std::to_chars(buffer + 2, buffer + sizeof(buffer), address, 16);
  return {buffer, result.ptr};
}

std::optional<Address> parse_address(std::string_view text) {
  if (text.size() < 3 || text.size() > 18 || text[0] != '0' || (text[1] != 'x' && text[1] != 'X')) {
    return std::nullopt;
  }
  Address value = 0;
  const char* first = text.data() + 2;
  const char* last = text.data() + text.size();
  const auto result = std::from_chars(first, last, value, 16);
  // from_chars accepts a leading '-' for signed types only; for Address it stops at any
  // non-hex character, so a partial parse means the text had one.
  if (result.ec != std::errc() || result.ptr != last) {
    return std::nullopt;
  }
  return value;
}

}  // namespace graphcheck
