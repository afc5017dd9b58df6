# timm_add_plugin(<target> KIND <models|optim|sched|aug> SOURCES <src>... [LIBRARIES <lib>...]
#                 [OUTPUT_DIRECTORY <dir>] [NO_INSTALL])
#
# Builds one timm-cpp plugin: a MODULE library linked against the SDK with
# -z defs, so a missing symbol is a link error here and never a dlopen error
# on a user's machine. The file is named <target>.so and written to
# OUTPUT_DIRECTORY (default: the build tree's plugin folder when building
# timm-cpp itself, else the current binary dir).
include_guard(GLOBAL)

function(timm_add_plugin target)
  cmake_parse_arguments(ARG "NO_INSTALL" "KIND;OUTPUT_DIRECTORY" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "timm_add_plugin(${target}): SOURCES is required")
  endif()
  if(NOT ARG_KIND MATCHES "^(models|optim|sched|aug)$")
    message(FATAL_ERROR "timm_add_plugin(${target}): KIND must be models, optim, sched or aug, got '${ARG_KIND}'")
  endif()
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE TimmCpp::sdk ${ARG_LIBRARIES})
  target_link_options(${target} PRIVATE "LINKER:-z,defs")
  if(NOT ARG_OUTPUT_DIRECTORY)
    if(DEFINED TIMM_PLUGIN_OUTPUT_DIR)
      set(ARG_OUTPUT_DIRECTORY "${TIMM_PLUGIN_OUTPUT_DIR}")
    else()
      set(ARG_OUTPUT_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}")
    endif()
  endif()
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  if(TARGET timm_pch AND COMMAND timm_use_pch)
    timm_use_pch(${target})
  endif()
  if(NOT ARG_NO_INSTALL)
    # The plugins a run can load (timm-cpp's own build collects them into
    # its timm_runtime target).
    set_property(GLOBAL APPEND PROPERTY TIMM_PLUGIN_TARGETS ${target})
    if(COMMAND timm_install_plugin)
      timm_install_plugin(${target})
    endif()
  endif()
endfunction()
