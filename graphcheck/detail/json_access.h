// Typed reads from a parsed JSON document whose errors name the JSON path of the bad field.
// Private to the snapshot and report readers; nothing here is public API.
#ifndef GRAPHCHECK_DETAIL_JSON_ACCESS_H_
#define GRAPHCHECK_DETAIL_JSON_ACCESS_H_

#include <graphcheck/address.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace graphcheck::detail {

/// @brief How many characters of a found value an error message shows before "...".
inline constexpr std::size_t kFoundChars = 40;

/// @brief Parses `text` as one JSON document.
/// @throws Error `<source>: not valid JSON: <what and where, with the byte position>`.
[[nodiscard]] nlohmann::json parse_json_document(std::string_view text, std::string_view source);

/// @brief `value` as compact JSON text, cut to about `max_chars` characters (a UTF-8 sequence
/// is never split; "..." marks a cut). Bounded work and recursion whatever the nesting depth,
/// so a hostile document cannot overflow the stack through an error message.
[[nodiscard]] std::string describe_json(const nlohmann::json& value,
                                        std::size_t max_chars = kFoundChars);

/// @brief True when `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates,
/// nothing above U+10FFFF): exactly the strings the JSON reader accepts.
[[nodiscard]] bool is_valid_utf8(std::string_view text);

/// @brief Appends `text` as a JSON string literal: quoted, with the quote, the backslash and
/// control characters escaped. `text` must be valid UTF-8 (see `is_valid_utf8`); it is copied as
/// is.
void append_json_string(std::string& out, std::string_view text);

/// @brief A value inside a parsed document together with its JSON path ("graphs[0].nodes[3]").
///
/// Every accessor checks the JSON type first and throws `Error` with one line:
/// `<source>: <path>: expected <what>, found <value>`. The root's path is empty and reads
/// "top level" in messages.
/// Lifetime: refers to the document and to the `source` text, which must outlive it.
/// Thread safety: immutable; safe to share for reading.
class JsonField {
 public:
  JsonField(const nlohmann::json& value, std::string path, std::string_view source)
      : value_(&value), path_(std::move(path)), source_(source) {}

  [[nodiscard]] const nlohmann::json& json() const { return *value_; }
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] std::string_view source() const { return source_; }

  /// The member `key` of this object; throws `missing required key "<key>"` when absent.
  [[nodiscard]] JsonField required(std::string_view key) const;
  /// The member `key` of this object, or nullopt when absent (null is present, not absent).
  [[nodiscard]] std::optional<JsonField> optional(std::string_view key) const;
  /// Element `index` of this array (the caller checks the bound with `array_size`).
  [[nodiscard]] JsonField element(std::size_t index) const;

  /// Throws unless this is an object.
  void expect_object() const;
  /// The number of elements; throws unless this is an array.
  [[nodiscard]] std::size_t array_size() const;

  [[nodiscard]] std::string as_string() const;
  /// A string with at least one character.
  [[nodiscard]] std::string as_nonempty_string() const;
  /// An integer literal >= 0 (no fraction, no exponent, at most 2^64 - 1).
  [[nodiscard]] std::uint64_t as_uint() const;
  /// An integer literal > 0.
  [[nodiscard]] std::uint64_t as_positive() const;
  /// A "0x..." address string (see `parse_address`).
  [[nodiscard]] Address as_address() const;

  /// Throws `<source>: <path>: expected <expected>, found <this value>`.
  [[noreturn]] void fail(std::string_view expected) const;
  /// Throws `<source>: <path>: <message>`.
  [[noreturn]] void fail_with(std::string_view message) const;

 private:
  const nlohmann::json* value_;
  std::string path_;
  std::string_view source_;
};

/// @brief `<source>: <path>: ` (or `<source>: top level: ` for the root), the prefix of every
/// message about a field.
[[nodiscard]] std::string field_prefix(std::string_view source, std::string_view path);

/// @brief Path of member `key` below `path` ("graphs[0]" + "nodes" -> "graphs[0].nodes").
[[nodiscard]] std::string member_path(std::string_view path, std::string_view key);
/// @brief Path of element `index` below `path` ("graphs" + 0 -> "graphs[0]").
[[nodiscard]] std::string element_path(std::string_view path, std::size_t index);

}  // namespace graphcheck::detail

#endif  // GRAPHCHECK_DETAIL_JSON_ACCESS_H_
