// The benchmarks' checks of CUDA, NCCL and orch calls: a failed call prints where it was and
// what it said, and ends the benchmark (a benchmark that carries on after an error times
// nothing worth printing). CHECK_NCCL needs `nccl`, the loaded NCCL API
// (orch::rt::nccl::api()), in scope.
#pragma once

#include <cstdio>
#include <cstdlib>

#define CHECK_CUDA(call)                                                                          \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)
#define CHECK_NCCL(call)                                                                                \
  do {                                                                                                  \
    int r_ = (call);                                                                                    \
    if (r_ != 0) {                                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, nccl->describe(r_).c_str()); \
      std::exit(1);                                                                                     \
    }                                                                                                   \
  } while (0)
#define CHECK_ORCH(x)                                                                          \
  do {                                                                                         \
    const auto& r_ = (x);                                                                      \
    if (!r_.ok()) {                                                                            \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, r_.error().to_string().c_str()); \
      std::exit(1);                                                                            \
    }                                                                                          \
  } while (0)
