#include "graphcheck/detail/json_access.h"

#include <graphcheck/error.h>

#include <algorithm>
#include <string>

namespace graphcheck::detail {
namespace {

// The length of the well-formed UTF-8 sequence at `text[i]` (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), or 0 if the bytes there do not form one.
std::size_t utf8_sequence_length(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[i + k]); };
  const unsigned char lead = byte(0);
  if (lead < 0x80) {
    return 1;
  }
  std::size_t length = 0;
  unsigned char low = 0x80;  // bounds of the second byte, tighter after some lead bytes
  unsigned char high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    low = lead == 0xe0 ? 0xa0 : 0x80;
    high = lead == 0xed ? 0x9f : 0xbf;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    low = lead == 0xf0 ? 0x90 : 0x80;
    high = lead == 0xf4 ? 0x8f : 0xbf;
  } else {
    return 0;
  }
  if (i + length > text.size() || byte(1) < low || byte(1) > high) {
    return 0;
  }
  for (std::size_t k = 2; k < length; ++k) {
    if ((byte(k) & 0xc0U) != 0x80U) {
      return 0;
    }
  }
  return length;
}

// nlohmann's messages quote the token that failed, which may hold any bytes of the input.
// An error message must stay one printable line, so control bytes become spaces and bytes
// that do not form valid UTF-8 become '?'. Valid multi-byte sequences are kept.
std::string one_printable_line(std::string_view text, std::size_t max_chars) {
  std::string out;
  out.reserve(std::min(text.size(), max_chars + 3));
  std::size_t i = 0;
  while (i < text.size() && out.size() < max_chars) {
    const auto byte = static_cast<unsigned char>(text[i]);
    const std::size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      out += '?';
      ++i;
    } else if (length == 1) {
      out += (byte < 0x20 || byte == 0x7f) ? ' ' : static_cast<char>(byte);
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  if (i < text.size()) {
    out += "...";
  }
  return out;
}

// Appends compact JSON for `value` until `out` exceeds `limit`. Every nesting level writes
// at least one character before it recurses, so the depth is bounded by `limit`.
void append_limited(const nlohmann::json& value, std::string& out, std::size_t limit) {
  if (out.size() > limit) {
    return;
  }
  if (value.is_array()) {
    out += '[';
    bool first = true;
    for (const auto& element : value) {
      if (out.size() > limit) {
        return;
      }
      if (!first) {
        out += ',';
      }
      first = false;
      append_limited(element, out, limit);
    }
    out += ']';
  } else if (value.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, member] : value.items()) {
      if (out.size() > limit) {
        return;
      }
      if (!first) {
        out += ',';
      }
      first = false;
      out += nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      out += ':';
      append_limited(member, out, limit);
    }
    out += '}';
  } else {
    out += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

}  // namespace

bool is_valid_utf8(std::string_view text) {
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t length = utf8_sequence_length(text, i);
    if (length == 0) {
      return false;
    }
    i += length;
  }
  return true;
}

void append_json_string(std::string& out, std::string_view text) {
  constexpr std::string_view kHex = "0123456789abcdef";
  out += '"';
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (byte < 0x20) {
          out += "\\u00";
          out += kHex[byte >> 4U];
          out += kHex[byte & 0xfU];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

Error json_syntax_error(std::string_view source, const nlohmann::json::exception& error,
                        std::size_t byte) {
  constexpr std::size_t kMaxMessage = 300;
  // "[json.exception.parse_error.101] parse error at line 1, column 4: syntax error ..."
  std::string message = error.what();
  if (const auto bracket = message.find("] ");
      message.starts_with("[json.") && bracket != std::string::npos) {
    message.erase(0, bracket + 2);
  }
  const std::string where = " (byte " + std::to_string(byte) + ")";
  const auto column = message.find("column ");
  const auto colon = column == std::string::npos ? column : message.find(':', column);
  if (colon != std::string::npos) {
    message.insert(colon, where);
  } else {
    message += where;
  }
  return Error(std::string(source) +
               ": not valid JSON: " + one_printable_line(message, kMaxMessage));
}

Error json_depth_error(std::string_view source, std::string_view path, std::size_t level) {
  return Error(field_prefix(source, path) + "expected arrays and objects nested at most " +
               std::to_string(kMaxJsonDepth) + " levels deep, found level " +
               std::to_string(level));
}

void require_no_nul(std::string_view text, std::string_view source) {
  const std::size_t nul = text.find('\0');
  if (nul == std::string_view::npos) {
    return;
  }
  const std::string_view before = text.substr(0, nul);
  const std::size_t line =
      1 + static_cast<std::size_t>(std::count(before.begin(), before.end(), '\n'));
  const std::size_t line_start = before.rfind('\n');
  const std::size_t column = nul - (line_start == std::string_view::npos ? 0 : line_start + 1) + 1;
  throw Error(std::string(source) + ": not valid JSON: a NUL byte at line " + std::to_string(line) +
              ", column " + std::to_string(column) + " (byte " + std::to_string(nul + 1) +
              "), which JSON text never holds (a string writes it \\u0000): is the file "
              "damaged or padded?");
}

nlohmann::json parse_json_document(std::string_view text, std::string_view source) {
  require_no_nul(text, source);
  // `depth` counts the containers around the one that opens; refusing it there bounds the
  // parser's stack of open containers.
  const nlohmann::json::parser_callback_t limit_depth =
      [source](int depth, nlohmann::json::parse_event_t event, const nlohmann::json& /*value*/) {
        if ((event == nlohmann::json::parse_event_t::object_start ||
             event == nlohmann::json::parse_event_t::array_start) &&
            static_cast<std::size_t>(depth) >= kMaxJsonDepth) {
          throw Error(std::string(source) + ": not valid JSON: arrays and objects nested deeper " +
                      "than " + std::to_string(kMaxJsonDepth) + " levels");
        }
        return true;
      };
  try {
    return nlohmann::json::parse(text.begin(), text.end(), limit_depth);
  } catch (const nlohmann::json::parse_error& error) {
    throw json_syntax_error(source, error, error.byte);
  } catch (const nlohmann::json::exception& error) {
    // Out-of-range numbers ("1e999") are reported as out_of_range, not parse_error.
    constexpr std::size_t kMaxMessage = 300;
    std::string message = error.what();
    if (const auto bracket = message.find("] ");
        message.starts_with("[json.") && bracket != std::string::npos) {
      message.erase(0, bracket + 2);
    }
    throw Error(std::string(source) +
                ": not valid JSON: " + one_printable_line(message, kMaxMessage));
  }
}

void ValueCapture::add(nlohmann::json value, bool container) {
  // Stored only inside a stored container and while the budget lasts: then `used_` is the
  // length of the stored value's compact text without its closing brackets.
  nlohmann::json* parent = kept_.empty() ? nullptr : kept_.back();
  const bool stored = kept_.size() == depth_ - (container ? 1 : 0) && used_ <= budget_;
  if (!stored) {
    return;
  }
  const bool first = parent->empty();
  used_ += first ? 0 : 1;  // ','
  nlohmann::json* slot = nullptr;
  if (parent->is_object()) {
    used_ +=
        nlohmann::json(key_).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size() +
        1;  // "key":
    slot = &(*parent)[key_];
    *slot = std::move(value);
  } else {
    parent->push_back(std::move(value));
    slot = &parent->back();
  }
  if (container) {
    used_ += 1;  // '[' or '{'
    kept_.push_back(slot);
  } else {
    used_ += slot->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).size();
  }
}

void ValueCapture::open(bool object) {
  nlohmann::json empty = object ? nlohmann::json::object() : nlohmann::json::array();
  if (depth_++ == 0) {
    *root_ = std::move(empty);
    kept_.push_back(root_.get());
    used_ = 1;
    return;
  }
  add(std::move(empty), true);
}

void ValueCapture::key(std::string key) { key_ = std::move(key); }

void ValueCapture::scalar(nlohmann::json value) { add(std::move(value), false); }

bool ValueCapture::close() {
  if (kept_.size() == depth_) {
    kept_.pop_back();
    used_ += 1;  // ']' or '}'
  }
  return --depth_ == 0;
}

std::string describe_json(const nlohmann::json& value, std::size_t max_chars) {
  std::string out;
  append_limited(value, out, max_chars);
  if (out.size() <= max_chars) {
    return out;
  }
  // Cut on a character boundary: never leave half a UTF-8 sequence before the "...".
  std::size_t cut = max_chars;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0U) == 0x80U) {
    --cut;
  }
  out.resize(cut);
  out += "...";
  return out;
}

std::string field_prefix(std::string_view source, std::string_view path) {
  std::string prefix(source);
  prefix += ": ";
  prefix += path.empty() ? std::string_view("top level") : path;
  prefix += ": ";
  return prefix;
}

std::string member_path(std::string_view path, std::string_view key) {
  std::string result(path);
  if (!result.empty()) {
    result += '.';
  }
  result += key;
  return result;
}

std::string element_path(std::string_view path, std::size_t index) {
  std::string result(path);
  result += '[';
  result += std::to_string(index);
  result += ']';
  return result;
}

JsonField JsonField::required(std::string_view key) const {
  expect_object();
  const auto it = value_->find(key);
  if (it == value_->end()) {
    fail_with("missing required key \"" + std::string(key) + "\"");
  }
  return {*it, member_path(path_, key), source_};
}

std::optional<JsonField> JsonField::optional(std::string_view key) const {
  expect_object();
  const auto it = value_->find(key);
  if (it == value_->end()) {
    return std::nullopt;
  }
  return JsonField(*it, member_path(path_, key), source_);
}

JsonField JsonField::element(std::size_t index) const {
  return {(*value_)[index], element_path(path_, index), source_};
}

void JsonField::expect_object() const {
  if (!value_->is_object()) {
    fail("an object");
  }
}

std::size_t JsonField::array_size() const {
  if (!value_->is_array()) {
    fail("an array");
  }
  return value_->size();
}

std::string JsonField::as_string() const {
  if (!value_->is_string()) {
    fail("a string");
  }
  return value_->get<std::string>();
}

std::string JsonField::as_nonempty_string() const {
  if (!value_->is_string() || value_->get_ref<const std::string&>().empty()) {
    fail("a non-empty string");
  }
  return value_->get<std::string>();
}

std::uint64_t JsonField::as_uint() const {
  if (!value_->is_number_unsigned()) {
    fail("a non-negative integer");
  }
  return value_->get<std::uint64_t>();
}

std::uint64_t JsonField::as_positive() const {
  if (!value_->is_number_unsigned() || value_->get<std::uint64_t>() == 0) {
    fail("a positive integer");
  }
  return value_->get<std::uint64_t>();
}

Address JsonField::as_address() const {
  std::optional<Address> address;
  if (value_->is_string()) {
    address = parse_address(value_->get_ref<const std::string&>());
  }
  if (!address) {
    fail("an address string \"0x\" followed by 1 to 16 hex digits");
  }
  return *address;
}

void JsonField::fail(std::string_view expected) const {
  std::string message("expected ");
  message += expected;
  message += ", found ";
  message += describe_json(*value_);
  fail_with(message);
}

void JsonField::fail_with(std::string_view message) const {
  throw Error(field_prefix(source_, path_) + std::string(message));
}

}  // namespace graphcheck::detail
