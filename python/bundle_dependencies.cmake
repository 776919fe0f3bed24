# At install (component `python`): the shared libraries liborchc.so needs that a machine with
# Python and the CUDA toolkit need not have (ANTLR, yaml-cpp, xxHash from Debian), copied next to
# it under their sonames, where its $ORIGIN rpath finds them (what auditwheel does). The C and C++
# runtimes, the driver and the CUDA toolkit's own libraries are left to the system; liborchc.so's
# rpath is set to $ORIGIN alone. Needs ORCH_PYTHON_COMPILER_LIB (the library, a path or a
# generator expression) and ORCH_PYTHON_LIBDIR (the folder in the wheel).
install(CODE "
  set(lib \"${ORCH_PYTHON_COMPILER_LIB}\")
  file(GET_RUNTIME_DEPENDENCIES
    LIBRARIES \"\${lib}\"
    RESOLVED_DEPENDENCIES_VAR orch_deps
    UNRESOLVED_DEPENDENCIES_VAR orch_missing
    PRE_EXCLUDE_REGEXES
      \"^ld-linux\" \"^libc[.]so\" \"^libm[.]so\" \"^libgcc_s[.]so\" \"^libstdc[+][+][.]so\"
      \"^libpthread[.]so\" \"^libdl[.]so\" \"^librt[.]so\" \"^libcuda[.]so\" \"^libnvrtc\" \"^libnvJitLink\"
      \"^libcudart\")
  if(orch_missing)
    message(FATAL_ERROR \"liborchc.so: cannot resolve \${orch_missing}\")
  endif()
  set(dest \"\${CMAKE_INSTALL_PREFIX}/${ORCH_PYTHON_LIBDIR}\")
  foreach(dep IN LISTS orch_deps)
    get_filename_component(name \"\${dep}\" NAME)
    message(STATUS \"Bundling \${dep}\")
    file(COPY_FILE \"\${dep}\" \"\${dest}/\${name}\")
  endforeach()
  file(RPATH_SET FILE \"\${dest}/liborchc.so\" NEW_RPATH \"\$ORIGIN\")
" COMPONENT python EXCLUDE_FROM_ALL)
