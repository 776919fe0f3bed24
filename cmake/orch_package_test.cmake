# ctest orch_package_embed_saxpy: cmake -DORCH_BUILD_DIR=... -DORCH_EXAMPLE_DIR=... -DWORK_DIR=...
#   -DGENERATOR=... -DCXX_COMPILER=... -DBUILD_TYPE=... [-DEXTRA_FLAGS=...] -P orch_package_test.cmake
# 1. cmake --install the build into WORK_DIR/prefix (a fresh folder);
# 2. configure and build examples/embed_saxpy against it, with nothing but the prefix on
#    CMAKE_PREFIX_PATH (find_package(orch) + orch_add_pipeline + orch::runtime);
# 3. run it: without a CUDA device it must print its "no CUDA device" line and exit 0; with
#    one it must print "embed_saxpy: ok" and exit 0.
foreach(var ORCH_BUILD_DIR ORCH_EXAMPLE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "orch_package_test.cmake: -D${var}=... is required")
  endif()
endforeach()

function(step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name} failed (exit ${rc}):\n$ ${ARGN}\n${out}\n${err}")
  endif()
  message("ok: ${name}")
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
set(build "${WORK_DIR}/embed_saxpy")

set(config_args "")
if(BUILD_TYPE)
  set(config_args --config "${BUILD_TYPE}")
endif()
step("install into ${prefix}" "${CMAKE_COMMAND}" --install "${ORCH_BUILD_DIR}" --prefix "${prefix}" ${config_args})
foreach(f include/orch/runtime.h include/orch/orch.h share/orch/targets/sm_90.yaml
          lib/cmake/orch/orchConfig.cmake lib/cmake/orch/orch_add_pipeline.cmake bin/orchc bin/orch-run)
  if(NOT EXISTS "${prefix}/${f}")
    message(FATAL_ERROR "the install lacks ${f}")
  endif()
endforeach()

set(example_args "")
if(EXTRA_FLAGS)
  list(APPEND example_args "-DCMAKE_CXX_FLAGS=${EXTRA_FLAGS}" "-DCMAKE_EXE_LINKER_FLAGS=${EXTRA_FLAGS}")
endif()
if(BUILD_TYPE)
  list(APPEND example_args "-DCMAKE_BUILD_TYPE=${BUILD_TYPE}")
endif()
step("configure examples/embed_saxpy against the install"
     "${CMAKE_COMMAND}" -S "${ORCH_EXAMPLE_DIR}" -B "${build}" -G "${GENERATOR}"
     "-DCMAKE_PREFIX_PATH=${prefix}" "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}"
     -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON ${example_args})
# The package, not this build tree, must be what the example found.
file(STRINGS "${build}/CMakeCache.txt" orch_dir_line REGEX "^orch_DIR:")
if(NOT orch_dir_line MATCHES "${prefix}/")
  message(FATAL_ERROR "the example found orch somewhere else: ${orch_dir_line}")
endif()
step("build examples/embed_saxpy" "${CMAKE_COMMAND}" --build "${build}" ${config_args})
if(NOT EXISTS "${build}/orch_pipelines/embed_saxpy/saxpy_pipeline.cpp")
  message(FATAL_ERROR "orch_add_pipeline wrote no saxpy_pipeline.cpp")
endif()

set(exe "${build}/embed_saxpy")
if(BUILD_TYPE AND NOT EXISTS "${exe}" AND EXISTS "${build}/${BUILD_TYPE}/embed_saxpy")
  set(exe "${build}/${BUILD_TYPE}/embed_saxpy")
endif()
execute_process(COMMAND "${exe}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("embed_saxpy: exit ${rc}\nstdout:\n${out}stderr:\n${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "embed_saxpy failed (exit ${rc})")
endif()
if(out MATCHES "embed_saxpy: skipped: no CUDA device: [^\n]+\n")
  message("ok: no CUDA device here; the example built against the install and exited cleanly")
elseif(out MATCHES "embed_saxpy: ok")
  message("ok: the example ran on the GPU and matched the CPU reference")
else()
  message(FATAL_ERROR "embed_saxpy printed neither its result nor its no-device line")
endif()
