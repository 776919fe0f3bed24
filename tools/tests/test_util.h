// Helpers shared by orch_tools_tests.
#pragma once

#include <string>
#include <vector>

namespace orch::tools_test {

// Empty where a CUDA device can run the tests, else why not ("no CUDA device: ...").
const std::string& gpu_unavailable_reason();
// A temporary folder for this run of the tests (removed at exit unless ORCH_KEEP_TEST_FILES).
const std::string& temp_dir();
// examples/embed_saxpy/saxpy.orch compiled with orchc (once); empty (and *log says why) on failure.
std::string compiled_saxpy(std::string* log);

// Any .orch file compiled with orchc into the temporary folder (once per path).
std::string compiled(const std::string& orch_file, std::string* log);
// The acceptance examples' folder ($ORCH_SPEC_DIR, else the build's ORCH_SPEC_DIR).
std::string spec_dir();

struct RunOutput {
  int exit_code = -1;
  std::string out, err;
};
// orch-run in-process: parse `args` (as after the program name) and run them.
RunOutput orch_run(const std::vector<std::string>& args);

}  // namespace orch::tools_test
