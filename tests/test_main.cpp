// The one main() of orch_tests; every *_test.cpp adds its test cases to this executable.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "support/test_paths.h"

int main(int argc, char** argv) {
  // None of the caller's ORCH_* settings (a targets folder, printed passes) reach the tests.
  orch::test_paths::isolate_environment(ORCH_TESTS_SOURCE_DIR, "");
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  return ctx.run();
}
