// CUDA errors as orch Errors: the ordinary ones name the call, and the sticky ones (a kernel
// faulted; the context is lost for the whole process) say so instead of pointing at whatever
// call happened to notice them.
#include <string>

#include "runtime/src/internal.h"

namespace orch::rt {

bool is_sticky(cudaError_t e) {
  // driver_types.h: "This leaves the process in an inconsistent state and any further CUDA work
  // will return the same error. To continue using CUDA, the process must be terminated and
  // relaunched." (cudaErrorAssert: "The device cannot be used again.")
  switch (e) {
    case cudaErrorECCUncorrectable:
    case cudaErrorContained:
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorTensorMemoryLeak:
    case cudaErrorMpsClientTerminated:
    case cudaErrorExternalDevice:
      return true;
    default:
      return false;
  }
}

Status context_status() {
  const cudaError_t e = cudaStreamQuery(cudaStreamLegacy);
  if (e == cudaSuccess || e == cudaErrorNotReady) return {};
  (void)cudaGetLastError();
  if (is_sticky(e)) return cuda_error(e, "checking the CUDA context");
  return {};
}

Error cuda_error(cudaError_t e, const std::string& what, std::string where) {
  const std::string name = std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
  if (is_sticky(e))
    // Where it was noticed is not where it happened: no statement is named.
    return Error(ErrorCode::ContextLost,
                 "the CUDA context is lost: " + name +
                     ". A kernel faulted earlier, and CUDA reports such a fault at the next call that "
                     "waits for the GPU or submits work, here: " + what +
                     ". CUDA does not say which kernel faulted (compute-sanitizer, or CUDA_LAUNCH_BLOCKING=1, "
                     "finds it). Every later CUDA call in this process fails the same way; only a new "
                     "process can use the GPU again",
                 {}, static_cast<int>(e));
  return Error(ErrorCode::Cuda, what + ": " + name, std::move(where), static_cast<int>(e));
}

Error no_device_error(cudaError_t e) {
  if (is_sticky(e)) return cuda_error(e, "looking for the CUDA device");
  return Error(ErrorCode::NoDevice,
               std::string("no CUDA device: ") + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")", {},
               static_cast<int>(e));
}

Error out_of_memory() { return Error(ErrorCode::OutOfMemory, "out of memory"); }

}  // namespace orch::rt

namespace orch {

Error cuda_error(int e, const std::string& what) { return rt::cuda_error(static_cast<cudaError_t>(e), what); }

}  // namespace orch
