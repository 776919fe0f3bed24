// Shared between the runtime's CUDA sources: the loaded pipeline and error helpers.
#pragma once

#include <mutex>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "orch/runtime.h"
#include "runtime/src/cuda_owners.h"
#include "runtime/src/plan.h"

namespace orch {

struct Pipeline::Impl {
  std::unique_ptr<uint64_t[]> storage;  // the file, 8-byte aligned; fb points into it
  size_t size = 0;
  const fb::Pipeline* fb = nullptr;
  std::string name;
  std::string image;
  int device = 0;
  int arch = 0;                               // 90 for sm_90
  std::vector<rt::Library> libraries;         // one per distinct image
  std::vector<cudaKernel_t> kernels;          // per Pipeline.kernels

  // Dynamic shared memory above 48 KiB needs a kernel attribute; instantiate() may run on
  // several threads, so the record of what was set is locked.
  mutable std::mutex attribute_mutex;
  mutable std::vector<unsigned> shared_bytes_allowed;  // per kernel

  Status allow_shared_bytes(int kernel, unsigned bytes) const;
};

namespace rt {

// An error for a failed CUDA call: "<what>: cudaErrorX (text)".
Error cuda_error(cudaError_t e, const std::string& what, std::string where = {});

// "no CUDA device: ..." when cudaGetDevice fails.
Error no_device_error(cudaError_t e);

}  // namespace rt
}  // namespace orch
