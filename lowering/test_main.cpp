// The one main() of orch_lowering_tests (lowering/ keeps its tests apart from tests/). The case
// that compiles ejected files with nvcc needs nvcc ($ORCH_NVCC, else the toolkit's): where there
// is none it is excluded and said so (SKIPPED), and run alone (ctest's orch_eject_nvcc_tests) the
// executable exits 77, which ctest reports as skipped.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "support/test_paths.h"

int main(int argc, char** argv) {
  // The tests run orchc and NVRTC: none of the caller's ORCH_* settings reach them.
  orch::test_paths::isolate_environment(ORCH_LOWERING_SOURCE_DIR,
                                        (orch::test_paths::build_root() / "test-cache").string());
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  const char* env = std::getenv("ORCH_NVCC");
  const std::string nvcc = env && *env ? env : "/usr/local/cuda/bin/nvcc";
  if (access(nvcc.c_str(), X_OK) != 0) {
    bool nvcc_only = false;
    for (int i = 1; i < argc; ++i)
      if (std::strstr(argv[i], "nvcc compiles") &&
          (std::strncmp(argv[i], "--test-case=", 12) == 0 || std::strncmp(argv[i], "-tc=", 4) == 0))
        nvcc_only = true;
    std::printf(
        "SKIPPED: \"eject: every ejected example nvcc compiles\": no nvcc at %s (set "
        "ORCH_NVCC)\n",
        nvcc.c_str());
    if (nvcc_only) return 77;
    ctx.addFilter("test-case-exclude", "*nvcc compiles*");
  }
  return ctx.run();
}
