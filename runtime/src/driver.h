// The few CUDA driver calls the runtime needs that the runtime API lacks: where an allocation
// starts and ends, and a JIT compile that returns its log. runtime/ does not link libcuda, so
// they come from cudaGetDriverEntryPointByVersion, once, on first use.
#pragma once

#include <cuda.h>

#include <string>

namespace orch::rt {

struct Driver {
  CUresult (*mem_get_address_range)(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) = nullptr;
  CUresult (*pointer_get_attribute)(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) = nullptr;
  CUresult (*link_create)(unsigned n, CUjit_option* options, void** values, CUlinkState* state) = nullptr;
  CUresult (*link_add_data)(CUlinkState state, CUjitInputType type, void* data, size_t size, const char* name,
                            unsigned n, CUjit_option* options, void** values) = nullptr;
  CUresult (*link_destroy)(CUlinkState state) = nullptr;
  CUresult (*get_error_name)(CUresult e, const char** name) = nullptr;
};

// The entry points found (any may be null: the caller says what it could not check).
const Driver& driver();

// "CUDA_ERROR_INVALID_VALUE" (or the number when the driver cannot name it).
std::string driver_error_name(CUresult e);

// Compiles `ptx` (NUL-terminated) with the driver's JIT and returns its error log and info log
// (ptxas's messages), or why it could not. Used only to explain a PTX that failed to load.
std::string jit_log(const char* ptx, size_t size);

}  // namespace orch::rt
