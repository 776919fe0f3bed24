// orch_lsp_tests' main: doctest's, with the checkout's target profiles for every check (the
// tests never read a profile from outside the repository).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  setenv("ORCH_TARGETS_DIR", ORCH_LSP_SOURCE_DIR "/targets", 1);
  doctest::Context context(argc, argv);
  return context.run();
}
