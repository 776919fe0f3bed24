// NVSHMEM's host library, loaded at run time like NCCL (nccl.h): the runtime links no NVSHMEM
// and includes none of its headers. The few types it passes are declared here with NVSHMEM
// 3.4.5's layouts (each a versioned struct NVSHMEM checks: version = (1 << 16) + size), and every
// function is looked up with dlsym in $ORCH_NVSHMEM_LIBRARY if set, else libnvshmem_host.so.3.
//
// Why nvshmemx_hostlib_init_attr and not nvshmemx_init_attr: the header's nvshmemx_init_attr is
// an inline wrapper around nvshmemi_init_thread, which lives in the static device library
// (libnvshmem_device.a) that an application links, not in libnvshmem_host.so. orch's kernels are
// linked with the device library by orchc, into CUBINs whose device state
// nvshmemx_culibrary_init fills in once the host library is initialised.
//
// Not wired into instantiate yet (docs/multi-gpu.md, "NVSHMEM"): the loader, its errors and the
// bootstrap are what the multi-GPU test (runtime/tests/nvshmem_gpu_test.cpp) runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "orch/runtime.h"

namespace orch::rt::nvshmem {

constexpr size_t kUniqueIdBytes = 128;
struct UniqueId {  // nvshmemx_uniqueid_v1
  int version = (1 << 16) + 128;
  char internal[124] = {};
};
static_assert(sizeof(UniqueId) == kUniqueIdBytes, "nvshmemx_uniqueid_t is 128 bytes");

struct UniqueIdArgs {  // nvshmemx_uniqueid_args_v1
  int version = (1 << 16) + 24;
  UniqueId* id = nullptr;
  int myrank = -1;
  int nranks = -1;
};
static_assert(sizeof(UniqueIdArgs) == 24, "nvshmemx_uniqueid_args_t is 24 bytes");

struct InitArgs {  // nvshmemx_init_args_v1
  int version = (1 << 16) + 128;
  UniqueIdArgs uid_args;
  char content[96] = {};
};
static_assert(sizeof(InitArgs) == 128, "nvshmemx_init_args_t is 128 bytes");

struct InitAttr {  // nvshmemx_init_attr_v1
  int version = (1 << 16) + 144;
  void* mpi_comm = nullptr;
  InitArgs args;
};
static_assert(sizeof(InitAttr) == 144, "nvshmemx_init_attr_t is 144 bytes");

constexpr unsigned kInitWithUniqueId = 1u << 3;  // NVSHMEMX_INIT_WITH_UNIQUEID

struct Api {
  std::string path;  // what was dlopen'ed
  int major = 0, minor = 0, patch = 0;

  void (*vendor_get_version_info)(int*, int*, int*) = nullptr;
  int (*get_uniqueid)(UniqueId*) = nullptr;
  int (*set_attr_uniqueid_args)(int, int, const UniqueId*, InitAttr*) = nullptr;
  int (*hostlib_init_attr)(unsigned, InitAttr*) = nullptr;
  void (*hostlib_finalize)() = nullptr;
  int (*my_pe)() = nullptr;
  int (*n_pes)() = nullptr;
  void* (*malloc)(size_t) = nullptr;
  void (*free)(void*) = nullptr;
  void (*barrier_all)() = nullptr;
  int (*culibrary_init)(void*) = nullptr;  // CUlibrary (cudaLibrary_t is the same handle)
  int (*cumodule_init)(void*) = nullptr;   // CUmodule

  std::string version_string() const;  // "3.4.5"
};

// Loads NVSHMEM's host library from `path` exactly (no search, no caching), with every function
// orch uses. Errors (ErrorCode::Unsupported) name the path, dlerror()'s reason or the missing
// symbol.
orch::Result<const Api*> open(const std::string& path);

// The process's NVSHMEM: $ORCH_NVSHMEM_LIBRARY if set, else libnvshmem_host.so.3; loaded once
// per path and kept for the life of the process. `version` (the artifact's nvshmem_version,
// "3.4.5"), where not empty, must be the library's exactly: the kernels' device library and the
// host library share their device state's layout.
orch::Result<const Api*> api(const std::string& version = "");

}  // namespace orch::rt::nvshmem
