# timm_add_test(<name> SOURCES <src>... [LABELS <label>...] [LIBRARIES <lib>...]
#               [TIMEOUT <seconds>] [PLUGINS <plugin target>...])
#
# PLUGINS: plugin targets the test loads at run time; they are built first
# (a build-order dependency, never a link).
#
# One doctest executable registered with ctest. Labels: "unit" (fast),
# "parity" (against the Python oracle), "e2e" (whole runs), "multiprocess".
include_guard(GLOBAL)

function(timm_add_test name)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LABELS;LIBRARIES;PLUGINS" ${ARGN})
  if(NOT BUILD_TESTING)
    return()
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE timm_test_support ${ARG_LIBRARIES})
  timm_use_pch(${name})
  if(ARG_PLUGINS)
    add_dependencies(${name} ${ARG_PLUGINS})
  endif()
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT})
endfunction()
