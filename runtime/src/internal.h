// Shared between the runtime's CUDA sources: the loaded pipeline and error helpers.
#pragma once

#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "artifact/artifact.h"
#include "orch/runtime.h"
#include "runtime/src/cuda_owners.h"
#include "runtime/src/nvshmem.h"
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
  std::vector<std::unique_ptr<char[]>> jit_logs;  // the JIT's log buffers, kept while libraries live
  std::vector<rt::Library> libraries;         // one per distinct image
  std::vector<cudaKernel_t> kernels;          // per Pipeline.kernels

  // NVSHMEM: its host library (the version the kernels were linked with), loaded at load when
  // the pipeline uses it; per library, whether it holds NVSHMEM's device state
  // (nvshmem::kDeviceStateSymbol), which nvshmemx_culibrary_init fills in once NVSHMEM runs, and
  // the Session generation it was last filled in under (instantiate() may run on several threads).
  const rt::nvshmem::Api* nvshmem = nullptr;
  std::vector<bool> nvshmem_libraries;
  mutable std::mutex nvshmem_mutex;
  mutable uint64_t nvshmem_generation = 0;
  Status init_nvshmem_libraries(const rt::nvshmem::Session& session) const;
  // NVSHMEM forgets the libraries it initialised (nvshmemx_culibrary_finalize) before they go.
  ~Impl();

  // Dynamic shared memory above 48 KiB needs a kernel attribute; instantiate() may run on
  // several threads, so the record of what was set is locked.
  mutable std::mutex attribute_mutex;
  mutable std::vector<unsigned> shared_bytes_allowed;  // per kernel

  // Up to this many bytes of dynamic shared memory need no attribute.
  static constexpr unsigned kDefaultSharedBytes = 48 * 1024;
  Status allow_shared_bytes(int kernel, unsigned bytes) const;
};

namespace rt {

// True for the errors after which the process's CUDA context is unusable (a kernel faulted):
// every later CUDA call returns the same error.
bool is_sticky(cudaError_t e);

// An error for a failed CUDA call: "<what>: cudaErrorX (text)", at `where`. A sticky error is
// ContextLost instead, with no `where`: the call that notices a fault is not its cause.
Error cuda_error(cudaError_t e, const std::string& what, std::string where = {});
// OK, or ContextLost when a kernel faulted earlier in this process: asked without waiting for the
// GPU (cudaStreamQuery on the legacy stream returns the sticky error, and nothing else it might
// say is taken as a failure).
Status context_status();

// "no CUDA device: ..." when cudaGetDevice fails.
Error no_device_error(cudaError_t e);

// OutOfMemory, "out of memory": short enough to need no allocation (std::string's small
// buffer), so it can be made when memory has run out.
Error out_of_memory();

// Runs `f` (returning Status or Result<T>) and turns an exception escaping it into an Error:
// the public calls run their bodies through this, so std::bad_alloc (or std::length_error from
// a size no container can hold) never leaves the runtime.
template <class F>
auto guarded(F&& f) noexcept -> decltype(f()) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  } catch (const std::exception& e) {
    try {
      return Error(ErrorCode::InvalidArgument, std::string("unexpected exception in the runtime: ") + e.what());
    } catch (...) {
    }
  } catch (...) {
    try {
      return Error(ErrorCode::InvalidArgument, "unexpected exception in the runtime");
    } catch (...) {
    }
  }
  return out_of_memory();
}

}  // namespace rt
}  // namespace orch
