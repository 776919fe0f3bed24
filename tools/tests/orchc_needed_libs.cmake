# Fails when orchc's dynamic section names NVRTC or nvJitLink as needed: orchc loads them on
# first use (tools/orchc/toolkit_libs.h), so that starting it costs neither.
#   cmake -DBINARY=path/to/orchc -P orchc_needed_libs.cmake
find_program(READELF readelf)
if(NOT READELF)
  message(STATUS "orchc-needed-libs: skipped: no readelf")
  return()
endif()
execute_process(COMMAND ${READELF} -d ${BINARY} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf -d ${BINARY} failed")
endif()
string(REGEX MATCHALL "Shared library: \\[[^]]+\\]" needed "${dynamic}")
foreach(lib IN LISTS needed)
  if(lib MATCHES "nvrtc|nvJitLink")
    message(FATAL_ERROR "orchc needs ${lib} at start-up; forward the function that brought it in "
                        "from tools/orchc/toolkit_libs.cpp (nm -D --undefined-only orchc)")
  endif()
endforeach()
message(STATUS "orchc needs: ${needed}")
