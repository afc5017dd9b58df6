# Defines the imported target Timm::Torch for the LibTorch inside a Python
# torch wheel.
#
# We do not use find_package(Torch): the CUDA wheel's config insists on a
# matching CUDA toolkit and cuDNN at configure time, which breaks on machines
# whose toolkit differs from the wheel's (and costs configure time). The wheel
# is self-describing, so we ask its Python for the location, version and ABI.
#
# Inputs (cache variables): TIMM_PYTHON (a Python with torch installed) or
# TORCH_ROOT (the torch package folder). Outputs: Timm::Torch, TORCH_ROOT,
# TIMM_TORCH_VERSION, TIMM_TORCH_HAS_CUDA.
include_guard(GLOBAL)

set(TIMM_PYTHON "" CACHE FILEPATH "Python interpreter whose torch package to build against")
set(TORCH_ROOT "" CACHE PATH "Folder of the torch Python package (site-packages/torch)")

if(NOT TORCH_ROOT)
  if(NOT TIMM_PYTHON)
    find_program(TIMM_PYTHON_FOUND NAMES python3 REQUIRED)
    set(TIMM_PYTHON "${TIMM_PYTHON_FOUND}" CACHE FILEPATH "" FORCE)
  endif()
  execute_process(
    COMMAND "${TIMM_PYTHON}" -c "import os, torch; print(os.path.dirname(torch.__file__))"
    OUTPUT_VARIABLE _timm_torch_root OUTPUT_STRIP_TRAILING_WHITESPACE
    RESULT_VARIABLE _timm_rc ERROR_VARIABLE _timm_err)
  if(NOT _timm_rc EQUAL 0)
    message(FATAL_ERROR "cannot import torch with '${TIMM_PYTHON}': ${_timm_err}\n"
                        "Run scripts/setup.sh, or pass -DTIMM_PYTHON=<python with torch> or -DTORCH_ROOT=<site-packages/torch>.")
  endif()
  set(TORCH_ROOT "${_timm_torch_root}" CACHE PATH "" FORCE)
endif()

set(_timm_api_version_h "${TORCH_ROOT}/include/torch/csrc/api/include/torch/version.h")
if(NOT EXISTS "${_timm_api_version_h}")
  message(FATAL_ERROR "TORCH_ROOT='${TORCH_ROOT}' has no include/torch/csrc/api/include/torch/version.h; "
                      "expected the torch package folder (site-packages/torch)")
endif()
# torch >= 2.12 keeps the numbers in headeronly/version.h, older ones in the API header.
set(_timm_version_h "${TORCH_ROOT}/include/torch/headeronly/version.h")
if(NOT EXISTS "${_timm_version_h}")
  set(_timm_version_h "${_timm_api_version_h}")
endif()
foreach(_part MAJOR MINOR PATCH)
  file(STRINGS "${_timm_version_h}" _line REGEX "#define TORCH_VERSION_${_part} ")
  string(REGEX REPLACE ".*TORCH_VERSION_${_part} +([0-9]+).*" "\\1" _TIMM_TORCH_${_part} "${_line}")
endforeach()
set(TIMM_TORCH_VERSION "${_TIMM_TORCH_MAJOR}.${_TIMM_TORCH_MINOR}.${_TIMM_TORCH_PATCH}")

foreach(_lib c10 torch_cpu torch)
  if(NOT EXISTS "${TORCH_ROOT}/lib/lib${_lib}.so")
    message(FATAL_ERROR "${TORCH_ROOT}/lib/lib${_lib}.so not found; is TORCH_ROOT a complete torch install?")
  endif()
endforeach()
set(TIMM_TORCH_HAS_CUDA OFF)
if(EXISTS "${TORCH_ROOT}/lib/libtorch_cuda.so")
  set(TIMM_TORCH_HAS_CUDA ON)
endif()

# c10d's ProcessGroupGloo.hpp includes gloo's headers, which the wheel does
# not ship; the symbols are in libtorch_cpu.so. We compile against Debian's
# libgloo-dev headers (only the declarations it needs: the device, context and
# store types), proven by the multi-process tests. GLOO_ROOT points at another
# copy, e.g. one unpacked from the .deb on a machine without apt.
find_path(TIMM_GLOO_INCLUDE_DIR gloo/context.h HINTS "${GLOO_ROOT}/include" "${GLOO_ROOT}/usr/include")
if(NOT TIMM_GLOO_INCLUDE_DIR)
  message(FATAL_ERROR "gloo's headers (gloo/context.h) not found: install libgloo-dev "
                      "(scripts/setup.sh does) or set GLOO_ROOT to a prefix that has include/gloo")
endif()

if(NOT TARGET Timm::Torch)
  add_library(Timm::Torch INTERFACE IMPORTED)
  set_target_properties(Timm::Torch PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${TORCH_ROOT}/include;${TORCH_ROOT}/include/torch/csrc/api/include"
    # What torch_cpu's exported target carries; without USE_DISTRIBUTED the
    # c10d headers compile to nothing.
    INTERFACE_COMPILE_DEFINITIONS "_GLIBCXX_USE_CXX11_ABI=1;USE_DISTRIBUTED;USE_C10D_GLOO;USE_RPC;USE_TENSORPIPE"
    INTERFACE_LINK_LIBRARIES "${TORCH_ROOT}/lib/libtorch.so;${TORCH_ROOT}/lib/libtorch_cpu.so;${TORCH_ROOT}/lib/libc10.so")
endif()
# ATen's at::parallel_for is an inline template whose loop runs on the
# intra-op threads only when compiled with -fopenmp (ATen/ParallelOpenMP.h);
# without it every at::parallel_for in our code, and in a plugin built
# against the SDK, runs on one thread without a word (madgrad's one-pass step
# took 116 ms on 1 and on 2 threads, timm's 114 and 92). The wheel's
# libtorch_cpu brings its own libgomp.so.1; linking that one keeps a single
# OpenMP runtime in the process, the one at::set_num_threads sets.
file(STRINGS "${TORCH_ROOT}/include/ATen/Config.h" _timm_at_openmp REGEX "#define AT_PARALLEL_OPENMP 1")
if(_timm_at_openmp)
  if(NOT EXISTS "${TORCH_ROOT}/lib/libgomp.so.1")
    message(FATAL_ERROR "${TORCH_ROOT} is an OpenMP build of torch (ATen/Config.h: AT_PARALLEL_OPENMP 1) "
                        "but has no lib/libgomp.so.1 to link")
  endif()
  set_property(TARGET Timm::Torch APPEND PROPERTY INTERFACE_COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CXX>:-fopenmp>")
  set_property(TARGET Timm::Torch APPEND PROPERTY INTERFACE_LINK_LIBRARIES "${TORCH_ROOT}/lib/libgomp.so.1")
endif()
# /usr/include is searched anyway; naming it would break #include_next.
if(NOT TIMM_GLOO_INCLUDE_DIR STREQUAL "/usr/include")
  set_property(TARGET Timm::Torch APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${TIMM_GLOO_INCLUDE_DIR}")
endif()
message(STATUS "LibTorch ${TIMM_TORCH_VERSION} at ${TORCH_ROOT} (CUDA: ${TIMM_TORCH_HAS_CUDA})")
