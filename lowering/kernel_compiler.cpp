#include "lowering/kernel_compiler.h"

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

#include "lowering/inspect_ptx.h"
#include "lowering/kernel_cache.h"
#include "lowering/kernel_nvrtc.h"
#include "lowering/kernel_toolchain.h"
#include "lowering/nvrtc_log.h"
#include "lowering/nvshmem.h"
#include "support/file_observer.h"
#include "transform_hash.h"

#ifndef ORCH_CUDA_TOOLKIT_ROOT
#define ORCH_CUDA_TOOLKIT_ROOT "/usr/local/cuda"
#endif

extern char** environ;

namespace orch {

namespace fs = std::filesystem;

namespace {

using namespace toolchain;  // Toolkit, probe_toolkit, nvcc_ptx, NvrtcProgram, JitLinker, ...

// SharedMemoryCode::automatic relocates a unit with a loop of at least 16 multiply-adds on 8
// shared-memory loads: the MoE expert kernel's inner loop has 32 on 24, the SGEMM's 256 on 128;
// the heat solver's reductions have none in a loop. auto_rule() keys the cache, so a new rule
// recompiles.
constexpr uint32_t kMinFmas = 16, kMinSharedLoads = 8;
std::string auto_rule() {
  return " (a loop of " + std::to_string(kMinFmas) + " multiply-adds on " + std::to_string(kMinSharedLoads) +
         " shared loads)";
}

// Bumped whenever what we pass NVRTC or store changes in a way the other key fields miss.
constexpr const char* kKeySalt = "orch-kernel-cache-v2";  // v2: a module of several entries
// A hash of orchc's own sources that turn a kernel's code into its image (this file, the PTX
// patcher): a changed orchc never takes an image an older one cached (cmake/orch_source_hash.cmake).
constexpr const char* kTransformHash = ORCH_KERNEL_TRANSFORM_HASH;

// ---- one kernel --------------------------------------------------------------------------------

struct Target {
  std::string arch;  // "sm_90" for a CUBIN, "compute_90" for the PTX
  bool ptx = false;
};


class PtxMemo {
 public:
  // The result under `key`, computing it with `make` once (other callers wait for it).
  template <class F>
  PtxResult get(const std::string& key, F&& make) {
    std::shared_ptr<Slot> slot;
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::shared_ptr<Slot>& s = slots_[key];
      if (!s) s = std::make_shared<Slot>();
      slot = s;
    }
    std::call_once(slot->once, [&] { slot->result = make(); });
    return slot->result;
  }

 private:
  struct Slot {
    std::once_flag once;
    PtxResult result;
  };
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<Slot>> slots_;
};


struct BuildResult {
  bool compiled = false;  // NVRTC succeeded
  bool linked = false;    // and the image is final
  std::vector<std::string> symbols;  // per entry
  std::string log;
  std::string image;
  std::string failure;  // what failed, when it was not the source (NVRTC API, nvJitLink)
};

class KernelJob {
 public:
  KernelJob(const KernelSource& source, const CompileOptions& options, const Toolkit& toolkit,
            const std::vector<Target>& targets, bool use_cache, PtxMemo& memo,
            const nvshmem::DeviceLibrary* nvshmem_lib)
      : src_(source),
        options_(options),
        toolkit_(toolkit),
        targets_(targets),
        use_cache_(use_cache),
        memo_(memo),
        nvshmem_lib_(nvshmem_lib) {}

  std::optional<CompiledKernel> run();
  std::vector<Diagnostic>& diagnostics() { return diags_; }

 private:
  std::vector<std::string> nvrtc_options(const std::string& arch) const;
  // nvcc's PTX for `varch` in place of `nvrtc_ptx` (NVRTC's, whose entries are `lowered`), where
  // the unit uses shared memory and nvcc gives a usable one; nullopt: keep NVRTC's.
  std::optional<std::string> nvcc_instead(const std::string& varch, const std::string& nvrtc_ptx,
                                          const std::vector<std::string>& lowered) const;
  PtxResult nvcc_result(const std::string& varch) const;  // nvcc_ptx for the unit, memoized
  // nvcc compiles the unit -rdc=true: for the device runtime, or asked for (SharedMemoryCode).
  bool nvcc_rdc() const {
    return device_runtime_ || options_.shared_memory_code == SharedMemoryCode::relocatable;
  }
  BuildResult build(const Target& target) const;
  BuildResult build_patched(const Target& target) const;
  // Links `input` (PTX or a relocatable CUBIN) with nvJitLink for target.arch, with cudadevrt
  // where the kernel uses the device runtime and references what cudadevrt defines (see the
  // definition), into out.image; `out` carries what came before.
  BuildResult link(const Target& target, nvJitLinkInputType type, const std::string& input, BuildResult out) const;
  // One nvJitLink run, with cudadevrt (the whole library) or without it.
  BuildResult link_with(const Target& target, nvJitLinkInputType type, const std::string& input, BuildResult out,
                        bool cudadevrt) const;
  void add_log_diagnostics(const std::string& log, bool errors);
  void error(DiagCode code, std::string message) {
    diags_.push_back({Severity::Error, to_string(code), src_.origin, std::move(message), {}});
  }

  const KernelSource& src_;
  const CompileOptions& options_;
  const Toolkit& toolkit_;
  const std::vector<Target>& targets_;
  bool use_cache_;
  PtxMemo& memo_;
  bool device_runtime_ = false;
  // Calls NVSHMEM: -rdc, NVSHMEM's headers and prelude (code_), linked with its device
  // library, CUBINs only. nvshmem_lib_ is set (and usable) whenever this is.
  bool nvshmem_ = false;
  const nvshmem::DeviceLibrary* nvshmem_lib_ = nullptr;
  std::string code_;   // what NVRTC compiles: src_.code, after NVSHMEM's prelude where needed
  bool nvcc_ = false;  // shared-memory units take nvcc's PTX (see nvcc_ptx)
  std::vector<KernelEntry> entries_;  // src_.entries, or the one it stands for
  std::vector<std::string> exprs_;    // the distinct name expressions, in order
  std::vector<size_t> expr_of_;       // per entry, its expression in exprs_
  bool patched_ = false;              // some entry has a patch
  std::vector<Diagnostic> diags_;
  std::set<std::string> reported_;  // warnings repeat for every arch: report each once
};

std::vector<std::string> KernelJob::nvrtc_options(const std::string& arch) const {
  // No -default-device: kernel files must mean the same to NVRTC as to nvcc, where an
  // unannotated function is host code.
  std::vector<std::string> opts = {"-arch=" + arch, "-std=c++17"};
  for (const std::string& dir : src_.include_dirs) opts.push_back("--include-path=" + dir);
  // The toolkit's headers as nvcc sees them: CUDA 13 keeps CCCL (cuda::std, cuda::atomic,
  // cuda::barrier, cuda::ptx, cub, thrust) in include/cccl.
  for (const std::string& dir : toolkit_.include_dirs) opts.push_back("--include-path=" + dir);
  if (nvshmem_) {
    opts.push_back("--include-path=" + nvshmem_lib_->include_dir);
    for (const char* flag : nvshmem::kNvrtcFlags) opts.push_back(flag);
  } else if (device_runtime_) {
    opts.push_back("-rdc=true");
  }
  for (const std::string& flag : options_.extra_flags) opts.push_back(flag);
  return opts;
}

PtxResult KernelJob::nvcc_result(const std::string& varch) const {
  std::string key = std::string("nvcc") + '\0' + src_.code + '\0' + src_.file_name + '\0' + varch + '\0' +
                    (nvcc_rdc() ? "rdc" : "whole");
  for (const std::string& e : exprs_) key += '\0' + e;
  for (const std::string& d : src_.include_dirs) key += '\0' + d;
  return memo_.get(key, [&] {
    return nvcc_ptx(toolkit_.nvcc, src_.code, src_.file_name, exprs_, src_.include_dirs, varch, nvcc_rdc());
  });
}

std::optional<std::string> KernelJob::nvcc_instead(const std::string& varch, const std::string& nvrtc_ptx,
                                                   const std::vector<std::string>& lowered) const {
  if (!nvcc_ || !mentions_shared_memory(nvrtc_ptx)) return std::nullopt;
  PtxResult n = nvcc_result(varch);
  if (!n.compiled || ptx_version(n.ptx) != ptx_version(nvrtc_ptx)) return std::nullopt;
  for (const std::string& name : lowered)
    if (!has_entry(n.ptx, name)) return std::nullopt;
  return n.ptx;
}

// The patched path: NVRTC to PTX for the target's virtual arch, then each entry with a patch
// made (lowering/ptx_entry.h): patched in place where no entry needs the function as it is and no
// other patch came first, else a copy of the pristine function under a fresh name; each guard's
// module joined (renamed where names clash); then nvJitLink to one CUBIN (with cudadevrt where the
// code uses the device runtime). The PTX target keeps the patched, joined PTX.
BuildResult KernelJob::build_patched(const Target& target) const {
  BuildResult out;
  const std::string varch = virtual_arch(target.arch);
  const std::vector<std::string> opts = nvrtc_options(varch);
  std::string key = src_.code + '\0' + src_.file_name;
  for (const std::string& e : exprs_) key += '\0' + e;
  for (const std::string& o : opts) key += '\0' + o;
  PtxResult user = memo_.get(key, [&] { return nvrtc_ptx(code_, src_.file_name, exprs_, opts); });
  out.log = user.log;
  if (!user.compiled) return out;
  out.compiled = true;
  if (!user.failure.empty()) {
    out.failure = user.failure;
    return out;
  }
  std::string ptx = user.ptx;
  if (std::optional<std::string> n = nvcc_instead(varch, user.ptx, user.lowered)) ptx = std::move(*n);
  std::string why;
  // The functions some entry needs unpatched keep their names; so does the first patch of a
  // function no entry needs unpatched.
  std::set<std::string> plain, in_place;
  for (size_t i = 0; i < entries_.size(); ++i)
    if (entries_[i].patch.empty()) plain.insert(user.lowered[expr_of_[i]]);
  struct Made {
    std::string symbol;
    lowering::PtxEntryPatch patch;
  };
  std::vector<Made> made;
  std::map<std::string, std::string> symbol_of;  // an entry's function, patch and guard -> its symbol
  out.symbols.resize(entries_.size());
  for (size_t i = 0; i < entries_.size(); ++i) {
    const KernelEntry& e = entries_[i];
    const std::string& function = user.lowered[expr_of_[i]];
    if (e.patch.empty()) {
      out.symbols[i] = function;
      continue;
    }
    const std::string variant = function + '\0' + e.patch.describe() + '\0' + e.guard_code;
    if (auto it = symbol_of.find(variant); it != symbol_of.end()) {
      out.symbols[i] = it->second;
      continue;
    }
    lowering::PtxEntryPatch patch = e.patch;
    if (!e.guard_code.empty()) {
      std::vector<std::string> gopts = {"-arch=" + varch, "-std=c++17", "-rdc=true"};
      for (const std::string& dir : toolkit_.include_dirs) gopts.push_back("--include-path=" + dir);
      std::string gkey = std::string("guard") + '\0' + e.guard_code;
      for (const std::string& o : gopts) gkey += '\0' + o;
      PtxResult guard = memo_.get(gkey, [&] { return nvrtc_ptx(e.guard_code, "orch_guard.cu", {}, gopts); });
      if (!guard.compiled || !guard.failure.empty()) {
        out.failure = "orchc's guard code does not compile (a bug in orchc): " +
                      (guard.failure.empty() ? guard.log : guard.failure);
        return out;
      }
      std::map<std::string, std::string> renamed;
      std::optional<std::string> joined = lowering::merge_ptx_modules(ptx, guard.ptx, &why, &renamed);
      if (!joined) {
        out.failure = "cannot join orchc's guard code to the kernel: " + why;
        return out;
      }
      ptx = std::move(*joined);
      if (auto r = renamed.find(patch.guard); r != renamed.end()) patch.guard = r->second;
    }
    std::string symbol = function;
    if (plain.count(function) || !in_place.insert(function).second) {
      // A copy of the function as NVRTC made it: no patch is applied before every copy is made.
      symbol = lowering::fresh_ptx_name(ptx, function + "_orch");
      std::optional<std::string> cloned = lowering::clone_ptx_entry(ptx, function, symbol, &why);
      if (!cloned) {
        out.failure = "cannot copy the kernel for orchc's code at its entry: " + why;
        return out;
      }
      ptx = std::move(*cloned);
    }
    made.push_back({symbol, patch});
    symbol_of.emplace(variant, symbol);
    out.symbols[i] = symbol;
  }
  for (const Made& m : made) {
    std::optional<std::string> patched = lowering::patch_ptx_entry(ptx, m.symbol, m.patch, &why);
    if (!patched) {
      out.failure = "cannot put orchc's code at the kernel's entry: " + why;
      return out;
    }
    ptx = std::move(*patched);
  }
  if (target.ptx) {
    out.image = std::move(ptx);
    out.linked = true;
    return out;
  }
  return link(target, NVJITLINK_INPUT_PTX, ptx, std::move(out));
}

// cudadevrt only where the code needs it, as nvcc's nvlink links it: nvJitLink takes a library
// whole (every member, wanted or not), where nvlink takes only the members that define a symbol
// the code references. The device graph launch API (cudaGraphLaunch, cudaGraphSetConditional,
// cudaGetCurrentGraphExec) is resolved by the driver at load time, not by cudadevrt, so a kernel
// that only launches graphs needs none of it; linked anyway, its module carried all of
// cuda_device_runtime.o (the MoE route kernel of bench/real_workloads.py: 206,432 bytes with 32
// kernels of cudadevrt's and 13 KB of initialized device globals, against nvlink's 8,928 bytes
// with `route` alone; the same SASS for `route`). So the code is linked without cudadevrt first,
// and with it where that leaves a reference undefined (a device-side <<<>>>, cudaMalloc, ...:
// cudadevrt's __cudaCDP2* and cuda* functions).
BuildResult KernelJob::link(const Target& target, nvJitLinkInputType type, const std::string& input,
                            BuildResult out) const {
  if (device_runtime_) {
    BuildResult alone = link_with(target, type, input, out, false);
    if (alone.linked) return alone;
  }
  return link_with(target, type, input, std::move(out), device_runtime_);
}

BuildResult KernelJob::link_with(const Target& target, nvJitLinkInputType type, const std::string& input,
                                 BuildResult out, bool cudadevrt) const {
  JitLinker linker;
  auto link_failed = [&](const char* step, nvJitLinkResult lr) {
    out.failure = std::string(step) + ": " + jitlink_error_name(lr);
    std::string logs = linker.logs();
    if (!logs.empty()) out.failure += "\n" + logs;
    return out;
  };
  nvJitLinkResult lr = linker.create({"-arch=" + target.arch});
  if (lr != NVJITLINK_SUCCESS) return link_failed("nvJitLinkCreate", lr);
  lr = nvJitLinkAddData(linker.get(), type, input.data(), input.size(), src_.file_name.c_str());
  if (lr != NVJITLINK_SUCCESS) return link_failed("nvJitLinkAddData", lr);
  if (cudadevrt) {
    lr = nvJitLinkAddFile(linker.get(), NVJITLINK_INPUT_LIBRARY, toolkit_.cudadevrt.c_str());
    if (lr != NVJITLINK_SUCCESS) return link_failed("nvJitLinkAddFile(libcudadevrt.a)", lr);
  }
  if (nvshmem_) {
    // Host objects holding NVSHMEM's device code (fatbins); nvJitLink takes their device part.
    lr = nvJitLinkAddFile(linker.get(), NVJITLINK_INPUT_LIBRARY, nvshmem_lib_->device_lib.c_str());
    if (lr != NVJITLINK_SUCCESS) return link_failed("nvJitLinkAddFile(libnvshmem_device.a)", lr);
  }
  lr = nvJitLinkComplete(linker.get());
  if (lr != NVJITLINK_SUCCESS) return link_failed("nvJitLinkComplete", lr);
  size_t linked_size = 0;
  lr = nvJitLinkGetLinkedCubinSize(linker.get(), &linked_size);
  if (lr != NVJITLINK_SUCCESS || linked_size == 0) return link_failed("nvJitLinkGetLinkedCubinSize", lr);
  out.image.assign(linked_size, '\0');
  lr = nvJitLinkGetLinkedCubin(linker.get(), out.image.data());
  if (lr != NVJITLINK_SUCCESS) return link_failed("nvJitLinkGetLinkedCubin", lr);
  std::string info = linker.logs();
  if (!info.empty()) out.log += (out.log.empty() ? "" : "\n") + info;
  out.linked = true;
  return out;
}

BuildResult KernelJob::build(const Target& target) const {
  if (patched_) return build_patched(target);
  BuildResult out;
  NvrtcProgram program;
  nvrtcResult r = program.create(code_, src_.file_name);
  if (r != NVRTC_SUCCESS) {
    out.failure = std::string("nvrtcCreateProgram: ") + nvrtcGetErrorString(r);
    return out;
  }
  if (add_name_expressions(program.get(), exprs_, &out.failure) != NVRTC_SUCCESS) return out;
  std::vector<std::string> opts = nvrtc_options(target.arch);
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  nvrtcResult compiled =
      nvrtcCompileProgram(program.get(), static_cast<int>(argv.size()), argv.data());
  out.log = program_log(program.get());
  if (compiled != NVRTC_SUCCESS) {
    // A bad source leaves its reasons in the log; anything else (a bad option) may not.
    if (out.log.empty()) out.log = std::string("nvrtc: ") + nvrtcGetErrorString(compiled);
    return out;
  }
  out.compiled = true;
  std::vector<std::string> lowered;
  if (!lowered_names(program.get(), exprs_, &lowered, &out.failure)) return out;
  for (size_t i = 0; i < entries_.size(); ++i) out.symbols.push_back(lowered[expr_of_[i]]);

  size_t size = 0;
  if (nvcc_) {
    // A unit that uses shared memory: nvcc's PTX, linked here (ptx_relocatable as below).
    std::string ptx;
    if ((r = nvrtcGetPTXSize(program.get(), &size)) == NVRTC_SUCCESS && size > 1) {
      ptx.assign(size, '\0');
      if (nvrtcGetPTX(program.get(), ptx.data()) != NVRTC_SUCCESS) ptx.clear();
      while (!ptx.empty() && ptx.back() == '\0') ptx.pop_back();
    }
    if (std::optional<std::string> n = nvcc_instead(virtual_arch(target.arch), ptx, lowered)) {
      if (target.ptx) {
        out.image = std::move(*n);
        out.linked = true;
        return out;
      }
      // Device-runtime code is relocatable in every mode: nvJitLink links it with cudadevrt.
      // Other code is compiled whole, as NVRTC's own CUBIN would be (ptxas_cubin), or linked
      // by nvJitLink (ptxas -c) where a relocatable mode asks; where that fails, NVRTC's.
      if (device_runtime_) return link(target, NVJITLINK_INPUT_PTX, *n, std::move(out));
      const SharedMemoryCode mode = options_.shared_memory_code == SharedMemoryCode::automatic
                                        ? auto_shared_memory_code(*n, nullptr)
                                        : options_.shared_memory_code;
      if (mode != SharedMemoryCode::whole_program) {
        BuildResult linked = link(target, NVJITLINK_INPUT_PTX, *n, out);
        if (linked.linked) return linked;
      } else {
        std::string why;
        if (std::optional<std::string> cubin = ptxas_cubin(toolkit_.ptxas, *n, target.arch, &why)) {
          out.image = std::move(*cubin);
          out.linked = true;
          return out;
        }
      }
    }
  }
  if (target.ptx) {
    // The PTX of a device-runtime kernel is relocatable: see CompiledKernel::ptx_relocatable.
    if ((r = nvrtcGetPTXSize(program.get(), &size)) != NVRTC_SUCCESS) {
      out.failure = std::string("nvrtcGetPTXSize: ") + nvrtcGetErrorString(r);
      return out;
    }
    out.image.assign(size, '\0');
    if ((r = nvrtcGetPTX(program.get(), out.image.data())) != NVRTC_SUCCESS) {
      out.failure = std::string("nvrtcGetPTX: ") + nvrtcGetErrorString(r);
      return out;
    }
    while (!out.image.empty() && out.image.back() == '\0') out.image.pop_back();
    out.linked = true;
    return out;
  }
  if ((r = nvrtcGetCUBINSize(program.get(), &size)) != NVRTC_SUCCESS || size == 0) {
    out.failure = std::string("nvrtcGetCUBINSize: ") + nvrtcGetErrorString(r);
    return out;
  }
  std::string cubin(size, '\0');
  if ((r = nvrtcGetCUBIN(program.get(), cubin.data())) != NVRTC_SUCCESS) {
    out.failure = std::string("nvrtcGetCUBIN: ") + nvrtcGetErrorString(r);
    return out;
  }
  if (!device_runtime_ && !nvshmem_) {
    out.image = std::move(cubin);
    out.linked = true;
    return out;
  }
  // -rdc gave a relocatable CUBIN; nvJitLink resolves its device-runtime calls against
  // cudadevrt (the path devlaunch_probe.cpp showed loads and runs on the GPU), and its NVSHMEM
  // calls against libnvshmem_device.a.
  return link(target, NVJITLINK_INPUT_CUBIN, cubin, std::move(out));
}

void KernelJob::add_log_diagnostics(const std::string& log, bool errors) {
  std::vector<NvrtcLogMessage> messages = parse_nvrtc_log(log);
  for (Diagnostic& d : nvrtc_log_diagnostics(messages, src_, errors, true)) {
    if (d.severity == Severity::Warning) {
      std::string id = std::to_string(d.range.begin.line) + ":" +
                       std::to_string(d.range.begin.col) + ":" + d.message;
      if (!reported_.insert(id).second) continue;
    }
    diags_.push_back(std::move(d));
  }
}

std::optional<CompiledKernel> KernelJob::run() {
  entries_ = src_.entries;
  if (entries_.empty()) entries_.push_back({src_.name, "", {}, {}});
  for (const KernelEntry& e : entries_) {
    const std::string expr = e.entry.empty() ? e.name : e.entry;
    auto it = std::find(exprs_.begin(), exprs_.end(), expr);
    expr_of_.push_back(static_cast<size_t>(it - exprs_.begin()));
    if (it == exprs_.end()) exprs_.push_back(expr);
    patched_ = patched_ || !e.patch.empty();
  }
  device_runtime_ = src_.uses_device_runtime || mentions_device_runtime(src_.code);
  nvshmem_ = src_.uses_nvshmem || nvshmem::mentions_nvshmem(src_.code);
  code_ = src_.code;
  if (nvshmem_) {
    if (!nvshmem_lib_ || !nvshmem_lib_->problem.empty()) {
      error(DiagCode::E0904, "kernel '" + src_.name + "' calls NVSHMEM's device API, but " +
                                 (nvshmem_lib_ ? nvshmem_lib_->problem : std::string("NVSHMEM was not looked for")));
      return std::nullopt;
    }
    code_ = nvshmem::nvrtc_prelude(src_.file_name) + src_.code + nvshmem::nvrtc_postlude();
  }
  if (device_runtime_ && toolkit_.cudadevrt.empty()) {
    error(DiagCode::E0902, "kernel '" + src_.name +
                       "' uses the device runtime, but libcudadevrt.a is not in the CUDA toolkit" +
                       (toolkit_.root.empty() ? std::string() : " at " + toolkit_.root) +
                       " (set CUDA_HOME)");
    return std::nullopt;
  }

  // Not where NVRTC is given flags nvcc may read otherwise, nor for code that asks which of the
  // two compiles it.
  nvcc_ = options_.use_nvcc && !toolkit_.nvcc.empty() && options_.extra_flags.empty() &&
          src_.code.find("__CUDACC_RTC__") == std::string::npos;
  // NVSHMEM units: NVRTC's code only (nvcc would need NVSHMEM's flags and headers too).
  if (nvshmem_) nvcc_ = false;

  CompiledKernel result;
  result.name = src_.name;
  result.device_runtime = device_runtime_;
  result.nvshmem = nvshmem_;
  if (nvshmem_) result.nvshmem_version = nvshmem_lib_->version;

  // The headers it reads, always (orchc's artifact cache learns of them through the file
  // observer even when this compile uses no kernel cache). Where they cannot all be known, the
  // kernel is compiled every time and the artifact cache stores nothing (FileFact::Incomplete).
  std::string incomplete;
  const std::string includes =
      include_fingerprint(src_.code, src_.file_name, src_.include_dirs, toolkit_.include_dir, &incomplete);
  if (!incomplete.empty()) {
    use_cache_ = false;
    observe_file(FileFact::Incomplete, src_.file_name, incomplete);
  }
  // Everything an image depends on except its arch; each target adds its own.
  std::string common_key;
  if (use_cache_) {
    KeyBuilder key;
    key.add(kKeySalt).add(kTransformHash).add(src_.code).add(src_.file_name).add(device_runtime_ ? 1 : 0);
    key.add(uint64_t(toolkit_.nvrtc_major)).add(uint64_t(toolkit_.nvrtc_minor));
    key.add(uint64_t(toolkit_.link_major)).add(uint64_t(toolkit_.link_minor));
    for (const std::string& o : nvrtc_options("<arch>")) key.add(o);
    key.add(includes);
    // Every kernel the module holds, with what orchc puts at its entry and the guard's code.
    key.add(uint64_t(entries_.size()));
    for (const KernelEntry& e : entries_)
      key.add(e.entry.empty() ? e.name : e.entry).add(e.patch.describe()).add(e.guard_code);
    // Which nvcc may give the PTX (the PTX of a unit that uses shared memory is its), and which
    // of its code (the mode is keyed for every unit: whether one touches shared memory is known
    // only once NVRTC has compiled it).
    key.add(nvcc_ ? toolkit_.nvcc : std::string());
    if (nvcc_)
      key.add(std::string("shared-memory-code=") + to_string(options_.shared_memory_code) +
              (options_.shared_memory_code == SharedMemoryCode::automatic ? auto_rule() : std::string()))
          .add(toolkit_.nvcc_size)
          .add(uint64_t(toolkit_.nvcc_mtime))
          .add(toolkit_.ptxas)
          .add(toolkit_.ptxas_size)
          .add(uint64_t(toolkit_.ptxas_mtime))
          .add(env("NVCC_PREPEND_FLAGS"))
          .add(env("NVCC_APPEND_FLAGS"))
          .add(env("NVCC_CCBIN"));
    if (device_runtime_)
      key.add(toolkit_.cudadevrt)
          .add(toolkit_.cudadevrt_size)
          .add(uint64_t(toolkit_.cudadevrt_mtime));
    // NVSHMEM's headers are keyed as the toolkit's are, by their release (its version header)
    // and place; its device library by path, size and time.
    if (nvshmem_)
      key.add(std::string("nvshmem"))
          .add(nvshmem_lib_->version)
          .add(nvshmem_lib_->include_dir)
          .add(nvshmem_lib_->device_lib)
          .add(nvshmem_lib_->device_lib_size)
          .add(uint64_t(nvshmem_lib_->device_lib_mtime));
    common_key = key.hex();
  }

  // Code that declares shared memory will most likely take nvcc's PTX: nvcc starts now, beside
  // NVRTC (a process of its own, so they overlap; NVRTC's compiles serialize within orchc), for
  // the targets that miss the cache. nvcc_instead still decides from NVRTC's PTX.
  std::vector<std::thread> early;
  struct Join {
    std::vector<std::thread>& threads;
    ~Join() {
      for (std::thread& t : threads) t.join();
    }
  } join{early};
  if (nvcc_ && src_.code.find("__shared__") != std::string::npos) {
    std::set<std::string> varchs;
    for (const Target& target : targets_) {
      std::error_code ec;
      if (use_cache_ &&
          fs::exists(cache_entry_path(options_.cache_dir,
                                      KeyBuilder().add(common_key).add(target.arch).add(target.ptx ? 1 : 0).hex()),
                     ec))
        continue;
      varchs.insert(virtual_arch(target.arch));
    }
    for (const std::string& varch : varchs) {
      try {
        early.emplace_back([this, varch] { nvcc_result(varch); });
      } catch (const std::system_error&) {
        break;  // no thread: nvcc runs when it is needed
      }
    }
  }

  std::set<std::string> logs_seen;
  for (size_t t = 0; t < targets_.size(); ++t) {
    const Target& target = targets_[t];
    // No PTX for NVSHMEM: relocatable PTX names NVSHMEM's symbols, which no driver resolves.
    if (nvshmem_ && target.ptx) continue;
    std::string key;
    std::optional<CacheEntry> entry;
    bool from_cache = false;
    if (use_cache_) {
      key = KeyBuilder().add(common_key).add(target.arch).add(target.ptx ? 1 : 0).hex();
      entry = read_cache_entry(options_.cache_dir, key);
      from_cache = entry.has_value();
      ++(from_cache ? result.cache_hits : result.cache_misses);
    }
    if (!entry) {
      BuildResult built = build(target);
      if (!built.compiled) {
        size_t before = diags_.size();
        add_log_diagnostics(built.log, true);
        bool any_error =
            std::any_of(diags_.begin() + before, diags_.end(),
                        [](const Diagnostic& d) { return d.severity == Severity::Error; });
        if (!any_error) {
          std::string text = !built.log.empty() ? built.log : built.failure;
          while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
          error(DiagCode::E0901,
                "kernel '" + src_.name + "' does not compile for " + target.arch + ":\n" + text);
        } else if (t > 0) {
          // The first arch compiled, so this one fails for reasons of its own: say which.
          for (size_t i = before; i < diags_.size(); ++i)
            if (diags_[i].severity == Severity::Error)
              diags_[i].notes.push_back(
                  {src_.origin, "while compiling kernel '" + src_.name + "' for " + target.arch});
        }
        return std::nullopt;
      }
      if (!built.linked) {
        add_log_diagnostics(built.log, false);
        error(DiagCode::E0902, "kernel '" + src_.name + "' could not be built for " + target.arch + ": " +
                           built.failure);
        return std::nullopt;
      }
      std::string symbols;
      for (const std::string& sym : built.symbols) symbols += (symbols.empty() ? "" : "\n") + sym;
      entry = CacheEntry{std::move(symbols), std::move(built.log), std::move(built.image)};
      if (use_cache_) write_cache_entry(options_.cache_dir, key, *entry);
    }
    // Cached logs replay their warnings, so a hit reports what a miss would.
    add_log_diagnostics(entry->log, false);
    if (!entry->log.empty() && logs_seen.insert(entry->log).second) {
      if (!result.log.empty()) result.log += "\n";
      result.log += entry->log;
    }
    if (result.symbols.empty()) {
      // One symbol per line (a symbol never holds a newline), one line per entry.
      std::string& all = entry->lowered_name;
      for (size_t at = 0, nl; at <= all.size(); at = nl + 1) {
        nl = all.find('\n', at);
        if (nl == std::string::npos) nl = all.size();
        result.symbols.push_back(all.substr(at, nl - at));
      }
      if (result.symbols.size() != entries_.size()) {
        error(DiagCode::E0902, "kernel '" + src_.name + "': the cached image names " + std::to_string(result.symbols.size()) +
                           " kernels, not " + std::to_string(entries_.size()) + " (a damaged cache entry?)");
        return std::nullopt;
      }
      result.lowered_name = result.symbols.front();
    }
    if (target.ptx) {
      result.ptx = std::move(entry->image);
      result.ptx_arch = target.arch;
      result.ptx_relocatable = device_runtime_;
    } else {
      result.cubins.push_back({target.arch, std::move(entry->image), from_cache});
    }
  }
  // What `automatic` chose, read again from the PTX it chose from (a cache hit compiles nothing).
  if (nvcc_ && !device_runtime_ && options_.shared_memory_code == SharedMemoryCode::automatic &&
      mentions_shared_memory(result.ptx)) {
    std::string why;
    const SharedMemoryCode mode = auto_shared_memory_code(result.ptx, &why);
    result.code_choice = std::string(to_string(mode)) + ": " + why;
    if (patched_) result.code_choice += "; patched at entry, so linked by nvJitLink either way";
  }
  return result;
}

struct Outcome {
  std::optional<CompiledKernel> kernel;
  std::vector<Diagnostic> diags;
};

}  // namespace

const char* to_string(SharedMemoryCode code) {
  switch (code) {
    case SharedMemoryCode::automatic:
      return "auto";
    case SharedMemoryCode::whole_program:
      return "whole-program";
    case SharedMemoryCode::relocatable:
      return "relocatable";
    case SharedMemoryCode::relocatable_whole_ptx:
      return "relocatable-whole-ptx";
  }
  return "whole-program";
}

bool parse_shared_memory_code(const std::string& text, SharedMemoryCode* out) {
  for (SharedMemoryCode c : {SharedMemoryCode::automatic, SharedMemoryCode::whole_program,
                             SharedMemoryCode::relocatable, SharedMemoryCode::relocatable_whole_ptx})
    if (text == to_string(c)) {
      *out = c;
      return true;
    }
  return false;
}

SharedMemoryCode auto_shared_memory_code(const std::string& ptx, std::string* why) {
  const std::optional<lowering::PtxSharedLoop> loop = lowering::ptx_shared_memory_loop(ptx);
  const bool relocate = loop && loop->fmas >= kMinFmas && loop->shared_loads >= kMinSharedLoads;
  if (why) {
    if (!loop)
      *why = "no loop does multiply-adds on shared-memory loads";
    else
      *why = "loop " + loop->label + " of " + loop->function + ": " + std::to_string(loop->fmas) +
             " multiply-adds on " + std::to_string(loop->shared_loads) + " shared-memory loads" +
             (relocate ? "" : " (under " + std::to_string(kMinFmas) + " on " + std::to_string(kMinSharedLoads) + ")");
  }
  return relocate ? SharedMemoryCode::relocatable_whole_ptx : SharedMemoryCode::whole_program;
}

std::string default_kernel_cache_dir() {
  if (!env("ORCH_CACHE_DIR").empty()) return env("ORCH_CACHE_DIR");
  std::string xdg = env("XDG_CACHE_HOME");
  // The XDG spec says to ignore a relative XDG_CACHE_HOME.
  if (!xdg.empty() && xdg.front() == '/') return (fs::path(xdg) / "orch" / "kernels").string();
  std::string home = env("HOME");
  if (!home.empty()) return (fs::path(home) / ".cache" / "orch" / "kernels").string();
  return {};
}

std::vector<std::optional<CompiledKernel>> compile_kernels(const std::vector<KernelSource>& sources,
                                                           const CompileOptions& options,
                                                           DiagnosticEngine& diags) {
  std::vector<std::optional<CompiledKernel>> results(sources.size());
  if (sources.empty()) return results;
  Toolkit toolkit = probe_toolkit();
  if (!toolkit.problem.empty()) {
    diags.error(DiagCode::E0901, SourceRange{}, "cannot compile kernels: " + toolkit.problem);
    return results;
  }

  // The arch list is checked once, against what this NVRTC can target.
  if (options.archs.empty()) {
    diags.error(DiagCode::E0111, SourceRange{}, "no target architecture to compile kernels for");
    return results;
  }
  int newest = 0;
  bool archs_ok = true;
  for (const std::string& arch : options.archs) {
    int number = 0;
    std::string suffix;
    bool known =
        parse_arch(arch, &number, &suffix) &&
        std::find(toolkit.archs.begin(), toolkit.archs.end(), number) != toolkit.archs.end();
    if (!known) {
      std::string supported;
      for (int a : toolkit.archs)
        supported += (supported.empty() ? "sm_" : ", sm_") + std::to_string(a);
      diags.error(DiagCode::E0111, SourceRange{},
                  "NVRTC " + std::to_string(toolkit.nvrtc_major) + "." +
                      std::to_string(toolkit.nvrtc_minor) + " cannot compile for '" + arch +
                      "' (it supports " + supported + ")");
      archs_ok = false;
      continue;
    }
    newest = std::max(newest, number);
  }
  if (!archs_ok) return results;
  std::vector<Target> targets;
  for (const std::string& arch : options.archs) targets.push_back({arch, false});
  // PTX without an `a`/`f` suffix: arch-specific PTX would not JIT on later GPUs.
  targets.push_back({"compute_" + std::to_string(newest), true});

  bool use_cache = options.use_cache && !options.cache_dir.empty();
  // NVSHMEM is looked for only where some kernel calls it: other pipelines observe nothing new.
  std::optional<nvshmem::DeviceLibrary> nvshmem_lib;
  for (const KernelSource& s : sources)
    if (s.uses_nvshmem || nvshmem::mentions_nvshmem(s.code)) {
      nvshmem_lib = nvshmem::find_device_library(options.nvshmem_home);
      break;
    }
  PtxMemo memo;
  std::vector<Outcome> outcomes(sources.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < sources.size(); i = next++) {
      KernelJob job(sources[i], options, toolkit, targets, use_cache, memo,
                    nvshmem_lib ? &*nvshmem_lib : nullptr);
      try {
        outcomes[i].kernel = job.run();
        outcomes[i].diags = std::move(job.diagnostics());
      } catch (const std::exception& e) {
        // Out of memory or a filesystem surprise: this kernel fails, the others go on.
        outcomes[i].kernel.reset();
        outcomes[i].diags = {{Severity::Error,
                              to_string(DiagCode::E0901),
                              sources[i].origin,
                              "kernel '" + sources[i].name + "' could not be compiled: " + e.what(),
                              {}}};
      }
    }
  };
  // NVRTC 13.0 serializes compiles within a process (measured on 16 cores: 32 compiles took
  // as long on 16 threads as on 1, while 8 processes ran ~5x faster), so these workers mostly
  // overlap nvJitLink, cache I/O and hashing; more would take worker processes.
  unsigned jobs = options.jobs ? options.jobs : std::max(1u, std::thread::hardware_concurrency());
  jobs = static_cast<unsigned>(std::min<size_t>(jobs, sources.size()));
  std::vector<std::thread> threads;
  for (unsigned j = 1; j < jobs; ++j) {
    try {
      threads.emplace_back(worker);
    } catch (const std::system_error&) {
      break;  // fewer threads than asked; this one and any started still drain the queue
    }
  }
  worker();
  for (std::thread& t : threads) t.join();

  // Merged in kernel order, so the output is the same for any number of jobs.
  for (size_t i = 0; i < sources.size(); ++i) {
    for (Diagnostic& d : outcomes[i].diags) diags.add(std::move(d));
    results[i] = std::move(outcomes[i].kernel);
  }
  return results;
}

}  // namespace orch
