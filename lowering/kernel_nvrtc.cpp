// NVRTC and nvJitLink for the kernel compiler: see kernel_nvrtc.h.
#include "lowering/kernel_nvrtc.h"

namespace orch::toolchain {

const char* jitlink_error_name(nvJitLinkResult r) {
  switch (r) {
    case NVJITLINK_SUCCESS:
      return "success";
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION:
      return "unrecognized option";
    case NVJITLINK_ERROR_MISSING_ARCH:
      return "missing -arch";
    case NVJITLINK_ERROR_INVALID_INPUT:
      return "invalid input";
    case NVJITLINK_ERROR_PTX_COMPILE:
      return "PTX compilation failed";
    case NVJITLINK_ERROR_NVVM_COMPILE:
      return "NVVM compilation failed";
    case NVJITLINK_ERROR_INTERNAL:
      return "internal error";
    case NVJITLINK_ERROR_THREADPOOL:
      return "thread pool error";
    case NVJITLINK_ERROR_UNRECOGNIZED_INPUT:
      return "unrecognized input";
    case NVJITLINK_ERROR_FINALIZE:
      return "finalizer error";
    case NVJITLINK_ERROR_NULL_INPUT:
      return "null input";
    case NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS:
      return "incompatible options";
    case NVJITLINK_ERROR_INCORRECT_INPUT_TYPE:
      return "incorrect input type";
    case NVJITLINK_ERROR_ARCH_MISMATCH:
      return "arch mismatch";
    case NVJITLINK_ERROR_OUTDATED_LIBRARY:
      return "outdated library";
    case NVJITLINK_ERROR_MISSING_FATBIN:
      return "missing fatbin";
    case NVJITLINK_ERROR_UNRECOGNIZED_ARCH:
      return "unrecognized arch";
    case NVJITLINK_ERROR_UNSUPPORTED_ARCH:
      return "unsupported arch";
    case NVJITLINK_ERROR_LTO_NOT_ENABLED:
      return "needs -lto";
  }
  return "unknown error";
}

nvrtcResult add_name_expressions(nvrtcProgram program, const std::vector<std::string>& exprs, std::string* failure) {
  for (const std::string& e : exprs) {
    nvrtcResult r = nvrtcAddNameExpression(program, e.c_str());
    if (r != NVRTC_SUCCESS) {
      *failure = std::string("nvrtcAddNameExpression: ") + nvrtcGetErrorString(r);
      return r;
    }
  }
  return NVRTC_SUCCESS;
}

bool lowered_names(nvrtcProgram program, const std::vector<std::string>& exprs, std::vector<std::string>* out,
                   std::string* failure) {
  for (const std::string& e : exprs) {
    const char* lowered = nullptr;
    nvrtcResult r = nvrtcGetLoweredName(program, e.c_str(), &lowered);
    if (r != NVRTC_SUCCESS || !lowered) {
      *failure = "no lowered name for entry \"" + e + "\": " + nvrtcGetErrorString(r);
      return false;
    }
    out->push_back(lowered);
  }
  return true;
}

std::string program_log(nvrtcProgram program) {
  size_t log_size = 0;
  if (nvrtcGetProgramLogSize(program, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    std::string log(log_size, '\0');
    if (nvrtcGetProgramLog(program, log.data()) == NVRTC_SUCCESS) return log.substr(0, log.find('\0'));
  }
  return {};
}

PtxResult nvrtc_ptx(const std::string& code, const std::string& file_name, const std::vector<std::string>& exprs,
                    const std::vector<std::string>& opts) {
  PtxResult out;
  NvrtcProgram program;
  nvrtcResult r = program.create(code, file_name);
  if (r != NVRTC_SUCCESS) {
    out.failure = std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(r);
    return out;
  }
  if (add_name_expressions(program.get(), exprs, &out.failure) != NVRTC_SUCCESS) return out;
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  nvrtcResult compiled = nvrtcCompileProgram(program.get(), static_cast<int>(argv.size()), argv.data());
  out.log = program_log(program.get());
  if (compiled != NVRTC_SUCCESS) {
    if (out.log.empty()) out.log = std::string("nvrtc: ") + nvrtcGetErrorString(compiled);
    return out;
  }
  out.compiled = true;
  if (!lowered_names(program.get(), exprs, &out.lowered, &out.failure)) return out;
  size_t size = 0;
  if ((r = nvrtcGetPTXSize(program.get(), &size)) != NVRTC_SUCCESS) {
    out.failure = std::string("nvrtcGetPTXSize: ") + nvrtcGetErrorString(r);
    return out;
  }
  out.ptx.assign(size, '\0');
  if ((r = nvrtcGetPTX(program.get(), out.ptx.data())) != NVRTC_SUCCESS) {
    out.failure = std::string("nvrtcGetPTX: ") + nvrtcGetErrorString(r);
    return out;
  }
  while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
  return out;
}

}  // namespace orch::toolchain
