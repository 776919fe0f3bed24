// Helpers shared by the runtime tests.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "orch/runtime.h"

namespace orch::fb {
struct Pipeline;
}

namespace orch::test {

// Empty when a CUDA device that can run the sm_90 examples is present, else why not
// ("no CUDA device: ..."). Computed once.
const std::string& gpu_unavailable_reason();

// Compiles example `name` (no extension) with orchc into a temporary folder, once per
// process; returns the .bin path, or "" with *log set to orchc's output. The examples are
// examples/ ($ORCH_EXAMPLES_DIR), orchc the build's ($ORCH_ORCHC: support/test_paths.h), and
// $ORCH_ORCHC_OPTIONS (words for the shell, e.g. "--no-pdl --unroll 1") are its options, here and
// in every helper below that compiles.
std::string compile_example(const std::string& name, std::string* log);
// A compiled pipeline, opened as the runtime opens it (no GPU needed): REQUIREs that the file
// opens. `p` points into `storage` (the file, 8-byte aligned), which it keeps.
struct OpenedExample {
  std::vector<uint64_t> storage;
  size_t size = 0;
  const fb::Pipeline* p = nullptr;
};
OpenedExample open_artifact(const std::string& path);
// Example `name`, compiled (compile_example) and opened.
OpenedExample open_example(const std::string& name);
// The same for a pipeline given as text (written to <tmp>/<name>.orch); `options`, if given, are
// orchc's options instead of $ORCH_ORCHC_OPTIONS (a test that needs particular ones).
std::string compile_source(const std::string& name, const std::string& source, std::string* log,
                           const char* options = nullptr);

// The source tree (support/test_paths.h) and its examples/ ($ORCH_EXAMPLES_DIR).
std::string checkout();
std::string examples_dir();
// NVSHMEM's folder (nvidia/nvshmem of the wheel) for the tests: $ORCH_NVSHMEM_HOME, else the
// build's (scripts/fetch-nvshmem); empty if neither has libnvshmem_host.so.3.
std::string nvshmem_home();
std::string temp_dir();
// The repository's pipelines/ folder ($ORCH_PIPELINES_DIR).
std::string pipelines_dir();
// Compiles a .orch file at `path` into the temporary folder as <name>.bin; "" and *log on failure.
std::string compile_file(const std::string& name, const std::string& path, std::string* log);

// Empty when at least two CUDA devices that run the sm_90 examples are present, else why not.
const std::string& multi_gpu_unavailable_reason();

// Multi-GPU tests run each rank as this test binary again (orch::ranks::spawn), with
// --orch-rank-worker=<scenario> and the scenario's arguments; main() hands such a process to
// run_rank_worker, which picks the rank's GPU and runs the scenario registered under that name.
using RankScenario = int (*)(const std::vector<std::string>& args);
bool register_rank_scenario(const char* name, RankScenario fn);
std::map<std::string, RankScenario>& rank_scenarios();
int run_rank_worker(const std::string& scenario, const std::vector<std::string>& args);

}  // namespace orch::test

// Checks a Status or Result and prints its error.
#define ORCH_REQUIRE_OK(x)                                  \
  do {                                                      \
    const auto& orch_r_ = (x);                              \
    INFO("error: ", orch_r_.error().to_string());           \
    REQUIRE(orch_r_.ok());                                  \
  } while (0)
#define ORCH_CHECK_OK(x)                                    \
  do {                                                      \
    const auto& orch_r_ = (x);                              \
    INFO("error: ", orch_r_.error().to_string());           \
    CHECK(orch_r_.ok());                                    \
  } while (0)
