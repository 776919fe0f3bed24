// NCCL through dlopen/dlsym: see nccl.h.
#include "runtime/src/nccl.h"

#include <string>

#include "runtime/src/shared_library.h"

namespace orch::rt::nccl {

namespace {

const dynlib::Kind kNccl{ErrorCode::Nccl, "NCCL", "NCCL library"};

const char* result_name(Result r) {
  static const char* const names[] = {"ncclSuccess",        "ncclUnhandledCudaError", "ncclSystemError",
                                      "ncclInternalError",  "ncclInvalidArgument",    "ncclInvalidUsage",
                                      "ncclRemoteError",    "ncclInProgress"};
  return r >= 0 && r < static_cast<int>(sizeof(names) / sizeof(names[0])) ? names[r] : "ncclResult?";
}

void find_symbols(dynlib::Symbols& s, Api& api) {
  s.require("ncclGetVersion", &api.GetVersion);
  s.require("ncclGetUniqueId", &api.GetUniqueId);
  s.require("ncclCommInitRank", &api.CommInitRank);
  s.require("ncclCommDestroy", &api.CommDestroy);
  s.require("ncclCommAbort", &api.CommAbort);
  s.require("ncclCommUserRank", &api.CommUserRank);
  s.require("ncclCommCount", &api.CommCount);
  s.require("ncclCommCuDevice", &api.CommCuDevice);
  s.require("ncclCommGetAsyncError", &api.CommGetAsyncError);
  s.require("ncclAllReduce", &api.AllReduce);
  s.require("ncclBroadcast", &api.Broadcast);
  s.require("ncclAllGather", &api.AllGather);
  s.require("ncclReduceScatter", &api.ReduceScatter);
  s.require("ncclGetErrorString", &api.GetErrorString);
  s.optional("ncclGetLastError", &api.GetLastError);
}

Status check_version(Api& api) {
  Result r = api.GetVersion(&api.version);
  if (r != kSuccess)
    return Error(ErrorCode::Nccl, "NCCL from '" + api.path + "': ncclGetVersion failed: " + result_name(r));
  // ncclAvg and bf16 arrived in 2.10; codes are major * 10000 + minor * 100 + patch since 2.9.
  if (api.version < 21000)
    return Error(ErrorCode::Nccl, "NCCL from '" + api.path + "' is version code " + std::to_string(api.version) +
                                      "; orch needs NCCL 2.10 or newer");
  return {};
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
  return dynlib::load_once<Api>(kNccl, path, find_symbols, check_version);
}

orch::Result<const Api*> api() {
  if (const char* env = dynlib::path_from_env("ORCH_NCCL_LIBRARY")) {
    orch::Result<const Api*> r = open(env);
    if (!r.ok())
      return Error(ErrorCode::Nccl, r.error().message() + " (the path comes from ORCH_NCCL_LIBRARY)");
    return r;
  }
  orch::Result<const Api*> first = open("libnccl.so.2");
  if (first.ok()) return first;
  orch::Result<const Api*> second = open("libnccl.so");
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
