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
// Pipeline::instantiate starts NVSHMEM through Session (below) over the pipeline's communicator,
// initialises the modules that hold NVSHMEM's device state (nvshmemx_culibrary_init), and
// allocates the symmetric buffers with nvshmem_malloc (executable_nvshmem.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
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
// nvshmemx_init_status(): NVSHMEM_STATUS_IS_INITIALIZED and the values after it (the MPG ones)
// mean initialised.
constexpr int kStatusIsInitialized = 2;

// The symbol NVSHMEM's device library defines in every module linked with it: the device state
// nvshmemx_culibrary_init fills in. A library without it has nothing to initialise.
constexpr const char* kDeviceStateSymbol = "nvshmemi_device_state_d";

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
  int (*culibrary_finalize)(void*) = nullptr;  // before the library is unloaded
  int (*init_status)() = nullptr;          // nvshmemx_init_status

  std::string version_string() const;  // "3.4.5"
};

// Loads NVSHMEM's host library from `path` exactly (no search, no environment variable), with
// every function orch uses; once per path, like api() (runtime/src/shared_library.h). Errors
// (ErrorCode::Nvshmem) name the path, dlerror()'s reason or the missing symbol.
orch::Result<const Api*> open(const std::string& path);

// The process's NVSHMEM: $ORCH_NVSHMEM_LIBRARY if set, else libnvshmem_host.so.3; loaded once
// per path and kept for the life of the process. `version` (the artifact's nvshmem_version,
// "3.4.5"), where not empty, must be the library's exactly: the kernels' device library and the
// host library share their device state's layout.
orch::Result<const Api*> api(const std::string& version = "");

// orch's NVSHMEM in this process. NVSHMEM is initialised once per process, over every rank at
// once, so every Executable that needs it shares one Session: the first join() initialises it
// (or adopts the application's, where NVSHMEM is already initialised), the others take the same
// one if they ask for the same rank and world size. NVSHMEM that orch started stays started
// until the process ends: NVSHMEM 3.x keeps its bootstrap across a finalise, so a later start in
// the same process would not start over with new ranks (NVIDIA/nvshmem#68), and a finalise needs
// every PE at once, which no destructor can promise. Thread-safe: join() holds a process-wide
// lock, so a second thread waits for an initialisation under way.
class Session {
 public:
  // Rank `rank` of `world_size`. Where NVSHMEM is not initialised yet, `share` is called (on
  // every rank) with rank 0's fresh unique id in its argument on rank 0; it must leave rank 0's
  // id there on every rank (orch broadcasts it over the pipeline's NCCL communicator), and every
  // rank must join at the same time: the initialisation waits for all of them. Errors are
  // ErrorCode::Nvshmem (InvalidValue for a rank outside the world) and name what failed.
  static orch::Result<std::shared_ptr<Session>> join(const Api& api, int rank, int world_size,
                                                     const std::function<orch::Status(UniqueId*)>& share);
  ~Session();  // finalises NVSHMEM where orch started it: only after end_for_tests()
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const Api& api() const { return *api_; }
  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  bool owned() const { return owned_; }  // orch initialised NVSHMEM
  // Different for every initialisation in this process: a module initialised under an earlier
  // one needs nvshmemx_culibrary_init again.
  uint64_t generation() const { return generation_; }

  // Tests only (a fake host library per test): lets go of the session orch started, so that it
  // ends (finalised) when its last holder lets go, and the next join() starts afresh.
  static void end_for_tests();

 private:
  Session() = default;
  const Api* api_ = nullptr;
  int rank_ = 0, world_size_ = 1;
  bool owned_ = false;
  bool registered_ = false;  // join() succeeded: the process's session
  uint64_t generation_ = 0;
};

// Memory from NVSHMEM's symmetric heap, freed (nvshmem_free, a collective: every PE frees its
// buffers in the same order) before the Session it came from can end.
class SymmetricMemory {
 public:
  SymmetricMemory() = default;
  SymmetricMemory(std::shared_ptr<Session> session, void* ptr) : session_(std::move(session)), ptr_(ptr) {}
  SymmetricMemory(SymmetricMemory&& o) noexcept { *this = std::move(o); }
  SymmetricMemory& operator=(SymmetricMemory&& o) noexcept {
    if (this != &o) {
      reset();
      session_ = std::move(o.session_);
      ptr_ = o.ptr_;
      o.ptr_ = nullptr;
    }
    return *this;
  }
  ~SymmetricMemory() { reset(); }
  void reset() {
    if (ptr_) session_->api().free(ptr_);
    ptr_ = nullptr;
    session_.reset();
  }
  void* get() const { return ptr_; }
  explicit operator bool() const { return ptr_ != nullptr; }

 private:
  std::shared_ptr<Session> session_;
  void* ptr_ = nullptr;
};

}  // namespace orch::rt::nvshmem
