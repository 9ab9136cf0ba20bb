# Installs the package `graphcheck` into the environment of PYTHON with pip, reusing the
# compiled modules that the CMake build in BUILD_DIR made (no second compile: pip's wheel build
# copies them, cmake/GraphcheckPythonPrebuilt.cmake). pip is skipped when the installed package
# already holds exactly python/graphcheck/ and those modules, so `make` and the python tier's
# setup test can both call this cheaply (the import hook graphcheck_watch.pth, installed beside
# the package, is compared too). Prints one line when it installs.
#
#   cmake -DPYTHON=<venv>/bin/python -DBUILD_DIR=<build> -P cmake/GraphcheckPythonInstall.cmake
cmake_minimum_required(VERSION 3.25)
foreach(_var PYTHON BUILD_DIR)
  if(NOT ${_var})
    message(FATAL_ERROR "GraphcheckPythonInstall: pass -D${_var}=...")
  endif()
endforeach()
get_filename_component(_source "${CMAKE_CURRENT_LIST_DIR}/.." ABSOLUTE)
get_filename_component(_modules_dir "${BUILD_DIR}/python/graphcheck" ABSOLUTE)

file(GLOB _modules RELATIVE "${_modules_dir}" "${_modules_dir}/_*.so")
if(NOT _modules)
  message(FATAL_ERROR "GraphcheckPythonInstall: no compiled module in ${_modules_dir}. Build the "
    "target graphcheck_python in ${BUILD_DIR} first (configured with GRAPHCHECK_PYTHON not OFF).")
endif()

# What the package must hold: the sources, then the modules (relative path -> file).
file(GLOB_RECURSE _sources RELATIVE "${_source}/python/graphcheck" "${_source}/python/graphcheck/*")
list(FILTER _sources EXCLUDE REGEX "(^|/)__pycache__/|\\.pyc$|\\.so$")
set(_expected "")
foreach(_file IN LISTS _sources)
  list(APPEND _expected "${_file}")
  set(_from_${_file} "${_source}/python/graphcheck/${_file}")
endforeach()
foreach(_file IN LISTS _modules)
  list(APPEND _expected "${_file}")
  set(_from_${_file} "${_modules_dir}/${_file}")
endforeach()
list(SORT _expected)

# Where it is installed now (-I: never the working directory, whose graphcheck/ may be the
# repository's C++ folder).
execute_process(COMMAND "${PYTHON}" -I -c
  "import importlib.util as u; s = u.find_spec('graphcheck'); print(list(s.submodule_search_locations)[0] if s and s.origin else '', end='')"
  OUTPUT_VARIABLE _installed RESULT_VARIABLE _rc ERROR_QUIET)
set(_same OFF)
if(_rc EQUAL 0 AND _installed)
  file(GLOB_RECURSE _present RELATIVE "${_installed}" "${_installed}/*")
  list(FILTER _present EXCLUDE REGEX "(^|/)__pycache__/|\\.pyc$")
  list(SORT _present)
  if(_present STREQUAL _expected)
    set(_same ON)
    foreach(_file IN LISTS _expected)
      execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${_from_${_file}}" "${_installed}/${_file}"
        RESULT_VARIABLE _differs)
      if(NOT _differs EQUAL 0)
        set(_same OFF)
        break()
      endif()
    endforeach()
  endif()
  # GRAPHCHECK=1's import hook sits beside the package, at the root of site-packages.
  get_filename_component(_site "${_installed}" DIRECTORY)
  execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files
    "${_source}/python/graphcheck_watch.pth" "${_site}/graphcheck_watch.pth" RESULT_VARIABLE _differs)
  if(NOT _differs EQUAL 0)
    set(_same OFF)
  endif()
endif()
if(_same)
  return()
endif()

execute_process(
  COMMAND "${PYTHON}" -I -m pip install --quiet --no-deps --no-build-isolation
    --disable-pip-version-check --root-user-action=ignore
    "--config-settings=cmake.define.GRAPHCHECK_PYTHON_PREBUILT_DIR=${_modules_dir}" "${_source}"
  RESULT_VARIABLE _rc OUTPUT_VARIABLE _out ERROR_VARIABLE _out)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "GraphcheckPythonInstall: pip could not install graphcheck into ${PYTHON}'s "
    "environment (scikit-build-core and pybind11 come from scripts/bootstrap.sh):\n${_out}")
endif()
get_filename_component(_env "${PYTHON}" DIRECTORY)
get_filename_component(_env "${_env}" DIRECTORY)
message("python: installed graphcheck into ${_env}")
