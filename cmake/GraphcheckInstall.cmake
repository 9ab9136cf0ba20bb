# Install rules (`cmake --install <build> --prefix <prefix>`): the public headers, the core,
# the LibTorch adapter and the CUPTI backend (static libraries, when built),
# libgraphcheck_inject.so, the CLI (`graphcheck`, and `graphcheck-demo` when the adapter is
# built), and the CMake package `graphcheck`:
#
#   find_package(graphcheck 0.1 REQUIRED [COMPONENTS torch cupti])
#
# graphcheck::core always; graphcheck::torch and graphcheck::cupti (with graphcheck::inject,
# the injection library) for the components asked for. Each component has its own export set
# and is loaded, with its dependencies (fmt, nlohmann_json; LibTorch for torch), only when asked
# for, so a core consumer needs no LibTorch. The Python package is not part of this (component
# `python`, installed by pip: pyproject.toml).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(GRAPHCHECK_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/graphcheck)
set(_graphcheck_components core)

# --- core: headers, library, CLI ----------------------------------------------------------
set_target_properties(graphcheck_core PROPERTIES EXPORT_NAME core)
install(TARGETS graphcheck_core EXPORT graphcheck-core-targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/graphcheck DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} PATTERN "*.in" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/include/graphcheck/config.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/graphcheck)
if(TARGET graphcheck_cli)
  # graphcheck::cli, for $<TARGET_FILE:graphcheck::cli> in a consumer's tests.
  set_target_properties(graphcheck_cli PROPERTIES EXPORT_NAME cli)
  install(TARGETS graphcheck_cli EXPORT graphcheck-core-targets
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET graphcheck_demo)
  # Beside `graphcheck`, where `graphcheck demo` looks for it; its RPATH keeps LibTorch's folder.
  install(TARGETS graphcheck_demo RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT graphcheck-core-targets NAMESPACE graphcheck:: DESTINATION ${GRAPHCHECK_INSTALL_CMAKEDIR})

# --- torch: the LibTorch adapter ------------------------------------------------------------
if(TARGET graphcheck_torch)
  list(APPEND _graphcheck_components torch)
  # Its headers are <graphcheck/torch/...>: under include/, which graphcheck::core carries.
  set_target_properties(graphcheck_torch PROPERTIES EXPORT_NAME torch)
  install(TARGETS graphcheck_torch EXPORT graphcheck-torch-targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY graphcheck/torch/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/graphcheck/torch
    FILES_MATCHING PATTERN "*.h")
  install(EXPORT graphcheck-torch-targets NAMESPACE graphcheck:: DESTINATION ${GRAPHCHECK_INSTALL_CMAKEDIR})
endif()

# --- cupti: the CUPTI backend and the injection library -------------------------------------
if(TARGET graphcheck_cupti)
  list(APPEND _graphcheck_components cupti)
  # Its headers are "cupti/...": in a folder of their own, so that adding it to a consumer's
  # include path brings nothing else. CUDA's and CUPTI's headers stay where the build found them.
  set_target_properties(graphcheck_cupti PROPERTIES EXPORT_NAME cupti)
  target_include_directories(graphcheck_cupti PUBLIC
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}/graphcheck-cupti>)
  install(TARGETS graphcheck_cupti EXPORT graphcheck-cupti-targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY cupti/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/graphcheck-cupti/cupti
    FILES_MATCHING PATTERN "*.h")
  if(TARGET graphcheck_inject)
    set_target_properties(graphcheck_inject PROPERTIES EXPORT_NAME inject)
    install(TARGETS graphcheck_inject EXPORT graphcheck-cupti-targets
      LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  endif()
  install(EXPORT graphcheck-cupti-targets NAMESPACE graphcheck:: DESTINATION ${GRAPHCHECK_INSTALL_CMAKEDIR})
endif()

# --- the package ----------------------------------------------------------------------------
# What the config file needs to find LibTorch again: the build's Torch_DIR and arch list.
set(GRAPHCHECK_CONFIG_TORCH_DIR "${Torch_DIR}")
set(GRAPHCHECK_CONFIG_TORCH_CUDA_ARCH_LIST "${TORCH_CUDA_ARCH_LIST}")
string(REPLACE ";" ", " GRAPHCHECK_CONFIG_COMPONENTS "${_graphcheck_components}")
configure_package_config_file(cmake/graphcheck-config.cmake.in
  ${PROJECT_BINARY_DIR}/graphcheck-config.cmake
  INSTALL_DESTINATION ${GRAPHCHECK_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/graphcheck-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/graphcheck-config.cmake ${PROJECT_BINARY_DIR}/graphcheck-config-version.cmake
  DESTINATION ${GRAPHCHECK_INSTALL_CMAKEDIR})
message(STATUS "graphcheck: install rules for the components: ${_graphcheck_components}")
