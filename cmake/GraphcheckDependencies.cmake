# Dependencies come from Debian's packages (scripts/bootstrap.sh installs them) and, for
# LibTorch, from the pinned torch wheel in the bootstrap's virtual environment.
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt 9 REQUIRED)
if(GRAPHCHECK_BUILD_CLI)
  find_package(CLI11 2 REQUIRED)
endif()
find_package(Threads REQUIRED)
if(GRAPHCHECK_BUILD_TESTS)
  find_package(GTest 1.11 REQUIRED)
endif()
if(GRAPHCHECK_BUILD_BENCHMARKS)
  find_package(benchmark 1.6 REQUIRED)
endif()

# --- LibTorch --------------------------------------------------------------------------
set(GRAPHCHECK_HAS_TORCH OFF)
# GRAPHCHECK_<X>_MISSING: why the parts below are not built, for the tier table (tests/).
set(GRAPHCHECK_TORCH_MISSING "GRAPHCHECK_TORCH=OFF")
if(NOT GRAPHCHECK_TORCH STREQUAL "OFF")
  # The torch of the bootstrap's environment; in a wheel build, the torch of the Python that
  # pip runs (as torch extensions do: `pip install --no-build-isolation .`, docs/python.md).
  set(_graphcheck_torch_python "")
  if(GRAPHCHECK_TORCH_VENV)
    set(_graphcheck_torch_python ${GRAPHCHECK_TORCH_VENV}/bin/python)
  elseif(SKBUILD AND Python_EXECUTABLE)
    set(_graphcheck_torch_python ${Python_EXECUTABLE})
  endif()
  set(GRAPHCHECK_TORCH_PREFIX "")
  if(_graphcheck_torch_python)
    execute_process(
      COMMAND ${_graphcheck_torch_python} -c "import torch; print(torch.utils.cmake_prefix_path, end='')"
      OUTPUT_VARIABLE _graphcheck_torch_prefix RESULT_VARIABLE _graphcheck_torch_rc ERROR_QUIET)
    if(_graphcheck_torch_rc EQUAL 0)
      list(APPEND CMAKE_PREFIX_PATH ${_graphcheck_torch_prefix})
      set(GRAPHCHECK_TORCH_PREFIX ${_graphcheck_torch_prefix})
    endif()
  endif()
  # The wheel is a CUDA build; without an architecture list its CMake config probes for a
  # GPU, which this (CPU) machine lacks. 9.0 is the H200 of the GPU check.
  if(NOT DEFINED TORCH_CUDA_ARCH_LIST AND NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST})
    set(TORCH_CUDA_ARCH_LIST "9.0")
  endif()
  find_package(Torch QUIET)
  if(Torch_FOUND)
    set(GRAPHCHECK_HAS_TORCH ON)
    message(STATUS "graphcheck: LibTorch ${Torch_VERSION} found; building the adapter")
    # The wheel's CUDA libraries (site-packages/nvidia/*/lib) have no RUNPATH pointing at them:
    # Python's `import torch` loads them first. A C++ program links libtorch_cuda.so, whose
    # libnccl.so.2 the linker would otherwise take from the CUDA toolkit (older, lacking
    # symbols torch 2.13 uses): -rpath-link for the link, and NCCL as a direct dependency with
    # the wheel's path so that the loader takes the wheel's at run time (graphcheck/torch).
    set(GRAPHCHECK_TORCH_NVIDIA_LIB_DIRS "")
    set(GRAPHCHECK_TORCH_NCCL "")
    if(GRAPHCHECK_TORCH_PREFIX)
      get_filename_component(_graphcheck_site "${GRAPHCHECK_TORCH_PREFIX}/../../.." ABSOLUTE)
      file(GLOB GRAPHCHECK_TORCH_NVIDIA_LIB_DIRS LIST_DIRECTORIES true "${_graphcheck_site}/nvidia/*/lib")
      file(GLOB GRAPHCHECK_TORCH_NCCL "${_graphcheck_site}/nvidia/nccl/lib/libnccl.so.*")
    endif()
  elseif(GRAPHCHECK_TORCH STREQUAL "ON")
    message(FATAL_ERROR "GRAPHCHECK_TORCH=ON but LibTorch was not found. Run scripts/bootstrap.sh "
      "and pass -DGRAPHCHECK_TORCH_VENV=<the path it prints>, or set GRAPHCHECK_TORCH=OFF.")
  else()
    message(STATUS "graphcheck: LibTorch not found; the adapter, `graphcheck demo` and the torch tier are skipped")
    set(GRAPHCHECK_TORCH_MISSING "LibTorch not found (scripts/bootstrap.sh installs torch; pass -DGRAPHCHECK_TORCH_VENV=<its path>)")
  endif()
endif()

# --- CUDA and CUPTI headers (compile only; the driver and CUPTI are loaded at run time) ---
# The backend needs headers, never libraries: cuda.h and cupti*.h of CUDA 13. They come from
# GRAPHCHECK_CUPTI_ROOT when set, else the CUDA toolkit (CUDA::cupti), else pip's
# nvidia-cuda-runtime and nvidia-cuda-cupti wheels for CUDA 13, which share
# site-packages/nvidia/cu13/include (looked up in GRAPHCHECK_TORCH_VENV, then python3's).
set(GRAPHCHECK_CUPTI_ROOT "" CACHE PATH
  "Folder whose include/ holds cuda.h and cupti.h of CUDA 13 (e.g. site-packages/nvidia/cu13); empty: the toolkit's, else pip's")
set(GRAPHCHECK_HAS_CUPTI OFF)
set(GRAPHCHECK_CUPTI_MISSING "GRAPHCHECK_CUPTI=OFF")
set(GRAPHCHECK_CUPTI_INCLUDE_DIRS "")

# _graphcheck_cuda13_headers(<root> <out-var>): <out-var> is "" when <root>/include holds
# cuda.h (CUDA_VERSION >= 13000) and cupti.h, else says what is missing.
function(_graphcheck_cuda13_headers root out)
  if(NOT EXISTS "${root}/include/cuda.h" OR NOT EXISTS "${root}/include/cupti.h")
    set(${out} "no include/cuda.h and include/cupti.h in ${root}" PARENT_SCOPE)
    return()
  endif()
  file(STRINGS "${root}/include/cuda.h" _version REGEX "^#define CUDA_VERSION [0-9]+")
  string(REGEX MATCH "[0-9]+$" _version "${_version}")
  if(NOT _version OR _version LESS 13000)
    set(${out} "${root}/include/cuda.h is CUDA_VERSION '${_version}', expected 13000 or later" PARENT_SCOPE)
    return()
  endif()
  set(${out} "" PARENT_SCOPE)
endfunction()

if(NOT GRAPHCHECK_CUPTI STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(GRAPHCHECK_CUPTI_ROOT)
    _graphcheck_cuda13_headers("${GRAPHCHECK_CUPTI_ROOT}" _problem)
    if(_problem)
      message(FATAL_ERROR "GRAPHCHECK_CUPTI_ROOT: ${_problem}. Point it at a folder whose include/ "
        "holds CUDA 13's cuda.h and cupti.h (pip's site-packages/nvidia/cu13), or leave it empty.")
    endif()
    set(GRAPHCHECK_CUPTI_INCLUDE_DIRS "${GRAPHCHECK_CUPTI_ROOT}/include")
    set(_graphcheck_cupti_from "GRAPHCHECK_CUPTI_ROOT (${GRAPHCHECK_CUPTI_ROOT})")
  elseif(CUDAToolkit_FOUND AND TARGET CUDA::cupti)
    get_target_property(_cuda_includes CUDA::toolkit INTERFACE_INCLUDE_DIRECTORIES)
    get_target_property(_cupti_includes CUDA::cupti INTERFACE_INCLUDE_DIRECTORIES)
    set(GRAPHCHECK_CUPTI_INCLUDE_DIRS ${_cuda_includes} ${_cupti_includes})
    set(_graphcheck_cupti_from "the CUDA ${CUDAToolkit_VERSION} toolkit")
  else()
    set(_roots "")
    if(GRAPHCHECK_TORCH_VENV)
      file(GLOB _roots "${GRAPHCHECK_TORCH_VENV}/lib/python3*/site-packages/nvidia/cu13")
    endif()
    execute_process(COMMAND python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'], end='')"
      OUTPUT_VARIABLE _purelib RESULT_VARIABLE _rc ERROR_QUIET)
    if(_rc EQUAL 0 AND _purelib)
      list(APPEND _roots "${_purelib}/nvidia/cu13")
    endif()
    foreach(_root IN LISTS _roots)
      _graphcheck_cuda13_headers("${_root}" _problem)
      if(NOT _problem)
        set(GRAPHCHECK_CUPTI_INCLUDE_DIRS "${_root}/include")
        set(_graphcheck_cupti_from "pip's nvidia-cuda-cupti (${_root})")
        break()
      endif()
    endforeach()
  endif()
  if(GRAPHCHECK_CUPTI_INCLUDE_DIRS)
    set(GRAPHCHECK_HAS_CUPTI ON)
    message(STATUS "graphcheck: CUDA and CUPTI headers from ${_graphcheck_cupti_from}; building the CUPTI backend")
  elseif(GRAPHCHECK_CUPTI STREQUAL "ON")
    message(FATAL_ERROR "GRAPHCHECK_CUPTI=ON but CUDA 13 with CUPTI was found neither in a CUDA toolkit "
      "nor in pip's nvidia-cuda-cupti. Install the CUDA toolkit (or pip's nvidia-cuda-cupti and "
      "nvidia-cuda-runtime for cu13), set CUDAToolkit_ROOT or GRAPHCHECK_CUPTI_ROOT, or set GRAPHCHECK_CUPTI=OFF.")
  else()
    message(STATUS "graphcheck: CUDA 13 with CUPTI not found; the CUPTI backend is skipped")
    set(GRAPHCHECK_CUPTI_MISSING "CUDA 13 with CUPTI headers not found (a CUDA toolkit, or pip's nvidia-cuda-cupti for cu13)")
  endif()
endif()
