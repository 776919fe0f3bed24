// Libraries the runtime loads at run time instead of linking them (NCCL: nccl.cpp; NVSHMEM's
// host library: nvshmem.cpp): dlopen with RTLD_NOW | RTLD_LOCAL, each function looked up with
// dlsym into a table of function pointers (an Api struct with a `path` member), loaded once per
// distinct path and kept for the life of the process (no dlclose once loaded: communicators,
// captured graphs and symmetric memory may outlive any one user). A failed load is not kept: the
// next call tries again. Errors name the path and dlerror()'s reason, or the first missing symbol.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "orch/runtime.h"

namespace orch::rt::dynlib {

// What a loader's errors call the library.
struct Kind {
  ErrorCode code;  // of every error
  // "NCCL": "cannot load NCCL from '<path>': <dlerror()>"
  const char* name;
  // "NCCL library": "'<path>' is not a usable NCCL library: it has no symbol <symbol>"
  const char* library;
};

// dlopen(path, RTLD_NOW | RTLD_LOCAL), or "cannot load <name> from '<path>': <dlerror()>".
Result<void*> open(const Kind& kind, const std::string& path);
void close(void* handle);

// The value of the environment variable `variable` (ORCH_NCCL_LIBRARY) where it is set and not
// empty, else nullptr: the path that replaces a loader's default.
const char* path_from_env(const char* variable);

// dlsym in one library, remembering the first required name that was not there.
class Symbols {
 public:
  explicit Symbols(void* handle) : handle_(handle) {}
  template <class F>
  void require(const char* name, F* out) {
    if (!optional(name, out) && missing_.empty()) missing_ = name;
  }
  // Leaves *out as it was (nullptr) where the library lacks `name`.
  template <class F>
  bool optional(const char* name, F* out) {
    void* s = find(name);
    if (s) *out = reinterpret_cast<F>(s);
    return s != nullptr;
  }
  // The first required name that was missing; empty when none was.
  const std::string& missing() const { return missing_; }

 private:
  void* find(const char* name) const;
  void* handle_;
  std::string missing_;
};

// Api from `path`, loaded on the first call for that path and the same table on every later one.
// The first load dlopens `path`, sets api.path, calls bind(Symbols&, Api&) to look the functions
// up, and then, where none was missing, check(Api&) -> Status (a version check, say); a missing
// symbol or a failed check closes the library again and is the error. One cache (and one lock,
// held through the load) per Api type, for the process.
template <class Api, class Bind, class Check>
Result<const Api*> load_once(const Kind& kind, const std::string& path, Bind bind, Check check) {
  struct Cache {
    std::mutex mutex;
    std::map<std::string, std::unique_ptr<Api>> loaded;
  };
  static auto* cache = new Cache();  // never destroyed: a library may be used during exit
  std::lock_guard<std::mutex> lock(cache->mutex);
  auto it = cache->loaded.find(path);
  if (it != cache->loaded.end()) return static_cast<const Api*>(it->second.get());

  Result<void*> handle = open(kind, path);
  if (!handle.ok()) return handle.error();
  auto api = std::make_unique<Api>();
  api->path = path;
  Symbols symbols(*handle);
  bind(symbols, *api);
  Status s = symbols.missing().empty()
                 ? Status(check(*api))
                 : Status(Error(kind.code, "'" + path + "' is not a usable " + kind.library +
                                               ": it has no symbol " + symbols.missing()));
  if (!s.ok()) {
    close(*handle);
    return s.error();
  }
  const Api* out = api.get();
  cache->loaded.emplace(path, std::move(api));
  return out;
}

}  // namespace orch::rt::dynlib
