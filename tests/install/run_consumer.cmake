# Builds and runs tests/install/consumer against graphcheck, for the `install` tier
# (tests/install/CMakeLists.txt). Every step's failure names the step and shows its output.
#
#   MODE=install: `cmake --install BUILD_DIR` into WORK_DIR/prefix, check the tree, run the
#     installed CLI, then configure the consumer with find_package (CMAKE_PREFIX_PATH=prefix).
#   MODE=subdirectory: configure the consumer with add_subdirectory(SOURCE_DIR).
# Both then build the consumer, and run consumer_check on DATA (expected: "stale 2") and the
# torch and cupti programs for the COMPONENTS given (comma-separated).
cmake_minimum_required(VERSION 3.25)
string(REPLACE "," ";" components "${COMPONENTS}")  # COMPONENTS: torch,cupti (comma-separated)

# run(<step> <expected exit code> <output variable> COMMAND...)
function(run step expected out)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
  if(NOT rc STREQUAL "${expected}")
    string(REPLACE ";" " " command "${ARGN}")
    message(FATAL_ERROR "${step}: exit ${rc}, expected ${expected}\n$ ${command}\n${stdout}\n${stderr}")
  endif()
  set(${out} "${stdout}" PARENT_SCOPE)
endfunction()

function(expect_match step text pattern)
  if(NOT text MATCHES "${pattern}")
    message(FATAL_ERROR "${step}: output does not match '${pattern}':\n${text}")
  endif()
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
# No build type (no optimization): the fastest compile, which matters in subdirectory mode,
# where the core is compiled again.
set(configure_args -S "${SOURCE_DIR}/tests/install/consumer" -B "${WORK_DIR}/build"
  -DCMAKE_BUILD_TYPE= "-DCONSUMER_COMPONENTS=${COMPONENTS}")

if(MODE STREQUAL "install")
  run("install" 0 out ${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")
  set(expected_files include/graphcheck/checker.h include/graphcheck/config.h
    lib/libgraphcheck.a bin/graphcheck lib/cmake/graphcheck/graphcheck-config.cmake
    lib/cmake/graphcheck/graphcheck-config-version.cmake lib/cmake/graphcheck/graphcheck-core-targets.cmake)
  if(torch IN_LIST components)
    list(APPEND expected_files lib/libgraphcheck_torch.a include/graphcheck/torch/registry.h
      lib/cmake/graphcheck/graphcheck-torch-targets.cmake)
  endif()
  if(cupti IN_LIST components)
    list(APPEND expected_files lib/libgraphcheck_cupti.a lib/libgraphcheck_inject.so
      include/graphcheck-cupti/cupti/backend.h lib/cmake/graphcheck/graphcheck-cupti-targets.cmake)
  endif()
  foreach(file IN LISTS expected_files)
    if(NOT EXISTS "${prefix}/${file}")
      message(FATAL_ERROR "install: ${prefix}/${file} is missing")
    endif()
  endforeach()
  if(EXISTS "${prefix}/graphcheck" OR EXISTS "${prefix}/lib/graphcheck")
    message(FATAL_ERROR "install: the Python component was installed by a plain cmake --install")
  endif()
  # The CLI runs from the prefix (findings: exit 1).
  run("installed CLI" 1 out "${prefix}/bin/graphcheck" check "${DATA}")
  expect_match("installed CLI" "${out}" "STALE")
  if(EXISTS "${prefix}/bin/graphcheck-demo")
    run("installed graphcheck-demo" 0 out "${prefix}/bin/graphcheck-demo" --help)
  endif()
  list(APPEND configure_args "-DCMAKE_PREFIX_PATH=${prefix}")
elseif(MODE STREQUAL "subdirectory")
  list(APPEND configure_args "-DGRAPHCHECK_SOURCE_DIR=${SOURCE_DIR}" -DGRAPHCHECK_TORCH=OFF
    -DGRAPHCHECK_CUPTI=OFF -DGRAPHCHECK_PYTHON=OFF)
else()
  message(FATAL_ERROR "MODE must be install or subdirectory, found '${MODE}'")
endif()

run("configure the consumer" 0 out ${CMAKE_COMMAND} ${configure_args})
set(targets consumer_check)
if(torch IN_LIST components)
  list(APPEND targets consumer_torch)
endif()
if(cupti IN_LIST components)
  list(APPEND targets consumer_cupti)
endif()
run("build the consumer" 0 out ${CMAKE_COMMAND} --build "${WORK_DIR}/build" -j 2 --target ${targets})

run("consumer_check" 0 out "${WORK_DIR}/build/consumer_check" "${DATA}")
expect_match("consumer_check" "${out}" "stale 2\nfindings 2\n")
if(torch IN_LIST components)
  run("consumer_torch" 0 out "${WORK_DIR}/build/consumer_torch")
  expect_match("consumer_torch" "${out}" "^weight 128\nbias 32\n$")
endif()
if(cupti IN_LIST components)
  run("consumer_cupti" 0 out "${WORK_DIR}/build/consumer_cupti")
  expect_match("consumer_cupti" "${out}" "check at launch: yes")
endif()
file(REMOVE_RECURSE "${WORK_DIR}")
message(STATUS "consumer (${MODE}; core ${components}): built and ran")
