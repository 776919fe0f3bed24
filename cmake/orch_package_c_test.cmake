# ctest orch_package_c_client: cmake -DORCH_BUILD_DIR=... -DORCH_SOURCE_DIR=... -DWORK_DIR=...
#   -DC_COMPILER=... [-DBUILD_TYPE=...] -P orch_package_c_test.cmake
# What a C or Makefile user does, with nothing but the install:
# 1. cmake --install the build into WORK_DIR/prefix (a fresh folder);
# 2. cc examples/c_client/main.c $(pkg-config --cflags --libs orch), with only the install's
#    pkgconfig folder on PKG_CONFIG_PATH, and check the program links liborch.so.0.1 alone;
# 3. run it on a file that does not exist: exit 1, the orch error printed (ORCH_ERROR_IO);
# 4. compile examples/saxpy.orch with the installed orchc and run the client on it: it loads
#    (exit 0); with a CUDA device it also launches, without one it says so.
foreach(var ORCH_BUILD_DIR ORCH_SOURCE_DIR WORK_DIR C_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "orch_package_c_test.cmake: -D${var}=... is required")
  endif()
endforeach()

function(run name expect_rc out_var)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc STREQUAL expect_rc)
    message(FATAL_ERROR "${name}: exit ${rc}, expected ${expect_rc}:\n$ ${ARGN}\n${out}\n${err}")
  endif()
  message("ok: ${name}\n${out}${err}")
  set(${out_var} "${out}${err}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
set(config_args "")
if(BUILD_TYPE)
  set(config_args --config "${BUILD_TYPE}")
endif()
run("install into ${prefix}" 0 ignored "${CMAKE_COMMAND}" --install "${ORCH_BUILD_DIR}" --prefix "${prefix}" ${config_args})

# The user's shell: only the install's pkg-config folder, no library path into this build.
file(GLOB pc_files "${prefix}/*/pkgconfig/orch.pc" "${prefix}/*/*/pkgconfig/orch.pc")
list(LENGTH pc_files n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "the install has ${n} orch.pc files: ${pc_files}")
endif()
get_filename_component(pc_dir "${pc_files}" DIRECTORY)
set(ENV{PKG_CONFIG_PATH} "${pc_dir}")
unset(ENV{PKG_CONFIG_LIBDIR})
unset(ENV{LD_LIBRARY_PATH})
set(client "${WORK_DIR}/c_client")
run("cc main.c $(pkg-config --cflags --libs orch)" 0 ignored
    sh -c "'${C_COMPILER}' -std=c99 -Wall -Werror '${ORCH_SOURCE_DIR}/examples/c_client/main.c' \$(pkg-config --cflags --libs orch) -o '${client}'")
find_program(READELF readelf)
if(READELF)
  run("readelf -d c_client" 0 dynamic "${READELF}" -d "${client}")
  if(NOT dynamic MATCHES "\\[liborch\\.so\\.0\\.1\\]")
    message(FATAL_ERROR "c_client does not link liborch.so.0.1")
  endif()
  if(dynamic MATCHES "libcudart|libstdc\\+\\+|liborch_")
    message(FATAL_ERROR "c_client links more than liborch.so (the C runtime aside)")
  endif()
  # The library exports the C API only.
  run("nm -D liborch.so" 0 symbols nm -D --defined-only "${pc_dir}/../liborch.so")
  string(REGEX MATCHALL "\n[0-9a-f]+ [TDBRW] [^\n]+" exported "\n${symbols}")
  foreach(line IN LISTS exported)
    if(NOT line MATCHES " orch_[a-z0-9_]+$" AND NOT line MATCHES " ORCH_")
      message(FATAL_ERROR "liborch.so exports more than orch_*: ${line}")
    endif()
  endforeach()
endif()

run("c_client on a file that does not exist" 1 out "${client}" "${WORK_DIR}/no-such.bin")
if(NOT out MATCHES "c_client: read: [^\n]*no-such\\.bin[^\n]*\\[orch error 2\\]")
  message(FATAL_ERROR "c_client did not report the missing file as ORCH_ERROR_IO (2)")
endif()

run("orchc examples/saxpy.orch" 0 ignored "${prefix}/bin/orchc" "${ORCH_SOURCE_DIR}/examples/saxpy.orch"
    --no-cache -o "${WORK_DIR}/saxpy.bin")
run("c_client saxpy.bin" 0 out "${client}" "${WORK_DIR}/saxpy.bin")
if(NOT out MATCHES "pipeline saxpy\n")
  message(FATAL_ERROR "c_client did not print the pipeline's name")
endif()
if(out MATCHES "no CUDA device: ")
  message("ok: no CUDA device here; the client loaded the pipeline through liborch.so")
elseif(out MATCHES "launched once")
  message("ok: the client launched the pipeline on the GPU")
else()
  message(FATAL_ERROR "c_client neither launched nor reported the missing device")
endif()
