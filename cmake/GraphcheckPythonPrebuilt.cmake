# A wheel from modules an earlier CMake build compiled: the Makefile installs the package into
# the bootstrap's environment with pip (metadata, entry points, uninstall) but without
# compiling it a second time, by passing -C cmake.define.GRAPHCHECK_PYTHON_PREBUILT_DIR=
# <build>/python/graphcheck. scikit-build-core copies python/graphcheck/ itself (pyproject.toml,
# wheel.packages); this adds the compiled modules built for the running interpreter.
file(GLOB _graphcheck_modules "${GRAPHCHECK_PYTHON_PREBUILT_DIR}/_*.${SKBUILD_SOABI}.so")
if(NOT _graphcheck_modules)
  message(FATAL_ERROR "GRAPHCHECK_PYTHON_PREBUILT_DIR: no module for ${SKBUILD_SOABI} in "
    "${GRAPHCHECK_PYTHON_PREBUILT_DIR}. Build the target graphcheck_python there with this Python "
    "(-DPython_EXECUTABLE=...) first, or leave GRAPHCHECK_PYTHON_PREBUILT_DIR unset to compile them.")
endif()
install(FILES ${_graphcheck_modules} DESTINATION graphcheck COMPONENT python)
include(GraphcheckPythonHook)
# pyproject.toml builds this target; here there is nothing left to build.
add_custom_target(graphcheck_python)
