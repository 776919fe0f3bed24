# orch_add_pipeline(<target> <file.orch>
#                   [NAME <symbol>]                     default: the file's name (saxpy.orch: saxpy)
#                   [ARCH <sm_XX>...]                   CUBINs to build (orchc --arch); default:
#                                                       the pipeline's `target` line
#                   [TARGET_PROFILE <name|file.yaml>]   orchc --target
#                   [DEPENDS <file>...])                more inputs that should rebuild it
#
# Compiles <file.orch> with orchc at build time and embeds the artifact in <target>, the way
# protobuf and Qt generate sources. Two files appear in the build tree, in a folder that is
# added to <target>'s include path:
#   <name>_pipeline.h     extern const unsigned char <name>_pipeline[];
#                         extern const size_t <name>_pipeline_size;
#   <name>_pipeline.cpp   the bytes (written by orch_embed_file.cmake, so no xxd is needed)
# and the application loads it with
#   #include "<name>_pipeline.h"
#   auto p = orch::Pipeline::load_from_memory(<name>_pipeline, <name>_pipeline_size);
# (The declarations have C linkage, so C code using orch/orch.h can include the header too.)
#
# The pipeline is recompiled when the .orch file, orchc, or a file named in DEPENDS changes,
# and when a kernel file the .orch names with `from "file.cu"` changes (those are found by
# reading the .orch file at configure time; CMake re-reads it whenever it changes). Headers
# that a .cu file includes are not seen: list them in DEPENDS.
#
# orch::orchc must exist: find_package(orch) defines it (or orch's own tree, when added with
# add_subdirectory). Its ORCH_TARGETS_DIR property, set by the package, names the target
# profiles orchc is given. The artifact itself is left at
# ${CMAKE_CURRENT_BINARY_DIR}/orch_pipelines/<target>/<name>.bin, e.g. for orch-run.
include_guard(GLOBAL)

function(orch_add_pipeline target orch_file)
  cmake_parse_arguments(PARSE_ARGV 2 ARG "" "NAME;TARGET_PROFILE" "ARCH;DEPENDS")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "orch_add_pipeline: unexpected arguments: ${ARG_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT TARGET ${target})
    message(FATAL_ERROR "orch_add_pipeline: ${target} is not a target (call add_executable or "
                        "add_library first)")
  endif()
  if(NOT TARGET orch::orchc)
    message(FATAL_ERROR "orch_add_pipeline: orch::orchc is not defined; call find_package(orch) first")
  endif()
  get_filename_component(orch_file "${orch_file}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${orch_file}")
    message(FATAL_ERROR "orch_add_pipeline: ${orch_file} does not exist")
  endif()

  if(DEFINED ARG_NAME)
    string(MAKE_C_IDENTIFIER "${ARG_NAME}" name)
    if(NOT name STREQUAL ARG_NAME)
      message(FATAL_ERROR "orch_add_pipeline: NAME ${ARG_NAME} is not a C identifier (try ${name})")
    endif()
  else()
    get_filename_component(stem "${orch_file}" NAME_WE)
    string(MAKE_C_IDENTIFIER "${stem}" name)
  endif()

  set(out_dir "${CMAKE_CURRENT_BINARY_DIR}/orch_pipelines/${target}")
  set(bin "${out_dir}/${name}.bin")
  set(cpp "${out_dir}/${name}_pipeline.cpp")
  set(header "${out_dir}/${name}_pipeline.h")
  get_property(embedded TARGET ${target} PROPERTY ORCH_PIPELINE_NAMES)
  if(name IN_LIST embedded)
    message(FATAL_ERROR "orch_add_pipeline: ${target} already embeds a pipeline named ${name}; "
                        "give this one another NAME")
  endif()
  set_property(TARGET ${target} APPEND PROPERTY ORCH_PIPELINE_NAMES ${name})

  # Kernel files named with `from "file.cu"`, relative to the .orch file.
  get_filename_component(orch_dir "${orch_file}" DIRECTORY)
  file(STRINGS "${orch_file}" from_lines REGEX "from[ \t]+\"[^\"]+\"")
  set(from_files "")
  foreach(line IN LISTS from_lines)
    string(REGEX MATCHALL "from[ \t]+\"[^\"]+\"" matches "${line}")
    foreach(m IN LISTS matches)
      string(REGEX REPLACE "^from[ \t]+\"([^\"]+)\"$" "\\1" path "${m}")
      get_filename_component(path "${path}" ABSOLUTE BASE_DIR "${orch_dir}")
      if(EXISTS "${path}")  # a missing one is orchc's error to report, with its location
        list(APPEND from_files "${path}")
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES from_files)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${orch_file}")

  set(extra_depends "")
  foreach(dep IN LISTS ARG_DEPENDS)
    get_filename_component(dep "${dep}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
    list(APPEND extra_depends "${dep}")
  endforeach()

  set(orchc_args "")
  if(ARG_ARCH)
    list(JOIN ARG_ARCH "," archs)
    list(APPEND orchc_args --arch "${archs}")
  endif()
  if(ARG_TARGET_PROFILE)
    list(APPEND orchc_args --target "${ARG_TARGET_PROFILE}")
  endif()
  get_target_property(targets_dir orch::orchc ORCH_TARGETS_DIR)
  if(targets_dir)
    list(APPEND orchc_args --targets-dir "${targets_dir}")
  endif()

  file(MAKE_DIRECTORY "${out_dir}")
  add_custom_command(
    OUTPUT "${bin}"
    COMMAND orch::orchc "${orch_file}" -o "${bin}" ${orchc_args}
    DEPENDS "${orch_file}" ${from_files} ${extra_depends} "$<TARGET_FILE:orch::orchc>"
    COMMENT "Compiling orch pipeline ${name} (${orch_file})"
    VERBATIM)
  add_custom_command(
    OUTPUT "${cpp}"
    COMMAND "${CMAKE_COMMAND}" "-DINPUT=${bin}" "-DOUTPUT=${cpp}" "-DNAME=${name}"
            "-DHEADER=${name}_pipeline.h" -P "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/orch_embed_file.cmake"
    DEPENDS "${bin}" "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/orch_embed_file.cmake"
    COMMENT "Embedding orch pipeline ${name} in ${target}"
    VERBATIM)

  # The header depends on nothing but the name: written now, so editors and the first build
  # see it, and rewritten only when it changes.
  file(CONFIGURE OUTPUT "${header}" CONTENT [[
// Generated by orch_add_pipeline from @orch_file@; do not edit.
// The compiled pipeline, embedded in @target@:
//   auto p = orch::Pipeline::load_from_memory(@name@_pipeline, @name@_pipeline_size);
#pragma once

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

extern const unsigned char @name@_pipeline[];
extern const size_t @name@_pipeline_size;

#ifdef __cplusplus
}
#endif
]] @ONLY)

  target_sources(${target} PRIVATE "${cpp}" "${header}")
  target_include_directories(${target} PRIVATE "${out_dir}")
endfunction()
