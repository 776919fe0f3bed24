// NVRTC and nvJitLink loaded on first use (toolkit_libs.h says why and from where).
#include "tools/orchc/toolkit_libs.h"

#include <dlfcn.h>
#include <link.h>
#include <nvJitLink.h>
#include <nvrtc.h>
#include <sys/stat.h>

#include <cstdlib>
#include <mutex>

#ifndef ORCH_NVRTC_SONAME
#error "ORCH_NVRTC_SONAME (libnvrtc.so.13) comes from tools/CMakeLists.txt"
#endif

namespace orch::orchc {

namespace {

struct Library {
  const char* soname;
  const char* linked_dir;  // where CMake found it; may be ""
  std::once_flag once;
  void* handle = nullptr;
  std::string error;  // why it did not load
};

Library& library(ToolkitLib which) {
  static Library nvrtc{ORCH_NVRTC_SONAME, ORCH_NVRTC_DIR, {}, nullptr, {}};
  static Library nvjitlink{ORCH_NVJITLINK_SONAME, ORCH_NVJITLINK_DIR, {}, nullptr, {}};
  return which == ToolkitLib::Nvrtc ? nvrtc : nvjitlink;
}

bool regular_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// The file to load, found without loading anything: LD_LIBRARY_PATH's folders in order (the
// dynamic loader's own first choice; ':' and ';' separate, an empty entry is the current
// folder), then the folder orchc was linked against. Empty: leave it to the loader.
std::string find_file(const Library& lib) {
  auto in = [&](std::string dir) -> std::string {
    if (dir.empty()) dir = ".";
    std::string path = dir + "/" + lib.soname;
    return regular_file(path) ? path : std::string();
  };
  if (const char* env = std::getenv("LD_LIBRARY_PATH")) {
    std::string dirs = env;
    size_t start = 0;
    for (;;) {
      const size_t end = dirs.find_first_of(":;", start);
      std::string found = in(dirs.substr(start, end == std::string::npos ? std::string::npos : end - start));
      if (!found.empty()) return found;
      if (end == std::string::npos) break;
      start = end + 1;
    }
  }
  if (lib.linked_dir[0] != '\0') return in(lib.linked_dir);
  return {};
}

void load(Library& lib) {
  std::call_once(lib.once, [&] {
    const std::string file = find_file(lib);
    const std::string name = file.empty() ? std::string(lib.soname) : file;
    lib.handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib.handle) {
      const char* why = ::dlerror();
      lib.error = why ? why : "cannot load " + name;
    }
  });
}

void* symbol(ToolkitLib which, const char* name) {
  Library& lib = library(which);
  load(lib);
  return lib.handle ? ::dlsym(lib.handle, name) : nullptr;
}

// The real path of a loaded library, from the loader's own record.
std::string loaded_path(const Library& lib) {
  if (!lib.handle) return {};
  struct link_map* map = nullptr;
  if (::dlinfo(lib.handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) return {};
  return map->l_name;
}

std::string identity_of(const std::string& path) {
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return {};
  std::string out = real;
  std::free(real);
  struct stat st {};
  if (::stat(out.c_str(), &st) != 0) return {};
  return out + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + " " + std::to_string(st.st_ino) + " " + std::to_string(st.st_dev);
}

}  // namespace

std::string toolkit_library_identity(ToolkitLib which) {
  Library& lib = library(which);
  const std::string file = find_file(lib);
  if (!file.empty()) return identity_of(file);
  // Only the loader knows which file it would take: load it and ask.
  load(lib);
  return identity_of(loaded_path(lib));
}

bool toolkit_library_consistent(ToolkitLib which) {
  Library& lib = library(which);
  if (!lib.handle) return true;  // not loaded (yet): whatever is used later is found afresh
  return identity_of(loaded_path(lib)) == toolkit_library_identity(which);
}

}  // namespace orch::orchc

// ---- the forwarding functions ---------------------------------------------------------------
// Each resolves its symbol once; where the library cannot be loaded it returns the library's
// internal-error code, which the kernel compiler reports (nvrtcVersion failing reads "NVRTC does
// not load").

#define ORCH_CAT2(a, b) a##b
#define ORCH_CAT(a, b) ORCH_CAT2(a, b)
#define ORCH_FORWARD(lib, failure, ret, name, params, args)                                    \
  extern "C" ret name params {                                                                 \
    using Fn = ret(*) params;                                                                  \
    static const Fn fn = reinterpret_cast<Fn>(orch::orchc::symbol(lib, #name));               \
    if (!fn) return failure;                                                                   \
    return fn args;                                                                            \
  }

namespace orch::orchc {
using ::nvrtcProgram;
}

#define NVRTC(name, params, args) \
  ORCH_FORWARD(orch::orchc::ToolkitLib::Nvrtc, NVRTC_ERROR_INTERNAL_ERROR, nvrtcResult, name, params, args)

NVRTC(nvrtcVersion, (int* major, int* minor), (major, minor))
NVRTC(nvrtcGetNumSupportedArchs, (int* n), (n))
NVRTC(nvrtcGetSupportedArchs, (int* archs), (archs))
NVRTC(nvrtcCreateProgram,
      (nvrtcProgram * prog, const char* src, const char* name, int num_headers, const char* const* headers,
       const char* const* include_names),
      (prog, src, name, num_headers, headers, include_names))
NVRTC(nvrtcDestroyProgram, (nvrtcProgram * prog), (prog))
NVRTC(nvrtcCompileProgram, (nvrtcProgram prog, int n, const char* const* options), (prog, n, options))
NVRTC(nvrtcGetPTXSize, (nvrtcProgram prog, size_t* size), (prog, size))
NVRTC(nvrtcGetPTX, (nvrtcProgram prog, char* ptx), (prog, ptx))
NVRTC(nvrtcGetCUBINSize, (nvrtcProgram prog, size_t* size), (prog, size))
NVRTC(nvrtcGetCUBIN, (nvrtcProgram prog, char* cubin), (prog, cubin))
NVRTC(nvrtcGetLTOIRSize, (nvrtcProgram prog, size_t* size), (prog, size))
NVRTC(nvrtcGetLTOIR, (nvrtcProgram prog, char* ir), (prog, ir))
NVRTC(nvrtcGetProgramLogSize, (nvrtcProgram prog, size_t* size), (prog, size))
NVRTC(nvrtcGetProgramLog, (nvrtcProgram prog, char* log), (prog, log))
NVRTC(nvrtcAddNameExpression, (nvrtcProgram prog, const char* const name), (prog, name))
NVRTC(nvrtcGetLoweredName, (nvrtcProgram prog, const char* const name, const char** lowered), (prog, name, lowered))

extern "C" const char* nvrtcGetErrorString(nvrtcResult result) {
  using Fn = const char* (*)(nvrtcResult);
  static const Fn fn = reinterpret_cast<Fn>(orch::orchc::symbol(orch::orchc::ToolkitLib::Nvrtc, "nvrtcGetErrorString"));
  return fn ? fn(result) : "NVRTC could not be loaded";
}

#define NVJITLINK(name, params, args)                                                                     \
  ORCH_FORWARD(orch::orchc::ToolkitLib::NvJitLink, NVJITLINK_ERROR_INTERNAL, nvJitLinkResult, name, params, \
               args)
// The versioned names nvJitLink.h declares (its inline functions call these).
#define NVJL(base) ORCH_CAT(ORCH_CAT(__nvJitLink, base), ORCH_NVJITLINK_SUFFIX)

NVJITLINK(nvJitLinkVersion, (unsigned int* major, unsigned int* minor), (major, minor))
NVJITLINK(NVJL(Create), (nvJitLinkHandle * handle, uint32_t n, const char* const* options), (handle, n, options))
NVJITLINK(NVJL(Destroy), (nvJitLinkHandle * handle), (handle))
NVJITLINK(NVJL(AddData),
          (nvJitLinkHandle handle, nvJitLinkInputType type, const void* data, size_t size, const char* name),
          (handle, type, data, size, name))
NVJITLINK(NVJL(AddFile), (nvJitLinkHandle handle, nvJitLinkInputType type, const char* file), (handle, type, file))
NVJITLINK(NVJL(Complete), (nvJitLinkHandle handle), (handle))
NVJITLINK(NVJL(GetLinkedCubinSize), (nvJitLinkHandle handle, size_t* size), (handle, size))
NVJITLINK(NVJL(GetLinkedCubin), (nvJitLinkHandle handle, void* cubin), (handle, cubin))
NVJITLINK(NVJL(GetLinkedPtxSize), (nvJitLinkHandle handle, size_t* size), (handle, size))
NVJITLINK(NVJL(GetLinkedPtx), (nvJitLinkHandle handle, char* ptx), (handle, ptx))
NVJITLINK(NVJL(GetErrorLogSize), (nvJitLinkHandle handle, size_t* size), (handle, size))
NVJITLINK(NVJL(GetErrorLog), (nvJitLinkHandle handle, char* log), (handle, log))
NVJITLINK(NVJL(GetInfoLogSize), (nvJitLinkHandle handle, size_t* size), (handle, size))
NVJITLINK(NVJL(GetInfoLog), (nvJitLinkHandle handle, char* log), (handle, log))
