// NCCL through dlopen/dlsym: see nccl.h.
#include "runtime/src/nccl.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

namespace orch::rt::nccl {

namespace {

std::mutex& mutex() {
  static std::mutex m;
  return m;
}

// Loaded libraries by the path asked for; never freed (see api()).
std::map<std::string, std::unique_ptr<Api>>& loaded() {
  static auto* m = new std::map<std::string, std::unique_ptr<Api>>();
  return *m;
}

const char* result_name(Result r) {
  static const char* const names[] = {"ncclSuccess",        "ncclUnhandledCudaError", "ncclSystemError",
                                      "ncclInternalError",  "ncclInvalidArgument",    "ncclInvalidUsage",
                                      "ncclRemoteError",    "ncclInProgress"};
  return r >= 0 && r < static_cast<int>(sizeof(names) / sizeof(names[0])) ? names[r] : "ncclResult?";
}

// Looks `name` up; false (and *missing set) when absent.
template <class F>
bool find(void* lib, const char* name, F* out, std::string* missing) {
  void* s = dlsym(lib, name);
  if (!s) {
    if (missing->empty()) *missing = name;
    return false;
  }
  *out = reinterpret_cast<F>(s);
  return true;
}

orch::Result<const Api*> open_locked(const std::string& path) {
  auto& cache = loaded();
  auto it = cache.find(path);
  if (it != cache.end()) return static_cast<const Api*>(it->second.get());

  (void)dlerror();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    return Error(ErrorCode::Nccl, "cannot load NCCL from '" + path + "': " + (why ? why : "dlopen failed"));
  }
  auto api = std::make_unique<Api>();
  api->path = path;
  std::string missing;
  find(lib, "ncclGetVersion", &api->GetVersion, &missing);
  find(lib, "ncclGetUniqueId", &api->GetUniqueId, &missing);
  find(lib, "ncclCommInitRank", &api->CommInitRank, &missing);
  find(lib, "ncclCommDestroy", &api->CommDestroy, &missing);
  find(lib, "ncclCommAbort", &api->CommAbort, &missing);
  find(lib, "ncclCommUserRank", &api->CommUserRank, &missing);
  find(lib, "ncclCommCount", &api->CommCount, &missing);
  find(lib, "ncclCommCuDevice", &api->CommCuDevice, &missing);
  find(lib, "ncclCommGetAsyncError", &api->CommGetAsyncError, &missing);
  find(lib, "ncclAllReduce", &api->AllReduce, &missing);
  find(lib, "ncclBroadcast", &api->Broadcast, &missing);
  find(lib, "ncclAllGather", &api->AllGather, &missing);
  find(lib, "ncclReduceScatter", &api->ReduceScatter, &missing);
  find(lib, "ncclGetErrorString", &api->GetErrorString, &missing);
  if (!missing.empty()) {
    dlclose(lib);
    return Error(ErrorCode::Nccl, "'" + path + "' is not a usable NCCL library: it has no symbol " + missing);
  }
  std::string optional;
  find(lib, "ncclGetLastError", &api->GetLastError, &optional);
  Result r = api->GetVersion(&api->version);
  if (r != kSuccess) {
    dlclose(lib);
    return Error(ErrorCode::Nccl, "NCCL from '" + path + "': ncclGetVersion failed: " + result_name(r));
  }
  // ncclAvg and bf16 arrived in 2.10; codes are major * 10000 + minor * 100 + patch since 2.9.
  if (api->version < 21000) {
    std::string v = std::to_string(api->version);
    dlclose(lib);
    return Error(ErrorCode::Nccl, "NCCL from '" + path + "' is version code " + v + "; orch needs NCCL 2.10 or newer");
  }
  const Api* out = api.get();
  cache.emplace(path, std::move(api));
  return out;
}

}  // namespace

std::string Api::version_string() const {
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

std::string Api::describe(Result r, Comm comm) const {
  std::string s = result_name(r);
  if (GetErrorString) {
    const char* text = GetErrorString(r);
    if (text && *text) s += std::string(" (") + text + ")";
  }
  if (GetLastError) {
    const char* last = GetLastError(comm);
    if (last && *last) s += std::string(": ") + last;
  }
  return s;
}

orch::Result<const Api*> open(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex());
  return open_locked(path);
}

orch::Result<const Api*> api() {
  std::lock_guard<std::mutex> lock(mutex());
  const char* env = std::getenv("ORCH_NCCL_LIBRARY");
  if (env && *env) {
    orch::Result<const Api*> r = open_locked(env);
    if (!r.ok())
      return Error(ErrorCode::Nccl, r.error().message() + " (the path comes from ORCH_NCCL_LIBRARY)");
    return r;
  }
  orch::Result<const Api*> first = open_locked("libnccl.so.2");
  if (first.ok()) return first;
  orch::Result<const Api*> second = open_locked("libnccl.so");
  if (second.ok()) return second;
  return Error(ErrorCode::Nccl, "the pipeline needs NCCL, which could not be loaded: " + first.error().message() +
                                    "; " + second.error().message() +
                                    ". Install NCCL 2.10 or newer (libnccl.so.2), put its folder on "
                                    "LD_LIBRARY_PATH, or set ORCH_NCCL_LIBRARY to the library's path");
}

Error error(const Api& api, Result r, const std::string& what, Comm comm, std::string where) {
  return Error(ErrorCode::Nccl, what + ": " + api.describe(r, comm), std::move(where));
}

}  // namespace orch::rt::nccl
