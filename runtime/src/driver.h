// The few CUDA driver calls the runtime needs that the runtime API lacks or makes slower: where
// an allocation starts and ends, a JIT compile that returns its log, and adding a kernel node.
// runtime/ does not link libcuda, so they come from cudaGetDriverEntryPointByVersion, once, on
// first use.
#pragma once

#include <cuda.h>

#include <string>

#include "orch/runtime.h"

namespace orch::rt {

struct Driver {
  CUresult (*mem_get_address_range)(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) = nullptr;
  CUresult (*pointer_get_attribute)(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) = nullptr;
  CUresult (*link_create)(unsigned n, CUjit_option* options, void** values, CUlinkState* state) = nullptr;
  CUresult (*link_add_data)(CUlinkState state, CUjitInputType type, void* data, size_t size, const char* name,
                            unsigned n, CUjit_option* options, void** values) = nullptr;
  CUresult (*link_destroy)(CUlinkState state) = nullptr;
  CUresult (*get_error_name)(CUresult e, const char** name) = nullptr;
  // Every kernel node the runtime builds (executable_build.cpp: add_kernel_node says why the driver's).
  using GraphAddNode = CUresult (*)(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps,
                                    const CUgraphEdgeData* edges, size_t n, CUgraphNodeParams* params);
  GraphAddNode graph_add_node = nullptr;
};

// The entry points found (any may be null: the caller says what it could not check).
const Driver& driver();

// "CUDA_ERROR_INVALID_VALUE" (or the number when the driver cannot name it).
std::string driver_error_name(CUresult e);

// cuda_error() for a driver call: "<what>: CUDA_ERROR_X" at `where`; a sticky error (the
// driver's numbers of those are the runtime's) is ContextLost, as there.
Error driver_call_error(CUresult e, const std::string& what, std::string where = {});

// Compiles `ptx` (NUL-terminated) with the driver's JIT and returns its error log and info log
// (ptxas's messages), or why it could not. Used only to explain a PTX that failed to load.
std::string jit_log(const char* ptx, size_t size);

}  // namespace orch::rt
