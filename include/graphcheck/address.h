// Device addresses as plain integers, and their text form in snapshots and reports.
#ifndef GRAPHCHECK_ADDRESS_H_
#define GRAPHCHECK_ADDRESS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace graphcheck {

/// @brief A device (or host) virtual address. graphcheck never dereferences one.
using Address = std::uint64_t;

/// @brief Formats `address` as lower-case hex with a `0x` prefix and no padding ("0x7f3a00000000").
/// Thread safety: pure function.
[[nodiscard]] std::string format_address(Address address);

/// @brief Parses "0x..." (hex digits, either case, 1 to 16 digits after the prefix).
/// @return the address, or `std::nullopt` if the text is not of that form.
/// Thread safety: pure function.
[[nodiscard]] std::optional<Address> parse_address(std::string_view text);

}  // namespace graphcheck

#endif  // GRAPHCHECK_ADDRESS_H_
