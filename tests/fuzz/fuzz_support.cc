// The helpers the fuzz targets share (fuzz_support.h).
#include "tests/fuzz/fuzz_support.h"

#include <stdlib.h>  // NOLINT(modernize-deprecated-headers): mkdtemp is POSIX, not <cstdlib>

#include <fstream>
#include <string>
#include <system_error>

namespace graphcheck::fuzz {

void require_terminal_text(std::string_view text, const char* what) {
  for (const char byte : text) {
    if (byte != '\n' && (static_cast<unsigned char>(byte) < 0x20U || byte == '\x7f')) {
      std::fprintf(stderr, "graphcheck fuzz: a control byte 0x%02x in %s\n",
                   static_cast<unsigned>(static_cast<unsigned char>(byte)), what);
      require(false, "a control byte in text meant for a terminal");
    }
  }
}

const std::filesystem::path& scratch_folder() {
  static const std::filesystem::path path = [] {
    std::string templ = "/tmp/graphcheck-fuzz-XXXXXX";
    require(::mkdtemp(templ.data()) != nullptr, "mkdtemp failed");
    return std::filesystem::path(templ);
  }();
  static const int removed_at_exit = std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  });
  static_cast<void>(removed_at_exit);
  return path;
}

void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  require(out.good(), "cannot write an input file");
}

}  // namespace graphcheck::fuzz
