# Every dependency comes from find_package; nothing is vendored. On Debian 12 the README's first
# command installs them with apt.
find_package(antlr4-runtime REQUIRED)
find_program(ANTLR4_TOOL NAMES antlr4 REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(Boost 1.74 REQUIRED)  # Boost.Graph is header-only
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(doctest REQUIRED)
find_package(Threads REQUIRED)

if(ORCH_STATIC_DEPS)
  set(ORCH_ANTLR_LIB antlr4_static)
  find_library(ORCH_YAML_CPP_STATIC NAMES libyaml-cpp.a REQUIRED)
  set(ORCH_YAML_LIB ${ORCH_YAML_CPP_STATIC})
else()
  set(ORCH_ANTLR_LIB antlr4_shared)
  set(ORCH_YAML_LIB yaml-cpp)
endif()
