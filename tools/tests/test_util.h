// Helpers shared by orch_tools_tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "artifact/pipeline_generated.h"

namespace orch::tools_test {

// Empty where a CUDA device can run the tests, else why not ("no CUDA device: ...").
const std::string& gpu_unavailable_reason();
// A temporary folder for this run of the tests (removed at exit unless ORCH_KEEP_TEST_FILES).
const std::string& temp_dir();
// examples/embed_saxpy/saxpy.orch compiled with orchc (once); empty (and *log says why) on failure.
std::string compiled_saxpy(std::string* log);

// Any .orch file compiled with orchc into the temporary folder (once per path and options), with
// orchc's `options` (words for the shell), else $ORCH_ORCHC_OPTIONS.
std::string compiled(const std::string& orch_file, std::string* log, const char* options = nullptr);
// Where the tests' inputs and tools are (support/test_paths.h: the build's paths, else the
// same places relative to this executable; each environment variable named may point elsewhere).
std::string checkout();       // the source tree
std::string examples_dir();   // examples/ ($ORCH_EXAMPLES_DIR)
std::string pipelines_dir();  // pipelines/ ($ORCH_PIPELINES_DIR)
std::string targets_dir();    // targets/
std::string orchc_path();     // the build's orchc ($ORCH_ORCHC)
std::string orch_run_path();  // the build's orch-run ($ORCH_RUN)

// A compiled pipeline read into memory (8-byte aligned for the FlatBuffers reader) and opened
// as the runtime opens it; `pipeline` is null (and `error` says why) when it cannot be.
struct LoadedPipeline {
  std::vector<uint64_t> storage;
  const orch::fb::Pipeline* pipeline = nullptr;
  std::string error;
};
LoadedPipeline load_pipeline(const std::string& bin);
// Writes `text` to a file in the temporary folder and returns its path.
std::string write_temp(const std::string& name, const std::string& text);
std::string read_all(const std::string& path);
// $ORCH_TEST_OUT (a folder for the pictures a GPU run brings back), or "" when unset.
std::string test_out_dir();

// A pipeline with a top-level 16 KiB fill and a fill of the same size inside a while loop (the
// misattribution of issue 13), as .orch text: src in, acc = rounds * src out.
const char* fills_orch();
// Two sibling `if`s, each with an `if` nested in its body and a kernel after that, every
// statement its own kernel (a1 a2 a3, b1 b2 b3): the pipeline whose records tell which order an
// exec numbers nested graphs' nodes in. x in; wa = 3 (2x + 1) - 0.5, wb = (x - 4)^2 + 7 out.
const char* nested_orch();
// One rank's allreduce after a kernel (out of place: on one rank NCCL copies s to r): g in,
// s = 2g, r = s.
const char* reduce_orch();

struct RunOutput {
  int exit_code = -1;
  std::string out, err;
};
// orch-run in-process: parse `args` (as after the program name) and run them.
RunOutput orch_run(const std::vector<std::string>& args);

}  // namespace orch::tools_test
