# Installs the SDK: headers, libtimm_core, the plugins, the apps and a CMake
# package, so that a third party can write
#   find_package(TimmCpp REQUIRED)
#   timm_add_plugin(my_model KIND models SOURCES my_model.cpp)
include(CMakePackageConfigHelpers)

install(DIRECTORY core/include/timm DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
install(FILES "${PROJECT_BINARY_DIR}/generated/include/timm/base/version.hpp"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/timm/base)
install(TARGETS timm_core EXPORT TimmCppTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT TimmCppTargets NAMESPACE TimmCpp:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/TimmCpp)

set(TIMM_CONFIG_TORCH_ROOT "${TORCH_ROOT}")
configure_package_config_file(cmake/TimmCppConfig.cmake.in
  "${PROJECT_BINARY_DIR}/TimmCppConfig.cmake"
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/TimmCpp)
write_basic_package_version_file("${PROJECT_BINARY_DIR}/TimmCppConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
install(FILES
  "${PROJECT_BINARY_DIR}/TimmCppConfig.cmake"
  "${PROJECT_BINARY_DIR}/TimmCppConfigVersion.cmake"
  cmake/TimmTorch.cmake cmake/TimmPlugin.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/TimmCpp)
