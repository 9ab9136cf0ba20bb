// Typed reads from a parsed JSON document whose errors name the JSON path of the bad field.
// Private to the snapshot and report readers; nothing here is public API.
#ifndef GRAPHCHECK_DETAIL_JSON_ACCESS_H_
#define GRAPHCHECK_DETAIL_JSON_ACCESS_H_

#include <graphcheck/address.h>
#include <graphcheck/error.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace graphcheck::detail {

/// @brief How many characters of a found value an error message shows before "...".
inline constexpr std::size_t kFoundChars = 40;

/// @brief The deepest nesting of arrays and objects a document may have (the root is level
/// 1). A snapshot's deepest legal content, 64 levels of conditional bodies, sits near level
/// 265; the bound lets a reader refuse `[[[[...` as soon as it passes this level, before the
/// nesting costs memory or time.
inline constexpr std::size_t kMaxJsonDepth = 512;

/// @brief Parses `text` as one JSON document into a DOM (for small documents: reports).
/// @throws Error `<source>: not valid JSON: <what and where, with the byte position>`, also
/// for nesting deeper than `kMaxJsonDepth`, refused when the reader reaches it.
[[nodiscard]] nlohmann::json parse_json_document(std::string_view text, std::string_view source);

/// @brief Refuses text with a NUL byte: JSON holds none (a string escapes it as \u0000), and
/// the JSON lexer takes one for the end of the input: a document followed by a NUL and
/// garbage was accepted, and a file of NULs was "unexpected end of input" at byte 1.
/// @throws Error `<source>: not valid JSON: a NUL byte at line L, column C (byte N)...`.
void require_no_nul(std::string_view text, std::string_view source);

/// @brief The one-line error for a syntax error that the JSON lexer or parser reported:
/// `<source>: not valid JSON: <parser message> (byte <byte>)`, printable whatever the input.
[[nodiscard]] Error json_syntax_error(std::string_view source,
                                      const nlohmann::json::exception& error, std::size_t byte);

/// @brief The one-line error for an array or object opened at `level` > `kMaxJsonDepth`
/// inside the value at `path`: `<source>: <path>: expected arrays and objects nested at most
/// 512 levels deep, found level <level>`.
[[nodiscard]] Error json_depth_error(std::string_view source, std::string_view path,
                                     std::size_t level);

/// @brief A copy of one JSON value fed by SAX events (a streaming reader's view of a value it
/// does not read but must name in an error). Only the part whose compact text fits in
/// `budget` characters (plus one, so that `describe_json` still marks the cut) is stored; the
/// rest is only counted, so a huge or deeply nested value costs no memory.
///
/// Usage: `open` (the value's own array or object), then the events inside it, until `close`
/// returns true; then `take`. Keys of a cut object are kept in document order up to the cut.
/// Thread safety: none; one reader owns it.
class ValueCapture {
 public:
  explicit ValueCapture(std::size_t budget = kFoundChars)
      : root_(std::make_unique<nlohmann::json>()), budget_(budget) {}

  /// An array or object opens (the first call opens the captured value itself).
  void open(bool object);
  /// The key of the next member of the innermost open object.
  void key(std::string key);
  /// A scalar inside the captured value.
  void scalar(nlohmann::json value);
  /// The innermost open array or object closes; true when it was the captured value itself.
  bool close();
  /// The captured value (cut where the budget ran out).
  [[nodiscard]] nlohmann::json take() { return std::move(*root_); }

 private:
  void add(nlohmann::json value, bool container);

  std::unique_ptr<nlohmann::json> root_;  // on the heap: `kept_` points into it
  std::vector<nlohmann::json*> kept_;     // the open containers that are stored, outermost first
  std::size_t depth_ = 0;                 // open containers, stored or not
  std::size_t used_ = 0;                  // compact characters stored so far
  std::size_t budget_;
  std::string key_;
};

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
