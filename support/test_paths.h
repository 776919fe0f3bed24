// For test binaries only (header-only, no library): where a test's inputs are, and an
// environment that keeps the caller's settings out of the tests.
//
// A test binary sits one folder below its build tree (build/tools/orch_tools_tests), in the
// build tree CMake made or in a copy of it inside the checkout (scripts/stage-gpu's build-gpu/
// on a GPU machine, where the paths CMake compiled in do not exist). So every input is found
// from the compiled-in path when it exists, else relative to the executable; an environment
// variable may point elsewhere, but none is needed.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace orch::test_paths {

// The build tree holding this executable: /proc/self/exe's grandparent.
inline std::filesystem::path build_root() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::filesystem::current_path(ec) : exe.parent_path().parent_path();
}

// The checkout: `compiled_in` (CMake's PROJECT_SOURCE_DIR) when it has examples/ and targets/,
// else the folder above the build tree.
inline std::string checkout(const std::string& compiled_in) {
  std::error_code ec;
  auto is_checkout = [&](const std::filesystem::path& p) {
    return std::filesystem::is_directory(p / "examples", ec) && std::filesystem::is_directory(p / "targets", ec);
  };
  if (is_checkout(compiled_in)) return compiled_in;
  return build_root().parent_path().string();
}

// $env_name when set and not empty (a harness pointing elsewhere on purpose), else `fallback`.
inline std::string located(const char* env_name, const std::string& fallback) {
  const char* v = std::getenv(env_name);
  return v && *v ? std::string(v) : fallback;
}

// A file of this build: `compiled_in` when it exists, else the same path below build_root()
// (`relative`, e.g. "compiler/orchc").
inline std::string built(const std::string& compiled_in, const std::string& relative) {
  std::error_code ec;
  if (std::filesystem::exists(compiled_in, ec)) return compiled_in;
  return (build_root() / relative).string();
}

// Removes what would change how orchc and the runtime behave under the tests when the caller
// happens to have it set (a targets folder, printed passes, cache folders), and points the
// targets at `checkout`/targets and both caches at `cache_dir`. What stays: the harness's own
// variables (ORCH_ORCHC, ORCH_RUN, ORCH_EXAMPLES_DIR, ORCH_PIPELINES_DIR,
// ORCH_NVCC: where inputs are; ORCH_ORCHC_OPTIONS: scripts/gpu-check's second run; ORCH_TEST_*,
// ORCH_KEEP_TEST_FILES, ORCH_UPDATE_GOLDEN), ORCH_NCCL_LIBRARY and CUDA's own (what this machine
// has).
inline void isolate_environment(const std::string& checkout, const std::string& cache_dir) {
  for (const char* name : {"ORCH_TARGETS_DIR", "ORCH_PRINT_PASSES", "ORCH_CACHE_DIR", "ORCH_ARTIFACT_CACHE_DIR",
                           "XDG_CACHE_HOME"})
    unsetenv(name);
  setenv("ORCH_TARGETS_DIR", (std::filesystem::path(checkout) / "targets").c_str(), 1);
  if (!cache_dir.empty()) setenv("ORCH_CACHE_DIR", cache_dir.c_str(), 1);
}

}  // namespace orch::test_paths
