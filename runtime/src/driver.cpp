#include "runtime/src/driver.h"

#include <cuda_runtime_api.h>

#include <mutex>

#include "runtime/src/internal.h"

namespace orch::rt {

namespace {

// CUDA 12.0's ABI of each symbol unless said: every function here has had it since long before,
// and a driver for CUDA 12.0 or newer provides it.
constexpr unsigned kAbiVersion = 12000;

template <class F>
void find(const char* symbol, F* out, unsigned abi = kAbiVersion) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(symbol, &fn, abi, cudaEnableDefault, &status) == cudaSuccess &&
      status == cudaDriverEntryPointSuccess)
    *out = reinterpret_cast<F>(fn);
  else
    (void)cudaGetLastError();
}

}  // namespace

const Driver& driver() {
  static Driver d;
  static std::once_flag once;
  std::call_once(once, [] {
    find("cuMemGetAddressRange", &d.mem_get_address_range);
    find("cuPointerGetAttribute", &d.pointer_get_attribute);
    find("cuLinkCreate", &d.link_create);
    find("cuLinkAddData", &d.link_add_data);
    find("cuLinkDestroy", &d.link_destroy);
    find("cuGetErrorName", &d.get_error_name);
    find("cuGraphAddNode", &d.graph_add_node, 12030);  // 12.3's, the one with edge data
  });
  return d;
}

std::string driver_error_name(CUresult e) {
  const char* name = nullptr;
  if (driver().get_error_name && driver().get_error_name(e, &name) == CUDA_SUCCESS && name) return name;
  return "CUresult " + std::to_string(static_cast<int>(e));
}

// The sticky errors (is_sticky) have the same numbers in both APIs.
static_assert(int{CUDA_ERROR_ECC_UNCORRECTABLE} == int{cudaErrorECCUncorrectable} &&
                  int{CUDA_ERROR_CONTAINED} == int{cudaErrorContained} &&
                  int{CUDA_ERROR_ILLEGAL_ADDRESS} == int{cudaErrorIllegalAddress} &&
                  int{CUDA_ERROR_LAUNCH_TIMEOUT} == int{cudaErrorLaunchTimeout} &&
                  int{CUDA_ERROR_ASSERT} == int{cudaErrorAssert} &&
                  int{CUDA_ERROR_HARDWARE_STACK_ERROR} == int{cudaErrorHardwareStackError} &&
                  int{CUDA_ERROR_ILLEGAL_INSTRUCTION} == int{cudaErrorIllegalInstruction} &&
                  int{CUDA_ERROR_MISALIGNED_ADDRESS} == int{cudaErrorMisalignedAddress} &&
                  int{CUDA_ERROR_INVALID_ADDRESS_SPACE} == int{cudaErrorInvalidAddressSpace} &&
                  int{CUDA_ERROR_INVALID_PC} == int{cudaErrorInvalidPc} &&
                  int{CUDA_ERROR_LAUNCH_FAILED} == int{cudaErrorLaunchFailure} &&
                  int{CUDA_ERROR_TENSOR_MEMORY_LEAK} == int{cudaErrorTensorMemoryLeak} &&
                  int{CUDA_ERROR_MPS_CLIENT_TERMINATED} == int{cudaErrorMpsClientTerminated} &&
                  int{CUDA_ERROR_EXTERNAL_DEVICE} == int{cudaErrorExternalDevice},
              "a sticky driver error has another number in the runtime API");

Error driver_call_error(CUresult e, const std::string& what, std::string where) {
  const cudaError_t same = static_cast<cudaError_t>(e);
  if (is_sticky(same)) return cuda_error(same, what, std::move(where));
  return Error(ErrorCode::Cuda, what + ": " + driver_error_name(e), std::move(where), static_cast<int>(e));
}

std::string jit_log(const char* ptx, size_t size) {
  const Driver& d = driver();
  if (!d.link_create || !d.link_add_data || !d.link_destroy) return "the driver's JIT linker is not available";
  static char error_log[16384], info_log[16384];  // under the lock below
  static std::mutex lock;
  std::lock_guard<std::mutex> guard(lock);
  error_log[0] = info_log[0] = '\0';
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, CU_JIT_INFO_LOG_BUFFER,
                            CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, CU_JIT_LOG_VERBOSE};
  void* values[] = {error_log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof error_log)), info_log,
                    reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof info_log)),
                    reinterpret_cast<void*>(static_cast<uintptr_t>(1))};
  CUlinkState state = nullptr;
  CUresult r = d.link_create(5, options, values, &state);
  if (r != CUDA_SUCCESS) return "cuLinkCreate failed: " + driver_error_name(r);
  // Compiling the PTX is what reports its errors; linking would add unresolved device-runtime
  // symbols that the library loader resolves itself, so it is not attempted.
  r = d.link_add_data(state, CU_JIT_INPUT_PTX, const_cast<char*>(ptx), size, "kernel.ptx", 0, nullptr, nullptr);
  (void)d.link_destroy(state);
  error_log[sizeof error_log - 1] = info_log[sizeof info_log - 1] = '\0';
  std::string out = error_log;
  if (info_log[0]) out += std::string(out.empty() ? "" : "\n") + info_log;
  if (r == CUDA_SUCCESS && out.empty()) return "the driver's JIT compiles this PTX without a message";
  if (out.empty()) out = "cuLinkAddData: " + driver_error_name(r) + ", with an empty log";
  return out;
}

}  // namespace orch::rt
