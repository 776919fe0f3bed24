// NCCL, loaded at run time. The runtime links no NCCL and includes no nccl.h: the few types it
// passes are declared here with NCCL's values (stable since NCCL 2.0; runtime/tests checks them
// against nccl.h where that header is installed), and every function is looked up with dlsym
// in the library dlopen finds: $ORCH_NCCL_LIBRARY if set, else libnccl.so.2, else libnccl.so.
// A process that already has NCCL loaded (an application that made its own communicator) gets
// that same library back from dlopen, by its soname.
#pragma once

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <string>

#include "orch/runtime.h"

namespace orch::rt::nccl {

// ncclComm_t is `struct ncclComm*`; orch only passes it along.
using Comm = void*;
using Result = int;  // ncclResult_t
enum : int { kSuccess = 0, kInProgress = 7 };

// ncclDataType_t
enum DataType : int {
  kInt8 = 0,
  kUint8 = 1,
  kInt32 = 2,
  kUint32 = 3,
  kInt64 = 4,
  kUint64 = 5,
  kFloat16 = 6,
  kFloat32 = 7,
  kFloat64 = 8,
  kBfloat16 = 9,
};
// ncclRedOp_t
enum RedOp : int { kSum = 0, kProd = 1, kMax = 2, kMin = 3, kAvg = 4 };

constexpr size_t kUniqueIdBytes = 128;
struct UniqueId {  // ncclUniqueId, passed by value to ncclCommInitRank
  char internal[kUniqueIdBytes];
};

struct Api {
  std::string path;  // what was dlopen'ed
  int version = 0;   // ncclGetVersion: 22809 for 2.28.9

  Result (*GetVersion)(int*) = nullptr;
  Result (*GetUniqueId)(UniqueId*) = nullptr;
  Result (*CommInitRank)(Comm*, int, UniqueId, int) = nullptr;
  Result (*CommDestroy)(Comm) = nullptr;
  Result (*CommAbort)(Comm) = nullptr;
  Result (*CommUserRank)(Comm, int*) = nullptr;
  Result (*CommCount)(Comm, int*) = nullptr;
  Result (*CommCuDevice)(Comm, int*) = nullptr;
  Result (*CommGetAsyncError)(Comm, Result*) = nullptr;
  Result (*AllReduce)(const void*, void*, size_t, DataType, RedOp, Comm, cudaStream_t) = nullptr;
  Result (*Broadcast)(const void*, void*, size_t, DataType, int, Comm, cudaStream_t) = nullptr;
  Result (*AllGather)(const void*, void*, size_t, DataType, Comm, cudaStream_t) = nullptr;
  Result (*ReduceScatter)(const void*, void*, size_t, DataType, RedOp, Comm, cudaStream_t) = nullptr;
  const char* (*GetErrorString)(Result) = nullptr;
  const char* (*GetLastError)(Comm) = nullptr;  // optional (NCCL >= 2.13)

  // "ncclInvalidArgument (invalid argument): <NCCL's last error>", for messages.
  std::string describe(Result r, Comm comm = nullptr) const;
  // "2.28.9"
  std::string version_string() const;
};

// Loads NCCL from `path` exactly (no search, no environment variable), with every function orch
// uses; once per path, like api() (runtime/src/shared_library.h). Errors name the path,
// dlerror()'s reason or the missing symbol.
orch::Result<const Api*> open(const std::string& path);

// The process's NCCL: $ORCH_NCCL_LIBRARY if set, else libnccl.so.2, else libnccl.so. Loaded
// once per distinct path and kept for the life of the process (no dlclose: communicators and
// captured graphs may outlive any one user); a failed load is tried again next time.
orch::Result<const Api*> api();

// Error code ErrorCode::Nccl for a failed NCCL call.
Error error(const Api& api, Result r, const std::string& what, Comm comm = nullptr, std::string where = {});

}  // namespace orch::rt::nccl
