# Warnings live on a private interface target, never in global flags, so consumers of the
# libraries are not forced to build with them.
add_library(graphcheck_warnings INTERFACE)
target_compile_options(graphcheck_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow -Wold-style-cast
  -Wundef -Wcast-qual -Wnon-virtual-dtor -Woverloaded-virtual)
# GCC 12 reports false -Wrestrict positives inside libstdc++ for `"literal" + std::string`
# (GCC bug 105651, fixed in GCC 13); silenced for that compiler only.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(graphcheck_warnings INTERFACE -Wno-restrict)
endif()
if(GRAPHCHECK_WERROR)
  target_compile_options(graphcheck_warnings INTERFACE -Werror)
endif()

# Sanitizer flags for the ASan+UBSan configuration (applied to everything graphcheck builds).
add_library(graphcheck_sanitize INTERFACE)
if(GRAPHCHECK_SANITIZE)
  target_compile_options(graphcheck_sanitize INTERFACE
    -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(graphcheck_sanitize INTERFACE -fsanitize=address,undefined)
endif()

# The fuzz configuration (the `fuzz` preset): libFuzzer's coverage on everything graphcheck
# builds, beside the sanitizers; the programs themselves link -fsanitize=fuzzer (tests/fuzz).
if(GRAPHCHECK_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "GRAPHCHECK_FUZZ=ON needs Clang (libFuzzer), found the "
      "${CMAKE_CXX_COMPILER_ID} compiler: configure with the `fuzz` preset or "
      "-DCMAKE_CXX_COMPILER=clang++")
  endif()
  if(NOT GRAPHCHECK_SANITIZE)
    message(FATAL_ERROR "GRAPHCHECK_FUZZ=ON needs GRAPHCHECK_SANITIZE=ON (a fuzzer without "
      "ASan and UBSan misses the bugs it exists to find): configure with the `fuzz` preset")
  endif()
  target_compile_options(graphcheck_sanitize INTERFACE -fsanitize=fuzzer-no-link)
endif()
