# Tests: a handful of doctest executables, one per area, whose TEST_CASEs
# ctest lists and runs one by one.
#
# timm_add_test_group(<group>)
#   Creates the executable timm_tests_<group> (doctest's main lives in
#   timm_test_support). Call before any timm_add_test of that group.
#
# timm_add_test(<name> GROUP <group> SOURCES <src>... [LABELS <label>...]
#               [TIMEOUT <seconds>] [PLUGINS <plugin target>...] [DEPENDS <target>...]
#               [OBJECTS <object library>...])
#   Compiles <src> into timm_tests_<group>. Every TEST_CASE of <src> becomes
#   the ctest test "<name>: <TEST_CASE name>", with the labels and timeout
#   given here. PLUGINS and DEPENDS are built first (build order only: tests
#   load plugins at run time and run tools as processes, never link them).
#   OBJECTS links object libraries into timm_tests_<group> (once per group):
#   code private to a plugin that its test checks directly, which the plugin
#   links as well (plugins/aug/autoaugment).
#   A <name> listed in TIMM_TORCH_FREE_TESTS includes no torch header
#   (directly or through the test helpers it includes): it compiles without
#   the precompiled header, which costs seconds to load.
#
# Labels: "unit" (fast), "parity" (against the Python oracle), "e2e" (whole
# runs), "multiprocess" (several processes).
#
# Why one executable per area: each executable is a link against LibTorch;
# 63 of them made 73 links.
# Discovery runs after each link (cmake/TimmTestDiscover.cmake): the
# executable lists its TEST_CASEs with their files, and each becomes an
# add_test that runs that case alone, so `ctest -R`, labels and --parallel
# work per TEST_CASE.
include_guard(GLOBAL)

set(_timm_test_discover_script "${CMAKE_CURRENT_LIST_DIR}/TimmTestDiscover.cmake")

# Test code runs little of its own (the work is in LibTorch, the core and the
# plugins, all at -O3), so it is compiled at -O1 (tests/core/test_layers.cpp:
# 6.0 s instead of 7.3 s; docs/build.md).
set(TIMM_TEST_OPT_FLAGS "-O1" CACHE STRING "Optimization flags for test executables")

# Intra-op threads per test process. `ctest --parallel N` runs N tests at
# once, and LibTorch gives each as many threads as there are cores: on 2
# cores two tests at 2 threads each spin against each other (the suite took
# 420 s that way, 342 s at one thread each; docs/build.md). A test whose
# result depends on the thread count sets its own (ThreadCount, the oracles'
# torch.set_num_threads), as do the tests that start timm-run.
set(TIMM_TEST_THREADS "1" CACHE STRING "OMP_NUM_THREADS of each test process")
if(NOT TIMM_TEST_THREADS MATCHES "^[1-9][0-9]*$")
  message(FATAL_ERROR "TIMM_TEST_THREADS must be a positive integer, got '${TIMM_TEST_THREADS}'")
endif()

function(timm_add_test_group group)
  if(NOT BUILD_TESTING)
    return()
  endif()
  set(target timm_tests_${group})
  add_executable(${target})
  target_link_libraries(${target} PRIVATE timm_test_support)
  timm_use_test_pch(${target})

  set(manifest "${CMAKE_CURRENT_BINARY_DIR}/${target}.manifest")
  set(ctest_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_tests.cmake")
  set(include_file "${CMAKE_CURRENT_BINARY_DIR}/${target}_include.cmake")
  # One line per source: name, file name, labels (comma-separated), timeout.
  file(GENERATE OUTPUT "${manifest}"
       CONTENT "$<JOIN:$<TARGET_PROPERTY:${target},TIMM_TEST_MANIFEST>,\n>\n")
  # Relinked (and so rediscovered) when its manifest or the discovery changes.
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS "${manifest}" "${_timm_test_discover_script}")
  add_custom_command(TARGET ${target} POST_BUILD
    COMMAND "${CMAKE_COMMAND}" -D "TEST_EXECUTABLE=$<TARGET_FILE:${target}>"
            -D "MANIFEST=${manifest}" -D "CTEST_FILE=${ctest_file}"
            -D "WORKING_DIRECTORY=${CMAKE_CURRENT_BINARY_DIR}" -D "THREADS=${TIMM_TEST_THREADS}"
            -P "${_timm_test_discover_script}"
    VERBATIM)
  # Before the executable is built, ctest shows one failing test per group
  # instead of silently running nothing.
  file(WRITE "${include_file}"
    "if(EXISTS \"${ctest_file}\")\n"
    "  include(\"${ctest_file}\")\n"
    "else()\n"
    "  add_test(${target}_NOT_BUILT sh -c \"echo '${target} is not built: build the project first'; exit 1\")\n"
    "endif()\n")
  set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES "${include_file}")
endfunction()

function(timm_add_test name)
  cmake_parse_arguments(ARG "" "GROUP;TIMEOUT" "SOURCES;LABELS;PLUGINS;DEPENDS;OBJECTS" ${ARGN})
  if(NOT BUILD_TESTING)
    return()
  endif()
  set(target timm_tests_${ARG_GROUP})
  if(NOT ARG_GROUP OR NOT TARGET ${target})
    message(FATAL_ERROR "timm_add_test(${name}): GROUP must name a group made by timm_add_test_group, "
                        "got '${ARG_GROUP}'")
  endif()
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 600)
  endif()
  string(REPLACE ";" "," labels "${ARG_LABELS}")
  foreach(src ${ARG_SOURCES})
    cmake_path(ABSOLUTE_PATH src BASE_DIRECTORY "${CMAKE_CURRENT_SOURCE_DIR}" NORMALIZE)
    cmake_path(GET src FILENAME file_name)
    get_property(known TARGET ${target} PROPERTY TIMM_TEST_FILE_NAMES)
    if(file_name IN_LIST known)
      message(FATAL_ERROR "timm_add_test(${name}): a source named ${file_name} is already in ${target}; "
                          "test files of one group need distinct names")
    endif()
    set_property(TARGET ${target} APPEND PROPERTY TIMM_TEST_FILE_NAMES "${file_name}")
    set_property(TARGET ${target} APPEND PROPERTY TIMM_TEST_MANIFEST
                 "${name}\t${file_name}\t${labels}\t${ARG_TIMEOUT}")
    target_sources(${target} PRIVATE "${src}")
    if(name IN_LIST TIMM_TORCH_FREE_TESTS)
      set_source_files_properties("${src}" TARGET_DIRECTORY ${target}
                                  PROPERTIES SKIP_PRECOMPILE_HEADERS ON SKIP_UNITY_BUILD_INCLUSION ON)
    endif()
  endforeach()
  if(ARG_PLUGINS OR ARG_DEPENDS)
    add_dependencies(${target} ${ARG_PLUGINS} ${ARG_DEPENDS})
  endif()
  foreach(objects ${ARG_OBJECTS})
    # Several tests of a group may need the same objects; linked twice they
    # would define every symbol twice.
    get_property(linked TARGET ${target} PROPERTY TIMM_TEST_OBJECTS)
    if(NOT objects IN_LIST linked)
      set_property(TARGET ${target} APPEND PROPERTY TIMM_TEST_OBJECTS ${objects})
      target_link_libraries(${target} PRIVATE ${objects})
    endif()
  endforeach()
endfunction()

# timm_use_test_pch(<target>): the shared precompiled header, with the test
# optimization flags.
function(timm_use_test_pch target)
  timm_use_pch(${target})
  target_compile_options(${target} PRIVATE ${TIMM_TEST_OPT_FLAGS})
endfunction()
