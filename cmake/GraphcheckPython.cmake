# Python and pybind11 for the Python package's compiled modules (python/CMakeLists.txt).
# The interpreter is, in order: Python_EXECUTABLE when given (scikit-build-core gives the one
# pip runs), else the bootstrap's GRAPHCHECK_TORCH_VENV, else FindPython's choice. pybind11 is
# the one installed in that interpreter (the pin of scripts/versions.env), else a system one.
# AUTO builds the modules for a top-level build without sanitizers (an instrumented module
# cannot be loaded by an uninstrumented python) when both are found.
set(GRAPHCHECK_HAS_PYTHON OFF)
if(GRAPHCHECK_SANITIZE)
  set(GRAPHCHECK_PYTHON_MISSING "a sanitizer build (an instrumented module cannot be loaded by an uninstrumented python)")
else()
  set(GRAPHCHECK_PYTHON_MISSING "GRAPHCHECK_PYTHON=${GRAPHCHECK_PYTHON}")
endif()
if(GRAPHCHECK_PYTHON STREQUAL "ON" OR (GRAPHCHECK_PYTHON STREQUAL "AUTO" AND PROJECT_IS_TOP_LEVEL
                                       AND NOT GRAPHCHECK_SANITIZE))
  if(NOT Python_EXECUTABLE AND GRAPHCHECK_TORCH_VENV AND EXISTS "${GRAPHCHECK_TORCH_VENV}/bin/python")
    set(Python_EXECUTABLE "${GRAPHCHECK_TORCH_VENV}/bin/python")
  endif()
  find_package(Python 3.9 COMPONENTS Interpreter Development.Module QUIET)
  set(_graphcheck_python_problem "")
  if(NOT Python_FOUND)
    set(_graphcheck_python_problem "no Python 3.9+ interpreter with its development headers (Python.h)")
  else()
    if(NOT pybind11_DIR)
      execute_process(COMMAND ${Python_EXECUTABLE} -m pybind11 --cmakedir
        OUTPUT_VARIABLE _graphcheck_pybind11_dir OUTPUT_STRIP_TRAILING_WHITESPACE
        RESULT_VARIABLE _graphcheck_pybind11_rc ERROR_QUIET)
      if(_graphcheck_pybind11_rc EQUAL 0 AND EXISTS "${_graphcheck_pybind11_dir}")
        set(pybind11_DIR "${_graphcheck_pybind11_dir}" CACHE PATH "pybind11's CMake package")
      endif()
    endif()
    find_package(pybind11 2.12 CONFIG QUIET)
    if(NOT pybind11_FOUND)
      set(_graphcheck_python_problem "pybind11 2.12+ not found (neither in ${Python_EXECUTABLE} nor installed for CMake)")
    endif()
  endif()
  if(NOT _graphcheck_python_problem)
    set(GRAPHCHECK_HAS_PYTHON ON)
    message(STATUS "graphcheck: Python ${Python_VERSION} (${Python_EXECUTABLE}), pybind11 ${pybind11_VERSION}; building graphcheck._core")
  elseif(GRAPHCHECK_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "GRAPHCHECK_PYTHON=ON but ${_graphcheck_python_problem}. Run scripts/bootstrap.sh and "
      "pass -DGRAPHCHECK_TORCH_VENV=<the path it prints> (or -DPython_EXECUTABLE=<a python with pybind11>), "
      "or set GRAPHCHECK_PYTHON=OFF.")
  else()
    message(STATUS "graphcheck: ${_graphcheck_python_problem}; the Python modules and the python tier are skipped")
    set(GRAPHCHECK_PYTHON_MISSING "${_graphcheck_python_problem}")
  endif()
endif()
