# timm_use_pch(<target>): reuse the shared precompiled header of timm_pch.
#
# GCC refuses a PCH built with other code-generation flags, and CMake compiles
# executables with -fPIE but libraries with -fPIC; executables are therefore
# compiled with -fPIC too (harmless for an executable) so one PCH serves all.
include_guard(GLOBAL)

function(timm_use_pch target)
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "EXECUTABLE")
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
    target_compile_options(${target} PRIVATE -fPIC)
  endif()
  target_precompile_headers(${target} REUSE_FROM timm_pch)
endfunction()
