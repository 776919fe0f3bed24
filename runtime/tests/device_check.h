// Whether this machine has a CUDA device that runs the sm_90 examples, for the test mains of
// the runtime's and the tools' tests (their GPU suites are skipped, with this reason, without).
#pragma once

#include <cuda_runtime_api.h>

#include <string>

namespace orch::test {

// Empty when device `device` exists and has compute capability 9.0 or newer, else why not
// ("no CUDA device: ...").
inline std::string sm90_device_problem(int device = 0) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string("no CUDA device: ") + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + " = " +
           std::to_string(static_cast<int>(e)) + ")";
  }
  if (count <= device)
    return device == 0 ? std::string("no CUDA device: cudaGetDeviceCount found none")
                       : "only " + std::to_string(count) + " CUDA device(s); device " + std::to_string(device) +
                             " is needed";
  int major = 0;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess || major < 9) {
    (void)cudaGetLastError();
    return "CUDA device " + std::to_string(device) + " cannot run the sm_90 examples (compute capability " +
           std::to_string(major) + ".x)";
  }
  return std::string();
}

}  // namespace orch::test
