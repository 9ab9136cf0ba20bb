// The fuzz targets (tests/fuzz/README.md): each takes one input and aborts when the code under
// test breaks a promise, so that libFuzzer keeps the input as a crash and the corpus test
// (corpus_test.cc) fails on it. The one way an input may be refused is graphcheck::Error with
// a one-line message.
#ifndef GRAPHCHECK_TESTS_FUZZ_FUZZ_SUPPORT_H_
#define GRAPHCHECK_TESTS_FUZZ_FUZZ_SUPPORT_H_

#include <graphcheck/error.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string_view>

namespace graphcheck::fuzz {

/// A snapshot's JSON: parsed, written, checked (snapshot_fuzz.cc).
void snapshot_input(std::string_view text);
/// A report's JSON: parsed, written, made into text and HTML (report_fuzz.cc).
void report_input(std::string_view text);
/// An allowlist file's bytes: read, and its globs matched (allowlist_fuzz.cc).
void allowlist_input(std::string_view bytes);
/// A watch folder's index.jsonl and report: summarized as text and JSON (watch_fuzz.cc).
void watch_input(std::string_view bytes);

/// Aborts (a crash libFuzzer keeps with its input) when `holds` is false.
inline void require(bool holds, const char* what) {
  if (!holds) {
    std::fprintf(stderr, "graphcheck fuzz: broken promise: %s\n", what);
    std::abort();
  }
}

/// A refused input's message: non-empty and one line (the CLI prints it after `error: `).
inline void require_one_line(const Error& error) {
  const std::string_view message = error.what();
  require(!message.empty(), "an Error without a message");
  require(message.find('\n') == std::string_view::npos, "an Error message of several lines");
}

/// Text meant for a terminal (to_text's reports and summaries, which pass every name through
/// `printable`): no control byte but line breaks, no DEL. `what` names the text.
void require_terminal_text(std::string_view text, const char* what);

/// This process's scratch folder for inputs that are files (libFuzzer's workers are processes,
/// each with its own), made at first use and removed at exit.
[[nodiscard]] const std::filesystem::path& scratch_folder();

/// Writes `bytes` to `path`, replacing what was there; aborts when it cannot.
void write_file(const std::filesystem::path& path, std::string_view bytes);

}  // namespace graphcheck::fuzz

#endif  // GRAPHCHECK_TESTS_FUZZ_FUZZ_SUPPORT_H_
