# orch_add_c_library(TARGET OUTPUT_NAME NAME [SONAME_VERSION]): the runtime's C API
# (orch/orch.h) as one shared library: the static runtime (taken whole), the static CUDA
# runtime and the FlatBuffers headers inside, NCCL dlopen'ed as always. A version script
# exports only the orch_* functions, so nothing inside (cudart, libstdc++'s inline code, the
# artifact reader) can clash with an application's own copies; --no-undefined proves nothing
# is missing. With SONAME_VERSION the file is versioned (liborch.so.0.1.0, soname
# liborch.so.0.1) for the C package (cmake/orch_install.cmake); without it, the plain
# liborch.so the Python package loads by path. One recipe for both.
function(orch_add_c_library target)
  cmake_parse_arguments(arg "" "OUTPUT_NAME;SONAME_VERSION" "" ${ARGN})
  set(map ${PROJECT_SOURCE_DIR}/runtime/orch_c.map)
  add_library(${target} SHARED ${PROJECT_SOURCE_DIR}/runtime/src/c_library.cpp)
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${arg_OUTPUT_NAME} LINKER_LANGUAGE CXX
                        LINK_DEPENDS ${map})
  if(arg_SONAME_VERSION)
    set_target_properties(${target} PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${arg_SONAME_VERSION})
  endif()
  set_target_properties(orch_runtime orch_artifact orch_expr PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(${target} PRIVATE
    -Wl,--whole-archive orch_runtime -Wl,--no-whole-archive
    -Wl,--version-script=${map} -Wl,--no-undefined)
endfunction()
