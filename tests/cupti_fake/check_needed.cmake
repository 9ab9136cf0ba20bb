# cmake -DLIBRARY=<file> -DREADELF=<readelf> -DALLOWED=<a,b,...> -P check_needed.cmake
# Fails when LIBRARY's dynamic section needs a library outside ALLOWED: the injection library
# is loaded by the CUDA driver into any process (CUDA_INJECTION64_PATH), where nothing but
# the C and C++ runtimes can be assumed; a missing NEEDED entry (libfmt.so.9 on a machine
# without it) makes the loader refuse it and graphcheck silently never attaches.
cmake_minimum_required(VERSION 3.25)  # IN_LIST
foreach(var LIBRARY READELF ALLOWED)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "check_needed.cmake: pass -D${var}=...")
  endif()
endforeach()
string(REPLACE "," ";" ALLOWED "${ALLOWED}")
execute_process(COMMAND ${READELF} -d ${LIBRARY} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${READELF} -d ${LIBRARY} failed (${rc}); is ${LIBRARY} an ELF file?")
endif()
string(REGEX MATCHALL "\\(NEEDED\\)[^\n]*\\[[^]\n]+\\]" entries "${dynamic}")
set(needed "")
set(unexpected "")
foreach(entry IN LISTS entries)
  string(REGEX REPLACE ".*\\[([^]]+)\\].*" "\\1" name "${entry}")
  list(APPEND needed ${name})
  if(NOT name IN_LIST ALLOWED)
    list(APPEND unexpected ${name})
  endif()
endforeach()
if(NOT needed)
  message(FATAL_ERROR "${LIBRARY} has no NEEDED entries; readelf output not understood:\n${dynamic}")
endif()
if(unexpected)
  message(FATAL_ERROR "${LIBRARY} needs ${unexpected}, outside the allowed ${ALLOWED}. Link "
    "that dependency statically or header-only into the injection library (fmt: "
    "fmt::fmt-header-only), or load it with dlopen at run time as the driver and CUPTI are.")
endif()
message(STATUS "${LIBRARY} needs only: ${needed}")
