// libFuzzer's entry for one target: GRAPHCHECK_FUZZ_TARGET names its function (CMakeLists.txt
// compiles this file once per target).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "tests/fuzz/fuzz_support.h"

// NOLINTNEXTLINE(readability-identifier-naming): the name libFuzzer calls
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  GRAPHCHECK_FUZZ_TARGET(std::string_view(reinterpret_cast<const char*>(data), size));  // NOLINT
  return 0;
}
