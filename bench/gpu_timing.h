// What the multi-GPU benchmarks share (scaling_bench, nvshmem_bench): launches timed with CUDA
// events, and the driver's version for their tables. CHECK_CUDA ends the benchmark on an error.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bench/check_calls.h"

namespace orch::bench {

// µs per launch of `launch` on stream `s`: after `warmups` launches, the median of `batches`
// batches of `per_batch` launches.
template <class F>
double median_us_per_launch(cudaStream_t s, int warmups, int batches, int per_batch, F&& launch) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a));
  CHECK_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < warmups; ++i) launch();
  CHECK_CUDA(cudaStreamSynchronize(s));
  std::vector<double> t;
  for (int batch = 0; batch < batches; ++batch) {
    CHECK_CUDA(cudaEventRecord(a, s));
    for (int i = 0; i < per_batch; ++i) launch();
    CHECK_CUDA(cudaEventRecord(b, s));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1000.0 / per_batch);
  }
  std::sort(t.begin(), t.end());
  CHECK_CUDA(cudaEventDestroy(a));
  CHECK_CUDA(cudaEventDestroy(b));
  return t[t.size() / 2];
}

// The driver's version as nvidia-smi prints it ("580.159.04"), else CUDA's number for it.
inline std::string driver_version() {
  std::ifstream f("/proc/driver/nvidia/version");
  std::string line;
  if (std::getline(f, line)) {
    std::istringstream words(line);
    std::string w;
    while (words >> w)
      if (std::count(w.begin(), w.end(), '.') >= 1 && std::isdigit(static_cast<unsigned char>(w[0]))) return w;
  }
  int v = 0;
  CHECK_CUDA(cudaDriverGetVersion(&v));
  return "CUDA " + std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10) + " driver";
}

}  // namespace orch::bench
