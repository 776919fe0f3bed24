// Libraries loaded at run time: see shared_library.h.
#include "runtime/src/shared_library.h"

#include <dlfcn.h>

#include <cstdlib>

namespace orch::rt::dynlib {

Result<void*> open(const Kind& kind, const std::string& path) {
  (void)dlerror();
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = dlerror();
    return Error(kind.code, std::string("cannot load ") + kind.name + " from '" + path +
                                "': " + (why ? why : "dlopen failed"));
  }
  return handle;
}

void close(void* handle) { dlclose(handle); }

const char* path_from_env(const char* variable) {
  const char* v = std::getenv(variable);
  return v && *v ? v : nullptr;
}

void* Symbols::find(const char* name) const { return dlsym(handle_, name); }

}  // namespace orch::rt::dynlib
