# Dependencies come from Debian's packages (scripts/bootstrap.sh installs them) and, for
# LibTorch, from the pinned torch wheel in the bootstrap's virtual environment.
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt 9 REQUIRED)
find_package(CLI11 2 REQUIRED)
find_package(Threads REQUIRED)
if(GRAPHCHECK_BUILD_TESTS)
  find_package(GTest 1.11 REQUIRED)
endif()
if(GRAPHCHECK_BUILD_BENCHMARKS)
  find_package(benchmark 1.6 REQUIRED)
endif()

# --- LibTorch --------------------------------------------------------------------------
set(GRAPHCHECK_HAS_TORCH OFF)
if(NOT GRAPHCHECK_TORCH STREQUAL "OFF")
  if(GRAPHCHECK_TORCH_VENV)
    execute_process(
      COMMAND ${GRAPHCHECK_TORCH_VENV}/bin/python -c "import torch; print(torch.utils.cmake_prefix_path, end='')"
      OUTPUT_VARIABLE _graphcheck_torch_prefix RESULT_VARIABLE _graphcheck_torch_rc ERROR_QUIET)
    if(_graphcheck_torch_rc EQUAL 0)
      list(APPEND CMAKE_PREFIX_PATH ${_graphcheck_torch_prefix})
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
  elseif(GRAPHCHECK_TORCH STREQUAL "ON")
    message(FATAL_ERROR "GRAPHCHECK_TORCH=ON but LibTorch was not found. Run scripts/bootstrap.sh "
      "and pass -DGRAPHCHECK_TORCH_VENV=<the path it prints>, or set GRAPHCHECK_TORCH=OFF.")
  else()
    message(STATUS "graphcheck: LibTorch not found; the adapter, `graphcheck demo` and the torch tier are skipped")
  endif()
endif()

# --- CUDA toolkit and CUPTI (compile and link only; the driver is loaded at run time) ---
set(GRAPHCHECK_HAS_CUPTI OFF)
if(NOT GRAPHCHECK_CUPTI STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND TARGET CUDA::cupti)
    set(GRAPHCHECK_HAS_CUPTI ON)
    message(STATUS "graphcheck: CUDA ${CUDAToolkit_VERSION} with CUPTI found; building the CUPTI backend")
  elseif(GRAPHCHECK_CUPTI STREQUAL "ON")
    message(FATAL_ERROR "GRAPHCHECK_CUPTI=ON but the CUDA toolkit with CUPTI was not found. Install the "
      "CUDA toolkit (or pip's nvidia-cuda-cupti), set CUDAToolkit_ROOT, or set GRAPHCHECK_CUPTI=OFF.")
  else()
    message(STATUS "graphcheck: CUDA toolkit with CUPTI not found; the CUPTI backend is skipped")
  endif()
endif()
