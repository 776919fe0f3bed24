# Installation and the CMake package. After `cmake --install build --prefix P`, a project calls
#
#   find_package(orch REQUIRED)            # with P in CMAKE_PREFIX_PATH
#   add_executable(app main.cpp)
#   orch_add_pipeline(app pipeline.orch)   # compiled by orchc at build time, embedded in app
#   target_link_libraries(app PRIVATE orch::runtime)
#
# The package holds:
#   lib/liborch_runtime.a, lib/liborch_artifact.a,  orch::runtime (the artifact reader and the
#   lib/liborch_expr.a                              expression language are its private parts,
#                                                   linked with it)
#   lib/liborch.so.0.1, lib/pkgconfig/orch.pc      the C API as one shared library, for C and
#                                                   Makefile users: pkg-config --cflags --libs orch
#   include/orch/runtime.h, include/orch/orch.h     the C++ and C APIs
#   bin/orchc, bin/orch-run, bin/orch-inspect       orch::orchc, orch::orch-run, orch::orch-inspect
#   bin/orch-lsp                                    the language server (docs/editors.md)
#   share/orch/editors/orch-<v>.vsix,               the VS Code extension (where Python packed it)
#   share/orch/editors/orch.tmLanguage.json         and its TextMate grammar, for other editors
#   share/orch/targets/*.yaml                       the target profiles orchc reads
#   lib/cmake/orch/                                 orchConfig.cmake, orch_add_pipeline.cmake, ...
# orch::runtime links the static CUDA runtime (CUDA::cudart_static), so the package config
# finds CUDAToolkit for the consumer; nothing else of orch's build dependencies is needed.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ORCH_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/orch" CACHE STRING
    "Where the orch package config is installed, relative to the prefix")
# compiler/ bakes ${CMAKE_INSTALL_PREFIX}/share/orch/targets into orchc; keep the two in step.
set(ORCH_INSTALL_TARGETS_SUBDIR "share/orch/targets")

# A target's include directories name folders of this tree, which mean nothing in an install:
# wrap each plain path in $<BUILD_INTERFACE:...> (entries that are already generator
# expressions are kept), then add the installed include folder. Done here, for the targets the
# package exports, so the folders that define them stay free of install concerns.
function(_orch_exportable_includes target)
  get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  set(wrapped "")
  if(dirs)
    foreach(dir IN LISTS dirs)
      if(dir MATCHES "^\\$<")
        list(APPEND wrapped "${dir}")
      else()
        list(APPEND wrapped "$<BUILD_INTERFACE:${dir}>")
      endif()
    endforeach()
  endif()
  list(APPEND wrapped "$<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>")
  set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${wrapped}")
  # The same for the SYSTEM flavour (orch_artifact's FlatBuffers headers).
  get_target_property(sys ${target} INTERFACE_SYSTEM_INCLUDE_DIRECTORIES)
  if(sys)
    set(wrapped "")
    foreach(dir IN LISTS sys)
      if(dir MATCHES "^\\$<")
        list(APPEND wrapped "${dir}")
      else()
        list(APPEND wrapped "$<BUILD_INTERFACE:${dir}>")
      endif()
    endforeach()
    set_target_properties(${target} PROPERTIES INTERFACE_SYSTEM_INCLUDE_DIRECTORIES "${wrapped}")
  endif()
endfunction()

_orch_exportable_includes(orch_runtime)
_orch_exportable_includes(orch_artifact)
_orch_exportable_includes(orch_expr)
# A consumer may link the static runtime into a shared library (a language binding, a plugin).
set_target_properties(orch_runtime orch_artifact orch_expr orch_ranks PROPERTIES POSITION_INDEPENDENT_CODE ON)
set_target_properties(orch_runtime PROPERTIES EXPORT_NAME runtime)
set_target_properties(orch_ranks PROPERTIES EXPORT_NAME ranks)
# orch_artifact is exported only because the static orch::runtime needs it at link time
# ($<LINK_ONLY:...>); its headers are not installed.
set_target_properties(orch_artifact PROPERTIES EXPORT_NAME artifact_internal)
set_target_properties(orch_expr PROPERTIES EXPORT_NAME expr_internal)
set_target_properties(orchc PROPERTIES EXPORT_NAME orchc)
set_target_properties(orch-run PROPERTIES EXPORT_NAME orch-run)
set_target_properties(orch-inspect PROPERTIES EXPORT_NAME orch-inspect)
set_target_properties(orch-lsp PROPERTIES EXPORT_NAME orch-lsp)
# Installed programs find libraries outside the system folders (NVRTC, nvJitLink when the
# toolkit is not in ld.so.conf) through an RPATH to where they were linked from.
set_target_properties(orchc orch-run orch-inspect orch-lsp PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)

install(TARGETS orch_runtime orch_artifact orch_expr orch_ranks
  EXPORT orchTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS orchc orch-run orch-inspect orch-lsp
  EXPORT orchTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# Editor support beside the server (docs/editors.md).
install(FILES ${PROJECT_SOURCE_DIR}/editors/vscode/syntaxes/orch.tmLanguage.json
  DESTINATION ${CMAKE_INSTALL_DATADIR}/orch/editors)
if(ORCH_VSIX_PATH)
  install(FILES ${ORCH_VSIX_PATH} DESTINATION ${CMAKE_INSTALL_DATADIR}/orch/editors)
endif()
# The C library and its pkg-config file (not in sanitized or fuzzing builds, which lack it).
if(TARGET orch_c)
  install(TARGETS orch_c LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  file(RELATIVE_PATH ORCH_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" ORCH_PC_TO_PREFIX "${ORCH_PC_TO_PREFIX}")
  find_package(CUDAToolkit REQUIRED)
  set(ORCH_PC_CUDA_CFLAGS "")
  foreach(dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
    string(APPEND ORCH_PC_CUDA_CFLAGS " -I${dir}")
  endforeach()
  configure_file(${PROJECT_SOURCE_DIR}/cmake/orch.pc.in ${PROJECT_BINARY_DIR}/orch.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/orch.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()
install(FILES ${PROJECT_SOURCE_DIR}/runtime/orch/runtime.h ${PROJECT_SOURCE_DIR}/runtime/orch/orch.h
              ${PROJECT_SOURCE_DIR}/runtime/orch/ranks.h ${PROJECT_SOURCE_DIR}/runtime/orch/observe.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/orch)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/targets/
  DESTINATION ${ORCH_INSTALL_TARGETS_SUBDIR}
  FILES_MATCHING PATTERN "*.yaml")

install(EXPORT orchTargets NAMESPACE orch:: DESTINATION ${ORCH_INSTALL_CMAKEDIR})
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/orchConfig.cmake.in
  ${PROJECT_BINARY_DIR}/orchConfig.cmake
  INSTALL_DESTINATION ${ORCH_INSTALL_CMAKEDIR}
  PATH_VARS ORCH_INSTALL_TARGETS_SUBDIR)
# orch's artifact format is versioned in the file itself; the package follows the project's
# version, compatible within a major version (0.x: within the same minor version).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_orch_compat SameMinorVersion)
else()
  set(_orch_compat SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/orchConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY ${_orch_compat})
install(FILES
  ${PROJECT_BINARY_DIR}/orchConfig.cmake
  ${PROJECT_BINARY_DIR}/orchConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/orch_add_pipeline.cmake
  ${PROJECT_SOURCE_DIR}/cmake/orch_embed_file.cmake
  DESTINATION ${ORCH_INSTALL_CMAKEDIR})

# The same function in this tree (a project that adds orch with add_subdirectory).
if(NOT TARGET orch::orchc)
  add_executable(orch::orchc ALIAS orchc)
endif()
set_target_properties(orchc PROPERTIES ORCH_TARGETS_DIR "${PROJECT_SOURCE_DIR}/targets")
include(${PROJECT_SOURCE_DIR}/cmake/orch_add_pipeline.cmake)

# The test: install this build into a temporary prefix, then configure, build and run
# examples/embed_saxpy against it, exactly as a user's project would.
if(NOT ORCH_FUZZ)
  set(_orch_example_flags "")
  if(ORCH_SANITIZE)
    # The installed libraries were built with the sanitizers; the example must link their runtimes.
    set(_orch_example_flags "-fsanitize=address,undefined")
  endif()
  add_test(NAME orch_package_embed_saxpy
    COMMAND ${CMAKE_COMMAND}
            -DORCH_BUILD_DIR=${PROJECT_BINARY_DIR}
            -DORCH_EXAMPLE_DIR=${PROJECT_SOURCE_DIR}/examples/embed_saxpy
            -DWORK_DIR=${PROJECT_BINARY_DIR}/package-test
            -DGENERATOR=${CMAKE_GENERATOR}
            -DCXX_COMPILER=${CMAKE_CXX_COMPILER}
            -DBUILD_TYPE=$<CONFIG>
            -DEXTRA_FLAGS=${_orch_example_flags}
            -P ${PROJECT_SOURCE_DIR}/cmake/orch_package_test.cmake)
  set_tests_properties(orch_package_embed_saxpy PROPERTIES
    TIMEOUT 600)
endif()
# The C package: a C program built with `cc main.c $(pkg-config --cflags --libs orch)` against
# the install alone (examples/c_client).
if(TARGET orch_c)
  enable_language(C)
  add_test(NAME orch_package_c_client
    COMMAND ${CMAKE_COMMAND}
            -DORCH_BUILD_DIR=${PROJECT_BINARY_DIR}
            -DORCH_SOURCE_DIR=${PROJECT_SOURCE_DIR}
            -DWORK_DIR=${PROJECT_BINARY_DIR}/package-c-test
            -DC_COMPILER=${CMAKE_C_COMPILER}
            -DBUILD_TYPE=$<CONFIG>
            -P ${PROJECT_SOURCE_DIR}/cmake/orch_package_c_test.cmake)
  set_tests_properties(orch_package_c_client PROPERTIES TIMEOUT 600)
endif()
