include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS graphcheck_core graphcheck_cli EXPORT graphcheck-targets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/graphcheck DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} PATTERN "*.in" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/include/graphcheck/config.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/graphcheck)
install(EXPORT graphcheck-targets NAMESPACE graphcheck:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/graphcheck)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/graphcheck-config-version.cmake COMPATIBILITY SameMinorVersion)
file(WRITE ${PROJECT_BINARY_DIR}/graphcheck-config.cmake
  "include(CMakeFindDependencyMacro)\nfind_dependency(nlohmann_json)\nfind_dependency(fmt)\n"
  "include(\${CMAKE_CURRENT_LIST_DIR}/graphcheck-targets.cmake)\n")
install(FILES ${PROJECT_BINARY_DIR}/graphcheck-config.cmake ${PROJECT_BINARY_DIR}/graphcheck-config-version.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/graphcheck)
