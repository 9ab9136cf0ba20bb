# A compiler cache for top-level builds. The Makefile passes GRAPHCHECK_CCACHE_DIR, a folder in
# the bootstrap's cache beside the Python environments, so a fresh clone on the same machine
# (CI's) compiles only what changed since the last build there; an empty value (the default of
# a plain `cmake` configure) or a missing `ccache` builds without it.
#
# Every clone shares the entries: paths below the source folder are hashed relative to it
# (CCACHE_BASEDIR) and the build folder's own path is not hashed (CCACHE_NOHASHDIR; the debug
# information of a hit names the folder of the build that compiled it first). A miss costs no
# second preprocessing: the entry's inputs are the compiler's own -MD list (CCACHE_DEPEND). The
# settings travel in the launcher, so `cmake --build` outside the Makefile uses the same cache.
set(GRAPHCHECK_CCACHE_DIR "" CACHE PATH
  "ccache's folder for this project's objects (empty: no compiler cache; the Makefile sets it)")
if(PROJECT_IS_TOP_LEVEL AND GRAPHCHECK_CCACHE_DIR)
  find_program(GRAPHCHECK_CCACHE_PROGRAM ccache)
  if(GRAPHCHECK_CCACHE_PROGRAM)
    set(_graphcheck_launcher ${CMAKE_COMMAND} -E env "CCACHE_DIR=${GRAPHCHECK_CCACHE_DIR}"
      "CCACHE_BASEDIR=${PROJECT_SOURCE_DIR}" CCACHE_NOHASHDIR=true CCACHE_DEPEND=true
      ${GRAPHCHECK_CCACHE_PROGRAM})
    set(CMAKE_C_COMPILER_LAUNCHER ${_graphcheck_launcher})
    set(CMAKE_CXX_COMPILER_LAUNCHER ${_graphcheck_launcher})
    set(CMAKE_CUDA_COMPILER_LAUNCHER ${_graphcheck_launcher})
    message(STATUS "graphcheck: compiler cache ${GRAPHCHECK_CCACHE_DIR}")
  else()
    message(STATUS "graphcheck: GRAPHCHECK_CCACHE_DIR is set but ccache was not found: no compiler cache")
  endif()
endif()
