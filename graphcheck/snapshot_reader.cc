// Snapshot JSON (format version 1) to `Snapshot`, streamed: a SAX handler builds the snapshot
// while the lexer reads, so that
// - unknown content is skipped without being stored (the format ignores unknown keys),
// - nesting deeper than `kMaxJsonDepth` is refused as soon as the reader reaches it,
// - no DOM of the document is built: memory is the text, the snapshot, and one small JSON
//   object per open record.
//
// How: records made of scalars only (producer, span, allocation, kernel param, kernel operand,
// extent) are collected as small JSON objects of their known members and typed by
// snapshot_records.h, so that every error names the JSON path of the bad field. Records that
// hold lists (top level, epoch, graph, node, conditional body) keep their scalar members the
// same way and receive each list member when it ends; a list keeps the first error among its
// elements and skips the elements after it. A record is typed when it closes, in the fixed
// order of its reader, so the error reported for a document with several problems does not
// depend on the order of its keys. The top level is typed after the whole document has been
// read: a syntax error anywhere wins, then "format" and "version" come first. Then the
// cross-field invariants (snapshot_validate.h).
#include <fcntl.h>
#include <graphcheck/error.h>
#include <graphcheck/snapshot.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "graphcheck/detail/json_access.h"
#include "graphcheck/detail/posix_file.h"
#include "graphcheck/detail/snapshot_records.h"
#include "graphcheck/detail/snapshot_validate.h"

namespace graphcheck {
namespace {

using detail::JsonField;
using detail::SnapshotKind;
using Json = nlohmann::json;

// One open array or object of the document.
struct Frame {
  enum class Role : std::uint8_t {
    kRecord,  // an object the format defines
    kList,    // an array the format defines
    kSkip,    // an unknown value (nothing kept), or a value of the wrong type (a short copy
              // kept for the error message)
  };
  Role role = Role::kSkip;
  SnapshotKind kind = SnapshotKind::kUnknown;
  std::string path;
  std::size_t nesting = 0;  // child-graph level: 0 for a graph's nodes, +1 below each node
  // kRecord: the known scalar members (a finished list member reads as []), the member whose
  // value comes next, the finished list members. kList: `key` is the list's member name.
  Json fields;
  std::string key;
  detail::RecordLists lists;
  // kList: the elements so far (`count` of them seen, good or bad).
  detail::SnapshotList list;
  std::size_t count = 0;
  // kSkip: the open containers of the skipped value, and its copy where one is kept.
  std::size_t depth = 0;
  std::optional<detail::ValueCapture> capture;
};

// The SAX handler (nlohmann::json_sax): returning false stops the parse, after recording why.
class SnapshotBuilder {
 public:
  explicit SnapshotBuilder(std::string_view source) : source_(source) {}

  // Scalars inside an unknown value are dropped before they become JSON values.
  bool null() { return ignoring() || value(Json(nullptr)); }
  bool boolean(bool flag) { return ignoring() || value(Json(flag)); }
  bool number_integer(Json::number_integer_t number) { return ignoring() || value(Json(number)); }
  bool number_unsigned(Json::number_unsigned_t number) { return ignoring() || value(Json(number)); }
  bool number_float(Json::number_float_t number, const Json::string_t& /*text*/) {
    return ignoring() || value(Json(number));
  }
  bool string(Json::string_t& text) { return ignoring() || value(Json(std::move(text))); }
  bool binary(Json::binary_t& /*bytes*/) { return ignoring() || value(Json()); }  // not in JSON
  bool start_object(std::size_t /*size*/) { return open(true); }
  bool start_array(std::size_t /*size*/) { return open(false); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(Json::string_t& name) {
    Frame& top = frames_.back();  // a record or a skipped object
    if (top.role == Frame::Role::kRecord) {
      top.key = std::move(name);
    } else if (top.capture) {
      top.capture->key(std::move(name));
    }
    return true;
  }

  bool parse_error(std::size_t byte, const std::string& /*token*/, const Json::exception& error) {
    stop_ = detail::json_syntax_error(source_, error, byte);
    return false;
  }

  // Why the parse stopped (after sax_parse returned false).
  [[nodiscard]] Error stop_reason() const {
    return stop_.value_or(Error(std::string(source_) + ": not valid JSON"));
  }

  // Types the top level once the whole document has been read.
  Snapshot finish() {
    if (!root_) {
      JsonField(root_value_, "", source_).fail("an object");
    }
    return detail::read_root(JsonField(root_->fields, "", source_), root_->lists);
  }

 private:
  bool skipping() const { return !frames_.empty() && frames_.back().role == Frame::Role::kSkip; }
  bool ignoring() const { return skipping() && !frames_.back().capture; }

  // Where the next value goes (kUnknown: it is skipped); counts the elements of a list.
  SnapshotKind claim() {
    if (frames_.empty()) {
      return SnapshotKind::kRoot;
    }
    Frame& top = frames_.back();
    if (top.role == Frame::Role::kRecord) {
      return detail::member_kind(top.kind, top.key);
    }
    ++top.count;
    if (top.list.error) {
      return SnapshotKind::kUnknown;
    }
    if (top.kind == SnapshotKind::kNodes && top.nesting > detail::kMaxGraphNesting) {
      top.list.error = detail::field_prefix(source_, top.path) + "expected at most " +
                       std::to_string(detail::kMaxGraphNesting) +
                       " levels of nested child graphs and conditional bodies, found more";
      return SnapshotKind::kUnknown;
    }
    return detail::element_kind(top.kind);
  }

  // The JSON path of the value `claim` just placed.
  std::string claimed_path() const {
    if (frames_.empty()) {
      return {};
    }
    const Frame& top = frames_.back();
    return top.role == Frame::Role::kRecord ? detail::member_path(top.path, top.key)
                                            : detail::element_path(top.path, top.count - 1);
  }

  bool value(Json scalar) {
    if (skipping()) {
      if (frames_.back().capture) {
        frames_.back().capture->scalar(std::move(scalar));
      }
    } else if (claim() != SnapshotKind::kUnknown) {
      deliver(std::move(scalar));
    }
    return true;
  }

  // A complete value for the place `claim` gave it: a record member, a list element, or the
  // top level when that is not an object.
  void deliver(Json complete) {
    if (frames_.empty()) {
      root_value_ = std::move(complete);
      return;
    }
    Frame& top = frames_.back();
    if (top.role == Frame::Role::kRecord) {
      top.fields[top.key] = std::move(complete);
      return;
    }
    try {
      const JsonField element(complete, detail::element_path(top.path, top.count - 1), source_);
      detail::add_element(top.kind, top.key, element, top.list.items);
    } catch (const Error& error) {
      top.list.error = error.what();
    }
  }

  bool open(bool object) {
    if (++depth_ > detail::kMaxJsonDepth) {
      stop_ = detail::json_depth_error(source_, frames_.empty() ? "" : frames_.back().path, depth_);
      return false;
    }
    if (skipping()) {
      Frame& top = frames_.back();
      ++top.depth;
      if (top.capture) {
        top.capture->open(object);
      }
      return true;
    }
    const SnapshotKind kind = claim();
    Frame frame;
    frame.path = claimed_path();
    if (!frames_.empty()) {
      const Frame& parent = frames_.back();
      frame.nesting = parent.nesting + (parent.kind == SnapshotKind::kNode ? 1 : 0);
      frame.key = parent.role == Frame::Role::kRecord ? parent.key : std::string();
    }
    if (kind != SnapshotKind::kUnknown && object && detail::is_record(kind)) {
      frame.role = Frame::Role::kRecord;
      frame.kind = kind;
      frame.fields = Json::object();
      frame.key.clear();
    } else if (kind != SnapshotKind::kUnknown && !object && detail::is_list(kind)) {
      frame.role = Frame::Role::kList;
      frame.kind = kind;
      frame.list.items = detail::empty_items(kind);
    } else {
      frame.depth = 1;
      if (kind != SnapshotKind::kUnknown) {  // the wrong type: keep a copy to name it
        frame.capture.emplace();
        frame.capture->open(object);
      }
    }
    frames_.push_back(std::move(frame));
    return true;
  }

  bool close() {
    --depth_;
    Frame& top = frames_.back();
    if (top.role == Frame::Role::kSkip) {
      if (top.capture) {
        top.capture->close();
      }
      if (--top.depth == 0) {
        std::optional<Json> copy;
        if (top.capture) {
          copy = top.capture->take();
        }
        frames_.pop_back();
        if (copy) {
          deliver(std::move(*copy));
        }
      }
      return true;
    }
    Frame done = std::move(top);
    frames_.pop_back();
    if (done.role == Frame::Role::kList) {
      end_list(std::move(done));
    } else if (done.kind == SnapshotKind::kRoot) {
      root_ = std::move(done);
    } else if (detail::is_scalar_record(done.kind)) {
      deliver(std::move(done.fields));
    } else {
      end_record(done);
    }
    return true;
  }

  // A list member ends: its record reads it as [] and keeps its elements. (No shrink_to_fit:
  // the unused capacity of a large list was never touched, so it is not resident, while a
  // shrinking copy would hold the list twice.)
  void end_list(Frame done) {
    Frame& record = frames_.back();  // lists are members of records
    record.fields[record.key] = Json::array();
    const auto same = std::find_if(record.lists.begin(), record.lists.end(),
                                   [&](const auto& entry) { return entry.first == record.key; });
    if (same != record.lists.end()) {
      same->second = std::move(done.list);  // a key given twice: the last one wins
    } else {
      record.lists.emplace_back(record.key, std::move(done.list));
    }
  }

  // An epoch, graph, node or body ends: typed now, it joins its list (or its error does).
  void end_record(Frame& done) {
    Frame& list = frames_.back();  // these records are elements of lists
    const JsonField fields(done.fields, done.path, source_);
    try {
      switch (done.kind) {
        case SnapshotKind::kEpoch:
          std::get<std::vector<Epoch>>(list.list.items)
              .push_back(detail::read_epoch(fields, done.lists));
          break;
        case SnapshotKind::kGraph:
          std::get<std::vector<GraphRecord>>(list.list.items)
              .push_back(detail::read_graph(fields, done.lists));
          break;
        case SnapshotKind::kNode:
          std::get<NodeList>(list.list.items).push_back(detail::read_node(fields, done.lists));
          break;
        default:  // kBody
          std::get<std::vector<NodeList>>(list.list.items)
              .push_back(detail::read_body(fields, done.lists));
          break;
      }
    } catch (const Error& error) {
      list.list.error = error.what();
    }
  }

  std::string_view source_;
  std::vector<Frame> frames_;
  std::size_t depth_ = 0;      // open arrays and objects
  std::optional<Error> stop_;  // why the parse stopped: a syntax error or too deep nesting
  std::optional<Frame> root_;  // the top-level object, typed by `finish`
  Json root_value_;            // the top-level value when it is not an object
};

}  // namespace

const Epoch* Snapshot::find_epoch(std::string_view label) const {
  const auto it = std::find_if(epochs.begin(), epochs.end(),
                               [label](const Epoch& epoch) { return epoch.label == label; });
  return it == epochs.end() ? nullptr : &*it;
}

Snapshot parse_snapshot(std::string_view json, std::string_view source) {
  detail::require_no_nul(json, source);
  SnapshotBuilder builder(source);
  if (!Json::sax_parse(json.begin(), json.end(), &builder)) {
    throw builder.stop_reason();
  }
  Snapshot snapshot = builder.finish();
  detail::validate_snapshot(snapshot, source);
  return snapshot;
}

Snapshot read_snapshot(const std::filesystem::path& path) {
  const std::string name = path.string();
  const auto fail = [&name](int error) {
    throw Error(name + ": cannot read the snapshot file: " + std::strerror(error));
  };
  // Opened without waiting (a FIFO's open waits for a writer otherwise), then looked at: a
  // device or a socket is refused (reading /dev/zero never ends), a pipe is read to its end
  // (`graphcheck check <(backend ...)`), a folder gets what to run instead.
  const detail::Descriptor fd(::open(name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));  // NOLINT
  if (fd.get() < 0) {
    fail(errno);
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    fail(errno);
  }
  if (S_ISDIR(info.st_mode)) {
    std::error_code index_error;
    const bool watch_folder = std::filesystem::exists(path / "index.jsonl", index_error);
    throw Error(name + ": expected a snapshot file, found a folder" +
                (watch_folder ? std::string(" written by graphcheck's watch: run graphcheck "
                                            "report on it, or check one of its "
                                            "*.snapshot.json files")
                              : std::string()));
  }
  if (!S_ISREG(info.st_mode) && !S_ISFIFO(info.st_mode)) {
    throw Error(name + ": expected a snapshot file, found " +
                std::string(detail::file_kind(info.st_mode)));
  }
  if (S_ISFIFO(info.st_mode)) {
    const int flags = ::fcntl(fd.get(), F_GETFL);  // NOLINT(cppcoreguidelines-pro-type-vararg)
    if (flags < 0 || ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK) < 0) {  // NOLINT
      fail(errno);
    }
  }
  std::string text;
  try {
    if (S_ISREG(info.st_mode)) {
      text.reserve(static_cast<std::size_t>(info.st_size));  // one allocation, no doubling
    }
    // A NUL ends the reading at once: a sparse file of zeros is refused at its first chunk, not
    // read whole (where memory allows reserving it, that was gigabytes of zeros).
    if (const int error = detail::read_to_end(fd.get(),
                                              [&text, &name](std::string_view chunk) {
                                                text.append(chunk);
                                                if (chunk.find('\0') != std::string_view::npos) {
                                                  detail::require_no_nul(text, name);
                                                }
                                              });
        error != 0) {
      fail(error);
    }
    if (text.empty()) {
      throw Error(name + ": expected a snapshot, found " +
                  (S_ISFIFO(info.st_mode)
                       ? std::string("a FIFO (named pipe) that gave no bytes (no writer, or it "
                                     "wrote nothing)")
                       : std::string("an empty file")));
    }
    return parse_snapshot(text, name);
  } catch (const std::bad_alloc&) {
    // A sparse file of 100 GB, or a pipe that never ends: named, not "internal error".
    throw Error(name + ": out of memory reading the snapshot (" +
                std::to_string(std::max<std::uint64_t>(static_cast<std::uint64_t>(info.st_size),
                                                       text.size())) +
                " bytes): is this the right file?");
  }
}

}  // namespace graphcheck
