# The import hook of the server debug flag (GRAPHCHECK=1, docs/server.md): python/graphcheck_watch.pth
# goes to the root of the wheel's platlib (site-packages), where Python's `site` runs its one line
# at every start. Component `python` (what scikit-build-core installs into the wheel), never part
# of a plain `cmake --install`. Included by python/CMakeLists.txt (wheel builds that compile the
# modules) and cmake/GraphcheckPythonPrebuilt.cmake (the Makefile's install from a build folder).
install(FILES "${CMAKE_CURRENT_LIST_DIR}/../python/graphcheck_watch.pth" DESTINATION .
  COMPONENT python EXCLUDE_FROM_ALL)
