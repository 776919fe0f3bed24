// Checks inside a rank process of the multi-GPU tests (multi_gpu_test.cpp, nvshmem_gpu_test.cpp,
// nvshmem_examples_gpu_test.cpp): a scenario run by run_rank_worker (test_util.h), outside any
// doctest case, whose exit status and stdout are what the test that spawned the ranks sees.
// Each failure prints one line, "rank R: CHECK FAILED at file:line: expression[: detail]";
// RANK_CHECK counts it and goes on, the others return 1 from the scenario. A scenario sets
// rank_checks().rank once it knows its rank, and returns 1 where rank_checks().failures is not 0.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdarg>
#include <cstdio>

namespace orch::test {

struct RankChecks {
  int rank = -1;     // in every failure's line
  int failures = 0;  // RANK_CHECKs that failed
};
inline RankChecks& rank_checks() {
  static RankChecks c;
  return c;
}

// "rank R: <kind> FAILED at <file>:<line>: <expr>", then ": " and printf(fmt, ...) where given.
inline void rank_failed(const char* kind, const char* file, int line, const char* expr) {
  std::printf("rank %d: %s FAILED at %s:%d: %s\n", rank_checks().rank, kind, file, line, expr);
  std::fflush(stdout);
}
__attribute__((format(printf, 5, 6))) inline void rank_failed(const char* kind, const char* file,
                                                              int line, const char* expr,
                                                              const char* fmt, ...) {
  std::printf("rank %d: %s FAILED at %s:%d: %s: ", rank_checks().rank, kind, file, line, expr);
  va_list args;
  va_start(args, fmt);
  std::vprintf(fmt, args);
  va_end(args);
  std::printf("\n");
  std::fflush(stdout);
}

}  // namespace orch::test

// Counts a failure and goes on.
#define RANK_CHECK(cond)                                             \
  do {                                                               \
    if (!(cond)) {                                                   \
      ::orch::test::rank_failed("CHECK", __FILE__, __LINE__, #cond); \
      ++::orch::test::rank_checks().failures;                        \
    }                                                                \
  } while (0)

// Returns 1 from the scenario; the optional rest is a printf format and its arguments.
#define RANK_REQUIRE(cond, ...)                                                                   \
  do {                                                                                            \
    if (!(cond)) {                                                                                \
      ::orch::test::rank_failed("REQUIRE", __FILE__, __LINE__, #cond __VA_OPT__(, ) __VA_ARGS__); \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

// An orch::Status or orch::Result that must be ok; prints its error.
#define RANK_REQUIRE_OK(x)                                               \
  do {                                                                   \
    const auto& rank_r_ = (x);                                           \
    if (!rank_r_.ok()) {                                                 \
      ::orch::test::rank_failed("REQUIRE", __FILE__, __LINE__, #x, "%s", \
                                rank_r_.error().to_string().c_str());    \
      return 1;                                                          \
    }                                                                    \
  } while (0)

// A CUDA call that must succeed; prints the error's name and text.
#define RANK_CUDA(x)                                                                     \
  do {                                                                                   \
    const cudaError_t rank_e_ = (x);                                                     \
    if (rank_e_ != cudaSuccess) {                                                        \
      ::orch::test::rank_failed("CUDA", __FILE__, __LINE__, #x, "%s (%s)",               \
                                cudaGetErrorString(rank_e_), cudaGetErrorName(rank_e_)); \
      return 1;                                                                          \
    }                                                                                    \
  } while (0)
