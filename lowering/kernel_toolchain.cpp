// The CUDA toolkit for the kernel compiler: probing it, and nvcc/ptxas for shared-memory units.
#include "lowering/kernel_toolchain.h"

#include <fcntl.h>
#include <nvJitLink.h>
#include <nvrtc.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "lowering/kernel_cache.h"
#include "lowering/nvrtc_log.h"
#include "support/file_observer.h"
#include "transform_hash.h"

#ifndef ORCH_CUDA_TOOLKIT_ROOT
#define ORCH_CUDA_TOOLKIT_ROOT "/usr/local/cuda"
#endif

extern char** environ;

namespace orch::toolchain {

// ---- the toolkit ------------------------------------------------------------------------------


std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

Toolkit probe_toolkit() {
  Toolkit t;
  // CUDA_HOME / CUDA_PATH first, as nvcc's users expect; then where CMake found the toolkit.
  std::vector<std::string> roots;
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"})
    if (!env(var).empty()) roots.push_back(env(var));
  roots.push_back(ORCH_CUDA_TOOLKIT_ROOT);
  roots.push_back("/usr/local/cuda");
  // Every look is reported to the file observer (orchc's artifact cache replays a compile only
  // while the toolkit is found where it was).
  for (const std::string& root : roots) {
    for (const char* sub :
         {"include", "targets/x86_64-linux/include", "targets/sbsa-linux/include"}) {
      const fs::path dir = fs::path(root) / sub;
      const bool is = is_dir(dir);
      observe_file_flag(FileFact::Directory, dir.string(), is);
      if (!is) continue;
      std::error_code ec;
      const bool header = fs::exists(dir / "cuda_runtime.h", ec);
      observe_file_flag(FileFact::Exists, (dir / "cuda_runtime.h").string(), header);
      if (header) {
        t.root = root;
        t.include_dir = dir.string();
        t.include_dirs = {t.include_dir};
        const fs::path cccl = dir / "cccl";
        const bool has_cccl = is_dir(cccl);
        observe_file_flag(FileFact::Directory, cccl.string(), has_cccl);
        if (has_cccl) t.include_dirs.push_back(cccl.string());
        break;
      }
    }
    if (!t.root.empty()) break;
  }
  for (const std::string& root : roots) {
    for (const char* sub : {"lib64", "lib", "targets/x86_64-linux/lib", "targets/sbsa-linux/lib"}) {
      fs::path p = fs::path(root) / sub / "libcudadevrt.a";
      std::error_code ec;
      if (!fs::is_regular_file(p, ec)) {
        observe_file_flag(FileFact::RegularFile, p.string(), false);
        continue;
      }
      observe_file_flag(FileFact::RegularFile, p.string(), true);
      t.cudadevrt = p.string();
      t.cudadevrt_size = fs::file_size(p, ec);
      auto mtime = fs::last_write_time(p, ec);
      if (!ec) t.cudadevrt_mtime = static_cast<int64_t>(mtime.time_since_epoch().count());
      observe_file(FileFact::SizeAndTime, p.string(),
                   std::to_string(t.cudadevrt_size) + " " + std::to_string(t.cudadevrt_mtime));
      break;
    }
    if (!t.cudadevrt.empty()) break;
  }
  // nvcc: $ORCH_NVCC ("off" for none), else bin/nvcc of the first root that has one.
  std::vector<std::string> nvccs;
  const std::string given = env("ORCH_NVCC");
  if (given == "off" || given == "0" || given == "none")
    ;
  else if (!given.empty())
    nvccs.push_back(given);
  else {
    // The nvcc of the toolkit whose headers were found first, as NVRTC's PTX and nvcc's must
    // be of one toolkit (nvcc_ptx checks their .version too).
    if (!t.root.empty()) nvccs.push_back((fs::path(t.root) / "bin" / "nvcc").string());
    for (const std::string& root : roots) nvccs.push_back((fs::path(root) / "bin" / "nvcc").string());
  }
  for (const std::string& p : nvccs) {
    std::error_code ec;
    const bool is = fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
    observe_file_flag(FileFact::RegularFile, p, is);
    if (!is) continue;
    const std::string ptxas = (fs::path(p).parent_path() / "ptxas").string();
    const bool has_ptxas = fs::is_regular_file(ptxas, ec) && ::access(ptxas.c_str(), X_OK) == 0;
    observe_file_flag(FileFact::RegularFile, ptxas, has_ptxas);
    if (!has_ptxas) continue;
    auto identify = [&](const std::string& path, uint64_t* size, int64_t* mtime) {
      *size = fs::file_size(path, ec);
      auto time = fs::last_write_time(path, ec);
      if (!ec) *mtime = static_cast<int64_t>(time.time_since_epoch().count());
      observe_file(FileFact::SizeAndTime, path, std::to_string(*size) + " " + std::to_string(*mtime));
    };
    t.nvcc = p;
    t.ptxas = ptxas;
    identify(t.nvcc, &t.nvcc_size, &t.nvcc_mtime);
    identify(t.ptxas, &t.ptxas_size, &t.ptxas_mtime);
    break;
  }
  if (nvrtcVersion(&t.nvrtc_major, &t.nvrtc_minor) != NVRTC_SUCCESS)
    t.problem = "NVRTC does not load";
  if (nvJitLinkVersion(&t.link_major, &t.link_minor) != NVJITLINK_SUCCESS)
    t.problem = "nvJitLink does not load";
  int count = 0;
  if (nvrtcGetNumSupportedArchs(&count) == NVRTC_SUCCESS && count > 0) {
    t.archs.resize(static_cast<size_t>(count));
    if (nvrtcGetSupportedArchs(t.archs.data()) != NVRTC_SUCCESS) t.archs.clear();
  }
  return t;
}

// "sm_90" -> 90, "sm_90a" -> 90 with suffix "a"; false if not of that shape.
bool parse_arch(const std::string& arch, int* number, std::string* suffix) {
  if (arch.rfind("sm_", 0) != 0) return false;
  size_t i = 3, digits_end = 3;
  while (digits_end < arch.size() && std::isdigit(static_cast<unsigned char>(arch[digits_end])))
    ++digits_end;
  if (digits_end == i || digits_end - i > 4) return false;
  *number = std::stoi(arch.substr(i, digits_end - i));
  *suffix = arch.substr(digits_end);
  return suffix->empty() || *suffix == "a" || *suffix == "f";
}

// Kernels that call these need -rdc and cudadevrt. Scanned as identifiers, so a mention in a
// comment costs only a needless link; device-side `<<<` launches need the same.
bool mentions_device_runtime(const std::string& code) {
  static const std::set<std::string> kNames = {"cudaGraphLaunch",
                                               "cudaGraphSetConditional",
                                               "cudaGetCurrentGraphExec",
                                               "cudaGraphKernelNodeSetParam",
                                               "cudaGraphKernelNodeSetEnabled",
                                               "cudaGraphKernelNodeSetGridDim",
                                               "cudaGraphKernelNodeUpdatesApply",
                                               "cudaLaunchDevice",
                                               "cudaLaunchDeviceV2",
                                               "cudaGetParameterBuffer",
                                               "cudaGetParameterBufferV2"};
  if (code.find("<<<") != std::string::npos) return true;
  auto ident = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  for (size_t i = 0; i < code.size();) {
    if (!ident(code[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < code.size() && ident(code[j])) ++j;
    if (code[i] == 'c' && kNames.count(code.substr(i, j - i))) return true;
    i = j;
  }
  return false;
}

// ---- nvcc, for kernels that use shared memory -----------------------------------------------
//
// NVRTC 13.0 addresses shared memory with 64-bit pointers; nvcc's device compiler (cicc) with
// 32-bit ones (its --sharedmem32, on by default; NVRTC has no such option, and libnvvm refuses
// LLVM's -nvptx-short-ptr). Measured on the MoE expert kernel of bench/real_workloads.py: NVRTC's
// PTX is byte for byte cicc's with --sharedmem32 0 (16 FMAs: the k loop not unrolled, 64-bit
// address arithmetic; 48 registers), nvcc's has 32-bit shared addresses, the loop unrolled
// twice (48 FMAs) and takes 40 registers, through ptxas and nvJitLink alike; on an H200 the
// MoE rows ran 1.5x slower than the same graph built by nvcc. Code that touches no shared
// memory compiles to the same PTX either way (every kernel of the examples and of
// bench/real_workloads.py: the same SASS). So where NVRTC's PTX of a translation unit mentions
// shared memory, the PTX comes from the toolkit's nvcc instead (`nvcc -ptx`, the same
// options), and everything after it is as before: patched units and -rdc units go through
// nvJitLink (with cudadevrt), other units through the toolkit's ptxas, whole program, as NVRTC
// compiles them itself (ptxas_cubin). NVRTC still compiles the unit first: its diagnostics,
// its lowered names, and whether it touches shared memory. Where nvcc is missing, fails, or
// gives PTX of another .version or without an entry NVRTC named, NVRTC's code is used. A cold
// compile of such a unit takes nvcc's time beside NVRTC's (nvcc starts early where the code
// says __shared__; about 0.4 s for the MoE kernels on this machine); the kernel cache keeps
// the result, under a key that names the nvcc and ptxas.


// Runs argv (argv[0] a path), stdout and stderr into `log_path`; its exit status, -1 where it
// could not start or ran past `timeout_s` (then it is killed).
int run_process(const std::vector<std::string>& args, const std::string& log_path, int timeout_s) {
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  for (int delay_us = 200;; delay_us = std::min(delay_us * 2, 20000)) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (r < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    ::usleep(static_cast<useconds_t>(delay_us));
  }
}

std::string read_whole(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// The PTX's `.version` line ("9.0"), empty if none.
std::string ptx_version(const std::string& ptx) {
  const size_t at = ptx.find("\n.version ");
  if (at == std::string::npos) return {};
  const size_t begin = at + 10, end = ptx.find_first_of("\r\n", begin);
  return ptx.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

// `.entry NAME(` in the PTX, NAME whole.
bool has_entry(const std::string& ptx, const std::string& name) {
  return ptx.find(".entry " + name + "(") != std::string::npos;
}

// nvcc's PTX of `code` for the virtual arch `varch`, as NVRTC compiled it: -std=c++17, the same
// include folders, -rdc=true where `rdc`; each name expression instantiated the way
// nvrtcAddNameExpression does (its address taken, here by a host-side variable after the
// code). `file_name` names the code for __FILE__ and messages (#line), as NVRTC's does.
PtxResult nvcc_ptx(const std::string& nvcc, const std::string& code, const std::string& file_name,
                   const std::vector<std::string>& exprs, const std::vector<std::string>& include_dirs,
                   const std::string& varch, bool rdc) {
  PtxResult out;
  std::error_code ec;
  std::string dir = (fs::temp_directory_path(ec) / "orch_nvcc_XXXXXX").string();
  if (ec || !::mkdtemp(dir.data())) {
    out.failure = "no temporary folder for nvcc";
    return out;
  }
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(dir, e);
    }
  } cleanup{dir};
  std::string text = "#line 1 \"";
  for (char c : file_name) {
    if (c == '"' || c == '\\') text += '\\';
    text += c;
  }
  text += "\"\n" + code;
  if (!text.empty() && text.back() != '\n') text += '\n';
  if (!exprs.empty()) {
    text += "namespace orch_nvcc_name_expressions_ {\n";
    for (size_t i = 0; i < exprs.size(); ++i)
      text += "void* const orch_name_expression_" + std::to_string(i) + " = (void*)&" + exprs[i] + ";\n";
    text += "}\n";
  }
  const fs::path cu = fs::path(dir) / "orch_unit.cu", ptx = fs::path(dir) / "orch_unit.ptx";
  {
    std::ofstream f(cu, std::ios::binary);
    f << text;
    if (!f) {
      out.failure = "cannot write nvcc's input";
      return out;
    }
  }
  std::vector<std::string> args = {nvcc, "-ptx", "-arch=" + varch, "-std=c++17"};
  if (rdc) args.push_back("-rdc=true");
  for (const std::string& d : include_dirs) args.push_back("-I" + d);
  args.insert(args.end(), {cu.string(), "-o", ptx.string()});
  const int status = run_process(args, (fs::path(dir) / "log").string(), 300);
  if (status != 0) {
    out.failure = "nvcc: " + (status < 0 ? std::string("did not run") : "exit " + std::to_string(status)) + "\n" +
                  read_whole(fs::path(dir) / "log");
    return out;
  }
  out.ptx = read_whole(ptx);
  out.compiled = !out.ptx.empty();
  if (!out.compiled) out.failure = "nvcc wrote no PTX";
  return out;
}

// ptxas's CUBIN of `ptx` for `arch` ("sm_90"), whole program (not -c): what NVRTC makes of a unit
// without -rdc, and nvcc's -cubin. nvJitLink compiles PTX as relocatable code (ptxas -c), which
// can cost registers (the SGEMM of bench/real_workloads.py: 48 whole, 74 relocatable).
std::optional<std::string> ptxas_cubin(const std::string& ptxas, const std::string& ptx, const std::string& arch,
                                       std::string* failure) {
  std::error_code ec;
  std::string dir = (fs::temp_directory_path(ec) / "orch_ptxas_XXXXXX").string();
  if (ec || !::mkdtemp(dir.data())) {
    *failure = "no temporary folder for ptxas";
    return std::nullopt;
  }
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(dir, e);
    }
  } cleanup{dir};
  const fs::path in = fs::path(dir) / "orch_unit.ptx", out = fs::path(dir) / "orch_unit.cubin";
  {
    std::ofstream f(in, std::ios::binary);
    f << ptx;
    if (!f) {
      *failure = "cannot write ptxas's input";
      return std::nullopt;
    }
  }
  const int status =
      run_process({ptxas, "-arch=" + arch, in.string(), "-o", out.string()}, (fs::path(dir) / "log").string(), 300);
  if (status != 0) {
    *failure = "ptxas: " + (status < 0 ? std::string("did not run") : "exit " + std::to_string(status)) + "\n" +
               read_whole(fs::path(dir) / "log");
    return std::nullopt;
  }
  std::string cubin = read_whole(out);
  if (cubin.empty()) {
    *failure = "ptxas wrote no CUBIN";
    return std::nullopt;
  }
  return cubin;
}

// "sm_90a" -> "compute_90a"; a "compute_" arch stays.
std::string virtual_arch(const std::string& arch) {
  return arch.rfind("sm_", 0) == 0 ? "compute_" + arch.substr(3) : arch;
}

}  // namespace orch::toolchain
