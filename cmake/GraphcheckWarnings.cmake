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
