// NVRTC and nvJitLink as the kernel compiler uses them (kernel_compiler.cpp): owners for their
// handles and NVRTC's compile to PTX. Internal to lowering/: the one place besides
// kernel_compiler.cpp and kernel_toolchain.cpp that includes their headers.
#pragma once

#include <nvJitLink.h>
#include <nvrtc.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lowering/kernel_toolchain.h"

namespace orch::toolchain {

class NvrtcProgram {
 public:
  NvrtcProgram() = default;
  NvrtcProgram(const NvrtcProgram&) = delete;
  NvrtcProgram& operator=(const NvrtcProgram&) = delete;
  ~NvrtcProgram() {
    if (program_) nvrtcDestroyProgram(&program_);
  }
  nvrtcResult create(const std::string& code, const std::string& file_name) {
    return nvrtcCreateProgram(&program_, code.c_str(), file_name.c_str(), 0, nullptr, nullptr);
  }
  nvrtcProgram get() const { return program_; }

 private:
  nvrtcProgram program_ = nullptr;
};

class JitLinker {
 public:
  JitLinker() = default;
  JitLinker(const JitLinker&) = delete;
  JitLinker& operator=(const JitLinker&) = delete;
  ~JitLinker() {
    if (handle_) nvJitLinkDestroy(&handle_);
  }
  nvJitLinkResult create(const std::vector<std::string>& options) {
    std::vector<const char*> argv;
    for (const std::string& o : options) argv.push_back(o.c_str());
    return nvJitLinkCreate(&handle_, static_cast<uint32_t>(argv.size()), argv.data());
  }
  nvJitLinkHandle get() const { return handle_; }
  // The error log, then the info log; empty if neither can be read.
  std::string logs() const {
    std::string out;
    size_t size = 0;
    if (handle_ && nvJitLinkGetErrorLogSize(handle_, &size) == NVJITLINK_SUCCESS && size > 1) {
      std::string log(size, '\0');
      if (nvJitLinkGetErrorLog(handle_, log.data()) == NVJITLINK_SUCCESS)
        out += log.substr(0, log.find('\0'));
    }
    if (handle_ && nvJitLinkGetInfoLogSize(handle_, &size) == NVJITLINK_SUCCESS && size > 1) {
      std::string log(size, '\0');
      if (nvJitLinkGetInfoLog(handle_, log.data()) == NVJITLINK_SUCCESS)
        out += log.substr(0, log.find('\0'));
    }
    return out;
  }

 private:
  nvJitLinkHandle handle_ = nullptr;
};

const char* jitlink_error_name(nvJitLinkResult r);
// The name expressions of a program, added before it compiles; their lowered names after.
nvrtcResult add_name_expressions(nvrtcProgram program, const std::vector<std::string>& exprs, std::string* failure);
bool lowered_names(nvrtcProgram program, const std::vector<std::string>& exprs, std::vector<std::string>* out,
                   std::string* failure);
std::string program_log(nvrtcProgram program);
// NVRTC to PTX for a virtual arch ("compute_90"); `exprs` (name expressions) name the kernels
// whose lowered names are wanted.
PtxResult nvrtc_ptx(const std::string& code, const std::string& file_name, const std::vector<std::string>& exprs,
                    const std::vector<std::string>& opts);

}  // namespace orch::toolchain
