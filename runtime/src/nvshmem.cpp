// NVSHMEM through dlopen/dlsym: see nvshmem.h.
#include "runtime/src/nvshmem.h"

#include <dlfcn.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>

namespace orch::rt::nvshmem {

namespace {

std::mutex& mutex() {
  static std::mutex m;
  return m;
}

// Loaded libraries by the path asked for; never freed (symmetric memory and initialised modules
// may outlive any one user).
std::map<std::string, std::unique_ptr<Api>>& loaded() {
  static auto* m = new std::map<std::string, std::unique_ptr<Api>>();
  return *m;
}

template <class F>
void find(void* lib, const char* name, F* out, std::string* missing) {
  void* s = dlsym(lib, name);
  if (!s) {
    if (missing->empty()) *missing = name;
    return;
  }
  *out = reinterpret_cast<F>(s);
}

orch::Result<const Api*> open_locked(const std::string& path) {
  auto& cache = loaded();
  auto it = cache.find(path);
  if (it != cache.end()) return static_cast<const Api*>(it->second.get());

  (void)dlerror();
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    return Error(ErrorCode::Unsupported,
                 "cannot load NVSHMEM from '" + path + "': " + (why ? why : "dlopen failed"));
  }
  auto api = std::make_unique<Api>();
  api->path = path;
  std::string missing;
  find(lib, "nvshmemx_vendor_get_version_info", &api->vendor_get_version_info, &missing);
  find(lib, "nvshmemx_get_uniqueid", &api->get_uniqueid, &missing);
  find(lib, "nvshmemx_set_attr_uniqueid_args", &api->set_attr_uniqueid_args, &missing);
  find(lib, "nvshmemx_hostlib_init_attr", &api->hostlib_init_attr, &missing);
  find(lib, "nvshmemx_hostlib_finalize", &api->hostlib_finalize, &missing);
  find(lib, "nvshmem_my_pe", &api->my_pe, &missing);
  find(lib, "nvshmem_n_pes", &api->n_pes, &missing);
  find(lib, "nvshmem_malloc", &api->malloc, &missing);
  find(lib, "nvshmem_free", &api->free, &missing);
  find(lib, "nvshmem_barrier_all", &api->barrier_all, &missing);
  find(lib, "nvshmemx_culibrary_init", &api->culibrary_init, &missing);
  find(lib, "nvshmemx_cumodule_init", &api->cumodule_init, &missing);
  if (!missing.empty()) {
    dlclose(lib);
    return Error(ErrorCode::Unsupported,
                 "'" + path + "' is not a usable NVSHMEM host library: it has no symbol " + missing);
  }
  api->vendor_get_version_info(&api->major, &api->minor, &api->patch);
  const Api* out = api.get();
  cache.emplace(path, std::move(api));
  return out;
}

}  // namespace

std::string Api::version_string() const {
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

orch::Result<const Api*> open(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex());
  return open_locked(path);
}

orch::Result<const Api*> api(const std::string& version) {
  std::lock_guard<std::mutex> lock(mutex());
  const char* env = std::getenv("ORCH_NVSHMEM_LIBRARY");
  const bool from_env = env && *env;
  orch::Result<const Api*> r = open_locked(from_env ? std::string(env) : std::string("libnvshmem_host.so.3"));
  if (!r.ok()) {
    return Error(ErrorCode::Unsupported,
                 "the pipeline needs NVSHMEM, which could not be loaded: " + r.error().message() +
                     (from_env ? " (the path comes from ORCH_NVSHMEM_LIBRARY)"
                               : ". Install NVSHMEM " + (version.empty() ? std::string("3.4.5") : version) +
                                     " (libnvshmem_host.so.3; pip: nvidia-nvshmem-cu13), put its lib folder on "
                                     "LD_LIBRARY_PATH, or set ORCH_NVSHMEM_LIBRARY to the library's path"));
  }
  if (!version.empty() && (*r)->version_string() != version)
    return Error(ErrorCode::Unsupported,
                 "NVSHMEM from '" + (*r)->path + "' is version " + (*r)->version_string() +
                     ", but the pipeline's kernels were linked with NVSHMEM " + version +
                     "'s device library; the two must be the same release (set ORCH_NVSHMEM_LIBRARY to "
                     "NVSHMEM " + version + "'s libnvshmem_host.so.3, or compile with that NVSHMEM)");
  return r;
}

}  // namespace orch::rt::nvshmem
