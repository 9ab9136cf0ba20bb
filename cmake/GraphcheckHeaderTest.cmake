# Compiles every public header alone in its own translation unit, so a header that relies
# on a transitive include fails the build (nvbench's header testing, in a few lines).
function(graphcheck_add_header_test target)
  file(GLOB headers CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/graphcheck/*.h)
  set(sources)
  foreach(header IN LISTS headers)
    get_filename_component(name ${header} NAME_WE)
    set(source ${CMAKE_CURRENT_BINARY_DIR}/header_test/${name}.cc)
    file(CONFIGURE OUTPUT ${source} CONTENT "#include <graphcheck/${name}.h>  // must compile alone\n")
    list(APPEND sources ${source})
  endforeach()
  add_library(${target} OBJECT ${sources})
  target_link_libraries(${target} PRIVATE graphcheck::core graphcheck_warnings)
endfunction()
